/* The unwind tables (.eh_frame) of the loaded objects, read for the
 * profiler's fast stack walk (stackwalk.c): the rule of each return
 * address, found through the search table and kept in a cache. */
#include "profiler/unwind_table.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/counters.h"
#include "os/platform.h"

/* x86-64 with the loader's _dl_find_object (glibc 2.35): elsewhere the
 * walk is libgcc's alone (stackwalk.c). */
#if defined(__x86_64__) && defined(DLFO_STRUCT_HAS_EH_DBASE)

/* ---------------------------------------------------------------------------
 * The fast walk (x86-64): the same unwind tables, read here, and what they
 * say about each return address kept in a cache, so that a stack seen
 * before costs a few loads per frame (libgcc's walk interprets the tables
 * again for every frame of every sample: about 1,000 instructions each).
 *
 * A frame's rule at address pc: CFA = (rsp or rbp) + cfa_off; the return
 * address is at CFA + ra_off; rbp, if this frame saved it, at CFA +
 * rbp_off. Only rules of that form are cached; a frame whose tables say
 * anything else (a signal frame, an expression, another register for the
 * CFA) sends the whole stack to libgcc's walk. An address no table covers
 * ends the stack, as it ends libgcc's walk.
 * ------------------------------------------------------------------------- */

/* A direct-mapped cache: pc -> rule, with the object's mapping as it was,
 * so that a rule of an unloaded object is not used for another. An entry
 * is two words: the rule packed into one, and a check word, the pc and
 * the mapping mixed with the rule. A reader takes both with plain loads
 * and uses the rule only when the check matches, so an entry half written
 * by another thread reads as a miss; no fence, no retry. 16 KiB, touched
 * only by a process that samples: a sample's walk misses the cache lines
 * of the workload in between, and a smaller entry is fewer misses (with
 * 40-byte entries guarded by a sequence number, a third of the walk's time
 * was the load of each entry). Rules whose offsets do not fit are not
 * cached (none seen in practice). */
#define RULE_CACHE 1024
typedef struct rule_slot_s {
  _Atomic(uint64_t) check, packed;
} rule_slot_t;
static rule_slot_t rule_cache[RULE_CACHE];

#define PACK_OFF_BITS 20 /* each offset, as a signed field */
#define PACK_OFF_MAX (((int64_t)1 << (PACK_OFF_BITS - 1)) - 1)

static inline bool pack_fits(int32_t v) { return v >= -PACK_OFF_MAX && v <= PACK_OFF_MAX; }

static inline uint64_t pack_field(int32_t v) { return (uint64_t)(int64_t)v & (((uint64_t)1 << PACK_OFF_BITS) - 1); }

static inline int32_t unpack_field(uint64_t w, unsigned shift) {
  /* sign-extend the field's top bit */
  return (int32_t)((int64_t)(w << (64 - shift - PACK_OFF_BITS)) >> (64 - PACK_OFF_BITS));
}

/* bits 0..1 kind, 2 cfa_rbp, then cfa_off, ra_off, rbp_off (20 bits each) */
static inline uint64_t rule_pack(const rule_t *r) {
  return (uint64_t)r->kind | (uint64_t)(r->cfa_rbp != 0) << 2 | pack_field(r->cfa_off) << 3 |
         pack_field(r->ra_off) << (3 + PACK_OFF_BITS) | pack_field(r->rbp_off) << (3 + 2 * PACK_OFF_BITS);
}

static inline rule_t rule_unpack(uint64_t w) {
  rule_t r = {(uint8_t)(w & 3), (uint8_t)((w >> 2) & 1), unpack_field(w, 3), unpack_field(w, 3 + PACK_OFF_BITS),
              unpack_field(w, 3 + 2 * PACK_OFF_BITS)};
  return r;
}

static inline uint64_t rule_key(uintptr_t pc, uintptr_t map) { return pc ^ (map * 0x9e3779b97f4a7c15ull); }

static inline rule_slot_t *rule_slot(uintptr_t pc) { return &rule_cache[(pc ^ (pc >> 12)) & (RULE_CACHE - 1)]; }

bool cache_get(uintptr_t pc, uintptr_t map, rule_t *out) {
  rule_slot_t *e = rule_slot(pc);
  uint64_t check = atomic_load_explicit(&e->check, memory_order_relaxed);
  uint64_t packed = atomic_load_explicit(&e->packed, memory_order_relaxed);
  if (packed == 0 || (check ^ packed) != rule_key(pc, map)) return false;
  *out = rule_unpack(packed);
  return true;
}

void cache_put(uintptr_t pc, uintptr_t map, const rule_t *r) {
  if (!pack_fits(r->cfa_off) || !pack_fits(r->ra_off) || !pack_fits(r->rbp_off)) return;
  rule_slot_t *e = rule_slot(pc);
  uint64_t packed = rule_pack(r);
  atomic_store_explicit(&e->packed, packed, memory_order_relaxed);
  atomic_store_explicit(&e->check, rule_key(pc, map) ^ packed, memory_order_relaxed);
}

/* Reading the tables: a cursor that never passes `end`. Its bytes are
 * the object's at address p + shift (a copy read from the file, or the
 * mapping itself with shift 0): pc-relative pointers need the address. */
typedef struct cur_s {
  const uint8_t *p, *end;
  uintptr_t shift;
  bool bad;
} cur_t;

static uint64_t rd_u(cur_t *c, size_t n) {
  if ((size_t)(c->end - c->p) < n) {
    c->bad = true;
    return 0;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v |= (uint64_t)c->p[i] << (8 * i);
  c->p += n;
  return v;
}

static uint64_t rd_uleb(cur_t *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = (uint8_t)rd_u(c, 1);
    if (c->bad) return 0;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static int64_t rd_sleb(cur_t *c) {
  int64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = (uint8_t)rd_u(c, 1);
    if (c->bad || shift >= 64) {
      c->bad = true;
      return 0;
    }
    v |= (int64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
  return v;
}

/* A pointer in DWARF's exception-header encoding: the formats and the
 * pc-relative and data-relative applications (indirect ones are read as
 * the address they name, which is all that skipping them needs). */
static uintptr_t rd_enc(cur_t *c, uint8_t enc, uintptr_t datarel) {
  if (enc == 0xff) return 0; /* omitted */
  const uint8_t *at = c->p;
  uintptr_t v;
  switch (enc & 0x0f) {
    case 0x00: v = (uintptr_t)rd_u(c, 8); break;
    case 0x01: v = (uintptr_t)rd_uleb(c); break;
    case 0x02: v = (uintptr_t)rd_u(c, 2); break;
    case 0x03: v = (uintptr_t)rd_u(c, 4); break;
    case 0x04: v = (uintptr_t)rd_u(c, 8); break;
    case 0x09: v = (uintptr_t)rd_sleb(c); break;
    case 0x0a: v = (uintptr_t)(int64_t)(int16_t)rd_u(c, 2); break;
    case 0x0b: v = (uintptr_t)(int64_t)(int32_t)rd_u(c, 4); break;
    case 0x0c: v = (uintptr_t)rd_u(c, 8); break;
    default: c->bad = true; return 0;
  }
  switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)at + c->shift; break;
    case 0x30: v += datarel; break;
    default: c->bad = true; return 0;
  }
  return v;
}

/* The registers the rules follow (DWARF numbers on x86-64). */
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

typedef struct cfa_state_s {
  uint8_t cfa_reg;
  int64_t cfa_off;
  int64_t rbp_off; /* 0: rbp unchanged */
  int64_t ra_off;  /* 0: the return address undefined (the outermost frame) */
} cfa_state_t;

/* Run a call-frame program up to pc; false for what the cache cannot hold. */
static bool run_cfa(cur_t *c, uintptr_t loc, uintptr_t pc, uint64_t code_align, int64_t data_align,
                    cfa_state_t *st, const cfa_state_t *initial) {
  cfa_state_t stack[4];
  int depth = 0;
  while (c->p < c->end && !c->bad) {
    uint8_t op = (uint8_t)rd_u(c, 1), low = op & 0x3f;
    uint64_t reg = 0;
    int64_t off = 0;
    switch (op >> 6) {
      case 1: /* advance_loc */
        loc += low * code_align;
        if (loc > pc) return true;
        continue;
      case 2: /* offset */
        reg = low;
        off = (int64_t)rd_uleb(c) * data_align;
        goto set_offset;
      case 3: /* restore */
        reg = low;
        goto restore;
    }
    switch (op) {
      case 0x00: break; /* nop */
      case 0x01: return false; /* set_loc: not in compiler output */
      case 0x02: loc += rd_u(c, 1) * code_align; if (loc > pc) return true; break;
      case 0x03: loc += rd_u(c, 2) * code_align; if (loc > pc) return true; break;
      case 0x04: loc += rd_u(c, 4) * code_align; if (loc > pc) return true; break;
      case 0x05: reg = rd_uleb(c); off = (int64_t)rd_uleb(c) * data_align; goto set_offset;
      case 0x06: reg = rd_uleb(c); goto restore;
      case 0x07: /* undefined */
        reg = rd_uleb(c);
        if (reg == REG_RA) st->ra_off = 0;
        else if (reg == REG_RBP) return false;
        break;
      case 0x08: /* same_value */
        reg = rd_uleb(c);
        if (reg == REG_RBP) st->rbp_off = 0;
        else if (reg == REG_RA) return false;
        break;
      case 0x09: /* register */
        reg = rd_uleb(c);
        rd_uleb(c);
        if (reg == REG_RBP || reg == REG_RA) return false;
        break;
      case 0x0a: /* remember_state */
        if (depth == 4) return false;
        stack[depth++] = *st;
        break;
      case 0x0b: /* restore_state: the CFA rule too, as compilers expect */
        if (depth == 0) return false;
        *st = stack[--depth];
        break;
      case 0x0c: st->cfa_reg = (uint8_t)rd_uleb(c); st->cfa_off = (int64_t)rd_uleb(c); break;
      case 0x0d: st->cfa_reg = (uint8_t)rd_uleb(c); break;
      case 0x0e: st->cfa_off = (int64_t)rd_uleb(c); break;
      case 0x0f: return false; /* def_cfa_expression */
      case 0x10: case 0x16: { /* expression, val_expression: skipped for other registers */
        reg = rd_uleb(c);
        if (reg == REG_RBP || reg == REG_RA) return false;
        uint64_t len = rd_uleb(c);
        if (c->bad || len > (uint64_t)(c->end - c->p)) return false;
        c->p += len;
        break;
      }
      case 0x11: reg = rd_uleb(c); off = rd_sleb(c) * data_align; goto set_offset;
      case 0x12: st->cfa_reg = (uint8_t)rd_uleb(c); st->cfa_off = rd_sleb(c) * data_align; break;
      case 0x13: st->cfa_off = rd_sleb(c) * data_align; break;
      case 0x14: case 0x15: /* val_offset */
        reg = rd_uleb(c);
        if (op == 0x14) rd_uleb(c); else rd_sleb(c);
        if (reg == REG_RBP || reg == REG_RA) return false;
        break;
      case 0x2e: rd_uleb(c); break; /* GNU_args_size */
      default: return false;
    }
    continue;
  set_offset:
    if (reg == REG_RBP) st->rbp_off = off;
    else if (reg == REG_RA) st->ra_off = off;
    continue;
  restore:
    if (reg == REG_RBP) st->rbp_off = initial->rbp_off;
    else if (reg == REG_RA) st->ra_off = initial->ra_off;
  }
  return !c->bad;
}

/* ---------------------------------------------------------------------------
 * Where the tables are read from. Read through the object's mapping, each
 * page they touch is faulted in with the kernel's fault-around (64 KiB
 * around it): the first walks through the C library alone made 128 KiB of
 * its tables resident, 7% of a small program's peak. So they are read
 * from the object's file with pread, when that file is the one mapped:
 * its ELF and program headers and its build-id note equal the mapping's
 * byte for byte (a library replaced on disk since it was loaded, as an
 * upgrade does, has another build id). Anything else (no file, no build
 * id, a short read, an FDE longer than the copy) reads the mapping.
 *
 * A read from the file is about ten system calls (open, the checks, the
 * search, the FDE and its CIE, close): a few microseconds. A program whose
 * stacks hold more distinct frames than the rule cache keeps (a compiler:
 * 126,000 reads at a 4 KiB rate) would spend seconds on them, so after the
 * first TABLE_FILE_READS reads of the process the tables are read through
 * the mapping: such a program is large, and its tables' pages with it.
 * ------------------------------------------------------------------------- */
#define TABLE_FILE_READS 4096
#define TABLE_WINDOW 128 /* search-table entries read at once */
#define TABLE_FDE_MAX 512
#define TABLE_FDE_LONG (32 * 1024) /* longer FDEs (a function of thousands of lines) */
#define TABLE_CIE_MAX 256
#define TABLE_HEAD_MAX 4096 /* ELF and program headers compared */


/* n bytes of the object at addr: the mapping's own (cap is then ignored),
 * or a copy in buf read from the file; NULL when the file cannot give them. */
static const uint8_t *src_view(table_src_t *s, uintptr_t addr, size_t n, uint8_t *buf, size_t cap) {
  if (s->fd < 0) return (const uint8_t *)addr;
  if (n <= cap) {
    for (unsigned i = 0; i < s->loads; i++) {
      if (addr - s->load[i].lo >= s->load[i].hi - s->load[i].lo || n > s->load[i].hi - addr) continue;
      if (os_file_read_at(s->fd, buf, n, s->load[i].off + (addr - s->load[i].lo)) == 0) return buf;
      break;
    }
  }
  s->failed = true;
  return NULL;
}

/* Whether the file's bytes at off equal the mapping's n bytes at addr. */
static bool same_bytes(int fd, uint64_t off, uintptr_t addr, size_t n) {
  uint8_t buf[512];
  while (n > 0) {
    size_t k = n < sizeof(buf) ? n : sizeof(buf);
    if (os_file_read_at(fd, buf, k, off) != 0 || memcmp(buf, (const void *)addr, k) != 0) return false;
    off += k;
    addr += k;
    n -= k;
  }
  return true;
}

/* The object's GNU build-id note in its mapping: its address, its file
 * offset and its size; false if it has none. */
static bool build_id_note(const ElfW(Phdr) *ph, unsigned phnum, uintptr_t bias, uintptr_t *at, uint64_t *off,
                          size_t *size) {
  for (unsigned i = 0; i < phnum; i++) {
    if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > 4096) continue;
    const uint8_t *p = (const uint8_t *)(bias + ph[i].p_vaddr), *end = p + ph[i].p_filesz;
    while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      size_t len = sizeof(*nh) + ((nh->n_namesz + 3) & ~(size_t)3) + ((nh->n_descsz + 3) & ~(size_t)3);
      if (len > (size_t)(end - p)) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(p + sizeof(*nh), "GNU", 4) == 0 &&
          nh->n_descsz > 0) {
        *at = (uintptr_t)p;
        *off = ph[i].p_offset + (uint64_t)(p - (const uint8_t *)(bias + ph[i].p_vaddr));
        *size = len;
        return true;
      }
      p += len;
    }
  }
  return false;
}

/* Open the file of the object mapped at [start, ...) with link map `map`
 * and check that it is the one mapped; else s reads the mapping. */
void src_open(table_src_t *s, uintptr_t start, const struct link_map *map) {
  static _Atomic(uint32_t) file_reads;
  s->fd = -1;
  s->loads = 0;
  s->failed = false;
  if (map == NULL || map->l_name == NULL ||
      atomic_load_explicit(&file_reads, memory_order_relaxed) >= TABLE_FILE_READS)
    return;
  atomic_fetch_add_explicit(&file_reads, 1, memory_order_relaxed);
  const char *path = map->l_name;
  if (path[0] == '\0') {
    if (map->l_prev != NULL) return;
    path = "/proc/self/exe"; /* the main program: the file it runs, even if renamed or replaced */
  }
  /* The headers at the mapping's start (the first PT_LOAD maps the file
   * from offset 0: checked below before anything else is believed). */
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)start;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum == 0 ||
      eh->e_phoff > TABLE_HEAD_MAX || eh->e_phnum > (TABLE_HEAD_MAX - eh->e_phoff) / sizeof(ElfW(Phdr)))
    return;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(start + eh->e_phoff);
  uintptr_t bias = (uintptr_t)map->l_addr;
  bool first = true;
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (first && (ph[i].p_offset != 0 || ((bias + ph[i].p_vaddr) & ~(uintptr_t)(OS_PAGE_BYTES - 1)) != start))
      return;
    first = false;
    if (s->loads == TABLE_LOADS) return;
    s->load[s->loads].lo = bias + ph[i].p_vaddr;
    s->load[s->loads].hi = bias + ph[i].p_vaddr + ph[i].p_filesz;
    s->load[s->loads].off = ph[i].p_offset;
    s->loads++;
  }
  uintptr_t note_at;
  uint64_t note_off;
  size_t note_size;
  if (first || !build_id_note(ph, eh->e_phnum, bias, &note_at, &note_off, &note_size)) return;
  int fd;
  if (os_file_open_read(path, &fd) != 0) return;
  size_t head = eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr));
  if (!same_bytes(fd, 0, start, head) || !same_bytes(fd, note_off, note_at, note_size)) {
    os_file_close(fd);
    return;
  }
  s->fd = fd;
}

void src_close(table_src_t *s) {
  if (s->fd >= 0) os_file_close(s->fd);
  s->fd = -1;
}

static rule_t rule_from_fde(uintptr_t pc, const uint8_t *fde, uintptr_t fde_at, uint32_t flen, uintptr_t dbase,
                            table_src_t *s);

/* The rule at pc, from the tables of the object whose .eh_frame_hdr is
 * at hdr_at (also its data-relative base), read through s. */
rule_t find_rule(uintptr_t pc, uintptr_t hdr_at, table_src_t *s) {
  rule_t none = {RULE_END, 0, 0, 0, 0}, other = {RULE_OTHER, 0, 0, 0, 0};
  if (hdr_at == 0) return none;
  uintptr_t dbase = hdr_at;
  /* .eh_frame_hdr: version 1, then the encodings of the .eh_frame pointer,
   * the count and the sorted table of (start, FDE). */
  uint8_t hbuf[20];
  const uint8_t *hdr = src_view(s, hdr_at, sizeof(hbuf), hbuf, sizeof(hbuf));
  if (hdr == NULL) return other;
  if (hdr[0] != 1 || hdr[3] != 0x3b) return other;
  cur_t c = {hdr + 4, hdr + 4 + 16, hdr_at - (uintptr_t)hdr, false};
  rd_enc(&c, hdr[1], dbase);
  uint64_t count = rd_enc(&c, hdr[2], dbase);
  if (c.bad || count == 0) return other;
  uintptr_t table_at = (uintptr_t)c.p + c.shift;
  /* Binary search, one start at a time until the rest fits a window. */
  uint64_t lo = 0, hi = count;
  int32_t wbuf[2 * TABLE_WINDOW];
  const int32_t *win = NULL; /* entries win_lo.. */
  uint64_t win_lo = 0;
  while (hi - lo > 1) {
    if (win == NULL && hi - lo <= TABLE_WINDOW) {
      win = (const int32_t *)src_view(s, table_at + 8 * lo, 8 * (hi - lo), (uint8_t *)wbuf, sizeof(wbuf));
      if (win == NULL) return other;
      win_lo = lo;
    }
    uint64_t mid = (lo + hi) / 2;
    int32_t start_rel;
    if (win != NULL) {
      start_rel = win[2 * (mid - win_lo)];
    } else {
      const int32_t *e = (const int32_t *)src_view(s, table_at + 8 * mid, 4, (uint8_t *)wbuf, sizeof(wbuf));
      if (e == NULL) return other;
      start_rel = *e;
    }
    if (dbase + (intptr_t)start_rel <= pc) lo = mid;
    else hi = mid;
  }
  int32_t entry[2];
  const int32_t *e = win != NULL ? &win[2 * (lo - win_lo)]
                                 : (const int32_t *)src_view(s, table_at + 8 * lo, 8, (uint8_t *)entry, sizeof(entry));
  if (e == NULL) return other;
  if (dbase + (intptr_t)e[0] > pc) return none;
  uintptr_t fde_at = dbase + (intptr_t)e[1];

  /* The FDE and its CIE. Lengths bound every read. */
  uint8_t fbuf[TABLE_FDE_MAX];
  const uint8_t *lenp = src_view(s, fde_at, 4, fbuf, sizeof(fbuf));
  if (lenp == NULL) return other;
  uint32_t flen;
  memcpy(&flen, lenp, 4);
  if (flen < 4 || flen == 0xffffffffu) return other;
  /* A long FDE is copied to a buffer shared by all threads, if free. */
  static uint8_t long_buf[TABLE_FDE_LONG];
  static _Atomic(bool) long_busy;
  bool long_held = false;
  const uint8_t *fde;
  if (s->fd >= 0 && 4 + (size_t)flen > sizeof(fbuf) &&
      !atomic_exchange_explicit(&long_busy, true, memory_order_acquire)) {
    long_held = true;
    fde = src_view(s, fde_at, 4 + (size_t)flen, long_buf, sizeof(long_buf));
  } else {
    fde = src_view(s, fde_at, 4 + (size_t)flen, fbuf, sizeof(fbuf));
  }
  rule_t r = fde == NULL ? other : rule_from_fde(pc, fde, fde_at, flen, dbase, s);
  if (long_held) atomic_store_explicit(&long_busy, false, memory_order_release);
  return r;
}

/* The rule at pc from the FDE at fde_at (its bytes at fde, read through s:
 * the CIE is read here) and the CIE it names. */
static rule_t rule_from_fde(uintptr_t pc, const uint8_t *fde, uintptr_t fde_at, uint32_t flen, uintptr_t dbase,
                            table_src_t *s) {
  rule_t none = {RULE_END, 0, 0, 0, 0}, other = {RULE_OTHER, 0, 0, 0, 0};
  uint8_t kbuf[TABLE_CIE_MAX];
  cur_t f = {fde + 4, fde + 4 + flen, fde_at - (uintptr_t)fde, false};
  uint32_t cie_off = (uint32_t)rd_u(&f, 4);
  uintptr_t cie_at = fde_at + 4 - cie_off;
  const uint8_t *lenp = src_view(s, cie_at, 4, kbuf, sizeof(kbuf));
  if (lenp == NULL) return other;
  uint32_t clen;
  memcpy(&clen, lenp, 4);
  if (clen < 4 || clen == 0xffffffffu) return other;
  const uint8_t *cie = src_view(s, cie_at, 4 + (size_t)clen, kbuf, sizeof(kbuf));
  if (cie == NULL) return other;
  cur_t k = {cie + 4, cie + 4 + clen, cie_at - (uintptr_t)cie, false};
  if (rd_u(&k, 4) != 0) return other; /* not a CIE */
  uint8_t version = (uint8_t)rd_u(&k, 1);
  const char *aug = (const char *)k.p;
  while (k.p < k.end && *k.p) k.p++;
  if (k.p == k.end) return other;
  k.p++;
  uint64_t code_align = rd_uleb(&k);
  int64_t data_align = rd_sleb(&k);
  uint64_t ra_reg = version == 1 ? rd_u(&k, 1) : rd_uleb(&k);
  uint8_t fde_enc = 0;
  if (ra_reg != REG_RA || k.bad) return other;
  if (aug[0] == 'z') {
    uint64_t alen = rd_uleb(&k);
    if (k.bad || alen > (uint64_t)(k.end - k.p)) return other;
    const uint8_t *after = k.p + alen;
    for (const char *a = aug + 1; *a; a++) {
      if (*a == 'R') fde_enc = (uint8_t)rd_u(&k, 1);
      else if (*a == 'L') rd_u(&k, 1);
      else if (*a == 'P') {
        uint8_t penc = (uint8_t)rd_u(&k, 1);
        rd_enc(&k, penc & 0x7f, 0);
      } else {
        return other; /* 'S' (a signal frame) and anything else */
      }
    }
    if (k.bad || after > k.end) return other;
    k.p = after;
  } else if (aug[0] != '\0') {
    return other;
  }
  uintptr_t start = rd_enc(&f, fde_enc, dbase);
  uintptr_t range = rd_enc(&f, fde_enc & 0x0f, 0);
  if (f.bad || pc < start || pc - start >= range) return none;
  if (aug[0] == 'z') {
    uint64_t alen = rd_uleb(&f);
    if (alen > (uint64_t)(f.end - f.p)) return other;
    f.p += alen;
  }

  cfa_state_t st = {REG_RSP, 8, 0, -8}, initial;
  if (!run_cfa(&k, start, (uintptr_t)-1, code_align, data_align, &st, &st)) return other;
  initial = st;
  if (!run_cfa(&f, start, pc, code_align, data_align, &st, &initial)) return other;
  if (st.ra_off == 0) return none; /* the outermost frame */
  if ((st.cfa_reg != REG_RSP && st.cfa_reg != REG_RBP) || st.cfa_off <= 0 || st.cfa_off > INT32_MAX ||
      st.ra_off < INT32_MIN || st.rbp_off < INT32_MIN || st.ra_off >= 0 || st.rbp_off > 0)
    return other;
  rule_t r = {RULE_OK, st.cfa_reg == REG_RBP, (int32_t)st.cfa_off, (int32_t)st.ra_off, (int32_t)st.rbp_off};
  return r;
}

#endif
