/* Heaps: creation, the generic allocation path, housekeeping, the
 * background round, abandonment and adoption. Frees from other threads
 * are remote.h's. */
#ifndef BRISK_HEAP_H
#define BRISK_HEAP_H

#include "heaps/heap_types.h"
#include "heaps/local_free.h"
#include "heaps/remote.h"

/* Heaps (heap.c; allocation: heap_alloc.c) */
BRISK_INTERNAL heap_t *heap_create(uint32_t kind, uintptr_t tid);
BRISK_INTERNAL heap_t *heap_adopt_abandoned(uintptr_t tid);
BRISK_INTERNAL void heap_abandon(heap_t *h);
/* Release every page of a first-class heap at once; the heap object is
 * kept for reuse by a later heap_create. */
BRISK_INTERNAL void heap_destroy(heap_t *h);
BRISK_INTERNAL void heap_collect(heap_t *h, bool force);
/* A round of the background purger (background.h): the free slices of
 * every heap, abandoned heaps whole, the pool and the huge cache; returns
 * the next deadline (0: none). */
BRISK_INTERNAL uint64_t heaps_background_round(uint64_t now);
/* What abandoned heaps kept for a thread that would adopt them
 * (heap_abandon) goes back: all of it (force, or the background thread is
 * off, so that no round will come for it), else what is due. */
BRISK_INTERNAL void heaps_abandoned_give_back(bool force);
BRISK_INTERNAL void heap_housekeeping(heap_t *h);
BRISK_INTERNAL void *heap_alloc(heap_t *h, size_t size);
/* heap_alloc for a size of class c (<= MEDIUM_MAX) once c's class cache
 * came up empty (malloc_above pops it itself). */
BRISK_INTERNAL void *heap_alloc_class(heap_t *h, unsigned c);
BRISK_INTERNAL void *heap_alloc_aligned(heap_t *h, size_t alignment, size_t size);
/* Memory for heaps and their samplers, which live as long as the process;
 * NULL when the OS has none. */
BRISK_INTERNAL void *heap_meta_take(size_t size);
BRISK_INTERNAL heap_t *heap_first(void);
BRISK_INTERNAL void heap_list_lock(void);
BRISK_INTERNAL void heap_list_unlock(void);
BRISK_INTERNAL void heap_list_reset_lock(void);
BRISK_INTERNAL void heap_sets_lock_all(void);
BRISK_INTERNAL void heap_sets_unlock_all(void);
BRISK_INTERNAL void heap_sets_reset_locks(void);
/* After fork in the child: heaps of threads that do not exist there. */
BRISK_INTERNAL void heap_orphan_others(uintptr_t tid);

#endif
