/* Frees from other threads (remote.c): the freeing thread's outbox and
 * its handover to the block's heap, the owner's take-back. Calls only
 * into pages, segments and parking. */
#ifndef BRISK_REMOTE_H
#define BRISK_REMOTE_H

#include "heaps/heap_types.h"
#include "heaps/page.h"

/* The owner (or the thread serving an abandoned heap) takes its inbox and
 * the parked arrays in: every block back to its page, each link checked. */
BRISK_INTERNAL void heap_drain_inbox(heap_t *h);
/* A free from a thread without a heap (it is exiting): the block is
 * handed to dst at once. gen is the life of dst the block is of (its
 * segment's heap_generation). */
BRISK_INTERNAL void heap_remote_free_direct(heap_t *dst, uint32_t gen, block_t *b);
/* Hand the slot's batch over to its heap and empty it. */
BRISK_INTERNAL void heap_outbox_flush_slot(outbox_slot_t *slot);

/* A free of b, a block of class page pg of another thread's heap (one
 * whose segments take page lists, of a class up to DIRECT_MAX), onto pg's
 * remote list: one CAS (layout.h, page_remote_t). The push onto an empty
 * list has the background thread watch the heap (park_watch), so that an
 * owner that does not come by has the list parked. */
enum { PAGE_PUSHED, PAGE_PUSH_INBOX, PAGE_PUSH_NOTIFY };
BRISK_INTERNAL void page_remote_watch(const page_t *pg) BRISK_NOINLINE;
BRISK_INLINE int page_remote_push(page_t *pg, block_t *b) {
  _Atomic(uintptr_t) *w = page_remote_word(pg);
  uintptr_t old = atomic_load_explicit(w, memory_order_relaxed);
  if (BRISK_HARDENED) page_fill_freed(pg, b);
  for (;;) {
    if (BRISK_UNLIKELY(old == PAGE_REMOTE_CLOSED)) return PAGE_PUSH_INBOX;
    if (BRISK_UNLIKELY(old == PAGE_REMOTE_FULL)) {
      /* The first free into a page on the full list opens its word and
       * tells the owner through the inbox, at once. */
      if (atomic_compare_exchange_weak(w, &old, 0)) return PAGE_PUSH_NOTIFY;
      continue;
    }
    block_set_next(b, (old & PAGE_REMOTE_PTR) ? (block_t *)(old & PAGE_REMOTE_PTR) : page_list_end(pg));
    /* Sequentially consistent: with the load of the watch flag after the
     * first push, a store-load pair against the background thread's
     * clear of the flag and its look at the list (park_idle_inbox). */
    if (atomic_compare_exchange_weak(w, &old, (uintptr_t)b + (old & ~PAGE_REMOTE_PTR) +
                                                  ((uintptr_t)1 << PAGE_REMOTE_COUNT_SHIFT)))
      break;
  }
  if (BRISK_UNLIKELY((old & PAGE_REMOTE_PTR) == 0)) page_remote_watch(pg);
  return PAGE_PUSHED;
}
/* The owner takes every remote list of h's pages in, each block freed as
 * its own (before a count or walk of its blocks, and at brisk_collect). */
BRISK_INTERNAL void heap_collect_remote(heap_t *h);
/* The owner leaves h: every page's remote list is closed (frees go to the
 * inbox, which the threads that serve an abandoned heap take in) and
 * what it held freed. A page's list opens again when its new owner finds
 * the page dry. */
BRISK_INTERNAL void heap_close_remote(heap_t *h);

/* The outbox slot of `me` for blocks bound for dst. */
BRISK_INLINE outbox_slot_t *heap_outbox_slot(heap_t *me, const heap_t *dst) {
  return &me->outbox[((uintptr_t)dst >> 6) % OUTBOX_SLOTS];
}

/* A free from a thread that does not own the block's heap, once me's slot
 * for the block's heap collects the block's life of it
 * (heap_outbox_retarget): the block joins the batch. urgent (a large or
 * medium block) hands the batch over now. */
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
/* A freeing thread, or the background round, takes an abandoned heap
 * for a moment (ABANDONED -> BUSY -> ABANDONED) to take its inbox in and
 * give back what became empty; false: another thread has it. */
BRISK_INTERNAL bool heap_serve_abandoned(heap_t *dst);
/* Abandoned h, held BUSY, after a drain: its class cache and each class's
 * current page are given back, unless its thread left them for the
 * thread that adopts the heap (left_ms) less than a purge delay before
 * `now` (0: read the clock) and the background thread runs to come back
 * for them: then the time they are due. force: given back whatever. */
BRISK_INTERNAL uint64_t heap_abandoned_tidy(heap_t *h, uint64_t now, bool force);

#endif
