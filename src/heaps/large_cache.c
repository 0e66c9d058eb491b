/* A heap's own cache of large blocks' spans (large_cache.h). */
#include "heaps/large_cache.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"

/* The owner's view of slot i: empty. */
static void view_clear(large_cache_t *lc, unsigned i) {
  lc->held -= lc->slices[i];
  lc->used &= ~(1u << i);
  lc->of_slices[lc->slices[i]] &= (uint8_t)~(1u << i);
}

/* Slot i's span for its owner, or NULL when the background thread gave it
 * back; either way the slot leaves the owner's view. */
static page_t *slot_take(large_cache_t *lc, unsigned i) {
  view_clear(lc, i);
  return atomic_exchange_explicit(&lc->slot[i], NULL, memory_order_acquire);
}

page_t *large_cache_take(heap_t *h, size_t slices, size_t size) {
  large_cache_t *lc = &h->lcache;
  if (BRISK_HARDENED || slices > SPAN_CACHE_SPAN_MAX) return NULL;
  uint32_t m = lc->of_slices[slices];
  if (m == 0) return NULL;
  uint32_t usable = (uint32_t)OS_PAGE_CEIL(size);
  /* The span of the right slice count whose room (where the purge of its
   * tail may start: tail_pages, set under the set's lock) is the least at
   * or past the block's end (the first less than a tail worth purging
   * past it will do): handed over as it is, with the block's size.
   * What lies between the block's end and the room (less than a slice,
   * since the block needs every slice of the span) stays resident while
   * the block lives. None such: one of the count, resized under the set's
   * lock, which moves the room. */
  for (;;) {
    unsigned fit = LARGE_CACHE_SLOTS, any = 31u - (unsigned)__builtin_clz(m);
    uint32_t best = UINT32_MAX;
    for (uint32_t k = m; k != 0;) {
      unsigned i = 31u - (unsigned)__builtin_clz(k); /* high slots first: puts fill the low ones first */
      k &= ~(1u << i);
      uint32_t room = lc->room[i];
      if (room >= usable && room < best) {
        best = room, fit = i;
        if (room - usable < LARGE_TAIL_PURGE_MIN) break; /* as close as a tail worth purging */
      }
    }
    unsigned i = fit < LARGE_CACHE_SLOTS ? fit : any;
    m &= ~(1u << i);
    page_t *span = slot_take(lc, i);
    if (span != NULL) {
      span->flags = PAGE_IN_USE | PAGE_LARGE;
      if (i == fit) span->block_size = usable;
      else span_large_resize(&h->segments, span, size);
      return span;
    }
    if (m == 0) return NULL; /* the background thread gave them back */
  }
}

page_t *large_cache_take_span(heap_t *h, size_t slices) {
  large_cache_t *lc = &h->lcache;
  if (slices > SPAN_CACHE_SPAN_MAX) return NULL;
  for (uint32_t m = lc->of_slices[slices]; m != 0;) {
    unsigned i = 31u - (unsigned)__builtin_clz(m);
    m &= ~(1u << i);
    page_t *span = slot_take(lc, i);
    if (span != NULL) return span_reuse_kept(&h->segments, span);
  }
  return NULL;
}

/* Slots the background thread emptied leave the owner's view. */
static void view_sync(large_cache_t *lc) {
  for (uint32_t u = lc->used; u != 0; u &= u - 1) {
    unsigned i = (unsigned)__builtin_ctz(u);
    if (atomic_load_relaxed(&lc->slot[i]) == NULL) view_clear(lc, i);
  }
}

static BRISK_NOINLINE void watch(bool worth_a_thread) {
  uint64_t delay = options_purge_delay_ms();
  if (delay < UINT64_MAX / 2) background_schedule(os_now_ms() + delay, worth_a_thread);
}

#define ALL_SLOTS ((1u << LARGE_CACHE_SLOTS) - 1)

bool large_cache_put(heap_t *h, page_t *span) {
  large_cache_t *lc = &h->lcache;
  size_t n = span->slice_count;
  if (BRISK_HARDENED || n > SPAN_CACHE_SPAN_MAX) return false;
  if (lc->used == ALL_SLOTS || lc->held + n > LARGE_CACHE_SLICES) {
    /* Full in the owner's view: the slots are loaded again only if the
     * background thread gave spans back since the last look. */
    uint32_t gave = atomic_load_relaxed(&lc->gave_back);
    if (gave == lc->gave_back_seen) return false;
    lc->gave_back_seen = gave;
    view_sync(lc);
    if (lc->used == ALL_SLOTS || lc->held + n > LARGE_CACHE_SLICES) return false;
  }
  /* A thread serving an abandoned heap frees into it but never takes
   * from it; with a purge delay of 0 nothing is kept. */
  if (atomic_load_relaxed(&h->state) != HEAP_OWNED || options_purge_delay_ms() == 0) return false;
  unsigned i = (unsigned)__builtin_ctz(~lc->used);
  span_keep_large(span);
  lc->room[i] = (uint32_t)span->tail_pages * (uint32_t)OS_PAGE_BYTES;
  lc->slices[i] = (uint8_t)n;
  lc->held += (uint32_t)n;
  lc->used |= 1u << i;
  lc->of_slices[n] |= (uint8_t)(1u << i);
  /* Sequentially consistent, as the load of `watched` after it: either
   * the background thread's clearing of the flag comes first, and this
   * put sees it cleared, or its look at the slots after the clearing
   * sees this span (large_cache_idle). */
  atomic_store(&lc->slot[i], span);
  /* A round is scheduled for it; the background thread is started for
   * it once the cache holds LARGE_CACHE_WORTH_A_THREAD slices (below that,
   * as for the set's free slices, a thread that never calls brisk again
   * keeps them until it exits, if no background thread runs). */
  bool worth = lc->held >= LARGE_CACHE_WORTH_A_THREAD;
  if (BRISK_UNLIKELY(!atomic_load(&lc->watched))) {
    atomic_store(&lc->watched, 1);
    watch(worth);
  } else if (BRISK_UNLIKELY(worth && lc->held - n < LARGE_CACHE_WORTH_A_THREAD) && !background_running()) {
    watch(true);
  }
  return true;
}

void large_cache_flush(heap_t *h) {
  large_cache_t *lc = &h->lcache;
  if (lc->used == 0) return;
  lock_acquire(&h->segments.lock);
  while (lc->used != 0) {
    page_t *span = slot_take(lc, (unsigned)__builtin_ctz(lc->used));
    if (span != NULL) span_release_kept_locked(&h->segments, span);
  }
  set_unlock(&h->segments);
}

bool large_span_try_grow(heap_t *h, page_t *span, size_t slices) {
  if (span_try_grow(&h->segments, span, slices)) return true;
  if (h->lcache.used == 0) return false;
  large_cache_flush(h);
  return span_try_grow(&h->segments, span, slices);
}

/* The kept spans back to h's set, under its lock while h is owned (its
 * destruction empties the slots under the lock before its segments go):
 * those unused since the last look, or all. */
static void give_back(heap_t *h, uint64_t now, uint64_t delay, bool all) {
  large_cache_t *lc = &h->lcache;
  if (atomic_load_acquire(&h->state) != HEAP_OWNED) return;
  for (unsigned i = 0; i < LARGE_CACHE_SLOTS; i++) {
    page_t *v = all ? atomic_load_relaxed(&lc->slot[i]) : lc->seen[i];
    if (v == NULL || (!all && now < lc->seen_ms[i] + delay)) continue;
    if (!all) lc->seen[i] = NULL;
    if (atomic_load_relaxed(&lc->slot[i]) != v) continue; /* taken meanwhile */
    page_t *span = atomic_exchange_explicit(&lc->slot[i], NULL, memory_order_acquire);
    if (span == NULL) continue;
    span_release_kept_locked(&h->segments, span);
    atomic_add_relaxed(&lc->gave_back, 1);
    STAT_COUNT(large_kept_returned, 1);
  }
}

uint64_t large_cache_idle(heap_t *h, uint64_t now) {
  large_cache_t *lc = &h->lcache;
  if (!atomic_load_relaxed(&lc->watched)) return 0;
  uint64_t delay = options_purge_delay_ms();
  if (delay >= UINT64_MAX / 2) return 0;
  uint64_t next = 0;
  bool any = false, due = false;
  for (unsigned i = 0; i < LARGE_CACHE_SLOTS; i++) {
    page_t *v = atomic_load_relaxed(&lc->slot[i]);
    if (v == NULL) {
      lc->seen[i] = NULL;
      continue;
    }
    any = true;
    if (v != lc->seen[i]) { /* new since the last look */
      lc->seen[i] = v;
      lc->seen_ms[i] = now;
      next = deadline_earlier(next, now + delay);
    } else if (now >= lc->seen_ms[i] + delay) {
      due = true;
    } else {
      next = deadline_earlier(next, lc->seen_ms[i] + delay);
    }
  }
  if (!any) {
    /* A store then a load on each side (large_cache_put: the slot, then
     * the flag), sequentially consistent: no span waits unwatched. */
    atomic_store(&lc->watched, 0);
    for (unsigned i = 0; i < LARGE_CACHE_SLOTS; i++) {
      if (atomic_load(&lc->slot[i]) != NULL) {
        atomic_store(&lc->watched, 1);
        return now + delay;
      }
    }
    return 0;
  }
  if (!due) return next;
  if (!lock_try_acquire(&h->segments.lock)) return deadline_earlier(next, now + PURGE_RETRY_MS);
  give_back(h, now, delay, false);
  lock_release(&h->segments.lock);
  /* One more look, which clears the flag if the owner put nothing since. */
  return deadline_earlier(next, now + delay);
}

void large_cache_trim(heap_t *h) {
  if (!atomic_load_relaxed(&h->lcache.watched)) return;
  lock_acquire(&h->segments.lock);
  give_back(h, 0, 0, true);
  lock_release(&h->segments.lock);
}
