/* Heap objects: creation, housekeeping, the background round, abandonment
 * and adoption (allocation beyond the inline path: heap_alloc.c; frees
 * from other threads: remote.c). */
#include <errno.h>
#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "heaps/heap.h"
#include "heaps/large_keep.h"
#include "heaps/park.h"
#include "heaps/sample.h"
#include "os/platform.h"
#include "profiler/profiler.h"
#include "runtime/background.h"
#include "runtime/options.h"

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

/* Memory for heaps and their samplers, which live as long as the
 * process: whole cache lines of a slice mapped for them. */
void *heap_meta_take(size_t size) {
  size_t need = (size + BRISK_CACHELINE - 1) & ~(size_t)(BRISK_CACHELINE - 1);
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
  void *r = meta_next;
  meta_next += need;
  meta_left -= need;
  lock_release(&heap_meta_lock);
  return r;
}

static heap_t *heap_storage_new(void) {
  bool expected = false;
  if (atomic_compare_exchange_strong(&main_heap_used, &expected, true)) return &main_heap_storage;
  return heap_meta_take(sizeof(heap_t));
}

static void heap_init_fields(heap_t *h, uint32_t kind, uintptr_t tid) {
  for (size_t i = 0; i < DIRECT_SLOTS; i++) h->direct[i] = &brisk_empty_page;
  memset(h->queues, 0, sizeof(h->queues));
  memset(&h->full, 0, sizeof(h->full));
  /* A thread's heap is never destroyed: its pages can take remote frees
   * on lists of their own (a first-class heap's go through the inbox,
   * whose tags keep a free racing the heap's destruction out of it). */
  segment_set_reset(&h->segments, h, tid, kind == HEAP_KIND_THREAD);
  h->segments.heap_generation = h->generation;
  memset(h->outbox, 0, sizeof(h->outbox));
  h->outbox_pending = 0;
  h->tid = tid;
  h->kind = kind;
  h->cache_path_max = MEDIUM_MAX;
  h->refill_mask = h->sampler != NULL ? 0 : REFILL_SLOW_EVERY - 1; /* a reused heap keeps its sampling */
  class_cache_init(h);
}

/* A heap that changed hands (reused, or adopted, whose inbox its adopter
 * drains next) starts with its inbox unwatched: a flag left set by the
 * life or the owner before would keep the first push into its empty inbox
 * from scheduling the background thread's look (park_watch), and a look
 * at a heap that was not owned then was passed by. Cleared once the heap
 * is OWNED: a round running since the heap was last owned may still set it
 * again, and then looks at it once more. */
static void heap_handed_over(heap_t *h) { atomic_store(&h->inbox_watched, 0); }

/* A destroyed first-class heap is reused whole: its generation lives on,
 * so batches still addressed to its former life are dropped. */
static heap_t *heap_reuse_free(uint32_t kind, uintptr_t tid) {
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    if (h->kind != kind || atomic_load_relaxed(&h->state) != HEAP_FREE) continue;
    int expected = HEAP_FREE;
    if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) continue;
    heap_init_fields(h, kind, tid);
    atomic_store_release(&h->state, HEAP_OWNED);
    heap_handed_over(h);
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
    h->left_ms = 0; /* what its thread left is the new owner's */
    segment_set_set_owner(&h->segments, tid);
    atomic_store_release(&h->state, HEAP_OWNED);
    heap_handed_over(h);
    STAT_COUNT(heaps_adopted, 1);
    STAT_LEVEL(heaps, 1);
    heap_drain_inbox(h);
    return h;
  }
  return NULL;
}

void heaps_abandoned_give_back(bool force) {
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    int expected = HEAP_ABANDONED;
    if (atomic_load_relaxed(&h->state) != expected) continue;
    /* A heap held BUSY is being served: its server tidies it. */
    if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) continue;
    heap_abandoned_tidy(h, 0, force);
    atomic_store_release(&h->state, HEAP_ABANDONED);
  }
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
      next = deadline_earlier(next, large_keep_idle(h, now, false));
    } else if (s == HEAP_ABANDONED) {
      /* No owner: serve it whole, as a freeing thread would. */
      int expected = HEAP_ABANDONED;
      if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) {
        next = deadline_earlier(next, now + PURGE_RETRY_MS);
        continue;
      }
      heap_drain_inbox(h);
      next = deadline_earlier(next, heap_abandoned_tidy(h, now, false));
      next = deadline_earlier(next, segment_set_purge_idle(&h->segments, now));
      atomic_store_release(&h->state, HEAP_ABANDONED);
      /* A push that landed after the drain, whose pusher saw the heap BUSY
       * and left it: the watch keeps a round coming for it. */
      next = deadline_earlier(next, park_idle_inbox(h, now));
    } else if (s == HEAP_BUSY && atomic_load(&h->inbox_watched)) {
      /* Another thread serves it (an exiting owner's abandon, a freeing
       * thread's serve). A push that landed after its drain watched the
       * inbox and scheduled this look; passed by, the look would be used
       * up and the serve would leave the heap ABANDONED with the push's
       * blocks in its inbox and no look to come. Come back once the serve
       * is done. */
      next = deadline_earlier(next, now + PURGE_RETRY_MS);
    }
  }
  next = deadline_earlier(next, prof_background(now));
  return deadline_earlier(next, segments_maintain(now, false));
}

/* ---------------------------------------------------------------------------
 * Housekeeping: run on the slow path when a page runs dry.
 * ------------------------------------------------------------------------- */
void heap_housekeeping(heap_t *h) {
  atomic_bump_single_writer(&h->alive, 1);
  background_poll();
  heap_drain_inbox(h);
  heap_flush_outbox(h);
  /* The purge reads the clock: on every eighth slow path only, which on a
   * workload that runs dry at every other allocation saves a clock read
   * per page; a purge waits for 8 slow paths at most beyond its delay. */
  if (++h->housekeeping_tick % HOUSEKEEPING_PURGE_EVERY == 0) {
    segment_set_purge(&h->segments, false);
    /* With no background thread, the owner gives back what its keep held
     * unused (the look of the background thread's, made here). */
    if (atomic_load_relaxed(&h->keep_watched) && !background_running()) large_keep_idle(h, os_now_ms(), true);
    if (h->kind == HEAP_KIND_THREAD && !sampling_active()) {
      h->cache_path_max = MEDIUM_MAX;
      h->refill_mask = REFILL_SLOW_EVERY - 1;
    }
  }
}

/* heap_collect; warm: but for the class cache and each class's current
 * page (heap_abandon). */
static void heap_collect_but(heap_t *h, bool force, bool warm) {
  heap_drain_inbox(h); /* first: a marked block there is checked against the page lists as they are */
  heap_collect_remote(h);
  heap_flush_outbox(h);
  if (!warm) {
    class_cache_flush(h);
    heap_retire_empty_heads(h);
  }
  large_keep_flush(h); /* after the drain, which may keep spans */
  span_cache_flush(&h->segments);
  segment_set_purge(&h->segments, force);
  heap_stats_publish(h);
  background_poll();
}

void heap_collect(heap_t *h, bool force) { heap_collect_but(h, force, false); }

void heap_abandon(heap_t *h) {
  /* A thread that starts next most often adopts this heap (a thread per
   * request): its class cache and each class's current page, empty or
   * not, stay for it, warm, rather than go back to be found again. The
   * background thread gives them back once a purge delay has passed with
   * no thread adopting the heap (heap_abandoned_tidy); without it running
   * they go back now. */
  uint64_t delay = options_purge_delay_ms();
  bool warm = delay != 0 && background_running();
  heap_collect_but(h, false, warm);
  if (warm) {
    h->left_ms = os_now_ms() | 1; /* never 0 */
    background_schedule(h->left_ms + delay, false);
  }
  /* After the collect, whose drain may bring pages back from the full
   * list with their lists open: from here on, frees go to the inbox. */
  heap_close_remote(h);
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
  sample_heap_gone(h);
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
