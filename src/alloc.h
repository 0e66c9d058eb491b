/* Allocation entry points beyond the inline fast path, shared by the
 * prefixed API and the standard symbols. */
#ifndef BRISK_ALLOC_H
#define BRISK_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "free.h"

BRISK_INTERNAL void *alloc_calloc(size_t count, size_t size);
BRISK_INTERNAL void *alloc_realloc(void *p, size_t size, brisk_fn_t fn);
/* realloc whose new block, when one is needed, comes from `target` (a
 * first-class heap owned by the caller; NULL: the caller's own heap). */
struct heap_s;
BRISK_INTERNAL void *alloc_realloc_in(struct heap_s *target, void *p, size_t size, brisk_fn_t fn);
BRISK_INTERNAL void *alloc_aligned(size_t alignment, size_t size);
BRISK_INTERNAL size_t alloc_usable_size(const void *p, brisk_fn_t fn);
BRISK_INTERNAL bool alloc_owns(const void *p);
BRISK_INTERNAL void alloc_collect(void);
/* Add the calling thread's pending page counts to the process counters. */
BRISK_INTERNAL void alloc_stats_sync(void);

#endif
