/* malloc's slow entries (malloc_slow.h): what malloc_inline
 * (alloc_inline.h) calls when its one likely branch fails. */
#include "alloc/malloc_slow.h"

#include <errno.h>

#include "heaps/heap.h"
#include "heaps/thread.h"

/* A first call on this thread (h is a static heap): its heap, then the
 * allocation. */
static BRISK_NOINLINE void *malloc_first(size_t size) {
  heap_t *h = thread_heap_init();
  if (h == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  return heap_alloc(h, size);
}

/* heap_alloc on h, or on the thread's new heap when h is a static one. */
BRISK_INLINE void *malloc_in(heap_t *h, size_t size) {
  if (BRISK_UNLIKELY(h->kind == HEAP_KIND_STATIC)) return malloc_first(size);
  return heap_alloc(h, size);
}

void *malloc_refill(size_t size, heap_t *h) {
  block_t *b = page_refill_pop(h, h->direct[(size + 15) >> 4]);
  return b != NULL ? b : malloc_in(h, size);
}

void *malloc_above(size_t size, heap_t *h) {
  brisk_assert(size > DIRECT_MAX);
  if (size <= h->cache_path_max) { /* MEDIUM_MAX; less while the profiler samples */
    /* Most allocations of these classes are served by the class cache
     * (empty in the hardened build). A static heap's cache_path_max is 0:
     * its calls take malloc_in below. */
    brisk_assert(h->kind != HEAP_KIND_STATIC);
    unsigned c = size_to_class_above_direct(size);
    block_t *b = class_cache_pop(h, c);
    return b != NULL ? b : heap_alloc_class(h, c);
  } else if (size <= MEDIUM_MAX && h->sampler != NULL) {
    /* The same while the heap samples: a cached block is counted here
     * (sample.h) unless the sample falls on it, which heap_alloc_class
     * takes. Only allocations above MEDIUM_MAX test this without it. */
    unsigned c = size_to_class_above_direct(size);
    block_t *b = sampling_class_cache_pop(h, c);
    return b != NULL ? b : heap_alloc_class(h, c);
  }
  return malloc_in(h, size);
}
