/* Huge blocks: above LARGE_MAX, a mapping each, with the segment header in
 * its first slice; owned by no heap unless a first-class heap adopts one
 * (span.h). Freed mappings and the resident rests of larger ones are kept
 * for the next huge block for one purge delay (huge.c). */
#ifndef BRISK_HUGE_H
#define BRISK_HUGE_H

#include <stdbool.h>

#include "layout.h"

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

/* Around fork (thread.c). */
BRISK_INTERNAL void huge_lock(void);
BRISK_INTERNAL void huge_unlock(void);
BRISK_INTERNAL void huge_reset_lock(void);

#endif
