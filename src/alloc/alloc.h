/* Allocation entry points beyond the inline fast path, shared by the
 * prefixed API and the standard symbols. */
#ifndef BRISK_ALLOC_H
#define BRISK_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/free.h"

BRISK_INTERNAL void *alloc_calloc(size_t count, size_t size);
BRISK_INTERNAL void *alloc_realloc(void *p, size_t size, brisk_fn_t fn);
/* realloc whose new block, when one is needed, comes from `target` (a
 * first-class heap owned by the caller; NULL: the caller's own heap). */
struct heap_s;
BRISK_INTERNAL void *alloc_realloc_in(struct heap_s *target, void *p, size_t size, brisk_fn_t fn);
BRISK_INTERNAL void *alloc_aligned(size_t alignment, size_t size);
BRISK_INTERNAL bool alloc_owns(const void *p);
/* The start of the block of brisk's (handed out or not) that holds p;
 * NULL when none does. Nothing reported. */
BRISK_INTERNAL void *alloc_block_of(const void *p);
/* The calling thread's heap and the memory kept for every heap: all that
 * is unused when force, else what is past its purge delay. */
BRISK_INTERNAL void alloc_collect(bool force);
/* The usable size a request of `size` bytes gets (0: none can be that
 * large), computed as heap_alloc sizes its blocks. */
BRISK_INTERNAL size_t alloc_good_size(size_t size);
/* The usable size of a block brisk handed out (no checks). */
BRISK_INTERNAL size_t alloc_block_size(const void *p);
/* Is the new block p of n usable bytes known to be zero (a large or huge
 * block on memory fresh from the OS)? */
BRISK_INTERNAL bool alloc_is_fresh(const void *p, size_t n);
/* A block whose whole usable size is zero. */
BRISK_INTERNAL void *alloc_zalloc(size_t size);
/* brisk_expand and brisk_rezalloc (include/brisk.h). */
BRISK_INTERNAL void *alloc_expand(void *p, size_t size);
BRISK_INTERNAL void *alloc_rezalloc(void *p, size_t size);
/* Add the calling thread's pending page counts to the process counters. */
BRISK_INTERNAL void alloc_stats_sync(void);

#endif
