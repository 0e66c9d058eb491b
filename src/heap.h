/* Heaps: creation, the generic allocation path, remote frees,
 * housekeeping, abandonment and adoption. */
#ifndef BRISK_HEAP_H
#define BRISK_HEAP_H

#include "heap_types.h"
#include "page.h"

/* Heaps (heap.c) */
BRISK_INTERNAL heap_t *heap_create(uint32_t kind, uintptr_t tid);
BRISK_INTERNAL heap_t *heap_adopt_abandoned(uintptr_t tid);
BRISK_INTERNAL void heap_abandon(heap_t *h);
/* Release every page of a first-class heap at once; the heap object is
 * kept for reuse by a later heap_create. */
BRISK_INTERNAL void heap_destroy(heap_t *h);
/* Pages, blocks in use (in class pages; large blocks are not counted) and
 * segments, as JSON; the owner's view. */
BRISK_INTERNAL size_t heap_stats_json(heap_t *h, char *buf, size_t len);
BRISK_INTERNAL void heap_collect(heap_t *h, bool force);
BRISK_INTERNAL void heap_housekeeping(heap_t *h);
BRISK_INTERNAL void *heap_alloc(heap_t *h, size_t size);
BRISK_INTERNAL void *heap_alloc_aligned(heap_t *h, size_t alignment, size_t size);
BRISK_INTERNAL void heap_drain_inbox(heap_t *h);
/* A free from a thread that does not own the block's heap. `me` is the
 * freeing thread's heap (its outbox batches), or NULL to push at once; gen
 * is dst's generation as read from its inbox; urgent (a large block) hands
 * the batch over now. */
BRISK_INTERNAL void heap_remote_free(heap_t *me, heap_t *dst, uint32_t gen, block_t *b,
                                     bool urgent);
BRISK_INTERNAL void heap_flush_outbox(heap_t *h);
BRISK_INTERNAL heap_t *heap_first(void);
BRISK_INTERNAL void heap_list_lock(void);
BRISK_INTERNAL void heap_list_unlock(void);
BRISK_INTERNAL void heap_list_reset_lock(void);
/* After fork in the child: heaps of threads that do not exist there. */
BRISK_INTERNAL void heap_orphan_others(uintptr_t tid);

#endif
