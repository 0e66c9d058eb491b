/* Walks over every heap, the pool and the huge cache: the figures of
 * mallinfo and the statistics, malloc_trim, a new purge delay.
 *
 * Heaps are never unmapped and their list only grows, so it is walked
 * without a lock; each heap's segments are read or changed under its set's
 * lock (span.h), which the owner takes only for page events. The walks
 * over owned heaps hold the heap-list lock as well: fork takes it, so no
 * fork happens while a set's lock is held here (the forking thread's own
 * heap would keep it locked in the child). Heaps being destroyed or reused
 * are safe to lock (segment_set_reset); orphaned heaps (a fork's child)
 * may have been mid-update and are left alone. */
#include "heaps/usage.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/huge.h"
#include "segments/pool.h"
#include "segments/span.h"

#define LOAD(f) atomic_load_explicit(&brisk_stats.f, memory_order_relaxed)

/* A heap whose set may hold segments and is consistent. */
static bool heap_has_set(const heap_t *h) {
  int s = atomic_load_relaxed(&h->state);
  return s == HEAP_OWNED || s == HEAP_ABANDONED || s == HEAP_BUSY;
}

static int64_t slice_bytes(uint64_t mask) {
  return (int64_t)__builtin_popcountll(mask) * (int64_t)SLICE_SIZE;
}

/* h's figures, its set's lock held; resident: free slices not purged. */
static void set_figures(heap_t *h, usage_heap_t *f, int64_t *resident) {
  segment_set_t *set = &h->segments;
  for (segment_t *seg = set->segs.first; seg; seg = seg->next) {
    /* Slices the purger holds (purging) are free ones on their way out. */
    uint64_t free_mask = (seg->free_slices | seg->purging) & ALL_PAGE_SLICES;
    f->segments++;
    f->in_use += slice_bytes(ALL_PAGE_SLICES & ~free_mask);
    f->free_bytes += slice_bytes(free_mask);
    f->free_runs += __builtin_popcountll(free_mask & ~(free_mask << 1));
    *resident += slice_bytes(seg->free_slices & seg->dirty_slices);
  }
  /* Spans in the span cache are in no free mask, but free and resident. */
  int64_t cached = (int64_t)set->cached_slices * (int64_t)SLICE_SIZE;
  f->in_use -= cached;
  f->free_bytes += cached;
  f->free_runs += set->cached_count;
  *resident += cached;
}

bool usage_heap(heap_t *h, usage_heap_t *out) {
  *out = (usage_heap_t){0, 0, 0, 0};
  int64_t resident = 0;
  heap_list_lock();
  if (heap_has_set(h)) {
    lock_acquire(&h->segments.lock);
    set_figures(h, out, &resident);
    lock_release(&h->segments.lock);
  }
  heap_list_unlock();
  return out->segments > 0;
}

void usage_collect(stats_usage_t *u) {
  usage_heap_t all = {0, 0, 0, 0};
  int64_t resident = 0;
  heap_list_lock();
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    if (!heap_has_set(h)) continue;
    lock_acquire(&h->segments.lock);
    set_figures(h, &all, &resident);
    lock_release(&h->segments.lock);
  }
  heap_list_unlock();
  int64_t in_use = all.in_use, free_bytes = all.free_bytes, chunks = all.free_runs;
  int64_t pooled, pool_bytes, pool_resident, cached, cached_bytes, tails;
  pool_usage(&pooled, &pool_bytes, &pool_resident);
  huge_usage(&cached, &cached_bytes, &tails);
  u->span_bytes = in_use;
  u->free_bytes = free_bytes + pool_bytes + cached_bytes + tails;
  u->free_resident_bytes = resident + pool_resident + cached_bytes + tails;
  u->free_chunks = chunks + pooled + cached;
  int64_t huge = LOAD(huge_bytes) - tails; /* two sources: may disagree for a moment */
  u->huge_block_bytes = huge < 0 ? 0 : huge;
}

bool usage_trim(heap_t *mine) {
  /* What went back: bytes purged and unmaps the OS did not refuse */
  int64_t purged = LOAD(purged_bytes), unmaps = LOAD(munmap_calls) - LOAD(unmap_failures);
  if (mine != NULL) heap_collect(mine, true);
  /* Other owners may be running: their free slices only, under their lock
   * (their class caches and empty current pages are theirs to give back). */
  heap_list_lock();
  for (heap_t *h = heap_first(); h; h = h->next_all)
    if (h != mine && atomic_load_relaxed(&h->state) == HEAP_OWNED) segment_set_purge_forced(&h->segments);
  heap_list_unlock();
  /* Heaps without a thread: served whole, as the purger does. Not under
   * the heap-list lock: freeing their inbox may start the purger thread,
   * which allocates. A fork meanwhile finds such a heap BUSY and orphans
   * it in the child. */
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    int expected = HEAP_ABANDONED;
    if (atomic_load_relaxed(&h->state) != expected) continue;
    if (!atomic_cas_strong_acq_rel(&h->state, &expected, HEAP_BUSY)) continue;
    heap_drain_inbox(h);
    heap_abandoned_tidy(h, 0, true);
    segment_set_purge_forced(&h->segments);
    atomic_store_release(&h->state, HEAP_ABANDONED);
  }
  segments_maintain(os_now_ms(), true);
  return LOAD(purged_bytes) != purged || LOAD(munmap_calls) - LOAD(unmap_failures) != unmaps;
}

uint64_t usage_reschedule(uint64_t now) {
  uint64_t delay = options_purge_delay_ms(), next = 0;
  heap_list_lock();
  for (heap_t *h = heap_first(); h; h = h->next_all)
    if (heap_has_set(h)) next = deadline_earlier(next, segment_set_reschedule(&h->segments, now, delay));
  heap_list_unlock();
  return next;
}
