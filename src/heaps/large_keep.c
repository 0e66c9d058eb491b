/* The large keep (large_keep.h). */
#include "heaps/large_keep.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"

/* A put into a keep not watched: the background thread is to look at it
 * a delay from now (a clock read once per watch, not per put). */
static BRISK_NOINLINE void large_keep_watch(heap_t *h) {
  atomic_store(&h->keep_watched, 1);
  uint64_t delay = options_purge_delay_ms();
  if (delay >= UINT64_MAX / 2) return; /* memory is never given back */
  background_schedule(os_now_ms() + delay, false);
}

bool large_keep_put(heap_t *h, page_t *span) {
  size_t n = span->slice_count;
  if (BRISK_HARDENED || h->kind != HEAP_KIND_THREAD || h->tid == 0 || n > LARGE_KEEP_SPAN_MAX) return false;
  uint32_t k = h->keep_n[n - 1];
  if (k == LARGE_KEEP_DEPTH || h->keep_slices + n > LARGE_KEEP_SLICES || options_purge_delay_ms() == 0)
    return false;
  span_mark_kept(span);
  /* Sequentially consistent, as the load of the watch after it: against
   * the background thread's clear of the watch and its loads of the slots
   * after it, one of the two sees the other (large_keep_idle). The span's
   * marks are released with it to the thread that takes it. */
  atomic_store(&h->keep[n - 1][k], span);
  h->keep_n[n - 1] = (uint8_t)(k + 1);
  h->keep_slices += (uint32_t)n;
  if (!atomic_load(&h->keep_watched)) large_keep_watch(h);
  return true;
}

page_t *large_keep_take(heap_t *h, size_t slices) {
  if (slices > LARGE_KEEP_SPAN_MAX) return NULL;
  _Atomic(page_t *) *slot = h->keep[slices - 1];
  for (uint32_t k = h->keep_n[slices - 1]; k-- > 0;) {
    h->keep_n[slices - 1] = (uint8_t)k;
    h->keep_slices -= (uint32_t)slices; /* taken here, or by the background thread */
    if (atomic_load_relaxed(&slot[k]) == NULL) continue;
    page_t *span = atomic_exchange_explicit(&slot[k], NULL, memory_order_acquire);
    if (span != NULL) {
      span_mark_taken(span);
      return span;
    }
  }
  return NULL;
}

void large_keep_flush(heap_t *h) {
  for (size_t n = 1; n <= LARGE_KEEP_SPAN_MAX; n++) {
    page_t *span;
    while ((span = large_keep_take(h, n)) != NULL) span_free_large(&h->segments, span);
  }
}

/* Slots that hold a span, each seen as it is now (under the set's lock,
 * which keeps two looks apart); take: those that held the same span at
 * the last look go back to the set. */
static bool large_keep_look(heap_t *h, bool take) {
  bool held = false;
  for (size_t n = 0; n < LARGE_KEEP_SPAN_MAX; n++) {
    for (size_t k = 0; k < LARGE_KEEP_DEPTH; k++) {
      _Atomic(page_t *) *slot = &h->keep[n][k];
      page_t *span = atomic_load(slot);
      /* acquire: the owner's marks of the span, stored before it */
      if (take && span != NULL && span == h->keep_seen[n][k] &&
          atomic_compare_exchange_strong_explicit(slot, &span, NULL, memory_order_acquire, memory_order_relaxed)) {
        span_free_kept_held(&h->segments, span);
        STAT_COUNT(large_keep_returned, 1);
        span = NULL;
      }
      if (take) h->keep_seen[n][k] = span;
      held |= span != NULL;
    }
  }
  return held;
}

uint64_t large_keep_idle(heap_t *h, uint64_t now) {
  if (!atomic_load(&h->keep_watched)) return 0;
  uint64_t delay = options_purge_delay_ms();
  if (delay >= UINT64_MAX / 2) return 0;
  if (!lock_try_acquire(&h->segments.lock)) return now + PURGE_RETRY_MS;
  bool held = large_keep_look(h, true);
  set_unlock(&h->segments);
  if (!held) {
    /* A store then loads of the slots: a put's store then load of the
     * watch either sees it cleared and watches again, or is seen here. */
    atomic_store(&h->keep_watched, 0);
    if (!large_keep_look(h, false)) return 0;
    atomic_store(&h->keep_watched, 1);
  }
  return now + delay;
}
