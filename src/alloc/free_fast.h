/* free's fast path once the pointer's segment is looked up, shared by the
 * inline entry points (alloc_inline.h) and the hardened build's checked
 * release (hardened.c): the block's owner frees it onto its page, anything
 * else is one call to free.c.
 *
 * Layer: alloc, below alloc_inline.h. */
#ifndef BRISK_FREE_FAST_H
#define BRISK_FREE_FAST_H

#include "alloc/free.h"
#include "base/atomics.h"
#include "heaps/block.h"
#include "heaps/local_free.h"
#include "os/platform.h"
#include "segments/registry.h"

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

#endif
