/* A heap's set of segments, its upper part (set.h): the purge of free
 * slices on their deadlines, by the owner or the background thread (in
 * claims, so that neither holds the lock across a system call), the
 * release of a destroyed heap's segments, its huge list, a new owner, a
 * reset, and the calls that act on every heap. */
#include "segments/span.h"

#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "base/list.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/huge.h"
#include "segments/pool.h"
#include "segments/segment.h"

uint64_t segments_maintain(uint64_t now, bool force) {
  uint64_t a = pool_maintain(now, force), b = huge_maintain(now, force);
  return deadline_earlier(a, b);
}

/* Purge the resident tails of the large blocks in seg->tails (under the
 * set's lock: a block grows into its tail under it too). */
static void segment_purge_tails(segment_t *seg) {
  for (uint64_t t = seg->tails; t; t &= t - 1) {
    page_t *pg = &seg->pages[__builtin_ctzll(t)];
    /* (relaxed: the large keep marks a span it keeps, PAGE_LARGE left set,
     * and gives it to a smaller block, without the lock) */
    uint32_t usable = field_load_relaxed(&pg->block_size); /* (it may shrink: the tail only grows) */
    if ((field_load_relaxed(&pg->flags) & PAGE_LARGE) && pg->span_bytes >= usable + LARGE_TAIL_PURGE_MIN)
      os_purge(pg->start + usable, pg->span_bytes - usable);
  }
  seg->tails = 0;
}

/* The slices of seg to purge at `now` (all waiting ones when force), with
 * the segment's purge state moved on as if they were purged: those freed
 * since the deadline was set wait one more delay. */
static uint64_t segment_take_due(segment_t *seg, uint64_t now, bool force) {
  if (seg->purge_slices == 0 && seg->purge_later == 0 && (seg->tails | seg->tails_later) == 0) {
    /* Every waiting slice was taken for a span again: no deadline left. */
    seg->purge_at_ms = 0;
    return 0;
  }
  if (!force && now < seg->purge_at_ms) return 0;
  /* A tail is purged once its block has lived through a whole delay: most
   * large blocks live far shorter, and their tails would only fault in
   * again under the next block carved there. */
  if (force) seg->tails |= seg->tails_later, seg->tails_later = 0;
  if (seg->tails) segment_purge_tails(seg);
  seg->tails = seg->tails_later;
  seg->tails_later = 0;
  uint64_t mask = (force ? seg->purge_slices | seg->purge_later : seg->purge_slices) &
                  seg->free_slices;
  seg->dirty_slices &= ~mask;
  seg->purge_slices = force ? 0 : seg->purge_later & ~mask;
  seg->purge_later = 0;
  seg->purge_at_ms = seg->purge_slices || seg->tails ? now + options_purge_delay_ms() : 0;
  return mask;
}

/* Slices the purger took from one segment; `kept`: those the OS refused
 * to purge. */
typedef struct {
  segment_t *seg;
  uint64_t mask;
  uint64_t kept;
} purge_claim_t;

#define PURGE_CLAIMS_PER_PASS 16

/* Under the set's lock: take `mask` out of the segment's free slices (the
 * owner cannot carve them while they are purged without the lock). */
static void purge_claim(segment_set_t *set, segment_t *seg, uint64_t mask, purge_claim_t *claims,
                        size_t *n) {
  seg->free_slices &= ~mask;
  dir_sync(set, seg);
  seg->purging |= mask;
  claims[(*n)++] = (purge_claim_t){seg, mask, 0};
}

/* Called with the set's lock held, which it releases: purge the claimed
 * slices without the lock, then give them back as free under it. */
static void purge_claimed(segment_set_t *set, purge_claim_t *claims, size_t n) {
  set_unlock(set);
  if (n == 0) return;
  for (size_t i = 0; i < n; i++) claims[i].kept = segment_purge_slices(claims[i].seg, claims[i].mask);
  lock_acquire(&set->lock);
  for (size_t i = 0; i < n; i++) {
    segment_t *seg = claims[i].seg;
    seg->dirty_slices |= claims[i].kept; /* refused: still resident, not zero */
    seg->purging &= ~claims[i].mask;
    seg->free_slices |= claims[i].mask;
    dir_sync(set, seg);
    set_note_free(set, seg);
  }
  set_unlock(set);
}

/* One pass over a locked set, which it unlocks: the due slices (all that
 * wait when force) are claimed, purged without the lock (at most
 * PURGE_CLAIMS_PER_PASS segments of them) and given back. Returns the
 * set's next deadline; *more: segments were left for another pass. */
static uint64_t set_purge_pass(segment_set_t *set, uint64_t now, bool force, bool *more) {
  purge_claim_t claims[PURGE_CLAIMS_PER_PASS];
  span_cache_expire(set, now, force);
  size_t n = 0;
  uint64_t next = set->cache_at_ms;
  for (segment_t *seg = set->segs.first; seg; seg = seg->next) {
    if (n < PURGE_CLAIMS_PER_PASS) {
      uint64_t mask = segment_take_due(seg, now, force);
      if (mask) purge_claim(set, seg, mask, claims, &n);
      else dir_sync(set, seg);
    }
    next = deadline_earlier(next, seg->purge_at_ms);
  }
  field_store_relaxed(&set->next_purge_ms, next);
  purge_claimed(set, claims, n);
  *more = n == PURGE_CLAIMS_PER_PASS;
  return next;
}

void segment_set_purge(segment_set_t *set, bool force) {
  uint64_t now = 0;
  /* Read without the lock (the purger may be moving it on): any value it
   * held is a right answer, an early check finds nothing due. */
  uint64_t due = field_load_relaxed(&set->next_purge_ms);
  if (force || due != 0) {
    now = os_now_ms();
    if (force || now >= due) {
      bool more = true;
      uint64_t next = 0;
      while (more) {
        lock_acquire(&set->lock);
        next = set_purge_pass(set, now, force, &more);
      }
      if (next) background_schedule(next, false);
    }
  }
  if (force || !background_running()) segments_maintain(now ? now : os_now_ms(), force);
}

uint64_t segment_set_purge_idle(segment_set_t *set, uint64_t now) {
  for (;;) {
    if (!lock_try_acquire(&set->lock)) return now + PURGE_RETRY_MS;
    if (set->next_purge_ms == 0 || now < set->next_purge_ms) {
      uint64_t next = set->next_purge_ms;
      set_unlock(set);
      return next;
    }
    bool more;
    uint64_t next = set_purge_pass(set, now, false, &more);
    if (!more) return next;
  }
}

void segment_set_release_all(segment_set_t *set) {
  segment_t *seg;
  lock_acquire(&set->lock);
  span_cache_forget(set); /* their segments go whole */
  while ((seg = set->segs.first) != NULL) {
    if (seg->purging) { /* the purger gives them back under the lock */
      dir_check(set);
      set_unlock(set);
      os_yield();
      lock_acquire(&set->lock);
      continue;
    }
    /* Out of the directory too before the lock is next let go: a purger
     * that gives slices back there (purge_claimed) may move an entry. */
    LIST_REMOVE(&set->segs, seg, next, prev);
    dir_remove(set, seg);
    for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) {
      if (seg->pages[i].span == &seg->pages[i]) {
        page_desc_clear(&seg->pages[i]);
        STAT_LEVEL(pages, -1);
      }
      seg->pages[i].span = &brisk_dead_page;
    }
    seg->free_slices = ALL_PAGE_SLICES;
    seg->tails = seg->tails_later = 0;
    seg->destroyed = 1;
    pool_put(seg, true);
  }
  brisk_assert(set->count == 0);
  field_store_relaxed(&set->next_purge_ms, 0);
  for (;;) { /* each huge block leaves the list under the lock, freed without it */
    seg = set->huge.first;
    if (seg != NULL) {
      LIST_REMOVE(&set->huge, seg, next, prev);
      seg->destroyed = 1;
    }
    set_unlock(set);
    if (seg == NULL) break;
    huge_free(&seg->pages[0]);
    lock_acquire(&set->lock);
  }
}

/* The huge list is under the set's lock: a thread that does not own the
 * heap takes a huge block off it when it frees one (span_free_foreign). */
void segment_set_adopt_huge(segment_set_t *set, segment_t *seg) {
  lock_acquire(&set->lock);
  LIST_PUSH_FRONT(&set->huge, seg, next, prev);
  seg->heap_generation = set->heap_generation;
  atomic_store_explicit(&seg->heap, set->heap, memory_order_relaxed);
  atomic_store_release(&seg->owner_tid, set->owner_tid);
  set_unlock(set);
}

void segment_set_free_huge(segment_set_t *set, page_t *pg) {
  segment_t *seg = segment_of_page(pg);
  lock_acquire(&set->lock);
  LIST_REMOVE(&set->huge, seg, next, prev);
  /* off the list: a racing second free by another thread finds it no
   * block of this set (span_free_foreign) */
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  set_unlock(set);
  huge_free(pg);
}

void segment_set_set_owner(segment_set_t *set, uintptr_t tid) {
  set->owner_tid = tid;
  lock_acquire(&set->lock);
  for (segment_t *seg = set->segs.first; seg; seg = seg->next)
    atomic_store_release(&seg->owner_tid, tid);
  for (segment_t *seg = set->huge.first; seg; seg = seg->next)
    atomic_store_release(&seg->owner_tid, tid);
  set_unlock(set);
}

/* ---------------------------------------------------------------------------
 * For the calls that act on every heap (malloc_trim, a new purge delay) and
 * for heap reuse; appended here, each under the set's lock.
 * ------------------------------------------------------------------------- */

void segment_set_reset(segment_set_t *set, struct heap_s *heap, uintptr_t tid, bool page_lists) {
  /* Under the lock: a thread walking every heap (usage.c, the purger) may
   * hold it right now, having seen the heap in use before it was
   * destroyed and is now reused. */
  lock_acquire(&set->lock);
  set->segs.first = set->segs.last = NULL;
  set->huge.first = set->huge.last = NULL;
  set->count = 0;
  span_cache_forget(set);
  field_store_relaxed(&set->next_purge_ms, 0);
  set->owner_tid = tid;
  set->heap = heap;
  set->page_lists = page_lists;
  set->fresh_only = false;
  set_unlock(set);
}

uint64_t segment_set_purge_forced(segment_set_t *set) {
  purge_claim_t claims[PURGE_CLAIMS_PER_PASS];
  for (;;) {
    /* As segment_set_purge_idle, but every free slice that may be resident,
     * due or not, and waiting for the owner's lock rather than trying it. */
    lock_acquire(&set->lock);
    span_cache_flush_locked(set);
    size_t n = 0;
    uint64_t next = 0;
    for (segment_t *seg = set->segs.first; seg; seg = seg->next) {
      uint64_t mask = seg->free_slices & seg->dirty_slices;
      if (mask && n < PURGE_CLAIMS_PER_PASS) {
        seg->dirty_slices &= ~mask;
        seg->purge_slices &= ~mask;
        seg->purge_later &= ~mask;
        if ((seg->purge_slices | seg->purge_later) == 0) seg->purge_at_ms = 0;
        purge_claim(set, seg, mask, claims, &n);
      }
      next = deadline_earlier(next, seg->purge_at_ms);
    }
    field_store_relaxed(&set->next_purge_ms, next);
    purge_claimed(set, claims, n);
    if (n == 0) return next;
  }
}

uint64_t segment_set_reschedule(segment_set_t *set, uint64_t now, uint64_t delay) {
  uint64_t latest = now + delay, next = 0;
  lock_acquire(&set->lock);
  if (set->cache_at_ms > latest) set->cache_at_ms = latest;
  next = set->cache_at_ms;
  for (segment_t *seg = set->segs.first; seg; seg = seg->next) {
    if (seg->purge_at_ms > latest) seg->purge_at_ms = latest;
    next = deadline_earlier(next, seg->purge_at_ms);
  }
  field_store_relaxed(&set->next_purge_ms, next);
  set_unlock(set);
  return next;
}
