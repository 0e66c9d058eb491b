/* Frees from other threads, the protocol's core: a batch handed over
 * to its heap's inbox (inbox_push), and the owner's take-back of its inbox
 * and of what the background thread parked (heap_drain_inbox). A free's
 * entry, which finds the block and its slot, is free.c's; the protocol
 * and its invariants are DESIGN.md's, "Threads and ownership". */
#include "heaps/remote.h"

#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "heaps/local_free.h"
#include "heaps/park.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "runtime/report.h"
#include "segments/registry.h"

/* What inbox_push did: dropped the batch (dst's generation moved on),
 * pushed it, or pushed it into an empty inbox. */
enum { PUSH_DROPPED = 0, PUSH_DONE = 1, PUSH_FIRST = 2 };

static int inbox_push(heap_t *dst, uint32_t gen, block_t *head, block_t *tail) {
  /* Counted in before the first load: a destruction that exchanged the
   * inbox before it is seen (the tag moved on), one after it waits for us
   * before the tail's memory can go (heap_destroy). */
  atomic_fetch_add(&dst->pushers, 1);
  uintptr_t old = atomic_load(&dst->inbox);
  uintptr_t tag = (uintptr_t)(gen & INBOX_GEN_MASK) << INBOX_GEN_SHIFT;
  do {
    if ((old & ~INBOX_PTR_MASK) != tag) {
      atomic_fetch_sub_explicit(&dst->pushers, 1, memory_order_release);
      return PUSH_DROPPED;
    }
    /* keep the tail's suspect bit */
    block_set_remote_next(tail, (block_t *)(old & INBOX_PTR_MASK),
                          (block_remote_link(tail) & REMOTE_LINK_SUSPECT) != 0);
    /* Sequentially consistent: with park_watch's load of the flag, a
     * store-load pair against the background thread's clear of the flag
     * and its look at the inbox (the same instruction as a release CAS on
     * x86-64). */
  } while (!atomic_compare_exchange_weak(&dst->inbox, &old, (uintptr_t)head | tag));
  atomic_fetch_sub_explicit(&dst->pushers, 1, memory_order_release);
  STAT_COUNT(remote_batches, 1);
  return (old & INBOX_PTR_MASK) == 0 ? PUSH_FIRST : PUSH_DONE;
}

/* After a push: a heap without a thread is served now, so that its memory
 * does not pile up; the first batch since an owner (or the thread serving
 * the heap) last took the inbox in is watched, so that it is not kept for
 * good if nobody comes by (park.h). */
static void inbox_pushed(heap_t *dst, int pushed) {
  if (pushed == PUSH_DROPPED) return;
  if (atomic_load_relaxed(&dst->state) == HEAP_ABANDONED && heap_serve_abandoned(dst)) return;
  if (BRISK_UNLIKELY(pushed == PUSH_FIRST)) park_watch(dst);
}

void heap_outbox_flush_slot(outbox_slot_t *slot) {
  if (slot->count == 0) return;
  heap_t *dst = slot->dst;
  STAT_COUNT(remote_frees, slot->count);
  int pushed = inbox_push(dst, slot->generation, slot->head, slot->tail);
  slot->head = slot->tail = NULL;
  slot->count = 0;
  inbox_pushed(dst, pushed);
}

void heap_outbox_retarget(outbox_slot_t *slot, heap_t *dst, uint32_t gen) {
  heap_outbox_flush_slot(slot);
  slot->dst = dst;
  slot->generation = gen;
}

void heap_flush_outbox(heap_t *h) {
  if (h->outbox_pending == 0) return;
  for (size_t i = 0; i < OUTBOX_SLOTS; i++) heap_outbox_flush_slot(&h->outbox[i]);
  h->outbox_pending = 0;
}

void heap_remote_free_direct(heap_t *dst, uint32_t gen, block_t *b) {
  STAT_COUNT(remote_frees, 1);
  block_set_remote_next(b, NULL, block_looks_free(b));
  block_set_remote_skip(b, NULL);
  inbox_pushed(dst, inbox_push(dst, gen, b, b));
}

/* The page of `b` if b could be the next block of a chain bound for h;
 * NULL if it could not. */
BRISK_INLINE page_t *remote_link_page(heap_t *h, block_t *b) {
  if (((uintptr_t)b & 15) != 0) return NULL;
  segment_t *seg = registry_lookup((uintptr_t)b);
  if (seg == NULL || seg->kind == SEGMENT_RETIRED) return NULL;
  if (atomic_load_relaxed(&seg->heap) != h) return NULL;
  page_t *pg = page_of(seg, (uintptr_t)b);
  if (!(pg->flags & PAGE_IN_USE)) return NULL;
  if (pg->flags & (PAGE_LARGE | PAGE_HUGE)) return (uint8_t *)b == pg->start ? pg : NULL;
  return page_holds_block_inline(pg, b) ? pg : NULL;
}

static void drain_chain(heap_t *h, block_t *b);
#define DRAIN_PAGES 32

/* A parked block back to its page, checked as a chain's link is. */
static void drain_parked_block(heap_t *h, uintptr_t e) {
  block_t *b = (block_t *)(e & ~REMOTE_LINK_SUSPECT);
  page_t *pg = remote_link_page(h, b);
  if (pg == NULL) {
    report_error("free(%p): a block freed by another thread was freed again before its owner took it back "
                 "(double free?)", (void *)b);
  } else if ((e & REMOTE_LINK_SUSPECT) && page_lists_contain(pg, b)) {
    report_error("free(%p): double free (size class %zu), the second from another thread", (void *)b,
                 (size_t)pg->block_size);
  } else {
    free_local(pg, b);
  }
}

/* The arrays the background thread parked (park.h): blocks of this life
 * of the heap are freed, those of a destroyed one dropped. */
static BRISK_NOINLINE void drain_parked(heap_t *h) {
  park_t *k = park_take(h);
  uint32_t tag = (uint32_t)(atomic_load_relaxed(&h->inbox) >> INBOX_GEN_SHIFT);
  while (k != NULL) {
    park_t *next = k->next;
    if (k->tag == tag) {
      for (size_t i = 0; i < k->count;) {
        uintptr_t first = k->entries[i++], n = 1;
        if (first & PARK_RUN) n = k->entries[i++];
        first &= ~PARK_RUN;
        page_t *pg = remote_link_page(h, (block_t *)(first & ~REMOTE_LINK_SUSPECT));
        size_t step = pg != NULL ? pg->block_size : 0;
        for (uintptr_t j = 0; j < n && (j == 0 || pg != NULL); j++) drain_parked_block(h, first + j * step);
      }
      /* The rest starts at a link the walk did not take: a block of
       * another kind, or a link written after the free. */
      if (k->rest != NULL && remote_link_page(h, k->rest) == NULL)
        report_error("free(%p): a block freed by another thread was freed again or written "
                     "before its owner took it back (double free?)", (void *)k->rest_from);
      else if (k->rest != NULL)
        drain_chain(h, k->rest);
    }
    park_release(k);
    k = next;
  }
}

void heap_drain_inbox(heap_t *h) {
  /* Large blocks freed by other threads go to the set, not the large keep
   * (large_keep.h: the keep would hand the one freed last out first,
   * whose lines the other thread's cache still holds). */
  uint8_t keep_off = h->keep_off;
  h->keep_off = 1;
  if (BRISK_UNLIKELY(atomic_load_relaxed(&h->parked) != NULL)) drain_parked(h);
  uintptr_t v = atomic_load_relaxed(&h->inbox);
  if ((v & INBOX_PTR_MASK) != 0) {
    v = atomic_exchange_acq_rel(&h->inbox, v & ~INBOX_PTR_MASK);
    block_t *b = (block_t *)(v & INBOX_PTR_MASK);
    if (b != NULL) drain_chain(h, b);
  }
  h->keep_off = keep_off;
}

static void drain_chain(heap_t *h, block_t *b) {
  /* The head was checked by the thread that freed it (or, past a parked
   * array, by the background thread). The registry, not
   * the address mask: a huge block aligned to 4 MiB or more starts past
   * the first 4 MiB of its mapping. */
  page_t *pg = page_of(registry_lookup((uintptr_t)b), (uintptr_t)b);
  /* The class pages this drain found, by slice: a chain of mixed classes
   * returns to a few pages in turn. */
  page_t *seen[DRAIN_PAGES] = {0};
  uint32_t retires = h->page_retires;
  while (b != NULL) {
    __builtin_prefetch(block_remote_skip(b), 1);
    uintptr_t link = block_remote_link(b);
    block_t *next = (block_t *)(link & ~REMOTE_LINK_SUSPECT);
    page_t *next_pg = pg;
    /* Blocks freed one after another often share a page, or return to
     * one this drain found: then the block index alone says whether the
     * link is one of its blocks (such a page stays in use while `next` is
     * not yet freed). The pages found are forgotten once the drain has
     * retired a page: its segment may be empty since, and unmapped by
     * anyone (with no segment cache, at once). */
    if (next != NULL && ((pg->flags & (PAGE_LARGE | PAGE_HUGE)) ||
                         !page_holds_block_inline(pg, next))) {
      if (BRISK_UNLIKELY(h->page_retires != retires)) {
        memset(seen, 0, sizeof(seen));
        retires = h->page_retires;
      }
      page_t **seen_at = &seen[((uintptr_t)next >> SLICE_SHIFT) % DRAIN_PAGES];
      next_pg = *seen_at;
      if (next_pg == NULL || !page_holds_block_inline(next_pg, next)) {
        next_pg = remote_link_page(h, next);
        if (next_pg != NULL && !(next_pg->flags & (PAGE_LARGE | PAGE_HUGE))) *seen_at = next_pg;
      }
      if (next_pg == NULL) {
        /* Its link is no chain link any more: the block was freed again (or
         * written) after another thread had freed it. Leave it and the rest
         * of the chain alone rather than free a block twice. */
        report_error("free(%p): a block freed by another thread was freed again or written "
                     "before its owner took it back (double free?)", (void *)b);
        return;
      }
    }
    if (BRISK_UNLIKELY(link & REMOTE_LINK_SUSPECT) && page_lists_contain(pg, b)) {
      report_error("free(%p): double free (size class %zu), the second from another thread",
                   (void *)b, (size_t)pg->block_size);
    } else {
      free_local(pg, b);
    }
    b = next;
    pg = next_pg;
  }
}

/* ---------------------------------------------------------------------------
 * Page lists (layout.h, page_remote_t): the heap-wide steps. A page's own
 * take, close and reopen are page.c's.
 * ------------------------------------------------------------------------- */
void page_remote_watch(const page_t *pg) {
  heap_t *dst = atomic_load_relaxed(&segment_of_page(pg)->heap);
  if (dst != NULL) park_watch(dst);
}

/* A list taken from pg's word v: each block freed as the owner's, its link
 * checked (a link that is no block of the page was written after the
 * free: the rest of the list is left alone). */
static void page_remote_free_list(page_t *pg, uintptr_t v) {
  block_t *b = (block_t *)(v & PAGE_REMOTE_PTR);
  block_t *end = page_list_end(pg);
  uint32_t n = page_remote_count(v);
  STAT_COUNT(remote_frees, n);
  for (uint32_t i = 0; i < n && b != end; i++) {
    if (!page_holds_block_inline(pg, b)) {
      report_error("free(%p): a list of blocks freed by other threads holds %p, not a block of the page "
                   "(a write after free?)", (void *)pg->start, (void *)b);
      return;
    }
    block_t *next = block_next(b);
    free_local(pg, b); /* the last may retire the page */
    b = next;
  }
}

/* Every page of h on a list (its class's queue or the full list) that
 * takes page lists: the word's new value is `to` (0 keeps a list as it
 * is, taking its blocks; PAGE_REMOTE_CLOSED closes it). The full list
 * first: its pages may move to their queues as their blocks come back
 * (and, while h is owned, open their words again). */
static void heap_remote_lists_swap(heap_t *h, uintptr_t to) {
  if (!h->segments.page_lists) return;
  for (unsigned c = 0; c < CLASS_COUNT && class_size(c) <= DIRECT_MAX; c++) {
    page_queue_t *q = c == 0 ? &h->full : &h->queues[c];
    for (page_t *pg = q->first, *next; pg != NULL; pg = next) {
      next = pg->next; /* pg may change lists or retire */
      if (!page_takes_remote(pg)) continue;
      _Atomic(uintptr_t) *w = page_remote_word(pg);
      uintptr_t v = atomic_load_relaxed(w);
      if (v == to || (to == 0 && !(v & PAGE_REMOTE_PTR))) continue;
      v = atomic_exchange_explicit(w, to, memory_order_acquire);
      if (v & PAGE_REMOTE_PTR) page_remote_free_list(pg, v);
    }
  }
}

void heap_collect_remote(heap_t *h) { heap_remote_lists_swap(h, 0); }

void heap_close_remote(heap_t *h) { heap_remote_lists_swap(h, PAGE_REMOTE_CLOSED); }

uint64_t heap_abandoned_tidy(heap_t *h, uint64_t now, bool force) {
  bool left = h->left_ms != 0;
  if (left) {
    uint64_t due = h->left_ms + options_purge_delay_ms();
    if (now == 0) now = os_now_ms();
    if (!force && now < due && background_running()) return due;
    h->left_ms = 0;
  }
  class_cache_flush(h);
  heap_retire_empty_heads(h);
  /* The retired pages' spans leave the span cache, as at an abandon that
   * keeps nothing (heap_collect) */
  if (left) {
    span_cache_flush(&h->segments);
    heap_stats_publish(h);
  }
  return 0;
}

/* A freeing thread takes an abandoned heap for a moment to take in its
 * inbox and give back what became empty. */
bool heap_serve_abandoned(heap_t *dst) {
  int expected = HEAP_ABANDONED;
  if (!atomic_cas_strong_acq_rel(&dst->state, &expected, HEAP_BUSY)) return false;
  heap_drain_inbox(dst);
  heap_abandoned_tidy(dst, 0, false);
  segment_set_purge(&dst->segments, false);
  atomic_store_release(&dst->state, HEAP_ABANDONED);
  /* What became free waits for its purge deadline, which only the
   * background thread may keep if neither side calls brisk again (the owner
   * is gone, this thread may sleep next): start it if that made it worth
   * it (no lock is held here). */
  background_poll();
  return true;
}

