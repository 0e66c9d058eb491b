/* The pool of empty segments. Taken and put under one lock: a segment
 * changes hands once per 4 MiB, never on a fast path. Newest first. */
#include "pool.h"

#include "atomics.h"
#include "list.h"
#include "options.h"
#include "platform.h"
#include "segment.h"

static brisk_lock_t pool_guard = BRISK_LOCK_INIT;
static segment_list_t pool_list;
static _Atomic(size_t) pool_count; /* read without the lock as a hint */

void pool_lock(void) { lock_acquire(&pool_guard); }
void pool_unlock(void) { lock_release(&pool_guard); }
void pool_reset_lock(void) { lock_reset(&pool_guard); }

/* Under the lock. */
static void pool_maintain_locked(uint64_t now, bool force) {
  uint64_t delay = options_purge_delay_ms();
  size_t keep = brisk_options.segment_cache < 0 ? 0 : (size_t)brisk_options.segment_cache;
  size_t seen = 0;
  segment_t *seg = pool_list.first;
  while (seg) {
    segment_t *next = seg->next;
    seen++;
    bool due = force || now >= seg->idle_since_ms + delay;
    if (due && seg->dirty_slices) {
      segment_purge_slices(seg, seg->dirty_slices & ALL_PAGE_SLICES);
      seg->dirty_slices = 0;
      seg->purge_slices = 0;
      seg->purge_later = 0;
    }
    /* The newest `keep` stay mapped (purged once due); the rest go back to
     * the OS at once, so RSS falls right after a burst, except the segments
     * of a destroyed heap, which go after the delay. */
    if (seen > keep && (!seg->keep_until_due || due)) {
      LIST_REMOVE(&pool_list, seg, next, prev);
      atomic_sub_relaxed(&pool_count, 1);
      segment_unmap(seg);
    }
    seg = next;
  }
}

void pool_maintain(bool force) {
  if (atomic_load_relaxed(&pool_count) == 0) return;
  uint64_t now = os_now_ms();
  lock_acquire(&pool_guard);
  pool_maintain_locked(now, force);
  lock_release(&pool_guard);
}

void pool_put(segment_t *seg, bool keep_until_due) {
  seg->keep_until_due = keep_until_due;
  /* The pool purges by idle time; a set that takes it starts afresh. */
  seg->purge_slices = 0;
  seg->purge_later = 0;
  seg->purge_at_ms = 0;
  atomic_store_relaxed(&seg->owner_tid, 0);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  uint64_t now = os_now_ms();
  seg->idle_since_ms = now;
  lock_acquire(&pool_guard);
  LIST_PUSH_FRONT(&pool_list, seg, next, prev);
  atomic_add_relaxed(&pool_count, 1);
  pool_maintain_locked(now, false);
  lock_release(&pool_guard);
}

segment_t *pool_take(void) {
  if (atomic_load_relaxed(&pool_count) == 0) return NULL;
  lock_acquire(&pool_guard);
  segment_t *seg = pool_list.first;
  if (seg) {
    LIST_REMOVE(&pool_list, seg, next, prev);
    atomic_sub_relaxed(&pool_count, 1);
  }
  lock_release(&pool_guard);
  return seg;
}
