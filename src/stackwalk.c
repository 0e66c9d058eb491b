/* Stack capture and symbol lookup for the heap profiler: see stackwalk.h. */
#include "stackwalk.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <unwind.h>

#include "platform.h"

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

size_t unwind_backtrace(uintptr_t *pcs, size_t max) {
  if (max == 0) return 0;
  self_range();
  walk_t w = {pcs, max, 0, 0, 0, true};
  if (atomic_load_explicit(&self_known, memory_order_acquire) == 2) {
    w.lo = self_lo;
    w.hi = self_hi;
  }
  _Unwind_Backtrace(walk_frame, &w);
  return w.n;
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
