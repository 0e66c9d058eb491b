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
BRISK_INTERNAL void heap_collect(heap_t *h, bool force);
/* A round of the background purger (background.h): the free slices of
 * every heap, abandoned heaps whole, the pool and the huge cache; returns
 * the next deadline (0: none). */
BRISK_INTERNAL uint64_t heaps_background_round(uint64_t now);
BRISK_INTERNAL void heap_housekeeping(heap_t *h);
BRISK_INTERNAL void *heap_alloc(heap_t *h, size_t size);
/* heap_alloc for a size of class c (<= MEDIUM_MAX) once c's class cache
 * came up empty (malloc_above pops it itself). */
BRISK_INTERNAL void *heap_alloc_class(heap_t *h, unsigned c);
BRISK_INTERNAL void *heap_alloc_aligned(heap_t *h, size_t alignment, size_t size);
BRISK_INTERNAL void heap_drain_inbox(heap_t *h);
/* A free from a thread without a heap (it is exiting): the block is
 * handed to dst at once. gen is dst's generation as read from its inbox. */
BRISK_INTERNAL void heap_remote_free_direct(heap_t *dst, uint32_t gen, block_t *b);
/* Hand the slot's batch over to its heap and empty it. */
BRISK_INTERNAL void heap_outbox_flush_slot(outbox_slot_t *slot);

/* The outbox slot of `me` for blocks bound for dst. */
BRISK_INLINE outbox_slot_t *heap_outbox_slot(heap_t *me, const heap_t *dst) {
  return &me->outbox[((uintptr_t)dst >> 6) % OUTBOX_SLOTS];
}

/* A free from a thread that does not own the block's heap, once me's slot
 * for the block's heap collects that heap's current generation
 * (heap_outbox_retarget): the block joins the batch. urgent (a large
 * block) hands the batch over now. */
BRISK_INLINE void heap_remote_free(heap_t *me, outbox_slot_t *slot, block_t *b, bool urgent) {
  /* Already on a list of its page? Only the owner may look; tell it. */
  block_set_remote_next(b, slot->head, block_looks_free(b));
  block_t **recent = &slot->recent[slot->count % REMOTE_SKIP];
  block_set_remote_skip(b, slot->count >= REMOTE_SKIP ? *recent : NULL);
  *recent = b;
  slot->head = b;
  if (slot->count++ == 0) {
    slot->tail = b;
    me->outbox_pending = 1;
  }
  if (BRISK_UNLIKELY(slot->count >= OUTBOX_BATCH || urgent)) heap_outbox_flush_slot(slot);
}
/* Point a slot at generation gen of dst, handing over the batch it held (a
 * batch for a destroyed generation of its heap is dropped at the push). */
BRISK_INTERNAL void heap_outbox_retarget(outbox_slot_t *slot, heap_t *dst, uint32_t gen);
BRISK_INTERNAL void heap_flush_outbox(heap_t *h);
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
