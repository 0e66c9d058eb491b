/* The large keep (large_keep.h). */
#include "heaps/large_keep.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"

/* Whether the keep is on: the process's asymmetric fence registered (1),
 * not yet tried (0), or refused (2: then no thread keeps spans). */
static _Atomic(int) keep_fence;

/* The owner's side of the handshake: busy, then a look at frozen, with only
 * a compiler barrier between (the background thread's fence orders them
 * against its own store and load). false: the background thread is
 * looking, or about to: the operation goes under the set's lock instead. */
BRISK_INLINE bool keep_enter(heap_t *h) {
  atomic_store_relaxed(&h->keep_busy, 1);
  atomic_signal_fence(memory_order_seq_cst);
  /* acquire: the slots the background thread emptied before it let go */
  if (BRISK_LIKELY(!atomic_load_explicit(&h->keep_frozen, memory_order_acquire))) return true;
  atomic_store_relaxed(&h->keep_busy, 0);
  return false;
}

BRISK_INLINE void keep_leave(heap_t *h) {
  atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&h->keep_busy, 0, memory_order_release);
}

/* A put into a keep not watched: the background thread is to look at it
 * a delay from now (a clock read once per watch, not per put). */
static BRISK_NOINLINE bool large_keep_watch(heap_t *h) {
  atomic_store_relaxed(&h->keep_watched, 1);
  uint64_t delay = options_purge_delay_ms();
  if (delay < UINT64_MAX / 2) background_schedule(os_now_ms() + delay, false); /* else never given back */
  return true;
}

/* The put itself, by the owner inside the handshake or under the lock:
 * true when the keep was not watched. */
BRISK_INLINE bool keep_push(heap_t *h, page_t *span, size_t n, uint32_t k) {
  span_mark_kept(span);
  /* release: the marks, for the thread that takes the span */
  atomic_store_explicit(&h->keep[n - 1][k], span, memory_order_release);
  h->keep_n[n - 1] = (uint8_t)(k + 1);
  h->keep_slices += (uint32_t)n;
  return !atomic_load_relaxed(&h->keep_watched);
}

/* The fence registered, or known refused: the first answer stands. */
static void keep_fence_register(void) {
  int v = 0;
  if (atomic_load_relaxed(&keep_fence) == 0)
    atomic_compare_exchange_strong(&keep_fence, &v, os_fence_register() ? 1 : 2);
}

void large_keep_init(void) {
  if (!BRISK_HARDENED) keep_fence_register();
}

/* The put under the set's lock: the background thread is looking, or
 * (first) the process's fence is not registered yet. false: not kept. */
static BRISK_NOINLINE bool keep_put_locked(heap_t *h, page_t *span, size_t n, uint32_t k) {
  keep_fence_register();
  if (atomic_load_relaxed(&keep_fence) != 1) return false;
  lock_acquire(&h->segments.lock);
  bool unwatched = keep_push(h, span, n, k);
  set_unlock(&h->segments);
  if (unwatched) large_keep_watch(h);
  return true;
}

bool large_keep_put(heap_t *h, page_t *span) {
  size_t n = span->slice_count;
  if (BRISK_HARDENED || h->kind != HEAP_KIND_THREAD || h->tid == 0 || h->keep_off || n > LARGE_KEEP_SPAN_MAX)
    return false;
  uint32_t k = h->keep_n[n - 1];
  if (k == LARGE_KEEP_DEPTH || h->keep_slices + n > LARGE_KEEP_SLICES || options_purge_delay_ms() == 0)
    return false;
  int on = atomic_load_relaxed(&keep_fence);
  if (BRISK_UNLIKELY(on != 1)) return on == 0 && keep_put_locked(h, span, n, k);
  if (BRISK_UNLIKELY(!keep_enter(h))) return keep_put_locked(h, span, n, k);
  bool unwatched = keep_push(h, span, n, k);
  keep_leave(h);
  if (BRISK_UNLIKELY(unwatched)) return large_keep_watch(h);
  return true;
}

/* The pop itself (inside the handshake or under the lock): the newest span
 * of `slices` slices; a slot found empty below keep_n was emptied by the
 * background thread (its slices are counted out here). */
static page_t *keep_pop(heap_t *h, size_t slices) {
  _Atomic(page_t *) *slot = h->keep[slices - 1];
  for (uint32_t k = h->keep_n[slices - 1]; k-- > 0;) {
    h->keep_n[slices - 1] = (uint8_t)k;
    h->keep_slices -= (uint32_t)slices;
    /* acquire: the marks the span was pushed with */
    page_t *span = atomic_load_explicit(&slot[k], memory_order_acquire);
    if (span != NULL) {
      atomic_store_relaxed(&slot[k], NULL);
      return span;
    }
  }
  return NULL;
}

static BRISK_NOINLINE page_t *keep_pop_locked(heap_t *h, size_t slices) {
  lock_acquire(&h->segments.lock);
  page_t *span = keep_pop(h, slices);
  set_unlock(&h->segments);
  return span;
}

page_t *large_keep_take(heap_t *h, size_t slices) {
  if (slices > LARGE_KEEP_SPAN_MAX || h->keep_n[slices - 1] == 0) return NULL;
  page_t *span;
  if (BRISK_LIKELY(keep_enter(h))) {
    span = keep_pop(h, slices);
    keep_leave(h);
  } else {
    span = keep_pop_locked(h, slices);
  }
  if (span != NULL) span_mark_taken(span);
  return span;
}

bool large_keep_grow(heap_t *h, page_t *span, size_t slices) {
  if (span_try_grow(&h->segments, span, slices)) return true;
  if (h->keep_slices == 0) return false;
  segment_t *seg = segment_of_page(span);
  size_t from = (size_t)(span - seg->pages) + span->slice_count, to = (size_t)(span - seg->pages) + slices;
  bool freed = false;
  /* Under the set's lock the background thread cannot look: the slots are
   * the owner's without the handshake. A slot emptied here is counted out
   * when a pop passes it, as one the background thread emptied. */
  lock_acquire(&h->segments.lock);
  for (size_t n = 1; n <= LARGE_KEEP_SPAN_MAX; n++) {
    for (uint32_t k = 0; k < h->keep_n[n - 1]; k++) {
      page_t *s = atomic_load_relaxed(&h->keep[n - 1][k]);
      size_t at = s != NULL && segment_of_page(s) == seg ? (size_t)(s - seg->pages) : SIZE_MAX;
      if (at == SIZE_MAX || at >= to || at + n <= from) continue;
      atomic_store_relaxed(&h->keep[n - 1][k], NULL);
      span_mark_taken(s);
      span_free_large_held(&h->segments, s);
      freed = true;
    }
  }
  set_unlock(&h->segments);
  return freed && span_try_grow(&h->segments, span, slices);
}

void large_keep_flush(heap_t *h) {
  lock_acquire(&h->segments.lock);
  for (size_t n = 1; n <= LARGE_KEEP_SPAN_MAX; n++) {
    page_t *span;
    while ((span = keep_pop(h, n)) != NULL) {
      span_mark_taken(span);
      span_free_large_held(&h->segments, span);
    }
  }
  /* Empty now: no look is owed. Cleared here, the watch cannot outlive
   * the heap's owner: a thread that adopts the heap later schedules its
   * own look with its first put (a watch left set would make that put
   * schedule none). */
  atomic_store_relaxed(&h->keep_watched, 0);
  set_unlock(&h->segments);
}

/* Under the set's lock, with the owner out of the slots: each slot that
 * held the same span at the last look gives it back: purged at once when
 * the owner has been idle since then (no slow path: `alive`), else to the
 * set, whose next spans of any size reuse its memory before its purge.
 * The rest are seen for the next look. true: a span is still kept. */
static bool keep_look(heap_t *h) {
  bool held = false;
  uint32_t alive = atomic_load_relaxed(&h->alive);
  bool idle = alive == h->keep_alive_seen;
  h->keep_alive_seen = alive;
  for (size_t n = 0; n < LARGE_KEEP_SPAN_MAX; n++) {
    for (size_t k = 0; k < LARGE_KEEP_DEPTH; k++) {
      _Atomic(page_t *) *slot = &h->keep[n][k];
      page_t *span = atomic_load_explicit(slot, memory_order_acquire);
      if (span != NULL && span == h->keep_seen[n][k]) {
        atomic_store_relaxed(slot, NULL);
        span_free_kept_held(&h->segments, span, idle);
        STAT_COUNT(large_keep_returned, 1);
        span = NULL;
      }
      h->keep_seen[n][k] = span;
      held |= span != NULL;
    }
  }
  if (!held) atomic_store_relaxed(&h->keep_watched, 0);
  return held;
}

uint64_t large_keep_idle(heap_t *h, uint64_t now, bool by_owner) {
  if (!atomic_load_relaxed(&h->keep_watched)) return 0;
  uint64_t delay = options_purge_delay_ms();
  if (delay >= UINT64_MAX / 2) return 0;
  if (!lock_try_acquire(&h->segments.lock)) return now + PURGE_RETRY_MS;
  if (!by_owner) {
    /* The other side of the handshake: frozen, then the fence, then a look
     * at busy. An owner inside an operation is seen busy (its store came
     * before the fence reached it); one that starts after sees frozen and
     * waits for the lock. */
    atomic_store_relaxed(&h->keep_frozen, 1);
    if (!os_fence_all()) {
      /* Nothing is ordered: the keep is off from now on (what is kept
       * waits for its owner's next large block or collect). */
      atomic_store_relaxed(&keep_fence, 2);
      atomic_store_explicit(&h->keep_frozen, 0, memory_order_release);
      set_unlock(&h->segments);
      return 0;
    }
    if (atomic_load_relaxed(&h->keep_busy)) {
      atomic_store_explicit(&h->keep_frozen, 0, memory_order_release);
      set_unlock(&h->segments);
      return now + PURGE_RETRY_MS;
    }
  }
  bool held = keep_look(h);
  if (!by_owner) atomic_store_explicit(&h->keep_frozen, 0, memory_order_release);
  set_unlock(&h->segments);
  return held ? now + delay : 0;
}
