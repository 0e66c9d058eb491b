/* Huge blocks: above LARGE_MAX, a mapping each, with the segment header in
 * its first slice; owned by no heap unless a first-class heap adopts one
 * (span.h). Freed mappings and the resident rests of larger ones are kept
 * for the next huge block for one purge delay (huge.c). */
#ifndef BRISK_HUGE_H
#define BRISK_HUGE_H

#include <stdbool.h>
#include <stdint.h>

#include "segments/layout.h"

/* The bytes huge_alloc maps for a block of `size` bytes that starts
 * `offset` bytes into its mapping (the header slice, or the alignment),
 * its guard page aside: the block's usable size is this minus offset.
 * brisk_good_size asks it too. */
BRISK_INLINE size_t huge_map_bytes(size_t offset, size_t size) {
  return OS_PAGE_CEIL(offset + size);
}
/* The usable size huge_alloc gives a block of `size` bytes (alignment up
 * to the header slice's). */
BRISK_INLINE size_t huge_usable_size(size_t size) {
  return huge_map_bytes(SLICE_SIZE, size) - SLICE_SIZE;
}

/* A huge block of `size` bytes whose start is a multiple of `alignment`;
 * NULL when the OS has no memory. */
BRISK_INTERNAL page_t *huge_alloc(size_t size, size_t alignment);
BRISK_INTERNAL void huge_free(page_t *pg);
/* Resize a huge block in place (into its tail, or with mremap without
 * moving); false when it cannot. */
BRISK_INTERNAL bool huge_try_resize(page_t *pg, size_t new_size);
/* Return the kept mappings and tails that are past the delay at `now`
 * (all when force); gives the next deadline (0: none). */
BRISK_INTERNAL uint64_t huge_maintain(uint64_t now, bool force);

/* For mallinfo and the statistics, under the huge lock: the mappings in
 * the huge cache and their bytes, and the bytes of the tails kept behind
 * huge blocks in use. */
BRISK_INTERNAL void huge_usage(int64_t *cached, int64_t *cached_bytes, int64_t *tail_bytes);

/* Around fork (thread.c). */
BRISK_INTERNAL void huge_lock(void);
BRISK_INTERNAL void huge_unlock(void);
BRISK_INTERNAL void huge_reset_lock(void);

#endif
