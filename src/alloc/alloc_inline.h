/* The fast paths, inlined into every public entry point (api.c,
 * override.c, override_new.c). Each has one likely branch; everything else
 * is a call to a noinline function in another file.
 *
 * Expected cost (x86-64, gcc 12 -O3, to the ret): malloc(<= 1 KiB) 19
 * instructions, a local free 33 (the registry lookup, the exact block
 * index and the double-free test included); a malloc(32)/free pair with
 * its calling loop 62 under callgrind. bench/fastpath_counts.txt keeps the
 * measured counts (scripts/fastpath_counts.sh writes it); the test
 * tests/test_fastpath_counts.sh fails if one grows, and if one falls until
 * the record is written again.
 */
#ifndef BRISK_ALLOC_INLINE_H
#define BRISK_ALLOC_INLINE_H

#include "alloc/free.h"
#include "alloc/free_fast.h"
#include "alloc/hardened.h"
#include "alloc/malloc_slow.h"
#include "base/atomics.h"
#include "heaps/heap.h"
#include "heaps/thread.h"
#include "os/platform.h"
#include "segments/registry.h"

BRISK_INLINE void *malloc_inline(size_t size) {
  heap_t *h = thread_heap();
  if (BRISK_LIKELY(size <= DIRECT_MAX)) {
    block_t *b = page_pop(h->direct[(size + 15) >> 4]);
    if (BRISK_LIKELY(b != NULL)) return b;
    return malloc_refill(size, h);
  }
  return malloc_above(size, h);
}

/* Bytes usable at p: for the start of a block of a class page or a large
 * block (the registry, the exact block index below the page's capacity, as
 * free checks them), its block size; anything else (huge blocks, foreign
 * and bad pointers, NULL) takes block_usable_size's checks and reports. */
BRISK_INLINE size_t usable_size_inline(const void *p, brisk_fn_t fn) {
  uintptr_t a = (uintptr_t)p;
  segment_t *seg = registry_lookup_wrapped(a);
  if (BRISK_LIKELY(seg != NULL)) {
    const page_t *pg = page_of(seg, a);
    if (BRISK_LIKELY(page_block_index(pg, a - (uintptr_t)pg->start) < pg->capacity &&
                     !(pg->flags & PAGE_HUGE)))
      return pg->block_size;
  }
  return block_usable_size(p, fn);
}

BRISK_INLINE void free_inline(void *p, brisk_fn_t fn) {
  if (BRISK_HARDENED) {
    segment_t *seg = registry_lookup((uintptr_t)p);
    if (BRISK_LIKELY(seg != NULL)) {
      const page_t *pg = page_of(seg, (uintptr_t)p);
      if (BRISK_LIKELY(fn != FN_DELETE && fn != FN_DELETE_ARRAY && field_load_relaxed(&pg->alloc_kind) == 0 &&
                       !(pg->flags & PAGE_HUGE))) {
        free_at(p, seg, fn);
        return;
      }
    }
    /* Out of line, so that the path above makes only tail calls (no
     * registers to save on the way in). */
    free_hardened_checked(p, seg, fn);
    return;
  }
  free_raw(p, fn);
}

/* A sized release (free_sized, sized operator delete): the hardened build
 * also checks the size against the block. */
BRISK_INLINE void free_sized_inline(void *p, size_t size, size_t alignment, brisk_fn_t fn) {
  if (BRISK_HARDENED && p != NULL && !hardened_release_ok(p, fn, true, size, alignment)) return;
  free_raw(p, fn);
}

#endif
