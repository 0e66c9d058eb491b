/* A heap's own cache of large blocks' spans (heap_types.h: large_cache_t):
 * the owner's free of a large block keeps its span here, and the owner's
 * next large block of the same size takes it back, neither taking the
 * set's lock nor reading the set. Up to LARGE_CACHE_SLOTS spans of at most
 * SPAN_CACHE_SPAN_MAX slices, LARGE_CACHE_SLICES slices in all; beyond
 * that a span goes to the set's span cache (span.h) as before.
 *
 * A kept span is marked freed (span_keep_large), so a second free of its
 * block is reported. Memory comes back when its thread goes quiet: the
 * first put since the background thread last found the cache empty
 * schedules a round, and a round gives back (to the set's free slices,
 * under the set's lock, whose purge follows a delay later) every span
 * that sat in its slot through a whole purge delay. An idle thread so
 * holds at most 1 MiB here for one to two delays, and none after a
 * third. The background thread is started for it once the cache holds
 * LARGE_CACHE_WORTH_A_THREAD slices (512 KiB); less, with no background
 * thread running, waits for the owner's next collect or its exit, as the
 * set's free slices do. The owner and the background thread each empty a slot with one
 * exchange: whoever gets the span has it.
 *
 * Layer: heaps, after sample.h and before page.h. */
#ifndef BRISK_LARGE_CACHE_H
#define BRISK_LARGE_CACHE_H

#include "heaps/heap_types.h"

/* The span of a large block of `size` bytes in `slices` slices from h's
 * cache, made in use again with the block's usable size (without the
 * lock when the span's tail_pages reaches past the block's end, else
 * resized under the set's lock), or NULL. Owner only. */
BRISK_INTERNAL page_t *large_cache_take(heap_t *h, size_t slices, size_t size);
/* A span of `slices` slices from h's cache for another use (a class page
 * for which the set has no resident memory), its descriptor new
 * (span_reuse_kept), or NULL. Owner only. */
BRISK_INTERNAL page_t *large_cache_take_span(heap_t *h, size_t slices);
/* Keep the span of a large block the owner freed (not sampled, counted
 * out already); false when it does not fit, or h is not owned (a thread
 * serving an abandoned heap). Owner only. */
BRISK_INTERNAL bool large_cache_put(heap_t *h, page_t *span);
/* Every kept span back to the set (the owner's collect, abandonment and
 * destruction; a thread serving an abandoned heap). */
BRISK_INTERNAL void large_cache_flush(heap_t *h);
/* span_try_grow of a large block of h (its owner): when the slices after
 * it are not all free, the kept spans go back first and it tries again. */
BRISK_INTERNAL bool large_span_try_grow(heap_t *h, page_t *span, size_t slices);
/* The background thread's look at an owned heap's cache at `now`: the
 * spans unused for a whole delay go back. Returns the next deadline (0:
 * none). The background thread only. */
BRISK_INTERNAL uint64_t large_cache_idle(heap_t *h, uint64_t now);
/* malloc_trim's: every span an owned heap keeps goes back. */
BRISK_INTERNAL void large_cache_trim(heap_t *h);

#endif
