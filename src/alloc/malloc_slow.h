/* malloc's slow entries, beside its inline path (alloc_inline.h), which
 * calls them; they call the heaps. */
#ifndef BRISK_MALLOC_SLOW_H
#define BRISK_MALLOC_SLOW_H

#include "heaps/heap_types.h"

/* malloc when the inline path cannot serve. h: the calling thread's heap
 * as the inline path read it (brisk_tls_heap), a static one before the
 * thread's first call. malloc_refill: a size up to DIRECT_MAX whose page
 * ran dry; malloc_above: a larger size (the class cache first). */
BRISK_INTERNAL void *malloc_refill(size_t size, heap_t *h) BRISK_NOINLINE;
BRISK_INTERNAL void *malloc_above(size_t size, heap_t *h) BRISK_NOINLINE;

#endif
