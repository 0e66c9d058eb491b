/* Pages of a heap: the class queues, the full list, carving and retiring.
 * Called by heap.c; calls only into segments. */
#ifndef BRISK_PAGE_H
#define BRISK_PAGE_H

#include "heap_types.h"
#include "profile_count.h"

/* Pages (and large blocks) taken or given back by h, counted into the
 * process counters in steps of PAGE_STAT_STEP: the counters are shared by
 * every thread, and one atomic add per page event kept their cache line
 * moving between cores. heap_stats_publish() adds the rest. */
#define PAGE_STAT_STEP 32
BRISK_INTERNAL void heap_stats_publish(heap_t *h);
BRISK_INLINE void heap_count_page(heap_t *h, int delta, bool large) {
  h->pages_pending += delta;
  if (large && delta > 0) h->large_pending++;
  if (BRISK_UNLIKELY(h->pages_pending >= PAGE_STAT_STEP || h->pages_pending <= -PAGE_STAT_STEP ||
                     h->large_pending >= PAGE_STAT_STEP))
    heap_stats_publish(h);
}

/* Hardened: fill a freed block, and check the fill when it is reused. */
BRISK_INTERNAL void page_fill_freed(const page_t *pg, block_t *b);
BRISK_INTERNAL void page_check_fill(const page_t *pg, block_t *b);

/* Free a block of a page that this heap's owner owns. Inline: the free
 * fast path and the inbox drain share it. When `used` drops to notify_at
 * (counted already), page_notify takes the block instead: to the class cache
 * (PAGE_CACHED pages, whose notify_at is UINT32_MAX, so every free), or
 * onto the local list and then the page changes list or is retired. */
BRISK_INTERNAL void page_notify(page_t *pg, block_t *b) BRISK_NOINLINE;

/* b onto the owner's local list (its count is the caller's). */
BRISK_INLINE void page_link_local(page_t *pg, block_t *b) {
  block_set_next(b, pg->local_free);
  pg->local_free = b;
}

BRISK_INLINE void page_push_local(page_t *pg, block_t *b) {
  page_link_local(pg, b);
  page_add_used(pg, -1);
}

BRISK_INLINE void free_local(page_t *pg, block_t *b) {
  if (BRISK_HARDENED) page_fill_freed(pg, b);
  /* used - 1 <= notify_at, as one decrement and its sign */
  if (BRISK_UNLIKELY(--pg->until_notify < 0)) {
    page_notify(pg, b); /* with the block counted as back */
    return;
  }
  page_link_local(pg, b);
}

/* Take the first block of the free list, or NULL when the list is empty
 * or its head lies outside the page (a link broken by a write after free:
 * the slow path tells which). */
BRISK_INLINE block_t *page_pop(page_t *pg) {
  block_t *b = pg->free;
  if (BRISK_UNLIKELY((uintptr_t)b - (uintptr_t)pg->start >= pg->area)) return NULL;
  pg->free = block_next(b);
  page_add_used(pg, 1);
  b->link = 0; /* a handed-out block must not look free to free() */
  if (BRISK_HARDENED) page_check_fill(pg, b);
  return b;
}

/* A page of class c with a block to give: the head of its free list, or
 * when that is empty, its next block never carved (page_take_fresh). */
BRISK_INTERNAL page_t *heap_find_page(heap_t *h, unsigned c);
BRISK_INTERNAL block_t *page_take_fresh(page_t *pg);
BRISK_INTERNAL bool page_holds_block(const page_t *pg, const block_t *b);
BRISK_INLINE bool page_holds_block_inline(const page_t *pg, const block_t *b) {
  uintptr_t off = (uintptr_t)b - (uintptr_t)pg->start;
  return off < pg->area && page_block_index(pg, off) < pg->reserved;
}
/* The owner's frees on pg's local list become its allocation list. */
BRISK_INLINE void page_take_local_free(page_t *pg) {
  pg->free = pg->local_free;
  pg->local_free = page_list_end(pg);
}

/* The current page of a class ran dry: when the owner's frees wait on its
 * local list, they become the allocation list and the first is popped,
 * without the slow path's housekeeping, which every 8th refill still
 * takes (so remote frees, outbox batches and purges wait 8 refills at
 * most). A thread that allocates and frees one size in turn runs its page
 * dry every 4096 / size allocations: this is most of its cost for sizes
 * near DIRECT_MAX. NULL: take the slow path. The empty page's area is 0,
 * so a heap that owns nothing is never written here. */
BRISK_INLINE block_t *page_refill_pop(heap_t *h, page_t *pg) {
  block_t *lf = pg->local_free;
  /* Only a list that ended: a head outside the page is a broken link,
   * which the slow path reports (page_collect). Never while the heap
   * samples (refill_mask 0): the local list must be counted
   * (profile_count.h; a list withdrawn for the profiler may end at the
   * list end, not the cut). */
  if (pg->free != page_list_end(pg) || !page_holds_block_inline(pg, lf) || (++h->refill_tick & h->refill_mask) == 0)
    return NULL;
  page_take_local_free(pg);
  return page_pop(pg);
}

/* Is b on the page's free or local_free list? (owner only; O(blocks)) */
BRISK_INTERNAL bool page_lists_contain(const page_t *pg, const block_t *b);
BRISK_INTERNAL void heap_retire_empty_heads(heap_t *h);

/* For the profiler's sample of cache class c (profile.h): the block the
 * next allocation of c would take (the cache's top, else the current
 * page's list), if its page holds no other live sample; the page is
 * marked PAGE_HOLDS_SAMPLE and given in *pg_out. NULL: none (the sample
 * is served as a large block). Owner only. */
BRISK_INTERNAL block_t *page_sample_take(heap_t *h, unsigned c, page_t **pg_out);

/* The class cache (heap_types.h). init sets each class's limit; flush
 * gives every cached block back to its page (owner only); blocks counts
 * them. */
BRISK_INTERNAL void class_cache_init(heap_t *h);
BRISK_INTERNAL void class_cache_flush(heap_t *h);
BRISK_INTERNAL size_t class_cache_blocks(const heap_t *h);

/* h's cache of class c (>= CLASS_CACHE_FIRST). */
BRISK_INLINE class_cache_t *heap_class_cache(heap_t *h, unsigned c) {
  return &h->ccache[c - CLASS_CACHE_FIRST];
}

/* The next block of class c (>= CLASS_CACHE_FIRST) from h's cache, or NULL. */
BRISK_INLINE block_t *class_cache_pop(heap_t *h, unsigned c) {
  class_cache_t *cc = heap_class_cache(h, c);
  if (cc->count == 0) return NULL;
  uint32_t i = --cc->count;
  block_t *b = cc->slot[i];
  b->link = 0; /* a handed-out block must not look free to free() */
  cc->page[i]->cached--;
  return b;
}

/* An allocation of class c (one with a cache) counted against ph's
 * countdown; false, counting nothing, when the countdown runs out on it
 * (the sample: the counted slow path takes it). */
BRISK_INLINE bool prof_count_class(prof_heap_t *ph, unsigned c) {
  int64_t left = ph->left[c] - (int64_t)class_size(c);
  if (left <= 0) return false;
  ph->left[c] = left;
  return true;
}

/* class_cache_pop while h samples for the profiler (h->prof set), the
 * block counted; NULL when the cache is empty or the sample falls on this
 * allocation. */
BRISK_INLINE block_t *prof_class_cache_pop(heap_t *h, unsigned c) {
  if (heap_class_cache(h, c)->count == 0 || !prof_count_class(h->prof, c)) return NULL;
  return class_cache_pop(h, c);
}

#endif
