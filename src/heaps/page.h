/* Pages of a heap: the class queues, the full list, carving and retiring.
 * Called by heap.c; calls only into segments. */
#ifndef BRISK_PAGE_H
#define BRISK_PAGE_H

#include <string.h>

#include "heaps/heap_types.h"
#include "heaps/sample.h"

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

/* Hardened: a freed class block holds HARDENED_FILL in its bytes 8 to
 * pg->fill_end - 1 (past its link, 64 at most), checked when the block is
 * handed out again; page_check_fill reports a change (a write after free).
 * Inline: one word at byte 8, then for blocks of 32 bytes or more three
 * 16-byte stores or loads at 16, fill_end - 16 and fill_low (blocks are
 * 16-byte aligned; the three overlap below 64 bytes), with no branch on the
 * block's size but the one for 16-byte blocks. */
BRISK_INTERNAL block_t *page_check_fill(const page_t *pg, block_t *b) __attribute__((returns_nonnull));

#define FILL_WORD (0x0101010101010101ull * HARDENED_FILL)

BRISK_INLINE size_t fill_low(size_t end) { return end > 48 ? end - 32 : 16; }

#if defined(__SSE2__)
#include <emmintrin.h>
BRISK_INLINE void page_fill_freed(const page_t *pg, block_t *b) {
  size_t end = pg->fill_end;
  if (end == 0) return; /* large and huge blocks are not filled */
  uint8_t *p = (uint8_t *)b;
  const uint64_t w = FILL_WORD;
  memcpy(p + 8, &w, 8);
  if (end < 32) return;
  __m128i f = _mm_set1_epi8((char)HARDENED_FILL);
  _mm_store_si128((__m128i *)(p + 16), f);
  _mm_store_si128((__m128i *)(p + end - 16), f);
  _mm_store_si128((__m128i *)(p + pg->fill_low), f);
}
BRISK_INLINE bool fill_intact(const page_t *pg, const block_t *b) {
  size_t end = pg->fill_end;
  const uint8_t *p = (const uint8_t *)b;
  uint64_t v;
  memcpy(&v, p + 8, 8);
  if (v != FILL_WORD) return false;
  if (end < 32) return true;
  __m128i f = _mm_set1_epi8((char)HARDENED_FILL);
  __m128i ok = _mm_cmpeq_epi8(_mm_load_si128((const __m128i *)(p + 16)), f);
  ok = _mm_and_si128(ok, _mm_cmpeq_epi8(_mm_load_si128((const __m128i *)(p + end - 16)), f));
  ok = _mm_and_si128(ok, _mm_cmpeq_epi8(_mm_load_si128((const __m128i *)(p + pg->fill_low)), f));
  return _mm_movemask_epi8(ok) == 0xffff;
}
#else
BRISK_INLINE void page_fill_freed(const page_t *pg, block_t *b) {
  const uint64_t w = FILL_WORD;
  for (size_t i = 8; i < pg->fill_end; i += 8) memcpy((uint8_t *)b + i, &w, 8);
}
BRISK_INLINE bool fill_intact(const page_t *pg, const block_t *b) {
  uint64_t bad = 0, v;
  for (size_t i = 8; i < pg->fill_end; i += 8) memcpy(&v, (const uint8_t *)b + i, 8), bad |= v ^ FILL_WORD;
  return bad == 0;
}
#endif

/* b, once its fill is checked: page_check_fill (which reports a change and
 * returns b) is the last call of the path that needs it, so a malloc that
 * inlines this saves no register for it. */
BRISK_INLINE block_t *page_check_fill_inline(const page_t *pg, block_t *b) {
  if (BRISK_LIKELY(fill_intact(pg, b))) return b;
  return page_check_fill(pg, b);
}

/* b onto the owner's local list (its count is the caller's). */
BRISK_INLINE void page_link_local(page_t *pg, block_t *b) {
  block_set_next(b, pg->local_free);
  pg->local_free = b;
}

BRISK_INLINE void page_push_local(page_t *pg, block_t *b) {
  page_link_local(pg, b);
  page_add_used(pg, -1);
}

/* Does pg take remote frees on its own list (layout.h, page_remote_t)? A
 * class page up to DIRECT_MAX of a heap whose segments do. */
BRISK_INLINE bool page_takes_remote(const page_t *pg) {
  return segment_of_page(pg)->page_lists && pg->size_class != 0 && pg->block_size <= DIRECT_MAX;
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
  if (BRISK_HARDENED) return page_check_fill_inline(pg, b);
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
   * (sample.h; a list withdrawn for sampling may end at the
   * list end, not the cut). */
  if (pg->free != page_list_end(pg) || !page_holds_block_inline(pg, lf) || (++h->refill_tick & h->refill_mask) == 0)
    return NULL;
  page_take_local_free(pg);
  return page_pop(pg);
}

/* After a block of pg went back to it (the local free, the class cache's
 * flush): bring a full page back to its queue, retire an empty one. */
BRISK_INTERNAL void page_after_free(heap_t *h, page_t *pg);
/* pg's sampled block is free: the profiler forgets it, and pg may hold
 * another. */
BRISK_INTERNAL void page_sample_forget(heap_t *h, page_t *pg);

/* Is b on the page's free or local_free list? (owner only; O(blocks)) */
BRISK_INTERNAL bool page_lists_contain(const page_t *pg, const block_t *b);
BRISK_INTERNAL void heap_retire_empty_heads(heap_t *h);



/* h's cache of class c (>= CLASS_CACHE_FIRST). */
BRISK_INLINE class_cache_t *heap_class_cache(heap_t *h, unsigned c) {
  return &h->ccache[c - CLASS_CACHE_FIRST];
}

#endif
