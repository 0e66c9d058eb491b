/* Pages of a heap: their life in the class queues and the full list,
 * carving blocks from fresh memory, and retiring empty pages. */
#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "base/list.h"
#include "heaps/page.h"
#include "runtime/background.h"
#include "runtime/report.h"
#include "segments/segment.h"

page_t brisk_empty_page = {
    .start = (uint8_t *)UINTPTR_MAX,
    .span = &brisk_empty_page,
};

/* The direct[] slots served by class c (only classes up to DIRECT_MAX). */
static void direct_update(heap_t *h, unsigned c) {
  size_t size = class_size(c);
  if (size > DIRECT_MAX) return;
  page_t *pg = h->queues[c].first;
  if (pg == NULL) pg = &brisk_empty_page;
  /* A heap that samples counts what its inline path takes (sample.h):
   * the old current page gives back what it was not asked for, the new
   * one waits behind a cut until the slow path counts it. */
  if (BRISK_UNLIKELY(h->sampler != NULL)) {
    page_t *old = h->direct[size / 16];
    sampler_head_change(h->sampler, c, old == &brisk_empty_page ? NULL : old,
                     pg == &brisk_empty_page ? NULL : pg);
  }
  size_t lo = c == 1 ? 0 : (class_size(c - 1) + 16) / 16;
  for (size_t w = lo; w <= size / 16; w++) h->direct[w] = pg;
}

/* The head of a class queue is its current page: it carries the bias so
 * the free fast path never sees it run empty. */
static void queue_remove(heap_t *h, page_queue_t *q, page_t *pg, unsigned c) {
  bool was_head = q->first == pg;
  LIST_REMOVE(q, pg, next, prev);
  if (was_head && c != 0) {
    page_add_used(pg, -(int64_t)PAGE_USED_BIAS);
    if (q->first) page_add_used(q->first, PAGE_USED_BIAS);
    direct_update(h, c);
  }
}

static void queue_push_back(heap_t *h, page_queue_t *q, page_t *pg, unsigned c) {
  LIST_PUSH_BACK(q, pg, next, prev);
  if (q->first == pg && c != 0) {
    page_add_used(pg, PAGE_USED_BIAS);
    direct_update(h, c);
  }
}

static void queue_push_front(heap_t *h, page_queue_t *q, page_t *pg, unsigned c) {
  page_t *old = q->first;
  LIST_PUSH_FRONT(q, pg, next, prev);
  if (c != 0) {
    if (old) page_add_used(old, -(int64_t)PAGE_USED_BIAS);
    page_add_used(pg, PAGE_USED_BIAS);
    direct_update(h, c);
  }
}

block_t *page_check_fill(const page_t *pg, block_t *b) {
  const uint8_t *p = (const uint8_t *)b;
  for (size_t i = sizeof(block_t); i < pg->fill_end; i++) {
    if (p[i] != HARDENED_FILL) {
      report_error("malloc(): block %p (size class %zu) was written %zu bytes in after it was "
                   "freed: a write after free",
                   (void *)b, (size_t)pg->block_size, i);
      break;
    }
  }
  return b;
}

static uint32_t gcd(uint32_t a, uint32_t b) {
  while (b) {
    uint32_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Carve up to a 4 KiB page worth of blocks from the fresh end of the page,
 * linked in front of the (empty) free list: in address order, or in the
 * hardened build in the order first + (r + i * stride) mod n for a random
 * r and a random stride prime to n. */
static void page_extend(page_t *pg) {
  uint32_t bs = pg->block_size;
  uint32_t n = PAGE_EXTEND_BYTES / bs;
  if (n < PAGE_EXTEND_MIN) n = PAGE_EXTEND_MIN;
  /* Hardened: 16 blocks at least, room to shuffle (16 starts times 8
   * strides); more would make every extension of the classes from 256 B
   * write pages no block was asked for yet (each carved block is filled). */
  if (BRISK_HARDENED && n < 16) n = 16;
  if (n > pg->capacity - pg->reserved) n = pg->capacity - pg->reserved;
  if (n == 0) return;
  uint8_t *first = pg->start + (size_t)pg->reserved * bs;
  if (BRISK_HARDENED) {
    uint32_t r = block_random_below(n), stride = 1 + block_random_below(n);
    while (gcd(stride, n) != 1) stride = stride % n + 1;
    block_t *head = pg->free;
    for (uint32_t i = 0; i < n; i++) {
      block_t *b = (block_t *)(first + (size_t)((r + (uint64_t)i * stride) % n) * bs);
      page_fill_freed(pg, b);
      block_set_next(b, head);
      head = b;
    }
    pg->free = head;
  } else {
    uint8_t *p = first;
    for (uint32_t i = 0; i + 1 < n; i++, p += bs) block_set_next((block_t *)p, p + bs);
    block_set_next((block_t *)p, pg->free);
    pg->free = (block_t *)first;
  }
  pg->reserved += n;
}

/* Blocks of the classes above DIRECT_MAX (which the inline malloc never
 * pops), carved from memory known to be zero, are handed out one at a time
 * and not written (page_take_fresh): linking them into the free list would
 * fault their OS pages in inside malloc, where a caller that times its
 * calls sees it, and keep blocks no one asked for resident. Their first
 * word is zero, so they do not look free. */
static bool page_carves_untouched(const page_t *pg) {
  return !BRISK_HARDENED && (pg->flags & PAGE_ZERO) && pg->size_class >= CLASS_CACHE_FIRST;
}

/* A block the page handed out: inside its carved area, at a block start. */
bool page_holds_block(const page_t *pg, const block_t *b) { return page_holds_block_inline(pg, b); }

static void page_report_broken(const page_t *pg, const block_t *link) {
  report_error("malloc(): the free list of the page at %p (size class %zu) holds %p, "
               "not one of its blocks: a write after free? The page is taken out of use",
               (void *)pg->start, (size_t)pg->block_size, (void *)link);
}

/* Is b on this list of the page? Stops at the end, at a link that leaves
 * the page, or after as many steps as the page has blocks. */
static bool list_contains(const page_t *pg, const block_t *list, const block_t *b) {
  const block_t *end = page_list_end(pg);
  for (uint32_t n = 0; list != end && n <= pg->reserved; n++) {
    if (list == b) return true;
    if (!page_holds_block(pg, list)) return false;
    list = block_next(list);
  }
  return false;
}

/* A cached block of pg goes back to pg's local list: no longer used,
 * no longer cached. */
bool page_lists_contain(const page_t *pg, const block_t *b) {
  if (pg->size_class == 0) return false;
  if (pg->flags & PAGE_CACHED) {
    const class_cache_t *cc = pg->ccache;
    for (uint32_t i = 0; i < cc->count; i++)
      if (cc->slot[i] == b) return true;
  }
  if (list_contains(pg, pg->free, b) || list_contains(pg, pg->local_free, b)) return true;
  /* The remote list as it is now: a pushed block's link is not written
   * again until the list is taken. */
  uintptr_t v = page_takes_remote(pg) ? atomic_load_acquire(page_remote_word(pg)) : 0;
  return (v & PAGE_REMOTE_PTR) != 0 && list_contains(pg, (const block_t *)(v & PAGE_REMOTE_PTR), b);
}

/* The owner's side of a page's remote list (layout.h, page_remote_t). */

/* A FULL or CLOSED word opened again: a CAS, so that a word that is open
 * (and may hold blocks) is left as it is. */
static void page_remote_open(page_t *pg) {
  _Atomic(uintptr_t) *w = page_remote_word(pg);
  uintptr_t v = atomic_load_relaxed(w);
  if (v == PAGE_REMOTE_FULL || v == PAGE_REMOTE_CLOSED)
    atomic_compare_exchange_strong_explicit(w, &v, 0, memory_order_relaxed, memory_order_relaxed);
}

/* pg ran dry: its remote list, taken whole, becomes its free list (its
 * links are checked as they are popped, as the local list's are). A list
 * closed while the heap had no owner is opened again. */
static bool page_remote_collect(page_t *pg) {
  if (!page_takes_remote(pg)) return false;
  _Atomic(uintptr_t) *w = page_remote_word(pg);
  uintptr_t v = atomic_load_relaxed(w);
  if (!(v & PAGE_REMOTE_PTR)) {
    if (v != 0) page_remote_open(pg);
    return false;
  }
  v = atomic_exchange_explicit(w, 0, memory_order_acquire); /* the pushers' links */
  if (!(v & PAGE_REMOTE_PTR)) return false; /* the background thread took it */
  pg->free = (block_t *)(v & PAGE_REMOTE_PTR);
  page_add_used(pg, -(int64_t)page_remote_count(v));
  STAT_COUNT(remote_frees, page_remote_count(v));
  return true;
}

/* pg is full and goes to the full list: its word becomes FULL (the next
 * free goes to the inbox, whose drain brings the page back), unless blocks
 * arrived since the look: then they are its free list. A push that made
 * the CAS fail may be taken by the background thread before the owner
 * takes it: the CAS is tried again, so that a page on the full list has its
 * word FULL, or open with the free that opened it on its way to the inbox.
 * (Left open, the page would still come back, when the parked blocks do:
 * tests/model/page_lists.pml.) */
static bool page_remote_close_full(page_t *pg) {
  if (!page_takes_remote(pg)) return false;
  for (;;) {
    uintptr_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(page_remote_word(pg), &expected, PAGE_REMOTE_FULL,
                                                memory_order_relaxed, memory_order_relaxed) ||
        !(expected & PAGE_REMOTE_PTR))
      return false;
    if (page_remote_collect(pg)) return true;
  }
}

/* Back from the full list: frees may take the page's list again, unless
 * the heap has no owner (a thread serving it brought the page back: its
 * frees keep going to the inbox, which such threads take in). */
static void page_remote_reopen(heap_t *h, page_t *pg) {
  if (page_takes_remote(pg) && atomic_load_relaxed(&h->state) == HEAP_OWNED) page_remote_open(pg);
}

enum collect_result { PAGE_HAS_BLOCKS, PAGE_IS_FULL, PAGE_IS_BROKEN };

/* Make the free list start with a block of the page if it has any to give.
 * `cut`: the heap samples, and its lists end at
 * page_list_cut (sample.h): so do the blocks carved here. */
static enum collect_result page_collect(page_t *pg, bool cut) {
  block_t *end = page_list_end(pg);
  if (pg->free != end) {
    if (page_holds_block(pg, pg->free)) return PAGE_HAS_BLOCKS;
    if (pg->free != page_list_cut(pg)) {
      page_report_broken(pg, pg->free);
      return PAGE_IS_BROKEN;
    }
    pg->free = end; /* cut for sampling: an empty list */
  }
  if (pg->local_free != end) {
    if (page_holds_block(pg, pg->local_free)) {
      page_take_local_free(pg);
      return PAGE_HAS_BLOCKS;
    }
    if (pg->local_free != page_list_cut(pg)) {
      page_report_broken(pg, pg->local_free);
      return PAGE_IS_BROKEN;
    }
    pg->local_free = end; /* an empty local list, cut for sampling */
  }
  if (page_remote_collect(pg)) return PAGE_HAS_BLOCKS;
  if (pg->reserved < pg->capacity) {
    if (!cut && page_carves_untouched(pg)) return PAGE_HAS_BLOCKS; /* page_take_fresh */
    if (cut) pg->free = page_list_cut(pg);
    page_extend(pg);
    return PAGE_HAS_BLOCKS;
  }
  return page_remote_close_full(pg) ? PAGE_HAS_BLOCKS : PAGE_IS_FULL;
}

block_t *page_take_fresh(page_t *pg) {
  brisk_assert(pg->reserved < pg->capacity && page_carves_untouched(pg));
  block_t *b = (block_t *)(pg->start + (size_t)pg->reserved * pg->block_size);
  pg->reserved++;
  page_add_used(pg, 1);
  return b; /* zero: it does not look free */
}

static page_t *page_new(heap_t *h, unsigned c) {
  page_t *pg = span_alloc(&h->segments, class_page_slices(c), 1, false);
  if (pg == NULL) return NULL;
  uint32_t bs = (uint32_t)class_size(c);
  page_set_block_size(pg, bs);
  pg->capacity = (uint32_t)(pg->span_bytes / bs);
  pg->area = pg->capacity * bs;
  pg->size_class = (uint16_t)c;
  pg->free = page_list_end(pg);
  pg->local_free = page_list_end(pg);
  pg->cached = 0;
  atomic_store_relaxed(page_remote_word(pg), 0);
  if (BRISK_HARDENED) {
    pg->fill_end = (uint8_t)(bs < HARDENED_FILL_MAX ? bs : HARDENED_FILL_MAX);
    pg->fill_low = (uint8_t)fill_low(pg->fill_end);
  }
  if (c >= CLASS_CACHE_FIRST) {
    /* Every free of its blocks goes through page_notify, to the cache. */
    pg->flags |= PAGE_CACHED;
    pg->ccache = heap_class_cache(h, c);
    page_set_notify_at(pg, UINT32_MAX);
  }
  heap_count_page(h, 1, false);
  return pg;
}

void heap_stats_publish(heap_t *h) {
  if (h->pages_pending) STAT_LEVEL(pages, h->pages_pending);
  if (h->large_pending) STAT_COUNT(large_allocs, h->large_pending);
  h->pages_pending = 0;
  h->large_pending = 0;
}

/* pg's sampled block is free: the profiler forgets it, and pg may hold
 * another. */
void page_sample_forget(heap_t *h, page_t *pg) {
  if (pg->prof_slot != 0) sample_freed_owned(pg, h);
  pg->prof_slot = 0;
  pg->prof_block = 0;
  pg->in_full &= (uint8_t)~PAGE_HOLDS_SAMPLE;
}

static void page_retire(heap_t *h, page_t *pg) {
  /* Its sample was freed where page_notify_push did not see it (a page
   * parked as broken is told only of its last free). */
  if (BRISK_UNLIKELY(pg->in_full & PAGE_HOLDS_SAMPLE)) page_sample_forget(h, pg);
  unsigned c = pg->size_class;
  if (page_list_of(pg) != PAGE_LIST_QUEUE) queue_remove(h, &h->full, pg, 0);
  else queue_remove(h, &h->queues[c], pg, c);
  heap_count_page(h, -1, false);
  h->page_retires++;
  span_free(&h->segments, pg);
}

page_t *heap_find_page(heap_t *h, unsigned c) {
  page_queue_t *q = &h->queues[c];
  for (;;) {
    page_t *pg = q->first;
    if (pg == NULL) break;
    enum collect_result r = page_collect(pg, h->sampler != NULL);
    if (r == PAGE_HAS_BLOCKS) return pg;
    /* Full: park it where the allocator does not look again. The first
     * block freed back to it (used drops below capacity) brings it back.
     * Broken: parked for good; it is released when its last block is freed. */
    queue_remove(h, q, pg, c);
    if (r == PAGE_IS_FULL) {
      page_list_set(pg, PAGE_LIST_FULL);
      if (!(pg->flags & PAGE_CACHED)) page_set_notify_at(pg, pg->capacity - 1);
    } else {
      page_list_set(pg, PAGE_LIST_BROKEN);
      page_set_notify_at(pg, 0);
      pg->free = pg->local_free = page_list_end(pg);
    }
    queue_push_back(h, &h->full, pg, 0);
    /* A broken page reuses no block: what waits on its remote list counts
     * as back, and the list is closed (its last free retires it). */
    if (r == PAGE_IS_BROKEN && page_takes_remote(pg)) {
      uintptr_t v = atomic_exchange_explicit(page_remote_word(pg), PAGE_REMOTE_CLOSED, memory_order_acquire);
      page_add_used(pg, -(int64_t)page_remote_count(v));
      if (page_used(pg) == 0) page_retire(h, pg);
    }
  }
  page_t *pg = page_new(h, c);
  if (pg == NULL) return NULL;
  queue_push_front(h, q, pg, c);
  page_collect(pg, h->sampler != NULL);
  return pg;
}

/* After a block of pg went back to it (free_local): bring a full page
 * back to its queue, retire an empty one. */
void page_after_free(heap_t *h, page_t *pg) {
  if (page_list_of(pg) == PAGE_LIST_FULL) {
    unsigned c = pg->size_class;
    queue_remove(h, &h->full, pg, 0);
    page_remote_reopen(h, pg);
    page_list_set(pg, PAGE_LIST_QUEUE);
    if (!(pg->flags & PAGE_CACHED)) page_set_notify_at(pg, 0);
    queue_push_back(h, &h->queues[c], pg, c);
  }
  if (page_used(pg) == 0) page_retire(h, pg);
}

void heap_retire_empty_heads(heap_t *h) {
  for (unsigned c = 1; c < CLASS_COUNT; c++) {
    page_t *pg;
    while ((pg = h->queues[c].first) != NULL && page_used(pg) == PAGE_USED_BIAS) page_retire(h, pg);
  }
}
