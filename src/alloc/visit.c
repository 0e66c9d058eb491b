/* A heap seen from its owner: the walk over its live blocks, block
 * membership, its statistics.
 *
 * Live blocks of a class page: the blocks carved so far (`reserved`) that
 * are on neither of its free lists nor in the heap's class cache. Large
 * blocks: the spans of the heap's segments flagged PAGE_LARGE; huge
 * blocks: the set's huge list (first-class heaps only: a thread's huge
 * blocks belong to no heap). The segment list is read under the set's
 * lock, which the background purger may take; page lists and descriptors
 * belong to the owner, the calling thread. */
#include "alloc/visit.h"

#include <string.h>

#include "alloc/alloc.h"
#include "base/atomics.h"
#include "heaps/thread.h"
#include "os/checker.h"
#include "runtime/report.h"
#include "segments/registry.h"

/* The most blocks a page has: a 64 KiB page of 16-byte blocks. */
#define PAGE_BLOCKS_MAX (SLICE_SIZE / 16)

static void mark_list(const page_t *pg, const block_t *list, uint64_t *free_map) {
  const block_t *end = page_list_end(pg);
  for (uint32_t n = 0; list != end && n <= pg->reserved; n++) {
    if (!page_holds_block(pg, list)) return; /* a broken link: the slow path reports it */
    size_t i = (size_t)((const uint8_t *)list - pg->start) / pg->block_size;
    free_map[i / 64] |= (uint64_t)1 << (i % 64);
    list = block_next(list);
  }
}

static int visit_page(heap_t *h, page_t *pg, brisk_block_visitor_t visitor, void *arg) {
  uint64_t free_map[PAGE_BLOCKS_MAX / 64];
  size_t words = ((size_t)pg->reserved + 63) / 64;
  memset(free_map, 0, words * sizeof(uint64_t));
  checker_quiet_begin(); /* the links of free blocks */
  mark_list(pg, pg->free, free_map);
  mark_list(pg, pg->local_free, free_map);
  if (pg->flags & PAGE_CACHED) {
    const class_cache_t *cc = pg->ccache;
    for (uint32_t k = 0; k < cc->count; k++) {
      if (cc->page[k] != pg) continue;
      const uint8_t *b = (const uint8_t *)cc->slot[k];
      size_t i = (size_t)(b - pg->start) / pg->block_size;
      free_map[i / 64] |= (uint64_t)1 << (i % 64);
    }
  }
  checker_quiet_end();
  for (size_t i = 0; i < pg->reserved; i++) {
    if (free_map[i / 64] & ((uint64_t)1 << (i % 64))) continue;
    int r = visitor((brisk_heap_t *)h, pg->start + i * pg->block_size, pg->block_size, arg);
    if (r != 0) return r;
  }
  return 0;
}

static int visit_pages(heap_t *h, brisk_block_visitor_t visitor, void *arg) {
  for (unsigned c = 1; c < CLASS_COUNT; c++) {
    for (page_t *pg = h->queues[c].first; pg; pg = pg->next) {
      int r = visit_page(h, pg, visitor, arg);
      if (r != 0) return r;
    }
  }
  for (page_t *pg = h->full.first; pg; pg = pg->next) {
    if (page_list_of(pg) == PAGE_LIST_BROKEN) continue;
    int r = visit_page(h, pg, visitor, arg);
    if (r != 0) return r;
  }
  return 0;
}

/* The large blocks of one segment, in address order. */
static size_t segment_large_blocks(segment_t *seg, page_t **out) {
  size_t n = 0;
  for (size_t i = SEGMENT_FIRST_SLICE; i < SLICES_PER_SEGMENT; i++) {
    page_t *pg = &seg->pages[i];
    if (pg->span == pg && (pg->flags & (PAGE_IN_USE | PAGE_LARGE)) == (PAGE_IN_USE | PAGE_LARGE)) out[n++] = pg;
  }
  return n;
}

/* The visitor runs without the set's lock (it may call into brisk). A
 * segment that holds a large block stays in the set meanwhile: the block's
 * free waits for the end of the walk, and only the owner and, for a wholly
 * free segment, the purger change the list. */
static int visit_large(heap_t *h, brisk_block_visitor_t visitor, void *arg) {
  segment_set_t *set = &h->segments;
  page_t *blocks[SLICES_PER_SEGMENT];
  lock_acquire(&set->lock);
  for (segment_t *seg = set->segs.first; seg; seg = seg->next) {
    size_t n = segment_large_blocks(seg, blocks);
    if (n == 0) continue;
    lock_release(&set->lock);
    for (size_t i = 0; i < n; i++) {
      int r = visitor((brisk_heap_t *)h, blocks[i]->start, blocks[i]->block_size, arg);
      if (r != 0) return r;
    }
    lock_acquire(&set->lock);
  }
  lock_release(&set->lock);
  return 0;
}

static int visit_huge(heap_t *h, brisk_block_visitor_t visitor, void *arg) {
  for (segment_t *seg = h->segments.huge.first; seg; seg = seg->next) {
    int r = visitor((brisk_heap_t *)h, seg->pages[0].start, seg->pages[0].span_bytes, arg);
    if (r != 0) return r;
  }
  return 0;
}

/* The owner id of every segment of h (and its huge blocks); the set keeps
 * the owner's own id, for the segments it may take later. */
static void segments_set_owner(heap_t *h, uintptr_t tid) {
  segment_set_t *set = &h->segments;
  lock_acquire(&set->lock);
  for (segment_t *seg = set->segs.first; seg; seg = seg->next) atomic_store_release(&seg->owner_tid, tid);
  for (segment_t *seg = set->huge.first; seg; seg = seg->next) atomic_store_release(&seg->owner_tid, tid);
  lock_release(&set->lock);
}

int heap_visit(heap_t *h, brisk_block_visitor_t visitor, void *arg) {
  uintptr_t me = os_thread_id();
  heap_collect_remote(h);
  heap_drain_inbox(h);
  /* While the visitor runs, the heap's lists must not change under the
   * walk: allocation from h is refused (h->tid), and frees of its blocks
   * take the remote path (the segments' owner id), to be taken back at
   * the end like any other thread's. */
  field_store_relaxed(&h->tid, HEAP_TID_VISITING);
  segments_set_owner(h, HEAP_TID_VISITING);
  int r = visit_pages(h, visitor, arg);
  if (r == 0) r = visit_large(h, visitor, arg);
  if (r == 0) r = visit_huge(h, visitor, arg);
  segments_set_owner(h, me);
  field_store_relaxed(&h->tid, me);
  heap_t *mine = thread_heap();
  if (mine->kind != HEAP_KIND_STATIC) heap_flush_outbox(mine);
  heap_drain_inbox(h);
  return r;
}

bool heap_contains(heap_t *h, const void *p) {
  uintptr_t a = (uintptr_t)p;
  segment_t *seg = registry_lookup(a);
  if (seg == NULL || seg->kind == SEGMENT_RETIRED) return false;
  if (seg->kind == SEGMENT_HUGE) {
    /* Another thread may be freeing it: one of h's huge blocks while it is
     * on h's list, which changes under the set's lock only (the mapping
     * is unmapped after it leaves the list). */
    bool huge = false;
    lock_acquire(&h->segments.lock);
    for (segment_t *s = h->segments.huge.first; s; s = s->next)
      if (s == seg) huge = (uint8_t *)p == s->pages[0].start;
    lock_release(&h->segments.lock);
    return huge;
  }
  /* Under the set's lock, a segment that names h as its heap is in h's set
   * (the purger moves wholly free segments out under it), so its page
   * descriptors are the caller's to read. */
  bool found = false;
  lock_acquire(&h->segments.lock);
  if (atomic_load_explicit(&seg->heap, memory_order_relaxed) == h) {
    page_t *pg = page_of(seg, a);
    if ((pg->flags & PAGE_IN_USE) && a >= (uintptr_t)pg->start) {
      if (pg->flags & PAGE_LARGE) found = a == (uintptr_t)pg->start;
      else found = page_block_index(pg, a - (uintptr_t)pg->start) < pg->reserved;
    }
  }
  lock_release(&h->segments.lock);
  return found;
}

size_t heap_stats_json(heap_t *h, char *buf, size_t len) {
  size_t pages = 0, full_pages = 0, used = 0, capacity_bytes = 0;
  for (unsigned c = 1; c < CLASS_COUNT; c++) {
    for (page_t *pg = h->queues[c].first; pg; pg = pg->next) {
      pages++;
      used += page_used(pg) % PAGE_USED_BIAS;
      capacity_bytes += pg->span_bytes;
    }
  }
  for (page_t *pg = h->full.first; pg; pg = pg->next) {
    full_pages++;
    used += page_used(pg) % PAGE_USED_BIAS;
    capacity_bytes += pg->span_bytes;
  }
  used -= class_cache_blocks(h);
  size_t large = 0, large_bytes = 0, huge = 0, huge_bytes = 0, segments;
  page_t *blocks[SLICES_PER_SEGMENT];
  lock_acquire(&h->segments.lock);
  segments = h->segments.count;
  for (segment_t *seg = h->segments.segs.first; seg; seg = seg->next) {
    size_t n = segment_large_blocks(seg, blocks);
    large += n;
    for (size_t i = 0; i < n; i++) large_bytes += blocks[i]->block_size;
  }
  for (segment_t *seg = h->segments.huge.first; seg; seg = seg->next) {
    huge++;
    huge_bytes += seg->pages[0].span_bytes;
  }
  lock_release(&h->segments.lock);
  return format_string(buf, len,
                       "{\"segments\":%zu,\"pages\":%zu,\"full_pages\":%zu,"
                       "\"blocks_in_use\":%zu,\"page_bytes\":%zu,\"large_blocks\":%zu,"
                       "\"large_bytes\":%zu,\"huge_blocks\":%zu,\"huge_bytes\":%zu,\"generation\":%zu}",
                       segments, pages + full_pages, full_pages, used + large + huge, capacity_bytes,
                       large, large_bytes, huge, huge_bytes, (size_t)h->generation);
}
