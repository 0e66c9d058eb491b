/* Stack capture and symbol lookup for the heap profiler: see stackwalk.h. */
#include "profiler/stackwalk.h"
#include "profiler/unwind_table.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#include "base/counters.h"
#include "os/platform.h"

/* The executable segment of the object that holds brisk's code, when that
 * object is not the main program (a frame there is brisk's own). */
static uintptr_t self_lo, self_hi;
static _Atomic(int) self_known; /* 0: not looked up, 1: looking, 2: known */

static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
  uintptr_t me = (uintptr_t)arg;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (me < lo || me >= hi) continue;
    /* The main program has no name here: linked statically into it, brisk
     * shares its code's range with the program's, so nothing is skipped. */
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0') {
      self_lo = lo;
      self_hi = hi;
    }
    return 1;
  }
  return 0;
}

static void self_range(void) {
  if (atomic_load_explicit(&self_known, memory_order_acquire) == 2) return;
  int expected = 0;
  if (atomic_compare_exchange_strong(&self_known, &expected, 1)) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&unwind_backtrace);
    atomic_store_explicit(&self_known, 2, memory_order_release);
    return;
  }
  /* Another thread looks it up: skip nothing this time rather than wait. */
}

typedef struct walk_s {
  uintptr_t *pcs;
  size_t max;
  size_t n;
  uintptr_t lo, hi;
  bool leading; /* still in brisk's own frames */
} walk_t;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
  walk_t *w = arg;
  int before = 0;
  uintptr_t ip = (uintptr_t)_Unwind_GetIPInfo(ctx, &before);
  if (ip == 0) return _URC_END_OF_STACK;
  if (w->leading) {
    if (ip >= w->lo && ip < w->hi) return _URC_NO_REASON;
    w->leading = false;
  }
  w->pcs[w->n++] = ip;
  return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

static size_t libgcc_backtrace(uintptr_t *pcs, size_t max, uintptr_t lo, uintptr_t hi) {
  walk_t w = {pcs, max, 0, lo, hi, true};
  _Unwind_Backtrace(walk_frame, &w);
  return w.n;
}

#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
/* The object of the frame before, during one walk: an object whose code is
 * on this thread's stack is not unloaded under it, so frames in the same
 * object need no new lookup. */
typedef struct {
  uintptr_t start, end;
  void *eh_frame;
  const struct link_map *map; /* its file and load bias (src_open) */
  bool permanent;             /* never unloaded (below) */
} walk_object_t;

/* Objects that are never unloaded, found once: the main program (the
 * first object of the default namespace, with no name), the object
 * holding this code (it runs) and the C library (this code's dependency:
 * loaded while it is). A frame in any of them needs no lookup. */
enum { PERMANENT_MAIN, PERMANENT_SELF, PERMANENT_LIBC, PERMANENT_COUNT };
static walk_object_t permanent[PERMANENT_COUNT];
static _Atomic(int) permanent_known[PERMANENT_COUNT]; /* 0: not yet, 1: being written, 2: known */

static bool object_holds(const struct dl_find_object *dlfo, uintptr_t addr) {
  return addr - (uintptr_t)dlfo->dlfo_map_start < (uintptr_t)dlfo->dlfo_map_end - (uintptr_t)dlfo->dlfo_map_start;
}

static bool permanent_note(const struct dl_find_object *dlfo) {
  const struct link_map *map = dlfo->dlfo_link_map;
  int which;
  if (map != NULL && map->l_prev == NULL && map->l_name != NULL && map->l_name[0] == '\0') which = PERMANENT_MAIN;
  else if (object_holds(dlfo, (uintptr_t)&permanent_note)) which = PERMANENT_SELF;
  else if (object_holds(dlfo, (uintptr_t)&getpid)) which = PERMANENT_LIBC;
  else return false;
  int expected = 0;
  if (!atomic_compare_exchange_strong_explicit(&permanent_known[which], &expected, 1, memory_order_relaxed,
                                               memory_order_relaxed))
    return true;
  walk_object_t o = {(uintptr_t)dlfo->dlfo_map_start, (uintptr_t)dlfo->dlfo_map_end, dlfo->dlfo_eh_frame,
                     dlfo->dlfo_link_map, true};
  permanent[which] = o;
  atomic_store_explicit(&permanent_known[which], 2, memory_order_release);
  return true;
}

static bool object_find(uintptr_t pc, walk_object_t *obj) {
  for (int i = 0; i < PERMANENT_COUNT; i++) {
    if (atomic_load_explicit(&permanent_known[i], memory_order_acquire) != 2) continue;
    if (pc - permanent[i].start < permanent[i].end - permanent[i].start) {
      *obj = permanent[i];
      return true;
    }
  }
  struct dl_find_object dlfo;
  if (_dl_find_object((void *)pc, &dlfo) != 0) return false;
  walk_object_t o = {(uintptr_t)dlfo.dlfo_map_start, (uintptr_t)dlfo.dlfo_map_end, dlfo.dlfo_eh_frame,
                     dlfo.dlfo_link_map, false};
  o.permanent = permanent_note(&dlfo);
  *obj = o;
  return true;
}

/* The rule for the frame at pc: cached, or read from the tables. */
static rule_t rule_at(uintptr_t pc, walk_object_t *obj) {
  if (pc - obj->start >= obj->end - obj->start && !object_find(pc, obj)) {
    rule_t none = {RULE_END, 0, 0, 0, 0};
    return none;
  }
  rule_t r;
  if (cache_get(pc, obj->start, &r)) return r;
  STAT_COUNT(profile_rules_read, 1);
  table_src_t src;
  src_open(&src, obj->start, obj->map);
  r = find_rule(pc, (uintptr_t)obj->eh_frame, &src);
  bool from_file = src.fd >= 0 && !src.failed;
  src_close(&src);
  if (!from_file) {
    STAT_COUNT(profile_rules_read_mapped, 1);
    if (src.failed) r = find_rule(pc, (uintptr_t)obj->eh_frame, &src); /* src_close left it reading the mapping */
  }
  cache_put(pc, obj->start, &r);
  return r;
}

/* Frames whose CFA moves further than this from the one before are not
 * believed: a stack that the tables misdescribe ends there. */
#define FRAME_MAX ((uintptr_t)64 << 20)

/* The walk from the caller of this function; SIZE_MAX when a frame needs
 * libgcc's walk. */
_Static_assert(sizeof(rule_t) <= sizeof(((walk_memo_t *)0)->rule[0]), "a rule fits a memo entry");

/* The rule at `at`, the frame at `depth` of the walk, when the memo does
 * not hold it: looked up, and memorised. Out of line, so that the walk's
 * loop over memorised frames keeps its registers. */
static __attribute__((noinline)) rule_t rule_remember(uintptr_t at, unsigned depth, walk_object_t *obj,
                                                      walk_memo_t *memo) {
  rule_t r = rule_at(at, obj);
  if (depth < WALK_MEMO_FRAMES) {
    /* Only a rule read from an object never unloaded (the last frame's
     * end of the stack included): the memo's rules are not checked
     * against the object's mapping, as the cache's are. */
    bool in_obj = at - obj->start < obj->end - obj->start;
    memo->pc[depth] = r.kind != RULE_OTHER && in_obj && obj->permanent ? at : 0;
    memcpy(memo->rule[depth], &r, sizeof(r));
  }
  return r;
}

/* Recorded frames from..to-1 found again from the walk's first rsp. */
static bool frames_found(const walk_memo_t *memo, uintptr_t rsp0, unsigned from, unsigned to) {
  for (unsigned i = from; i < to; i++)
    if (*(const uintptr_t *)(rsp0 + memo->lead_ra[i]) != memo->lead_pc[i]) return false;
  return true;
}

/* The frames of the last walk, recorded while each has a rule based on
 * rsp: their return addresses then sit at fixed offsets from this
 * function's rsp (each frame's rule, fixed by its address, fixes where
 * the next one starts). A walk that finds the same return addresses at
 * those offsets has the same frames: with one load and compare a frame
 * (instead of about 24 instructions) it skips the leading ones (brisk's
 * own, up to the first address kept), starting at the first kept frame
 * with the rsp and rbp the memo gives, and when the whole last walk was
 * recorded and matches, it is that walk (memo->same). Returns the frames
 * skipped (0: none). */
static unsigned lead_skip(walk_memo_t *memo, uintptr_t *rsp, uintptr_t *rbp, uintptr_t *pc) {
  unsigned n = memo->lead_n;
  uintptr_t rsp0 = *rsp;
  if (n == 0 || !frames_found(memo, rsp0, 0, n)) return 0;
  if (memo->lead_rbp != 0) *rbp = *(const uintptr_t *)(rsp0 + memo->lead_rbp);
  *rsp = rsp0 + memo->lead_cfa;
  *pc = memo->lead_pc[n - 1];
  return n;
}

static __attribute__((noinline)) size_t fast_backtrace(uintptr_t *pcs, size_t max, uintptr_t lo, uintptr_t hi,
                                                       walk_memo_t *memo) {
  uintptr_t pc, rsp, rbp;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(rsp), "=r"(rbp));
  size_t n = 0;
  walk_object_t obj = {0, 0, NULL, NULL, false};
  /* A return address points after its call: its rule is the call's. The
   * first pc is this function's own, not a return address. */
  uintptr_t at = pc, rsp0 = rsp;
  unsigned depth = lead_skip(memo, &rsp, &rbp, &pc);
  memo->same = 0;
  if (depth != 0) {
    /* the rest of the last whole walk found again */
    if (memo->whole_n != 0 && frames_found(memo, rsp0, depth, memo->whole_n)) {
      size_t k = memo->whole_kept < max ? memo->whole_kept : max;
      for (size_t i = 0; i < k; i++) pcs[i] = memo->lead_pc[depth - 1 + i];
      memo->same = k == memo->whole_kept;
      return k;
    }
    at = pc - 1;
    pcs[n++] = pc;
    if (n == max) return n;
  } else {
    memo->lead_n = 0;
  }
  memo->whole_n = 0;
  bool lead = depth == 0, rec = true; /* recording the leading frames; any frames */
  int32_t lead_rbp = 0;
  for (; depth < 256; depth++) {
    rule_t r;
    if (depth < WALK_MEMO_FRAMES && memo->pc[depth] == at) memcpy(&r, memo->rule[depth], sizeof(r));
    else r = rule_remember(at, depth, &obj, memo);
    /* Recorded: frames based on rsp, in objects never unloaded (the memo
     * holds their rules), so that their addresses fix their rules; the
     * end of the walk too, when it comes from such a rule. */
    if (rec && (r.cfa_rbp || depth >= WALK_MEMO_FRAMES || memo->pc[depth] != at)) rec = lead = false;
    if (BRISK_UNLIKELY(r.kind != RULE_OK)) {
      if (r.kind == RULE_END) break;
      return SIZE_MAX;
    }
    uintptr_t cfa = (r.cfa_rbp ? rbp : rsp) + (uintptr_t)(intptr_t)r.cfa_off;
    if (cfa - rsp - 1 >= FRAME_MAX || (cfa & 7) != 0) break; /* not above rsp, or too far */
    pc = *(const uintptr_t *)(cfa + (intptr_t)r.ra_off);
    if (r.rbp_off != 0) rbp = *(const uintptr_t *)(cfa + (intptr_t)r.rbp_off);
    rsp = cfa;
    if (rec) {
      memo->lead_ra[depth] = (int32_t)(cfa - rsp0) + r.ra_off;
      memo->lead_pc[depth] = pc;
      if (lead && r.rbp_off != 0) lead_rbp = (int32_t)(cfa - rsp0) + r.rbp_off;
    }
    if (pc == 0) {
      depth++; /* the zero is part of what a later walk must find */
      break;
    }
    at = pc - 1;
    /* brisk's own frames lead the stack: left out */
    if (n == 0 && pc - lo < hi - lo) continue;
    if (n == 0 && lead) {
      memo->lead_cfa = (int32_t)(cfa - rsp0);
      memo->lead_rbp = lead_rbp;
      memo->lead_n = (uint8_t)(depth + 1);
    }
    lead = false;
    pcs[n++] = pc;
    if (n == max) {
      depth++;
      break;
    }
  }
  /* Every frame recorded, the leading ones among them: a later walk that
   * finds them all is this one. */
  if (rec && memo->lead_n != 0 && depth <= WALK_MEMO_FRAMES && n != 0) {
    memo->whole_n = (uint8_t)depth;
    memo->whole_kept = (uint8_t)n;
  }
  return n;
}
#endif

size_t unwind_backtrace(uintptr_t *pcs, size_t max, walk_memo_t *memo) {
  if (max == 0) return 0;
  self_range();
  uintptr_t lo = 0, hi = 0;
  if (atomic_load_explicit(&self_known, memory_order_acquire) == 2) {
    lo = self_lo;
    hi = self_hi;
  }
#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)
  size_t n = fast_backtrace(pcs, max, lo, hi, memo);
  if (n != SIZE_MAX) {
    if (BRISK_DEBUG_LEVEL >= 2) { /* internal checks: libgcc's walk finds the same frames */
      uintptr_t check[64];
      size_t m = libgcc_backtrace(check, max < 64 ? max : 64, lo, hi);
      brisk_assert_internal(m == (n < 64 ? n : 64));
      /* Linked into the program (no range of its own to skip), each walk's
       * first frame is where this function called it: compared from the
       * second. */
      for (size_t i = lo == hi ? 1 : 0; i < m && i < n; i++) brisk_assert_internal(check[i] == pcs[i]);
    }
    return n;
  }
#else
  (void)memo;
#endif
  STAT_COUNT(profile_unwinder_walks, 1); /* about ten times a fast walk's cost */
  return libgcc_backtrace(pcs, max, lo, hi);
}

/* The main program's file, read once (/proc/self/exe); NULL if unknown. */
static char exe_buf[4096];
static _Atomic(int) exe_known; /* 0: not read, 1: reading, 2: read, 3: unknown */

static const char *exe_path(void) {
  int state = atomic_load_explicit(&exe_known, memory_order_acquire);
  if (state == 0) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&exe_known, &expected, 1)) return NULL;
    state = os_exe_path(exe_buf, sizeof(exe_buf)) ? 2 : 3;
    atomic_store_explicit(&exe_known, state, memory_order_release);
  }
  return state == 2 ? exe_buf : NULL;
}

void unwind_symbol(uintptr_t addr, const char **name, uintptr_t *offset, const char **object,
                   uintptr_t *object_offset) {
  Dl_info info;
  struct link_map *map = NULL;
  *name = NULL;
  *offset = 0;
  *object = NULL;
  *object_offset = 0;
  if (dladdr1((void *)addr, &info, (void **)&map, RTLD_DL_LINKMAP) == 0) return;
  /* The main program has an empty name in the link map: dladdr gives the
   * name it was started by. */
  if (map != NULL && map->l_name != NULL && map->l_name[0] == '\0') {
    /* The main program: its link map has no name, and dladdr's is the one
     * it was started by, relative to the directory it started in. */
    const char *exe = exe_path();
    if (exe != NULL) info.dli_fname = exe;
  }
  if (info.dli_fname != NULL && info.dli_fname[0] != '\0') {
    *object = info.dli_fname;
    *object_offset = addr - (map != NULL ? (uintptr_t)map->l_addr : (uintptr_t)info.dli_fbase);
  }
  if (info.dli_sname != NULL && info.dli_saddr != NULL) {
    *name = info.dli_sname;
    *offset = addr - (uintptr_t)info.dli_saddr;
  }
}
