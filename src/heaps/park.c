/* Parking an idle owner's inbox (park.h). Only the background thread
 * parks; it calls nothing above the heap layer. */
#include "heaps/park.h"

#include "heaps/page.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "runtime/report.h"
#include "segments/registry.h"

/* One array: a 64 KiB mapping (the last of a chain may have a `rest`). */
#define PARK_BYTES ((size_t)64 * 1024)
#define PARK_ENTRIES ((PARK_BYTES - sizeof(park_t)) / sizeof(uintptr_t))

void park_watch(heap_t *h) {
  /* A store then a load on each side (here: the chain, pushed by the
   * caller's CAS, then the flag; the background thread: the flag cleared,
   * then the inbox read again), sequentially consistent: an inbox never
   * holds a batch unwatched. */
  if (!atomic_load(&h->inbox_watched)) {
    atomic_store(&h->inbox_watched, 1);
    uint64_t delay = options_purge_delay_ms();
    if (delay >= UINT64_MAX / 2) return; /* memory is never given back */
    background_schedule(os_now_ms() + delay, true);
  }
  /* The background thread may not run yet, and the threads on either side
   * may call brisk no more: start it now (the callers hold no lock). */
  background_poll();
}

/* A mapping for n entries (0: the most a first array holds). */
static park_t *park_new(uint32_t tag, size_t n) {
  size_t bytes = n == 0 ? PARK_BYTES : OS_PAGE_CEIL(sizeof(park_t) + n * sizeof(uintptr_t));
  void *p;
  if (os_map_aligned(bytes, OS_PAGE_BYTES, &p) != 0) return NULL;
  park_t *k = p;
  k->next = NULL;
  k->mapped = bytes;
  k->count = 0;
  k->tag = tag;
  k->rest = NULL;
  k->rest_from = NULL;
  return k;
}

void park_release(park_t *k) {
  size_t n = k->mapped;
  os_unmap(k, n); /* if refused, left mapped, unused */
}

/* The page of b if b can be a block of a class page of h in a chain; NULL
 * otherwise. Only the descriptor's first line: fixed while the page is in
 * use, and the page stays in use (b counts as used in it) while the set's
 * lock keeps its segment in the set. */
static const page_t *park_block_page(const heap_t *h, uintptr_t b) {
  if ((b & 15) != 0) return NULL;
  segment_t *seg = registry_lookup(b);
  if (seg == NULL || seg->kind != SEGMENT_NORMAL || atomic_load_relaxed(&seg->heap) != h) return NULL;
  const page_t *pg = page_of(seg, b);
  if ((pg->flags & (PAGE_IN_USE | PAGE_LARGE | PAGE_HUGE)) != PAGE_IN_USE || b < (uintptr_t)pg->start) return NULL;
  uintptr_t off = b - (uintptr_t)pg->start;
  if (off >= pg->area || page_block_index(pg, off) >= pg->capacity) return NULL;
  return pg;
}

/* What a block of a chain that is no class page's is: a large block of h
 * in use (its span's start), which the walk frees (it holds the set's
 * lock, as a foreign free of a large block would); a profiler's sample or
 * a huge block of h, left to the owner; or anything else (a second free, a
 * link written after the free): no block of h in use. */
enum { SINGLE_LARGE, SINGLE_OWNERS, SINGLE_BAD };
static int park_single(heap_t *h, uintptr_t b, page_t **pg_out) {
  if ((b & 15) != 0) return SINGLE_BAD;
  segment_t *seg = registry_lookup(b);
  if (seg == NULL || atomic_load_relaxed(&seg->heap) != h || seg->destroyed) return SINGLE_BAD;
  page_t *pg = page_of(seg, b);
  uint8_t kind = seg->kind == SEGMENT_HUGE ? PAGE_HUGE : PAGE_LARGE;
  if ((seg->kind != SEGMENT_NORMAL && seg->kind != SEGMENT_HUGE) || pg->span != pg ||
      (pg->flags & (PAGE_IN_USE | kind)) != (PAGE_IN_USE | kind) || (uintptr_t)pg->start != b)
    return SINGLE_BAD;
  if (kind == PAGE_HUGE || (pg->flags & PAGE_SAMPLE)) return SINGLE_OWNERS;
  *pg_out = pg;
  return SINGLE_LARGE;
}

/* In-place heapsort: no allocation, and O(n log n) at worst. */
static void sift(uintptr_t *a, size_t i, size_t n) {
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && a[c + 1] > a[c]) c++;
    if (a[i] >= a[c]) return;
    uintptr_t t = a[i];
    a[i] = a[c];
    a[c] = t;
    i = c;
  }
}

static void sort_entries(uintptr_t *a, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift(a, i, n);
  for (size_t end = n; end-- > 1;) {
    uintptr_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift(a, 0, end);
  }
}

static void purge_range(uintptr_t start, uintptr_t end) {
  uintptr_t lo = (start + OS_PAGE_BYTES - 1) & ~(uintptr_t)(OS_PAGE_BYTES - 1);
  uintptr_t hi = end & ~(uintptr_t)(OS_PAGE_BYTES - 1);
  if (hi > lo) os_purge((void *)lo, hi - lo);
}

/* Sorted addresses, each kept once (a block is in a chain twice when the
 * chain closed on itself, which was reported); returns how many remain. */
static size_t unique_entries(uintptr_t *e, size_t n) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out > 0 && (e[i] & ~REMOTE_LINK_SUSPECT) == (e[out - 1] & ~REMOTE_LINK_SUSPECT)) continue;
    e[out++] = e[i];
  }
  return out;
}

/* The sorted, unique addresses of k become runs, in place (park_t). Every 4 KiB
 * page that lies wholly within consecutive free blocks is purged, and so
 * is the array's own tail past the runs. */
static void park_runs(const heap_t *h, park_t *k) {
  size_t n = k->count, out = 0;
  uintptr_t *e = k->entries;
  uintptr_t start = 0, end = 0; /* the bytes of consecutive blocks so far */
  for (size_t i = 0; i < n;) {
    uintptr_t first = e[i];
    const page_t *pg = park_block_page(h, first & ~REMOTE_LINK_SUSPECT);
    size_t bs = pg->block_size, len = 1;
    if (!(first & REMOTE_LINK_SUSPECT)) {
      uintptr_t last = (uintptr_t)pg->start + (uintptr_t)pg->capacity * bs; /* the page's blocks end */
      while (i + len < n && e[i + len] == first + len * bs && first + len * bs < last) len++;
    }
    uintptr_t b = first & ~REMOTE_LINK_SUSPECT;
    if (b != end) {
      purge_range(start, end);
      start = b;
    }
    end = b + len * bs;
    i += len;
    /* a run takes min(len, 2) entries: never ahead of the reads */
    if (len == 1) {
      e[out++] = first;
    } else {
      e[out++] = first | PARK_RUN;
      e[out++] = len;
    }
  }
  purge_range(start, end);
  k->count = out;
  uintptr_t used = OS_PAGE_CEIL((uintptr_t)&e[out] - (uintptr_t)k);
  if (used < k->mapped) os_purge((uint8_t *)k + used, k->mapped - used);
}

/* k's entries sorted into runs (its blocks' memory purged) and hung on
 * h, where the owner takes the whole list; an array left empty (large
 * blocks only, all freed) is released. */
static void park_publish(heap_t *h, park_t *k) {
  sort_entries(k->entries, k->count);
  k->count = unique_entries(k->entries, k->count);
  park_runs(h, k);
  if (k->count == 0 && k->rest == NULL) {
    park_release(k);
    return;
  }
  park_t *old = atomic_load_relaxed(&h->parked);
  do {
    k->next = old;
  } while (!atomic_compare_exchange_weak_explicit(&h->parked, &old, k, memory_order_release,
                                                  memory_order_relaxed));
}

/* The arrays of page lists' blocks park_lists filled (pre, the newest,
 * and those behind it), each published alone: with no chain from the inbox
 * to join them. */
static void park_lists_publish(heap_t *h, park_t *k) {
  while (k != NULL) {
    park_t *next = k->next;
    k->next = NULL;
    park_publish(h, k);
    k = next;
  }
}

/* Do any of h's page lists hold blocks? With the set's lock held. */
static bool park_lists_pending(heap_t *h) {
  for (segment_t *seg = h->segments.segs.first; seg != NULL; seg = seg->next) {
    if (!seg->page_lists) continue;
    for (size_t i = SEGMENT_FIRST_SLICE; i < SLICES_PER_SEGMENT; i++)
      if (atomic_load(&seg->remote[i].word) & PAGE_REMOTE_PTR) return true;
  }
  return false;
}

/* Take h's chain and park it; with the set's lock held. */
static void park_chain(heap_t *h, park_t *pre) {
  uintptr_t v = atomic_load_relaxed(&h->inbox);
  park_t *first = pre != NULL ? pre : park_new(0, 0);
  if (first == NULL) return; /* no memory: the owner takes it in as it is */
  /* The chain, the tag kept (it cannot move on while we hold the lock
   * but for a destruction, whose tag the array then keeps). */
  do {
    if ((v & INBOX_PTR_MASK) == 0) {
      park_lists_publish(h, first);
      return;
    }
  } while (!atomic_compare_exchange_weak_explicit(&h->inbox, &v, v & ~INBOX_PTR_MASK, memory_order_acq_rel,
                                                  memory_order_relaxed));
  uint32_t tag = (uint32_t)(v >> INBOX_GEN_SHIFT);
  /* The chain's addresses, into arrays of PARK_ENTRIES (newest first)... */
  park_t *k = first;
  uintptr_t b = v & INBOX_PTR_MASK;
  size_t pre_count = 0; /* the page lists' blocks, in pre and the arrays behind it */
  for (park_t *p = first; p != NULL; p = p->next) pre_count += p->count;
  size_t total = pre_count;
  /* A block freed twice by other threads can close the chain on itself:
   * the walk stops when it meets a block it saw (Brent's cycle test; the
   * blocks taken twice meanwhile are told apart after the sort). */
  uintptr_t seen = b, from = 0;
  size_t power = 1, since = 0;
  size_t singles = 0;
  while (b != 0) {
    uintptr_t link;
    if (park_block_page(h, b) != NULL) {
      if (k->count == PARK_ENTRIES) {
        park_t *more = park_new(tag, 0);
        if (more == NULL) break;
        more->next = k;
        k = more;
      }
      link = block_remote_link((const block_t *)b);
      k->entries[k->count++] = b | (link & REMOTE_LINK_SUSPECT);
      total++;
    } else {
      page_t *single = NULL;
      int r = park_single(h, b, &single);
      if (r == SINGLE_OWNERS) break; /* the rest is the owner's to take in */
      if (r == SINGLE_BAD) {
        report_error("free(%p): a block freed by another thread was freed again or written before its owner "
                     "took it back (double free?)", (void *)(from != 0 ? from : b));
        b = 0;
        break;
      }
      link = block_remote_link((const block_t *)b); /* read before the free */
      span_free_large_held(&h->segments, single);
      STAT_LEVEL(pages, -1);
      singles++;
    }
    from = b;
    b = link & ~REMOTE_LINK_SUSPECT;
    if (b == seen) { /* around again: every block of the cycle is taken or freed */
      report_error("free(%p): a block freed by another thread was freed again before its owner took it "
                   "back (double free?): its chain of remote frees closes on itself", (void *)b);
      b = 0;
      break;
    }
    if (++since == power) {
      seen = b;
      power <<= 1;
      since = 0;
    }
  }
  /* ...then into one, sorted by address (blocks freed by several threads
   * interleave in the chain), as runs. */
  park_t *all = k->next != NULL ? park_new(tag, total) : k;
  if (all == NULL) all = k; /* no memory for one: the newest array alone is parked */
  if (all != k) {
    for (park_t *p = k; p != NULL;) {
      park_t *next = p->next;
      for (size_t i = 0; i < p->count; i++) all->entries[all->count++] = p->entries[i];
      park_release(p);
      p = next;
    }
  } else if (k->next != NULL) { /* the older arrays' blocks go back as a chain */
    for (park_t *p = k->next; p != NULL;) {
      park_t *next = p->next;
      for (size_t i = 0; i < p->count; i++) {
        block_t *blk = (block_t *)(p->entries[i] & ~REMOTE_LINK_SUSPECT);
        block_set_remote_next(blk, b == 0 ? NULL : (void *)b, (p->entries[i] & REMOTE_LINK_SUSPECT) != 0);
        b = (uintptr_t)blk;
      }
      park_release(p);
      p = next;
    }
    k->next = NULL;
    total = k->count;
  }
  all->tag = tag;
  all->rest = (block_t *)b; /* what is not parked: drained as a chain */
  all->rest_from = (block_t *)from;
  STAT_COUNT(remote_parked, (int64_t)(total - pre_count + singles));
  park_publish(h, all);
}

/* Every page list of h that holds blocks, taken (a CAS: the owner may
 * take it first) and parked; with the set's lock held, which keeps the
 * segments in the set and their pages in use (a listed block counts as
 * used). The links are read as the owner's malloc would, each checked to
 * be a block of the list's page. */
static park_t *park_lists(heap_t *h) {
  uint32_t tag = (uint32_t)(atomic_load_relaxed(&h->inbox) >> INBOX_GEN_SHIFT);
  park_t *k = NULL;
  for (segment_t *seg = h->segments.segs.first; seg != NULL; seg = seg->next) {
    if (!seg->page_lists) continue;
    for (size_t i = SEGMENT_FIRST_SLICE; i < SLICES_PER_SEGMENT; i++) {
      _Atomic(uintptr_t) *w = &seg->remote[i].word;
      /* acquire: a pushed word orders the descriptor's first line, written
       * before the pushed block was handed out, before the reads below */
      uintptr_t v = atomic_load_acquire(w);
      page_t *pg = &seg->pages[i];
      if (!(v & PAGE_REMOTE_PTR) || pg->span != pg || !(pg->flags & PAGE_IN_USE) || !page_takes_remote(pg))
        continue;
      if (k == NULL || k->count + page_remote_count(v) > PARK_ENTRIES) {
        /* a new array in front: park_chain gathers them into one */
        park_t *more = park_new(tag, 0);
        if (more == NULL) return k; /* no memory: the owner takes the rest */
        more->next = k;
        k = more;
      }
      if (!atomic_compare_exchange_strong_explicit(w, &v, 0, memory_order_acquire, memory_order_relaxed))
        continue; /* taken, or a new push: the next look */
      block_t *b = (block_t *)(v & PAGE_REMOTE_PTR), *end = page_list_end(pg);
      uint32_t n = page_remote_count(v), j = 0;
      for (; j < n && b != end; j++) {
        if (park_block_page(h, (uintptr_t)b) != pg) {
          report_error("free(%p): a list of blocks freed by other threads holds %p, not a block of the page "
                       "(a write after free?)", (void *)pg->start, (void *)b);
          break;
        }
        k->entries[k->count++] = (uintptr_t)b;
        b = block_next(b);
      }
      STAT_COUNT(remote_parked, (int64_t)j);
      STAT_COUNT(remote_frees, (int64_t)j);
    }
  }
  return k;
}

/* Does h hold remote frees that wait: a chain in its inbox, or blocks on
 * its page lists (those only seen under the set's lock: a lock held
 * elsewhere counts as yes, to look again). */
static bool park_pending(heap_t *h, uintptr_t v) {
  if (v & INBOX_PTR_MASK) return true;
  if (!lock_try_acquire(&h->segments.lock)) return true;
  bool any = h->segments.page_lists && park_lists_pending(h);
  lock_release(&h->segments.lock);
  return any;
}

uint64_t park_idle_inbox(heap_t *h, uint64_t now) {
  if (!atomic_load_relaxed(&h->inbox_watched)) return 0;
  uintptr_t v = atomic_load(&h->inbox);
  if (!park_pending(h, v)) {
    /* A store then loads of the inbox and the page lists: a pusher's CAS
     * then load of the flag (inbox_push, page_remote_push) either sees it
     * cleared and watches again, or its blocks are seen here. */
    atomic_store(&h->inbox_watched, 0);
    v = atomic_load(&h->inbox);
    if (!park_pending(h, v)) return 0;
    atomic_store(&h->inbox_watched, 1);
  }
  uint64_t delay = options_purge_delay_ms();
  if (delay >= UINT64_MAX / 2) return 0;
  uint32_t alive = atomic_load_relaxed(&h->alive);
  if (v != h->inbox_seen || alive != h->alive_seen) { /* the owner moved since the last look */
    h->inbox_seen = v;
    h->alive_seen = alive;
    h->inbox_seen_ms = now;
    return now + delay;
  }
  if (now < h->inbox_seen_ms + delay) return h->inbox_seen_ms + delay;
  /* Unchanged for a whole delay: its owner is not taking it in. */
  /* (an abandoned heap's is served whole by the round instead) */
  if (atomic_load_relaxed(&h->state) != HEAP_OWNED) return now + delay;
  if (!lock_try_acquire(&h->segments.lock)) return now + PURGE_RETRY_MS;
  if (atomic_load_acquire(&h->state) == HEAP_OWNED) {
    /* The page lists first, into the array the chain's blocks join: a
     * page's blocks in one array (the first free into a full page went to
     * the inbox), so that its runs are whole when the array is purged. */
    park_chain(h, h->segments.page_lists ? park_lists(h) : NULL);
  }
  lock_release(&h->segments.lock);
  h->inbox_seen = 0;
  return now + delay; /* one more look: the flag is cleared when nothing waits */
}
