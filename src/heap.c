/* Heap objects: creation, the generic allocation path, housekeeping, the
 * background round, abandonment and adoption (frees from other threads:
 * remote.c). */
#include <errno.h>
#include <string.h>

#include "atomics.h"
#include "background.h"
#include "guard.h"
#include "guarded.h"
#include "heap.h"
#include "huge.h"
#include "park.h"
#include "platform.h"
#include "profile.h"
#include "registry.h"
#include "report.h"
#include "counters.h"

#define EMPTY_DIRECT_INIT                                                     \
  {                                                                           \
    [0 ... DIRECT_SLOTS - 1] = &brisk_empty_page                              \
  }

heap_t brisk_heap_empty = {.direct = EMPTY_DIRECT_INIT, .kind = HEAP_KIND_STATIC};
heap_t brisk_heap_dead = {.direct = EMPTY_DIRECT_INIT, .kind = HEAP_KIND_STATIC};

/* Every heap ever made, newest first. Heaps are never unmapped: a free
 * may still be on its way to one whose thread has gone. */
static _Atomic(heap_t *) heaps_all;
static brisk_lock_t heap_meta_lock = BRISK_LOCK_INIT;
static uint8_t *meta_next;
static size_t meta_left;
static heap_t main_heap_storage;
static _Atomic(bool) main_heap_used;

/* Around fork, after the heap-list lock: every heap's set lock, which any
 * thread may hold (a free of another heap's huge block, the background
 * thread's parking), so
 * that the child finds no set half changed. No thread holds two set locks,
 * and under one only the pool's and the huge lock are taken: these come
 * after, in fork_prepare's order. */
void heap_sets_lock_all(void) {
  for (heap_t *h = heap_first(); h; h = h->next_all) lock_acquire(&h->segments.lock);
}
void heap_sets_unlock_all(void) {
  for (heap_t *h = heap_first(); h; h = h->next_all) lock_release(&h->segments.lock);
}
void heap_sets_reset_locks(void) {
  for (heap_t *h = heap_first(); h; h = h->next_all) lock_reset(&h->segments.lock);
}

void heap_list_lock(void) { lock_acquire(&heap_meta_lock); }
void heap_list_unlock(void) { lock_release(&heap_meta_lock); }
void heap_list_reset_lock(void) { lock_reset(&heap_meta_lock); }
heap_t *heap_first(void) { return atomic_load_acquire(&heaps_all); }

static heap_t *heap_storage_new(void) {
  bool expected = false;
  if (atomic_compare_exchange_strong(&main_heap_used, &expected, true)) return &main_heap_storage;
  size_t need = (sizeof(heap_t) + BRISK_CACHELINE - 1) & ~(size_t)(BRISK_CACHELINE - 1);
  lock_acquire(&heap_meta_lock);
  if (meta_left < need) {
    void *p;
    if (os_map_aligned(SLICE_SIZE, OS_PAGE_BYTES, &p) != 0) {
      lock_release(&heap_meta_lock);
      return NULL;
    }
    meta_next = p;
    meta_left = SLICE_SIZE;
  }
  heap_t *h = (heap_t *)meta_next;
  meta_next += need;
  meta_left -= need;
  lock_release(&heap_meta_lock);
  return h;
}

static void heap_init_fields(heap_t *h, uint32_t kind, uintptr_t tid) {
  for (size_t i = 0; i < DIRECT_SLOTS; i++) h->direct[i] = &brisk_empty_page;
  memset(h->queues, 0, sizeof(h->queues));
  memset(&h->full, 0, sizeof(h->full));
  segment_set_reset(&h->segments, h, tid);
  h->segments.heap_generation = h->generation;
  memset(h->outbox, 0, sizeof(h->outbox));
  h->outbox_pending = 0;
  h->tid = tid;
  h->kind = kind;
  h->cache_path_max = MEDIUM_MAX;
  h->refill_mask = h->prof != NULL ? 0 : REFILL_SLOW_EVERY - 1; /* a reused heap keeps its sampling */
  class_cache_init(h);
}

/* A destroyed first-class heap is reused whole: its generation lives on,
 * so batches still addressed to its former life are dropped. */
static heap_t *heap_reuse_free(uint32_t kind, uintptr_t tid) {
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    if (h->kind != kind || atomic_load_relaxed(&h->state) != HEAP_FREE) continue;
    int expected = HEAP_FREE;
    if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) continue;
    heap_init_fields(h, kind, tid);
    atomic_store_release(&h->state, HEAP_OWNED);
    STAT_LEVEL(heaps, 1);
    return h;
  }
  return NULL;
}

heap_t *heap_create(uint32_t kind, uintptr_t tid) {
  if (kind == HEAP_KIND_USER) {
    heap_t *reused = heap_reuse_free(kind, tid);
    if (reused) return reused;
  }
  heap_t *h = heap_storage_new();
  if (h == NULL) return NULL;
  memset(h, 0, sizeof(*h));
  heap_init_fields(h, kind, tid);
  atomic_store_relaxed(&h->state, HEAP_OWNED);
  heap_t *head = atomic_load_relaxed(&heaps_all);
  do {
    h->next_all = head;
  } while (!atomic_compare_exchange_weak_explicit(&heaps_all, &head, h, memory_order_release,
                                                  memory_order_relaxed));
  STAT_LEVEL(heaps, 1);
  return h;
}

heap_t *heap_adopt_abandoned(uintptr_t tid) {
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    if (h->kind != HEAP_KIND_THREAD) continue;
    int expected = HEAP_ABANDONED;
    if (atomic_load_relaxed(&h->state) != expected) continue;
    if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) continue;
    h->tid = tid;
    segment_set_set_owner(&h->segments, tid);
    atomic_store_release(&h->state, HEAP_OWNED);
    STAT_COUNT(heaps_adopted, 1);
    STAT_LEVEL(heaps, 1);
    heap_drain_inbox(h);
    return h;
  }
  return NULL;
}

uint64_t heaps_background_round(uint64_t now) {
  uint64_t next = 0;
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    int s = atomic_load_relaxed(&h->state);
    if (s == HEAP_OWNED) {
      /* The owner may be running: only the free slices, under its lock,
       * and an inbox it has not taken in for a purge delay (park.h). */
      next = deadline_earlier(next, segment_set_purge_idle(&h->segments, now));
      next = deadline_earlier(next, park_idle_inbox(h, now));
    } else if (s == HEAP_ABANDONED) {
      /* No owner: serve it whole, as a freeing thread would. */
      int expected = HEAP_ABANDONED;
      if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) {
        next = deadline_earlier(next, now + PURGE_RETRY_MS);
        continue;
      }
      heap_drain_inbox(h);
      class_cache_flush(h);
      heap_retire_empty_heads(h);
      next = deadline_earlier(next, segment_set_purge_idle(&h->segments, now));
      atomic_store_release(&h->state, HEAP_ABANDONED);
      /* A push that landed after the drain, whose pusher saw the heap BUSY
       * and left it: the watch keeps a round coming for it. */
      next = deadline_earlier(next, park_idle_inbox(h, now));
    }
  }
  next = deadline_earlier(next, prof_background(now));
  return deadline_earlier(next, segments_maintain(now, false));
}

/* ---------------------------------------------------------------------------
 * Housekeeping: run on the slow path when a page runs dry.
 * ------------------------------------------------------------------------- */
void heap_housekeeping(heap_t *h) {
  background_poll();
  heap_drain_inbox(h);
  heap_flush_outbox(h);
  /* The purge reads the clock: on every eighth slow path only, which on a
   * workload that runs dry at every other allocation saves a clock read
   * per page; a purge waits for 8 slow paths at most beyond its delay. */
  if (++h->housekeeping_tick % HOUSEKEEPING_PURGE_EVERY == 0) {
    segment_set_purge(&h->segments, false);
    if (h->kind == HEAP_KIND_THREAD && !prof_active()) {
      h->cache_path_max = MEDIUM_MAX;
      h->refill_mask = REFILL_SLOW_EVERY - 1;
    }
  }
}

void heap_collect(heap_t *h, bool force) {
  heap_drain_inbox(h);
  heap_flush_outbox(h);
  class_cache_flush(h);
  heap_retire_empty_heads(h);
  span_cache_flush(&h->segments);
  segment_set_purge(&h->segments, force);
  heap_stats_publish(h);
  background_poll();
}

void heap_abandon(heap_t *h) {
  heap_collect(h, false);
  h->tid = 0;
  segment_set_set_owner(&h->segments, 0);
  STAT_COUNT(heaps_abandoned, 1);
  STAT_LEVEL(heaps, -1);
  atomic_store_release(&h->state, HEAP_ABANDONED);
  /* Frees that arrived while we were leaving are not lost: serve them. */
  heap_serve_abandoned(h);
}

void heap_destroy(heap_t *h) {
  heap_stats_publish(h);
  prof_forget_heap(h);
  /* A new generation first: batches of remote frees still on their way
   * carry the old one and are dropped, their blocks went with the heap. A
   * heap whose tags are used up keeps the last, which no life has. */
  h->generation++;
  uint32_t tag = h->generation & INBOX_GEN_MASK;
  atomic_exchange(&h->inbox, (uintptr_t)tag << INBOX_GEN_SHIFT);
  /* A push that loaded the old tag may be writing its tail's link: its
   * memory goes below (inbox_push). */
  while (atomic_load(&h->pushers) != 0) os_yield();
  for (park_t *k = park_take(h); k != NULL;) { /* parked blocks go with the heap */
    park_t *next = k->next;
    park_release(k);
    k = next;
  }
  heap_flush_outbox(h);
  segment_set_release_all(&h->segments);
  memset(h->queues, 0, sizeof(h->queues));
  memset(&h->full, 0, sizeof(h->full));
  for (size_t i = 0; i < CLASS_CACHE_COUNT; i++) h->ccache[i].count = 0;
  for (size_t i = 0; i < DIRECT_SLOTS; i++) h->direct[i] = &brisk_empty_page;
  h->tid = 0;
  h->segments.owner_tid = 0;
  STAT_LEVEL(heaps, -1);
  atomic_store_release(&h->state, tag == INBOX_GEN_MASK ? HEAP_RETIRED : HEAP_FREE);
  background_poll();
}

void heap_orphan_others(uintptr_t tid) {
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    int s = atomic_load_relaxed(&h->state);
    if (h->tid != tid && (s == HEAP_OWNED || s == HEAP_BUSY)) {
      /* Its lists may have been mid-update when the parent forked, and its
       * set's lock held by a thread the child does not have. */
      atomic_store_relaxed(&h->state, HEAP_ORPHANED);
      lock_reset(&h->segments.lock);
      segment_set_set_owner(&h->segments, 0);
    }
  }
}

/* ---------------------------------------------------------------------------
 * Allocation beyond the inline path.
 * ------------------------------------------------------------------------- */
/* The span of a new large block of `size` bytes: a span the cache kept
 * for a block of its size, else one cut for it (span.h). */
static page_t *large_span(heap_t *h, size_t slices, size_t align_slices, size_t size, bool sampled) {
  /* A sample of a quarter slice or less leaves most of its span untouched:
   * a light span (span.h) */
  if (sampled) return span_alloc(&h->segments, slices, align_slices, size <= SLICE_SIZE / 4);
  return span_alloc_large(&h->segments, slices, align_slices, size);
}

static void *alloc_large(heap_t *h, size_t size, size_t alignment, bool sampled) {
  /* Large blocks freed by other threads come back through the inbox. */
  if (atomic_load_relaxed(&h->inbox) & INBOX_PTR_MASK) heap_drain_inbox(h);
  size_t slices = large_slices(size);
  size_t align_slices = alignment > SLICE_SIZE ? alignment >> SLICE_SHIFT : 1;
  page_t *pg = large_span(h, slices, align_slices, size, sampled);
  if (pg == NULL) {
    heap_collect(h, true);
    pg = large_span(h, slices, align_slices, size, sampled);
    if (pg == NULL) return NULL;
  }
  if (BRISK_HARDENED) guard_span_tail(pg);
  /* One block: inv 1, shift 0 make the index the offset itself, so only
   * offset 0 passes the fast path's index < reserved check. */
  pg->inv = 1;
  pg->shift = 0;
  pg->capacity = 1;
  pg->reserved = 1;
  pg->notify_at = 0;
  page_set_used(pg, 1);
  /* A sample's tail stays unpurged (DESIGN.md, "Where a sample lives");
   * the hardened build's block is its span up to the guard placed above.
   * Any other span came marked a large block's with its usable size, under
   * the set's lock, where the purger reads them when the tail is due. */
  if (sampled) pg->flags |= PAGE_LARGE;
  if (sampled || BRISK_HARDENED) pg->block_size = (uint32_t)large_usable(pg, size);
  heap_count_page(h, 1, true);
  return pg->start;
}

/* A thread's huge blocks belong to no heap: any thread unmaps them on free.
 * A first-class heap's huge blocks belong to it, so that destroying the
 * heap releases them too. */
static void *alloc_huge(heap_t *h, size_t size, size_t alignment) {
  page_t *pg = huge_alloc(size, alignment);
  if (pg == NULL) return NULL;
  if (h->kind == HEAP_KIND_USER) segment_set_adopt_huge(&h->segments, segment_of_page(pg));
  background_poll();
  return pg->start;
}

/* A block of class c from its pages (the class cache aside). */
static void *alloc_class_page(heap_t *h, unsigned c) {
  page_t *pg = h->queues[c].first;
  block_t *b = pg ? page_pop(pg) : NULL;
  if (BRISK_LIKELY(b != NULL)) return b;
  heap_housekeeping(h);
  pg = heap_find_page(h, c);
  if (pg == NULL) {
    heap_collect(h, true);
    pg = heap_find_page(h, c);
    if (pg == NULL) return NULL;
  }
  b = page_pop(pg);
  return b != NULL ? b : page_take_fresh(pg);
}

static void *alloc_class(heap_t *h, unsigned c) {
  if (c >= CLASS_CACHE_FIRST) {
    block_t *cached = class_cache_pop(h, c);
    if (cached != NULL) return cached;
  }
  return alloc_class_page(h, c);
}

/* A block of its own for `size` bytes at `alignment` (16 or less: none):
 * a large block where one can be, else a huge one. */
static void *alloc_large_or_huge(heap_t *h, size_t size, size_t alignment, bool sampled) {
  if (size == 0) size = 1;
  if (alignment <= 16) alignment = 0;
  if (size <= LARGE_MAX && alignment <= SEGMENT_SIZE / 4) return alloc_large(h, size, alignment, sampled);
  return alloc_huge(h, size, alignment);
}

static void *heap_alloc_counted(heap_t *h, size_t size, size_t alignment);
/* What a large or huge block of n bytes counts for while sampling: n
 * rounded up to whole OS pages (prof_sample_weight keeps one weight per
 * page count); below n when that overflows. */
static inline size_t prof_page_bytes(size_t n) { return OS_PAGE_CEIL(n); }
/* While h samples, the refill that page_refill_pop leaves to the slow path
 * (it takes no local list in such a heap: refill_mask), of pg, h->direct's
 * page of a class up to DIRECT_MAX: the allocation counted, the local
 * list exposed up to the next sample. NULL if the sample falls on it or
 * there is nothing to refill from: heap_alloc_counted does the rest. */
static block_t *prof_refill(heap_t *h, page_t *pg);

/* While the profiler samples, the common case of heap_alloc: a class with
 * a cache (above DIRECT_MAX), no sample, a cached block; else NULL. */
BRISK_INLINE block_t *sampling_cache_pop(heap_t *h, size_t size) {
  prof_heap_t *ph = h->prof;
  if (ph == NULL || h->cache_path_max != DIRECT_MAX || size - (DIRECT_MAX + 1) >= MEDIUM_MAX - DIRECT_MAX)
    return NULL;
  return prof_class_cache_pop(h, size_to_class(size));
}

/* c: a class with a cache (malloc_above found it empty). */
void *heap_alloc_class(heap_t *h, unsigned c) {
  if (BRISK_UNLIKELY(prof_active())) {
    /* Most allocations while sampling: not the sample (the countdown does
     * not run out on it), and no list to cut (the class has no inline
     * path), so counted here. The sample goes the whole way. */
    prof_heap_t *ph = prof_heap_of(h);
    if (ph == NULL || !prof_count_class(ph, c)) return heap_alloc_counted(h, class_size(c), 0);
    void *q = alloc_class_page(h, c);
    if (BRISK_UNLIKELY(q == NULL)) errno = ENOMEM;
    if (!h->segments.fresh_only) prof_poll();
    return q;
  }
  void *p = alloc_class_page(h, c);
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  return p;
}

void *heap_alloc(heap_t *h, size_t size) {
  if (BRISK_UNLIKELY(prof_active())) {
    /* The counted refill of a class up to DIRECT_MAX (the common case of
     * a heap that samples), or a cached block */
    block_t *b = size <= DIRECT_MAX ? prof_refill(h, h->direct[(size + 15) >> 4]) : sampling_cache_pop(h, size);
    if (b != NULL) return b;
    /* A large block the sample does not fall on: counted here, without
     * the general path (linear: 57,000 of 300,000 allocations, about 60
     * instructions each) */
    prof_heap_t *ph = size - (MEDIUM_MAX + 1) < LARGE_MAX - MEDIUM_MAX ? prof_heap_of(h) : NULL;
    int64_t left = ph != NULL ? ph->left[0] - (int64_t)prof_page_bytes(size) : 0;
    if (left <= 0) return heap_alloc_counted(h, size, 0);
    ph->left[0] = left;
    void *p = alloc_large(h, size, 0, false);
    if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
    if (!h->segments.fresh_only) prof_poll();
    return p;
  }
  void *p;
  if (BRISK_LIKELY(size <= MEDIUM_MAX)) p = alloc_class(h, size_to_class(size));
  else if (size <= LARGE_MAX) p = alloc_large(h, size, 0, false);
  else p = alloc_huge(h, size, 0);
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  return p;
}

/* alignment: a power of two > 16. */
void *heap_alloc_aligned(heap_t *h, size_t alignment, size_t size) {
  if (BRISK_UNLIKELY(prof_active())) return heap_alloc_counted(h, size, alignment);
  if (size == 0) size = 1;
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  if (rounded < size) { errno = ENOMEM; return NULL; }
  void *p;
  if (rounded <= MEDIUM_MAX && alignment <= SLICE_SIZE) {
    /* A class whose size is a multiple of the alignment: its blocks are
     * aligned because pages start on 64 KiB boundaries (size_class.h). */
    unsigned c = size_to_class(rounded);
    if (class_size(c) % alignment == 0) {
      p = alloc_class(h, c);
      if (p == NULL) errno = ENOMEM;
      return p;
    }
  }
  p = alloc_large_or_huge(h, size, alignment, false);
  if (p == NULL) errno = ENOMEM;
  return p;
}

/* ---------------------------------------------------------------------------
 * Sampling for the heap profiler (profile.h). While it is on, every
 * allocation that reaches the functions above comes here and is counted
 * against its class's countdown (large and huge blocks share one), except
 * a block of a class list that prof_expose counted when it handed the list
 * to the inline path. The allocation that brings a countdown to zero is
 * sampled: it is served as a large block (or huge, as it would be anyway)
 * whose descriptor names its record. After an ordinary allocation of a
 * class with an inline path, its current page's list is cut where the
 * countdown will run out.
 * ------------------------------------------------------------------------- */
/* The current page of inline class c ran dry (its list ended, or was cut
 * by the profiler) and the owner's frees wait on its local list: they
 * become the list, and the first is taken, as page_refill_pop does for a
 * heap that does not sample, with the housekeeping on every
 * REFILL_SLOW_EVERY-th refill. NULL: the whole slow path. */
static block_t *sampling_refill(heap_t *h, page_t *pg) {
  if (!(pg->free == page_list_end(pg) || pg->free == page_list_cut(pg)) ||
      !page_holds_block_inline(pg, pg->local_free) || ++h->refill_tick % REFILL_SLOW_EVERY == 0)
    return NULL;
  page_take_local_free(pg);
  return page_pop(pg);
}

static block_t *prof_refill(heap_t *h, page_t *pg) {
  prof_heap_t *ph = h->prof;
  unsigned c = pg->size_class;
  if (ph == NULL || c == 0 || h->queues[c].first != pg || h->cache_path_max != DIRECT_MAX ||
      ph->epoch != sampler_epoch())
    return NULL;
  int64_t left = ph->left[c] - (int64_t)class_size(c);
  if (left <= 0) return NULL; /* the sample: the whole way */
  block_t *b = sampling_refill(h, pg);
  if (b == NULL) return NULL;
  ph->left[c] = left;
  prof_expose(ph, c, pg);
  return b;
}

static void *heap_alloc_counted(heap_t *h, size_t size, size_t alignment) {
  prof_heap_t *ph = prof_heap_of(h);
  /* What the allocation takes without sampling: class c (0: large or huge)
   * and the bytes it counts for. */
  unsigned c = 0;
  size_t n = size == 0 ? 1 : size, counted;
  if (alignment > 16) {
    size_t r = (n + alignment - 1) & ~(alignment - 1);
    if (r < n) {
      errno = ENOMEM;
      return NULL;
    }
    if (r <= MEDIUM_MAX && alignment <= SLICE_SIZE && class_size(size_to_class(r)) % alignment == 0)
      c = size_to_class(r);
  } else if (n <= MEDIUM_MAX) {
    c = size_to_class(n);
  }
  if (c != 0) {
    counted = class_size(c);
  } else {
    counted = prof_page_bytes(n);
    if (counted < n) {
      errno = ENOMEM;
      return NULL;
    }
  }
  bool inline_class = c != 0 && c < CLASS_CACHE_FIRST;
  void *p = NULL;
  if (ph != NULL) {
    page_t *pg = inline_class ? h->queues[c].first : NULL;
    if (pg != NULL && page_holds_block_inline(pg, pg->free)) return page_pop(pg); /* counted */
    ph->left[c] -= (int64_t)counted;
    unsigned which = ph->left[c] <= 0 && !ph->busy ? sampler_expired(ph, c) : 0;
    /* A guarded sample (guarded.h): blocks of a thread's heap only, which
     * are the malloc family's. */
    if ((which & SAMPLE_GUARD) && h->kind == HEAP_KIND_THREAD) p = guarded_alloc(size, alignment);
    if (p == NULL && (which & SAMPLE_PROFILE) && prof_recording()) {
      page_t *spg = NULL;
      /* A class with a cache: the block it would have given, in its page;
       * else (or when that page holds a sample) a large block. */
      if (c >= CLASS_CACHE_FIRST) p = page_sample_take(h, c, &spg);
      if (p == NULL) {
        p = alloc_large_or_huge(h, size, alignment, c != 0);
        if (p != NULL) spg = page_of(registry_lookup((uintptr_t)p), (uintptr_t)p);
      }
      if (p != NULL) {
        /* A large block sampled: its free by another thread must reach
         * this owner, not the background thread's parking (park_single),
         * which its flag says. */
        if (spg->flags & PAGE_LARGE) spg->flags |= PAGE_SAMPLE;
        prof_sampled(h, spg, size, c, counted);
      }
    } else if (which == 0 && pg != NULL && (p = sampling_refill(h, pg)) != NULL) {
      prof_expose(ph, c, pg);
      return p;
    }
  }
  if (p == NULL) { /* not sampled, or no memory for a span: served as usual */
    p = c != 0 ? alloc_class(h, c) : alloc_large_or_huge(h, size, alignment, false);
    if (p != NULL && inline_class && ph != NULL && h->queues[c].first != NULL)
      prof_expose(ph, c, h->queues[c].first);
  }
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  if (!h->segments.fresh_only) prof_poll();
  return p;
}
