/* The class cache: freed blocks of the classes above DIRECT_MAX (class
 * CLASS_CACHE_FIRST on) wait in their heap (heap_types.h: class_cache_t)
 * for its next allocation of the class, staying counted as used in their
 * pages. The owner's frees of a PAGE_CACHED page all reach page_notify
 * (local_free.h), which keeps the block here while the cache has room and
 * the page another live block. Owner only.
 *
 * Layer: heaps, after page.h and before local_free.h. */
#ifndef BRISK_CLASS_CACHE_H
#define BRISK_CLASS_CACHE_H

#include "heaps/page.h"

/* init sets each class's limit; flush gives every cached block back to
 * its page; blocks counts them. */
BRISK_INTERNAL void class_cache_init(heap_t *h);
BRISK_INTERNAL void class_cache_flush(heap_t *h);
BRISK_INTERNAL size_t class_cache_blocks(const heap_t *h);

/* Every cached block of pg goes back to pg's local list: pg's last live
 * block was freed, and cached blocks must not keep an otherwise empty
 * page (a whole span) from being retired. */
BRISK_INTERNAL void class_cache_evict_page(class_cache_t *cc, page_t *pg);

/* The next block of class c (>= CLASS_CACHE_FIRST) from h's cache, or NULL. */
BRISK_INLINE block_t *class_cache_pop(heap_t *h, unsigned c) {
  class_cache_t *cc = heap_class_cache(h, c);
  if (cc->count == 0) return NULL;
  uint32_t i = --cc->count;
  block_t *b = cc->slot[i];
  b->link = 0; /* a handed-out block must not look free to free() */
  cc->page[i]->cached--;
  if (BRISK_HARDENED) return page_check_fill_inline(cc->page[i], b);
  return b;
}

/* class_cache_pop while h samples (h->sampler set), the block counted;
 * NULL when the cache is empty or the sample falls on this allocation. */
BRISK_INLINE block_t *sampling_class_cache_pop(heap_t *h, unsigned c) {
  if (heap_class_cache(h, c)->count == 0 || !sampler_count_class(h->sampler, c)) return NULL;
  return class_cache_pop(h, c);
}

/* used of a PAGE_CACHED page not parked as broken, whose notify_at is
 * UINT32_MAX, without reading notify_at (the descriptor's second line). */
BRISK_INLINE uint32_t used_cached(const page_t *pg) {
  brisk_assert(pg->notify_at == UINT32_MAX);
  return (uint32_t)(pg->until_notify + (int64_t)UINT32_MAX + 1);
}

/* A live block of pg remains (or the bias) and the cache has room: b
 * joins the cache, staying used in its page, its link the page's list
 * end, which still looks free to a second free. pg: PAGE_CACHED, not
 * parked as broken. */
BRISK_INLINE bool class_cache_keep(class_cache_t *cc, page_t *pg, block_t *b) {
  if (!(used_cached(pg) - 1 > pg->cached && cc->count < cc->max)) return false;
  block_set_next(b, page_list_end(pg));
  pg->cached++;
  cc->page[cc->count] = pg;
  cc->slot[cc->count++] = b;
  return true;
}

/* For the profiler's sample of cache class c (sample.h): the block the
 * next allocation of c would take (the cache's top, else the current
 * page's list), if its page holds no other live sample; the page is
 * marked PAGE_HOLDS_SAMPLE and given in *pg_out. NULL: none (the sample
 * is served as a large block). Owner only. */
BRISK_INTERNAL block_t *page_sample_take(heap_t *h, unsigned c, page_t **pg_out);

#endif
