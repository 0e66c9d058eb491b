/* Stack capture and symbol lookup for the heap profiler: see stackwalk.h. */
#include "stackwalk.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <unwind.h>

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

void unwind_symbol(uintptr_t addr, const char **name, uintptr_t *offset, const char **object,
                   uintptr_t *object_offset) {
  Dl_info info;
  *name = NULL;
  *offset = 0;
  *object = NULL;
  *object_offset = 0;
  if (dladdr((void *)addr, &info) == 0) return;
  if (info.dli_fname != NULL && info.dli_fname[0] != '\0') {
    *object = info.dli_fname;
    *object_offset = addr - (uintptr_t)info.dli_fbase;
  }
  if (info.dli_sname != NULL && info.dli_saddr != NULL) {
    *name = info.dli_sname;
    *offset = addr - (uintptr_t)info.dli_saddr;
  }
}
