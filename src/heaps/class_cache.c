/* The class cache (class_cache.h): blocks of the classes above DIRECT_MAX
 * freed by their heap's owner, kept for its next allocation of the class;
 * and the profiler's sample of such a class, taken where the next
 * allocation would have been served. */
#include "heaps/class_cache.h"

static void cached_block_return(page_t *pg, block_t *b) {
  page_push_local(pg, b);
  pg->cached--;
}

void class_cache_evict_page(class_cache_t *cc, page_t *pg) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < cc->count; i++) {
    block_t *b = cc->slot[i];
    if (cc->page[i] == pg) {
      cached_block_return(pg, b);
    } else {
      cc->page[kept] = cc->page[i];
      cc->slot[kept++] = b;
    }
  }
  cc->count = kept;
}

void class_cache_flush(heap_t *h) {
  for (unsigned i = 0; i < CLASS_CACHE_COUNT; i++) {
    class_cache_t *cc = &h->ccache[i];
    while (cc->count > 0) {
      uint32_t k = --cc->count;
      page_t *pg = cc->page[k];
      cached_block_return(pg, cc->slot[k]);
      page_after_free(h, pg);
    }
  }
}

size_t class_cache_blocks(const heap_t *h) {
  size_t n = 0;
  for (unsigned i = 0; i < CLASS_CACHE_COUNT; i++) n += h->ccache[i].count;
  return n;
}

void class_cache_init(heap_t *h) {
  for (unsigned i = 0; i < CLASS_CACHE_COUNT; i++) {
    size_t fit = CLASS_CACHE_BYTES / class_size(CLASS_CACHE_FIRST + i);
    h->ccache[i].count = 0;
    h->ccache[i].max = fit < 1 ? 1 : fit > CLASS_CACHE_SLOTS ? CLASS_CACHE_SLOTS : (uint32_t)fit;
  }
}

block_t *page_sample_take(heap_t *h, unsigned c, page_t **pg_out) {
  class_cache_t *cc = heap_class_cache(h, c);
  page_t *pg;
  block_t *b;
  if (cc->count != 0) {
    pg = cc->page[cc->count - 1];
    if (pg->in_full & PAGE_HOLDS_SAMPLE) return NULL;
    b = class_cache_pop(h, c);
  } else {
    pg = h->queues[c].first;
    if (pg == NULL || !(pg->flags & PAGE_CACHED) || (pg->in_full & PAGE_HOLDS_SAMPLE)) return NULL;
    b = page_pop(pg);
    if (b == NULL) return NULL;
  }
  pg->in_full |= PAGE_HOLDS_SAMPLE;
  pg->prof_block = (uint16_t)(page_block_index(pg, (uintptr_t)b - (uintptr_t)pg->start) + 1);
  *pg_out = pg;
  return b;
}
