/* A heap's set of segments and the spans of slices cut from them. Each
 * segment keeps its slice masks: free (in no span), dirty (may be
 * resident), purge/purge_later (free slices waiting for their deadline:
 * see span_free) and purging (taken by the background purger while it
 * purges them). Depends on segments, the pool, huge blocks, the hardened
 * guards and the background thread's schedule. */
#include "span.h"

#include <string.h>

#include "atomics.h"
#include "background.h"
#include "platform.h"
#include "guard.h"
#include "huge.h"
#include "list.h"
#include "options.h"
#include "platform.h"
#include "pool.h"
#include "segment.h"
#include "counters.h"

/* Every release of a set's lock: then the pool's surplus, if a segment
 * went there under the lock, goes back to the OS (no unmap under it). */
static void set_unlock(segment_set_t *set) {
  lock_release(&set->lock);
  pool_poll();
}

/* Free slices waiting for the purge: at least this many in a segment (or
 * in the span cache) make it worth starting the background thread. */
#define PURGE_WORTH_A_THREAD 16

/* ---------------------------------------------------------------------------
 * The set's directory (span.h, segment_dir_t): entry seg->dir_slot holds
 * seg's free, dirty and light masks. Every function here that changes
 * them while seg is in the set calls dir_sync before it lets the lock go;
 * span_find reads only the directory until it has chosen a segment.
 * ------------------------------------------------------------------------- */
static void dir_sync(segment_set_t *set, segment_t *seg) {
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
static void dir_remove(segment_set_t *set, segment_t *seg) {
  size_t last = --set->count;
  if (seg->dir_slot != last) {
    set->dir[seg->dir_slot] = set->dir[last];
    set->dir[seg->dir_slot].seg->dir_slot = seg->dir_slot;
  }
}

/* Debug builds: the directory says what the segments say. */
static void dir_check(const segment_set_t *set) {
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
static bool set_note_free(segment_set_t *set, segment_t *seg) {
  if (seg->free_slices != ALL_PAGE_SLICES) return false;
  LIST_REMOVE(&set->segs, seg, next, prev);
  dir_remove(set, seg);
  pool_put(seg, false);
  return true;
}

static void set_deadline_lower(segment_set_t *set, uint64_t at);

/* seg (from the pool or new) joins the set. */
static void set_join_segment(segment_set_t *set, segment_t *seg) {
  seg->destroyed = 0;
  seg->heap_generation = set->heap_generation;
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
static segment_t *set_add_segment(segment_set_t *set, bool resident_only) {
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

/* Where a run of n free slices of mask may start: one bit per slice index
 * i (a multiple of align) with slices i..i+n-1 all in mask. */
static uint64_t run_starts(uint64_t mask, size_t n, size_t align) {
  uint64_t run = mask;
  size_t len = 1;
  while (len < n && run) {
    size_t step = len < n - len ? len : n - len;
    run &= run >> step;
    len += step;
  }
  if (align > 1) {
    uint64_t pattern = 0;
    for (size_t i = 0; i < SLICES_PER_SEGMENT; i += align) pattern |= (uint64_t)1 << i;
    run &= pattern;
  }
  return run;
}

/* The lowest start of a run of n free slices of seg in mask, or -1. The
 * hardened build prefers a run that leaves the guard pages where they are
 * (guard.c), since each guard moved is an mprotect call and, with other
 * threads running, a TLB shootdown on their CPUs: no guard inside the
 * run, and a guard at its end for a large block (which needs one there)
 * but not for a class page (which would lose those 4 KiB). With `strict`
 * only such a run will do. */
static int find_run(const segment_t *seg, uint64_t mask, size_t n, size_t align, bool large, bool strict) {
  uint64_t run = run_starts(mask, n, align);
  if (run == 0) return -1;
  if (BRISK_HARDENED) {
    uint64_t guarded = seg->guarded_slices, inside = 0;
    for (size_t k = 0; k + 1 < n; k++) inside |= guarded >> k;
    /* The segment's own last guard is no reason to put a large block at
     * its end: blocks keep to the low slices, as in the default build. */
    uint64_t last = (uint64_t)1 << (SLICES_PER_SEGMENT - 1);
    uint64_t ends = (large ? guarded & ~last : guarded) >> (n - 1);
    uint64_t best = run & ~inside & (large ? ends : ~ends);
    if (best == 0 && strict) return -1; /* only such a run will do */
    if (best == 0) best = run & ~inside;
    if (best != 0) run = best;
  }
  return __builtin_ctzll(run);
}

/* Slices leave the free mask; they are no longer waiting for a purge. */
static void slices_take(segment_t *seg, uint64_t bits) {
  seg->free_slices &= ~bits;
  seg->dirty_slices |= bits;
  seg->light_slices &= ~bits;
  seg->purge_slices &= ~bits;
  seg->purge_later &= ~bits;
}

/* The head descriptor of slices first..first+n-1 taken as one span. */
static page_t *span_head_init(segment_t *seg, size_t first, size_t n, bool zero) {
  page_t *head = &seg->pages[first];
  memset(head, 0, sizeof(*head));
  page_set_used(head, 0);
  head->start = (uint8_t *)seg + first * SLICE_SIZE;
  head->span_bytes = n * SLICE_SIZE;
  head->slice_count = (uint8_t)n;
  head->flags = PAGE_IN_USE | (zero ? PAGE_ZERO : 0);
  for (size_t i = first; i < first + n; i++) seg->pages[i].span = head;
  return head;
}

static page_t *span_carve(segment_t *seg, size_t first, size_t n, bool sample) {
  uint64_t bits = slice_bits(first, n);
  uint64_t last_bit = (uint64_t)1 << (first + n - 1);
  /* Hardened: guards left by earlier large blocks inside the new span are
   * lifted first; if the OS refuses, the run is not used (NULL). */
  if (BRISK_HARDENED && !guard_lift(seg, bits & ~last_bit)) return NULL;
  bool zero = (seg->dirty_slices & bits) == 0;
  /* a sample keeps light the slices it finds light or clean */
  uint64_t light = sample ? bits & (seg->light_slices | ~seg->dirty_slices) : 0;
  slices_take(seg, bits);
  seg->light_slices |= light;
  page_t *head = span_head_init(seg, first, n, zero);
  /* A guard at the span's end stays (the span loses those 4 KiB); the
   * segment's last slice keeps its guard for good. */
  if (BRISK_HARDENED && (seg->guarded_slices & last_bit)) head->span_bytes -= HARDENED_GUARD;
  return head;
}

/* ---------------------------------------------------------------------------
 * The span cache: a freed span of up to SPAN_CACHE_SPAN_MAX slices is kept
 * whole (out of the free masks) and handed to the next span_alloc of the
 * same size: no search, no mask updates, no deadline. A stack per slice
 * count, newest on top. Everything under the set's lock. It is emptied at
 * cache_at_ms (set by the first put after the last flush), by the owner's
 * purge or the purger, and by every collect.
 *
 * A class page's span is kept with its slices pointing at brisk_dead_page,
 * as free ones do. A large block's span keeps its descriptor, and its
 * slices keep pointing at it, so that the next large block of its size
 * takes it back with a few stores (span_cache_take): it is marked as not
 * in use (no PAGE_IN_USE; reserved and capacity 0), which every path that
 * reaches it through a slice reads as a dead page's, so a second free of
 * the block is reported as one into free memory. When it leaves the cache
 * any other way, its slices point at the dead page again (span_cache_drop).
 * ------------------------------------------------------------------------- */
static void slices_release_locked(segment_set_t *set, segment_t *seg, uint64_t bits);

static uint64_t earlier(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* Lowers the set's next deadline to `at` (under the lock). */
static void set_deadline_lower(segment_set_t *set, uint64_t at) {
  uint64_t next = set->next_purge_ms;
  if (next == 0 || at < next) field_store_relaxed(&set->next_purge_ms, at);
}

static size_t span_first_slice(const segment_t *seg, const page_t *span) { return (size_t)(span - seg->pages); }

/* A cached large block's span: its descriptor and slices as a free span's. */
static void span_cache_unkeep(segment_t *seg, page_t *span) {
  if (!(span->flags & PAGE_LARGE)) return;
  size_t first = span_first_slice(seg, span);
  for (size_t i = first; i < first + span->slice_count; i++) seg->pages[i].span = &brisk_dead_page;
  page_desc_clear(span);
}

/* A cached span back to its segment's free slices. */
static void span_cache_drop(segment_set_t *set, page_t *span) {
  segment_t *seg = segment_of_page(span);
  span_cache_unkeep(seg, span);
  slices_release_locked(set, seg, slice_bits(span_first_slice(seg, span), span->slice_count));
}

static void span_cache_push(segment_set_t *set, page_t *span, size_t n) {
  set->cached[n - 1][set->cached_n[n - 1]++] = span;
  set->cached_count++;
  set->cached_slices += (uint32_t)n;
}

/* A large block's span as the cache keeps it: its descriptor marked not in
 * use, its slices left pointing at it. */
static void span_keep_large(page_t *span) {
  span->flags &= (uint8_t)~PAGE_IN_USE;
  span->reserved = 0;
  span->capacity = 0;
}

static bool span_cache_put(segment_set_t *set, page_t *span, size_t n) {
  if (BRISK_HARDENED || n > SPAN_CACHE_SPAN_MAX || set->cached_n[n - 1] == SPAN_CACHE_DEPTH ||
      set->cached_slices + n > SPAN_CACHE_SLICES)
    return false;
  uint64_t delay = options_purge_delay_ms();
  if (delay == 0) return false; /* at once: nothing is kept */
  span_cache_push(set, span, n);
  if (set->cache_at_ms == 0) {
    set->cache_at_ms = os_now_ms() + delay;
    set_deadline_lower(set, set->cache_at_ms);
    background_schedule(set->cache_at_ms, false);
  } else if (set->cached_slices >= PURGE_WORTH_A_THREAD && set->cached_slices - n < PURGE_WORTH_A_THREAD &&
             !background_running()) {
    background_schedule(set->cache_at_ms, true);
  }
  return true;
}

/* The top of the stack of n-slice spans (not empty) leaves the cache. */
static page_t *span_cache_pop(segment_set_t *set, size_t n) {
  uint32_t top = set->cached_n[n - 1] - 1u;
  page_t *span = set->cached[n - 1][top]; /* read before the byte stores, which may alias it */
  set->cached_n[n - 1] = (uint8_t)top;
  set->cached_count--;
  set->cached_slices -= (uint32_t)n;
  return span;
}

/* Entry i of the stack of n-slice spans leaves the cache. */
static page_t *span_cache_remove(segment_set_t *set, size_t n, uint32_t i) {
  page_t **stack = set->cached[n - 1];
  page_t *span = stack[i];
  for (uint32_t top = set->cached_n[n - 1] - 1u; i < top; i++) stack[i] = stack[i + 1];
  stack[set->cached_n[n - 1] - 1u] = span;
  return span_cache_pop(set, n);
}

static void segment_deadline(segment_set_t *set, segment_t *seg);

/* A large block's span holds a tail worth purging: resident memory (not
 * fresh) past the block's end, at least LARGE_TAIL_PURGE_MIN of it. */
BRISK_INLINE bool large_has_tail(const page_t *span) {
  return !(span->flags & PAGE_ZERO) && span->span_bytes >= span->block_size + LARGE_TAIL_PURGE_MIN;
}

/* The tail is purged once its block has lived a whole delay: at the
 * segment's deadline after next (segment_take_due). */
BRISK_INLINE void large_tail_later(segment_set_t *set, page_t *span) {
  segment_t *seg = segment_of_page(span);
  seg->tails_later |= (uint64_t)1 << span_first_slice(seg, span);
  segment_deadline(set, seg);
}

/* The newest cached span of `slices` slices whose first slice is a
 * multiple of align, ready for use (its memory is not fresh); NULL if none.
 * large: for a large block, which takes a large block's kept descriptor
 * as it is (the caller sets again what a block's life changes: the counts,
 * reserved, capacity); any other use starts from a clean descriptor. */
static page_t *span_cache_take(segment_set_t *set, size_t slices, size_t align, bool large) {
  if (slices > SPAN_CACHE_SPAN_MAX) return NULL;
  page_t **stack = set->cached[slices - 1];
  for (uint32_t i = set->cached_n[slices - 1]; i-- > 0;) {
    segment_t *seg = segment_of_page(stack[i]);
    size_t first = span_first_slice(seg, stack[i]);
    if (first % align != 0) continue;
    page_t *span = span_cache_remove(set, slices, i);
    if (large && (span->flags & PAGE_LARGE)) {
      span->flags = PAGE_IN_USE | PAGE_LARGE;
      return span;
    }
    return span_head_init(seg, first, slices, false);
  }
  return NULL;
}

/* The common cases of a large block, short paths under the lock that
 * span_alloc_large and span_free_large take once either way: a new block
 * taking back the newest span the cache kept for a block of its size, and
 * a freed block's span kept whole. Any other case (a first put since the
 * cache was emptied, which sets its deadline; a put that makes the cache
 * worth a purger thread; a full stack; a stack whose top is a class
 * page's span) is left to the general path. */
static page_t *span_cache_take_large_locked(segment_set_t *set, size_t slices) {
  uint32_t k = set->cached_n[slices - 1];
  if (k == 0 || !(set->cached[slices - 1][k - 1]->flags & PAGE_LARGE)) return NULL;
  page_t *span = span_cache_pop(set, slices);
  span->flags = PAGE_IN_USE | PAGE_LARGE;
  return span;
}

static bool span_cache_put_large_locked(segment_set_t *set, page_t *span) {
  size_t n = span->slice_count;
  uint32_t slices = set->cached_slices + (uint32_t)n;
  if (BRISK_HARDENED || set->cache_at_ms == 0 || set->cached_n[n - 1] >= SPAN_CACHE_DEPTH ||
      slices > SPAN_CACHE_SLICES || (slices >= PURGE_WORTH_A_THREAD && set->cached_slices < PURGE_WORTH_A_THREAD))
    return false;
  span_cache_push(set, span, n);
  segment_t *seg = segment_of_page(span);
  uint64_t head = ~((uint64_t)1 << span_first_slice(seg, span));
  seg->tails &= head;
  seg->tails_later &= head;
  span_keep_large(span);
  return true;
}

/* Cached spans of seg that overlap `bits` go back to their segment: a
 * block grows in place over them. */
static void span_cache_release_in(segment_set_t *set, segment_t *seg, uint64_t bits) {
  for (size_t n = 1; n <= SPAN_CACHE_SPAN_MAX; n++) {
    for (uint32_t i = set->cached_n[n - 1]; i-- > 0;) {
      page_t *span = set->cached[n - 1][i];
      if (segment_of_page(span) == seg && (slice_bits(span_first_slice(seg, span), n) & bits))
        span_cache_drop(set, span_cache_remove(set, n, i));
    }
  }
}

/* Empty the cache without giving its spans back (their segments go whole). */
static void span_cache_forget(segment_set_t *set) {
  for (size_t n = 1; n <= SPAN_CACHE_SPAN_MAX; n++) {
    for (uint32_t i = 0; i < set->cached_n[n - 1]; i++)
      span_cache_unkeep(segment_of_page(set->cached[n - 1][i]), set->cached[n - 1][i]);
    set->cached_n[n - 1] = 0;
  }
  set->cached_count = 0;
  set->cached_slices = 0;
  set->cache_at_ms = 0;
}

static void span_cache_flush_locked(segment_set_t *set) {
  for (size_t n = 1; n <= SPAN_CACHE_SPAN_MAX; n++) {
    while (set->cached_n[n - 1] > 0) span_cache_drop(set, span_cache_pop(set, n));
  }
  set->cache_at_ms = 0;
}

void span_cache_flush(segment_set_t *set) {
  lock_acquire(&set->lock);
  span_cache_flush_locked(set);
  set_unlock(set);
}

/* Empties the cache when its deadline has come (or when force). */
static void span_cache_expire(segment_set_t *set, uint64_t now, bool force) {
  if (set->cache_at_ms != 0 && (force || now >= set->cache_at_ms)) span_cache_flush_locked(set);
}

/* Which free slices a search takes (span_find). */
enum { FIND_RESIDENT, FIND_LIGHT, FIND_CLEAN, FIND_ANY };

/* How many segments with free slices the hardened build's strict look
 * (span_find) reads the guards of. */
#define STRICT_LOOK_SEGMENTS 8

/* The first run of `slices` free slices of the kind asked, newest segment
 * first (the last in the directory), lowest address first, carved; NULL
 * if none. Inlined with a constant kind, each search is one mask per
 * directory entry: no segment header is read until one is chosen (but in
 * the hardened build's strict look, `strict`, which reads the guards of a
 * few). */
BRISK_INLINE page_t *span_find_in(segment_set_t *set, size_t slices, size_t align_slices, int kind, bool sample,
                                  bool large, bool strict) {
  dir_check(set);
  size_t looked = 0;
  for (size_t i = set->count; i-- > 0;) {
    const segment_dir_t *e = &set->dir[i];
    uint64_t mask = e->free_slices, dirty = e->dirty_slices;
    if (kind == FIND_RESIDENT) mask &= dirty & ~e->light_slices;
    else if (kind == FIND_LIGHT) mask &= dirty & e->light_slices;
    else if (kind == FIND_CLEAN) mask &= ~dirty;
    if (mask == 0) continue;
    /* The strict look reads each candidate's header (its guards): a few
     * at most, so that a heap of many segments does not pay one cache
     * miss per segment for every span. */
    if (BRISK_HARDENED && strict && looked++ == STRICT_LOOK_SEGMENTS) break;
    int first = find_run(e->seg, mask, slices, align_slices, large, strict);
    if (first < 0) continue;
    segment_t *seg = e->seg;
    page_t *span = span_carve(seg, (size_t)first, slices, sample);
    dir_sync(set, seg);
    return span;
  }
  return NULL;
}

/* The hardened build looks through the newest segments with free slices
 * (STRICT_LOOK_SEGMENTS of them) for a run that moves no guard page
 * (find_run) before it takes the first run it finds. */
BRISK_INLINE page_t *span_find(segment_set_t *set, size_t slices, size_t align_slices, int kind, bool sample,
                               bool large) {
  if (BRISK_HARDENED) {
    page_t *span = span_find_in(set, slices, align_slices, kind, sample, large, true);
    if (span != NULL) return span;
  }
  return span_find_in(set, slices, align_slices, kind, sample, large, false);
}

/* A span from a segment added to the set (a pooled or new one), in its
 * resident slices if they have room; NULL if none was added. */
static page_t *span_alloc_new_segment(segment_set_t *set, size_t slices, size_t align_slices, bool sample,
                                      bool resident_only, bool large) {
  segment_t *seg = set_add_segment(set, resident_only);
  if (seg == NULL) return NULL;
  int first = sample ? -1 : find_run(seg, seg->free_slices & seg->dirty_slices, slices, align_slices, large, false);
  if (first < 0) first = find_run(seg, seg->free_slices, slices, align_slices, large, false);
  if (first < 0) return NULL;
  page_t *span = span_carve(seg, (size_t)first, slices, sample);
  dir_sync(set, seg);
  return span;
}

/* An ordinary span: the span cache, then resident free slices (no page
 * faults, and the purged ones stay out of RSS) but light ones; then any
 * run. The span of a small class block the profiler sampled (only its
 * first pages are touched; no cache): light slices, then clean ones, then
 * any. Samples so come back to the few slices earlier samples used, and
 * never hold the rest of a resident slice that class pages would have
 * reused (which made the heap fault in fresh slices for them). Out of
 * line: the ordinary path keeps its registers. */
static BRISK_NOINLINE page_t *span_alloc_sample_locked(segment_set_t *set, size_t slices, size_t align_slices) {
  page_t *span = span_find(set, slices, align_slices, FIND_LIGHT, true, false);
  if (span == NULL) span = span_find(set, slices, align_slices, FIND_CLEAN, true, false);
  if (span == NULL) span = span_find(set, slices, align_slices, FIND_ANY, true, false);
  return span != NULL ? span : span_alloc_new_segment(set, slices, align_slices, true, false, false);
}

static page_t *span_alloc_locked(segment_set_t *set, size_t slices, size_t align_slices, bool large) {
  page_t *span = set->cached_count ? span_cache_take(set, slices, align_slices, large) : NULL;
  if (span == NULL) span = span_find(set, slices, align_slices, FIND_RESIDENT, false, large);
  /* Memory another heap gave back before fresh memory of this one. */
  if (span == NULL) span = span_alloc_new_segment(set, slices, align_slices, false, true, large);
  if (span == NULL) span = span_find(set, slices, align_slices, FIND_ANY, false, large);
  return span != NULL ? span : span_alloc_new_segment(set, slices, align_slices, false, false, large);
}

page_t *span_alloc(segment_set_t *set, size_t slices, size_t align_slices, bool sample) {
  if (slices == 0 || slices > SLICES_PER_SEGMENT - SEGMENT_FIRST_SLICE) return NULL;
  if (align_slices == 0) align_slices = 1;
  lock_acquire(&set->lock);
  page_t *span = BRISK_UNLIKELY(sample) ? span_alloc_sample_locked(set, slices, align_slices)
                                        : span_alloc_locked(set, slices, align_slices, false);
  set_unlock(set);
  return span;
}

static void large_resize_locked(segment_set_t *set, page_t *span, size_t size);

page_t *span_alloc_large(segment_set_t *set, size_t slices, size_t align_slices, size_t size) {
  if (slices == 0 || slices > SLICES_PER_SEGMENT - SEGMENT_FIRST_SLICE) return NULL;
  lock_acquire(&set->lock);
  page_t *span = align_slices == 1 && slices <= SPAN_CACHE_SPAN_MAX ? span_cache_take_large_locked(set, slices) : NULL;
  if (span == NULL) {
    span = span_alloc_locked(set, slices, align_slices, true);
    if (span != NULL) span->flags |= PAGE_LARGE;
  }
  /* A cached span is not fresh: what an earlier block wrote past this
   * one's end may be resident, and its tail is marked for the purge. */
  if (span != NULL) large_resize_locked(set, span, size);
  set_unlock(set);
  return span;
}

static void span_free_locked(segment_set_t *set, page_t *span, bool may_cache) {
  segment_t *seg = segment_of_page(span);
  size_t first = (size_t)(span - seg->pages);
  size_t n = span->slice_count;
  uint64_t bits = slice_bits(first, n);
  brisk_assert((seg->free_slices & bits) == 0);
  brisk_assert(span->span == span && (span->flags & PAGE_IN_USE));
  brisk_assert((span->flags & PAGE_LARGE) || page_used(span) == 0);
  seg->tails &= ~bits;
  seg->tails_later &= ~bits;
  bool large = (span->flags & PAGE_LARGE) != 0;
  if (may_cache && large && span_cache_put(set, span, n)) {
    span_keep_large(span); /* its slices still point at it (the span cache) */
    return;
  }
  for (size_t i = first; i < first + n; i++) seg->pages[i].span = &brisk_dead_page;
  page_desc_clear(span);
  if (may_cache && !large && span_cache_put(set, span, n)) return;
  slices_release_locked(set, seg, bits);
}

/* Slices no span uses any more become free; they are purged after the
 * delay (at once when it is 0). */
static void slices_release_locked(segment_set_t *set, segment_t *seg, uint64_t bits) {
  seg->free_slices |= bits;
  if (set_note_free(set, seg)) return;
  uint64_t delay = options_purge_delay_ms();
  if (delay == 0) { /* at once; what the OS refused stays dirty */
    seg->dirty_slices &= ~bits | segment_purge_slices(seg, bits);
  }
  dir_sync(set, seg);
  if (delay == 0) return;
  /* Slices wait between one and two delays: those freed while a deadline
   * is pending join the next round, so a slice freed just before the
   * deadline is not purged (and re-faulted) at once. */
  if (seg->purge_at_ms != 0) {
    seg->purge_later |= bits;
    /* The pending deadline was scheduled when it was set: a running purger
     * knows it. Otherwise these slices may make a thread worth starting. */
    if (background_running()) return;
  } else {
    seg->purge_slices |= bits;
    seg->purge_at_ms = os_now_ms() + delay;
    set_deadline_lower(set, seg->purge_at_ms);
  }
  background_schedule(seg->purge_at_ms,
                      __builtin_popcountll(seg->purge_slices | seg->purge_later) >= PURGE_WORTH_A_THREAD);
}

void span_free(segment_set_t *set, page_t *span) {
  lock_acquire(&set->lock);
  span_free_locked(set, span, true);
  set_unlock(set);
}

void span_free_large(segment_set_t *set, page_t *span) {
  lock_acquire(&set->lock);
  if (span->slice_count > SPAN_CACHE_SPAN_MAX || !span_cache_put_large_locked(set, span))
    span_free_locked(set, span, true);
  set_unlock(set);
}

int span_free_foreign(segment_set_t *set, segment_t *seg, page_t *span, const void *p, uintptr_t keep_owner) {
  lock_acquire(&set->lock);
  int r;
  uint8_t kind = seg->kind == SEGMENT_HUGE ? PAGE_HUGE : PAGE_LARGE;
  if (atomic_load_explicit(&seg->heap, memory_order_relaxed) != set->heap || seg->destroyed) {
    r = FOREIGN_NOT_IN_USE; /* its heap was destroyed meanwhile */
  } else if (atomic_load_relaxed(&seg->owner_tid) == keep_owner) {
    r = FOREIGN_BATCH;
  } else if (span->span != span || (span->flags & (PAGE_IN_USE | kind)) != (PAGE_IN_USE | kind) ||
             span->start != (const uint8_t *)p) {
    r = FOREIGN_NOT_IN_USE; /* freed meanwhile by another thread */
  } else if (kind == PAGE_HUGE ? span->prof_slot != 0 : (span->flags & PAGE_SAMPLE) != 0) {
    /* A sample: the owner tells the profiler. A large one's slot is
     * written by its owner later on (the heap's batch of samples): only
     * the flag, set before the block was handed out, is read here. */
    r = FOREIGN_BATCH;
  } else if (kind == PAGE_HUGE) {
    LIST_REMOVE(&set->huge, seg, next, prev);
    atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed); /* as segment_set_free_huge */
    set_unlock(set);
    huge_free(span);
    return FOREIGN_FREED;
  } else {
    if (span->slice_count > SPAN_CACHE_SPAN_MAX || !span_cache_put_large_locked(set, span))
      span_free_locked(set, span, true);
    r = FOREIGN_FREED;
  }
  set_unlock(set);
  return r;
}

void span_free_uncached(segment_set_t *set, page_t *span) {
  lock_acquire(&set->lock);
  span_free_locked(set, span, false);
  set_unlock(set);
}

static bool span_try_grow_locked(segment_set_t *set, page_t *span, size_t slices) {
  segment_t *seg = segment_of_page(span);
  size_t first = (size_t)(span - seg->pages);
  size_t have = span->slice_count;
  if (slices <= have) return true;
  if (first + slices > SLICES_PER_SEGMENT) return false;
  uint64_t extra = slice_bits(first + have, slices - have);
  if ((seg->free_slices & extra) != extra && set->cached_count) span_cache_release_in(set, seg, extra);
  if ((seg->free_slices & extra) != extra) return false;
  /* guards move to the new end: none may stay inside the grown span */
  if (BRISK_HARDENED && !guard_lift(seg, slice_bits(first, slices - 1))) {
    guard_span_tail(span); /* its own end guard again, if it was lifted */
    return false;
  }
  slices_take(seg, extra);
  dir_sync(set, seg);
  for (size_t i = first + have; i < first + slices; i++) seg->pages[i].span = span;
  span->slice_count = (uint8_t)slices;
  span->span_bytes = slices * SLICE_SIZE;
  if (BRISK_HARDENED) guard_span_tail(span);
  return true;
}

/* A deadline for seg (under the lock), if it has none. */
static void segment_deadline(segment_set_t *set, segment_t *seg) {
  /* A pending deadline was scheduled when it was set */
  if (seg->purge_at_ms != 0) return;
  seg->purge_at_ms = os_now_ms() + options_purge_delay_ms();
  set_deadline_lower(set, seg->purge_at_ms);
  background_schedule(seg->purge_at_ms, false);
}

static void large_resize_locked(segment_set_t *set, page_t *span, size_t size) {
  segment_t *seg = segment_of_page(span);
  uint64_t bit = (uint64_t)1 << span_first_slice(seg, span);
  span->block_size = (uint32_t)large_usable(span, size);
  bool tail = large_has_tail(span);
  if (tail && options_purge_delay_ms() == 0) { /* at once */
    os_purge(span->start + span->block_size, span->span_bytes - span->block_size);
  } else if (tail) {
    large_tail_later(set, span);
  } else {
    seg->tails &= ~bit;
    seg->tails_later &= ~bit;
  }
}

void span_large_resize(segment_set_t *set, page_t *span, size_t size) {
  lock_acquire(&set->lock);
  large_resize_locked(set, span, size);
  set_unlock(set);
}

bool span_try_grow(segment_set_t *set, page_t *span, size_t slices) {
  lock_acquire(&set->lock);
  bool grown = span_try_grow_locked(set, span, slices);
  set_unlock(set);
  return grown;
}

uint64_t segments_maintain(uint64_t now, bool force) {
  uint64_t a = pool_maintain(now, force), b = huge_maintain(now, force);
  return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

/* Purge the resident tails of the large blocks in seg->tails (under the
 * set's lock: a block grows into its tail under it too). */
static void segment_purge_tails(segment_t *seg) {
  for (uint64_t t = seg->tails; t; t &= t - 1) {
    page_t *pg = &seg->pages[__builtin_ctzll(t)];
    if ((pg->flags & PAGE_LARGE) && pg->span_bytes >= pg->block_size + LARGE_TAIL_PURGE_MIN)
      os_purge(pg->start + pg->block_size, pg->span_bytes - pg->block_size);
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
    next = earlier(next, seg->purge_at_ms);
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

void segment_set_reset(segment_set_t *set, struct heap_s *heap, uintptr_t tid) {
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
      next = earlier(next, seg->purge_at_ms);
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
    next = earlier(next, seg->purge_at_ms);
  }
  field_store_relaxed(&set->next_purge_ms, next);
  set_unlock(set);
  return next;
}
