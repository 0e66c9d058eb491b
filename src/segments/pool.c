/* The pool of empty segments. Taken and put under one lock, which is never
 * held across a system call: a segment being purged stays in the list,
 * marked (`purging`), and is skipped by pool_take; a segment to unmap
 * leaves the list first. Newest first. */
#include "segments/pool.h"

#include "base/atomics.h"
#include "base/list.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/segment.h"

static brisk_lock_t pool_guard = BRISK_LOCK_INIT;
static segment_list_t pool_list;
static _Atomic(size_t) pool_count; /* read without the lock as a hint */
/* Of those, segments pool_take_resident may hand out, or will once they
 * are purged no more: not a destroyed heap's (fixed while pooled), with
 * slices that may be resident (dirty_slices). Changed under the lock; read
 * without it as a hint. */
static _Atomic(size_t) pool_resident;
/* A segment arrived since the last maintenance: pool_poll runs it. */
_Atomic(int) pool_wanted;

static bool seg_resident(const segment_t *seg) {
  return !seg->destroyed && (seg->dirty_slices & ALL_PAGE_SLICES) != 0;
}

void pool_lock(void) { lock_acquire(&pool_guard); }
void pool_unlock(void) { lock_release(&pool_guard); }
void pool_reset_lock(void) { lock_reset(&pool_guard); }

static void pool_insert_locked(segment_t *seg) {
  LIST_PUSH_FRONT(&pool_list, seg, next, prev);
  atomic_add_relaxed(&pool_count, 1);
  if (seg_resident(seg)) atomic_add_relaxed(&pool_resident, 1);
}

/* Segments one maintenance pass purges at most (the rest wait for the
 * next pass, which the caller's deadline brings). */
#define POOL_PURGES_PER_PASS 64

uint64_t pool_maintain(uint64_t now, bool force) {
  if (atomic_load_relaxed(&pool_count) == 0) return 0;
  uint64_t delay = options_purge_delay_ms();
  int64_t cache = option_load(segment_cache);
  size_t keep = cache < 0 ? 0 : (size_t)cache;
  segment_t *purge[POOL_PURGES_PER_PASS];
  size_t npurge = 0, seen = 0;
  segment_t *unmap = NULL;
  uint64_t next = 0;
  lock_acquire(&pool_guard);
  segment_t *seg = pool_list.first;
  while (seg) {
    segment_t *after = seg->next;
    seen++;
    bool due = force || now >= seg->idle_since_ms + delay;
    if (seg->purging) {
      /* another pass purges it right now */
    } else if ((seen > keep || seg->purge_refused) && (!seg->keep_until_due || due)) {
      /* The newest `keep` stay mapped (purged once due); the rest go back
       * to the OS at once, so RSS falls right after a burst, except the
       * segments of a destroyed heap, which go after the delay. */
      LIST_REMOVE(&pool_list, seg, next, prev);
      atomic_sub_relaxed(&pool_count, 1);
      if (seg_resident(seg)) atomic_sub_relaxed(&pool_resident, 1);
      seg->next = unmap;
      unmap = seg;
    } else if (seg->dirty_slices && due && npurge < POOL_PURGES_PER_PASS) {
      seg->purging = seg->dirty_slices & ALL_PAGE_SLICES;
      purge[npurge++] = seg;
    } else if (seg->dirty_slices || seg->keep_until_due) {
      uint64_t d = seg->idle_since_ms + delay;
      if (due) d = now + 1; /* left for the next pass */
      if (next == 0 || d < next) next = d;
    }
    seg = after;
  }
  lock_release(&pool_guard);
  uint64_t kept[POOL_PURGES_PER_PASS];
  for (size_t i = 0; i < npurge; i++) kept[i] = segment_purge_slices(purge[i], purge[i]->purging);
  segment_t *again = NULL; /* segments the OS refused to unmap */
  while (unmap) {
    segment_t *after = unmap->next;
    if (!segment_unmap(unmap)) {
      unmap->next = again;
      again = unmap;
    }
    unmap = after;
  }
  if (npurge || again) {
    lock_acquire(&pool_guard);
    for (size_t i = 0; i < npurge; i++) {
      bool resident = seg_resident(purge[i]);
      /* Slices the OS refused to purge (locked memory) keep their
       * contents: still dirty. Such a segment leaves the pool for the OS
       * (unmapping locked memory works) rather than stay resident. */
      purge[i]->dirty_slices = kept[i];
      purge[i]->purge_slices = 0;
      purge[i]->purge_later = 0;
      purge[i]->purging = 0;
      if (resident && !seg_resident(purge[i])) atomic_sub_relaxed(&pool_resident, 1);
      if (kept[i]) {
        purge[i]->purge_refused = 1;
        if (next == 0 || now + 1 < next) next = now + 1; /* unmapped at the next pass */
      }
    }
    /* Refused unmaps stay pooled, tried again at the next pass. */
    while (again) {
      segment_t *after = again->next;
      again->idle_since_ms = now;
      pool_insert_locked(again);
      again = after;
    }
    lock_release(&pool_guard);
  }
  return next;
}

void pool_put(segment_t *seg, bool keep_until_due) {
  seg->keep_until_due = keep_until_due;
  seg->purge_refused = 0;
  /* The pool purges by idle time; a set that takes it starts afresh. */
  seg->purge_slices = 0;
  seg->purge_later = 0;
  seg->purge_at_ms = 0;
  atomic_store_relaxed(&seg->owner_tid, 0);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  uint64_t now = os_now_ms();
  seg->idle_since_ms = now;
  lock_acquire(&pool_guard);
  pool_insert_locked(seg);
  lock_release(&pool_guard);
  /* The caller holds its set's lock: the surplus is unmapped by its
   * pool_poll, after it lets the lock go. */
  atomic_store_relaxed(&pool_wanted, 1);
}

void pool_poll_slow(void) {
  if (!atomic_exchange_explicit(&pool_wanted, 0, memory_order_relaxed)) return;
  uint64_t next = pool_maintain(os_now_ms(), false);
  if (next) background_schedule(next, true);
}

static void pool_remove_locked(segment_t *seg) {
  LIST_REMOVE(&pool_list, seg, next, prev);
  atomic_sub_relaxed(&pool_count, 1);
  if (seg_resident(seg)) atomic_sub_relaxed(&pool_resident, 1);
}

segment_t *pool_take(bool take_destroyed) {
  if (atomic_load_relaxed(&pool_count) == 0) return NULL;
  lock_acquire(&pool_guard);
  /* A destroyed heap's segment last: while it waits, a late free of one
   * of its blocks is reported as such. */
  segment_t *seg = NULL;
  for (segment_t *s = pool_list.first; s; s = s->next) {
    if (s->purging) continue;
    if (!s->destroyed) { seg = s; break; }
    if (seg == NULL && take_destroyed) seg = s;
  }
  if (seg) pool_remove_locked(seg);
  lock_release(&pool_guard);
  return seg;
}

segment_t *pool_take_resident(void) {
  if (atomic_load_relaxed(&pool_resident) == 0) return NULL;
  lock_acquire(&pool_guard);
  segment_t *seg = pool_list.first;
  while (seg && (seg->purging || !seg_resident(seg))) seg = seg->next;
  if (seg) pool_remove_locked(seg);
  lock_release(&pool_guard);
  return seg;
}

void pool_usage(int64_t *segments, int64_t *free_bytes, int64_t *resident_bytes) {
  int64_t n = 0, resident = 0;
  lock_acquire(&pool_guard);
  for (segment_t *seg = pool_list.first; seg; seg = seg->next) {
    n++;
    /* Slices being purged right now (purging) count as gone. */
    uint64_t dirty = seg->dirty_slices & ~seg->purging & ALL_PAGE_SLICES;
    resident += (int64_t)__builtin_popcountll(dirty) * (int64_t)SLICE_SIZE;
  }
  lock_release(&pool_guard);
  *segments = n;
  *free_bytes = n * (int64_t)(SLICES_PER_SEGMENT - SEGMENT_FIRST_SLICE) * (int64_t)SLICE_SIZE;
  *resident_bytes = resident;
}
