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

/* The last of free's fast tests, on a block of one of the calling
 * thread's pages pg: at the start of a block handed out (idx, its exact
 * block index, below reserved) and not (probably) free. realloc makes the
 * same one. */
BRISK_INLINE bool local_block_ok(const page_t *pg, const block_t *b, uint64_t idx) {
  return idx < pg->reserved && !block_looks_free(b);
}

/* free_raw once p's segment is known (not NULL). */
BRISK_INLINE void free_at(void *p, segment_t *seg, brisk_fn_t fn) {
  uintptr_t a = (uintptr_t)p;
  page_t *pg = page_of(seg, a);
  block_t *b = (block_t *)p;
  uint64_t idx = page_block_index(pg, a - (uintptr_t)pg->start);
  if (BRISK_UNLIKELY(atomic_load_relaxed(&seg->owner_tid) != os_thread_id())) {
    free_other(p, seg, pg, idx, fn); /* most often another thread's block */
    return;
  }
  /* Local, at the start of a block handed out, and not (probably) free. */
  if (BRISK_LIKELY(local_block_ok(pg, b, idx))) {
    free_local(pg, b);
    return;
  }
  free_slow(p, seg, fn);
}

BRISK_INLINE void free_raw(void *p, brisk_fn_t fn) {
  segment_t *seg = registry_lookup_wrapped((uintptr_t)p);
  if (BRISK_UNLIKELY(seg == NULL)) {
    free_unowned(p, fn); /* NULL lands here too: registry[0] is empty */
    return;
  }
  free_at(p, seg, fn);
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

/* The hardened build's check of a release through fn, inline for its
 * common case: free (or any release that expects malloc's kind, unsized)
 * of a block whose kind byte says malloc, or that has none. That is
 * exactly when hardened_release_ok would find nothing to report and
 * nothing to reset; everything else takes it. fn is a constant at every
 * call site. */
BRISK_INLINE bool hardened_release_checked(void *p, segment_t *seg, brisk_fn_t fn) {
  if (fn != FN_DELETE && fn != FN_DELETE_ARRAY) {
    page_t *pg;
    const uint8_t *slot = hardened_kind_slot_at(seg, p, &pg);
    if (BRISK_LIKELY(slot == NULL || *slot == KIND_MALLOC)) return true;
  }
  return hardened_release_ok(p, fn, false, 0, 0);
}

/* A release through fn: the hardened build first checks how the block was
 * allocated against fn, with the segment it looked up for that (bounds
 * checked: a pointer past the registry, or NULL, takes free_raw's way).
 * Its common case, free of a block whose span never held a block of new
 * (where that check could find nothing to report), needs no more than the
 * span's flag; any other release goes through hardened_release_checked
 * first. */
BRISK_INTERNAL void free_hardened_checked(void *p, segment_t *seg, brisk_fn_t fn) BRISK_NOINLINE;

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
