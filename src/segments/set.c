/* A heap's set of segments, its lowest part: the release of the set's
 * lock, the directory that says which segments have free slices of which
 * kind, and segments joining the set (set.h). */
#include "segments/set.h"

#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "base/list.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/pool.h"
#include "segments/segment.h"

/* Every release of a set's lock: then the pool's surplus, if a segment
 * went there under the lock, goes back to the OS (no unmap under it). */
void set_unlock(segment_set_t *set) {
  lock_release(&set->lock);
  pool_poll();
}


/* ---------------------------------------------------------------------------
 * The set's directory (span.h, segment_dir_t): entry seg->dir_slot holds
 * seg's free, dirty and light masks. Every function here that changes
 * them while seg is in the set calls dir_sync before it lets the lock go;
 * span_find reads only the directory until it has chosen a segment.
 * ------------------------------------------------------------------------- */
void dir_sync(segment_set_t *set, segment_t *seg) {
  segment_dir_t *e = &set->dir[seg->dir_slot];
  e->free_slices = seg->free_slices;
  e->dirty_slices = seg->dirty_slices;
  e->light_slices = seg->light_slices;
}

/* Room for one more entry; false when the OS has no memory. The first
 * SET_DIR_INLINE entries are in the set itself (most threads' heaps never
 * need more: no system call); then a mapping, twice as large at each
 * growth. Called with the set's lock held, which it lets go around the
 * mmap and the old directory's munmap: no system call under the lock.
 * Only the set's owner adds segments, so while the lock is let go the
 * count can only fall. */
static bool dir_reserve(segment_set_t *set) {
  if (set->dir == NULL) {
    set->dir = set->dir_inline;
    set->dir_cap = SET_DIR_INLINE;
  }
  while (set->count >= set->dir_cap) {
    size_t cap = set->dir == set->dir_inline ? OS_PAGE_BYTES / sizeof(segment_dir_t) : set->dir_cap * 2;
    void *p;
    lock_release(&set->lock);
    int err = os_map_aligned(cap * sizeof(segment_dir_t), OS_PAGE_BYTES, &p);
    lock_acquire(&set->lock);
    if (err != 0) return false;
    segment_dir_t *old = set->dir;
    size_t old_cap = set->dir_cap;
    memcpy(p, old, set->count * sizeof(segment_dir_t));
    set->dir = (segment_dir_t *)p;
    set->dir_cap = cap;
    if (old != set->dir_inline) {
      /* Nobody reads the old one any more: every reader holds the lock. If
       * the OS refuses the unmap it stays mapped, unused. */
      lock_release(&set->lock);
      os_unmap(old, old_cap * sizeof(segment_dir_t));
      lock_acquire(&set->lock);
    }
  }
  return true;
}

static void dir_add(segment_set_t *set, segment_t *seg) {
  seg->dir_slot = (uint32_t)set->count;
  set->dir[set->count].seg = seg;
  set->count++;
  dir_sync(set, seg);
}

/* The last entry fills the gap. */
void dir_remove(segment_set_t *set, segment_t *seg) {
  size_t last = --set->count;
  if (seg->dir_slot != last) {
    set->dir[seg->dir_slot] = set->dir[last];
    set->dir[seg->dir_slot].seg->dir_slot = seg->dir_slot;
  }
}

/* Debug builds: the directory says what the segments say. */
void dir_check(const segment_set_t *set) {
  if (BRISK_DEBUG_LEVEL < 2) return;
  size_t n = 0;
  for (const segment_t *seg = set->segs.first; seg; seg = seg->next, n++) {
    const segment_dir_t *e = &set->dir[seg->dir_slot];
    brisk_assert_internal(seg->dir_slot < set->count && e->seg == seg);
    brisk_assert_internal(e->free_slices == seg->free_slices && e->dirty_slices == seg->dirty_slices &&
                          e->light_slices == seg->light_slices);
  }
  brisk_assert_internal(n == set->count);
}

/* A segment whose slices are all free goes to the pool; true if it went. */
bool set_note_free(segment_set_t *set, segment_t *seg) {
  if (seg->free_slices != ALL_PAGE_SLICES) return false;
  LIST_REMOVE(&set->segs, seg, next, prev);
  dir_remove(set, seg);
  pool_put(seg, false);
  return true;
}


/* seg (from the pool or new) joins the set. */
static void set_join_segment(segment_set_t *set, segment_t *seg) {
  seg->destroyed = 0;
  seg->heap_generation = set->heap_generation;
  seg->page_lists = set->page_lists;
  atomic_store_explicit(&seg->heap, set->heap, memory_order_relaxed);
  atomic_store_release(&seg->owner_tid, set->owner_tid);
  LIST_PUSH_FRONT(&set->segs, seg, next, prev);
  dir_add(set, seg);
  uint64_t waiting = seg->free_slices & seg->dirty_slices;
  if (waiting) {
    /* From the pool, not yet purged: its resident slices keep the deadline
     * they had there (the pool's purge stops following them). */
    seg->purge_slices = waiting;
    seg->purge_at_ms = seg->idle_since_ms + options_purge_delay_ms();
    if (seg->purge_at_ms == 0) seg->purge_at_ms = 1;
    set_deadline_lower(set, seg->purge_at_ms);
    background_schedule(seg->purge_at_ms, __builtin_popcountll(waiting) >= PURGE_WORTH_A_THREAD);
  }
}

/* A pooled segment joins the set (resident_only: one that may still be
 * resident, else none), or a new one (not resident_only); NULL if none. */
segment_t *set_add_segment(segment_set_t *set, bool resident_only) {
  if (!dir_reserve(set)) return NULL;
  segment_t *seg = resident_only ? pool_take_resident() : pool_take(!set->fresh_only);
  if (seg == NULL && !resident_only) {
    /* A new mapping, made without the lock (only the owner adds segments:
     * the directory's room reserved above is still there after) */
    lock_release(&set->lock);
    seg = segment_map();
    lock_acquire(&set->lock);
  }
  if (seg == NULL) return NULL;
  brisk_assert(set->count < set->dir_cap);
  set_join_segment(set, seg);
  return seg;
}

/* Lowers the set's next deadline to `at` (under the lock). */
void set_deadline_lower(segment_set_t *set, uint64_t at) {
  uint64_t next = set->next_purge_ms;
  if (next == 0 || at < next) field_store_relaxed(&set->next_purge_ms, at);
}

