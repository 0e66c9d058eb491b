/* Spans of slices cut from a heap's segments (set.h): the search for a
 * run of free slices, carving, the span cache, and spans' allocation,
 * free and growth. Each segment keeps its slice masks: free (in no span),
 * dirty (may be resident), purge/purge_later (free slices waiting for
 * their deadline: see span_free) and purging (taken by the background
 * purger while it purges them). Depends on the set's lower part (set.c),
 * segments, the pool, huge blocks, the hardened guards and the background
 * thread's schedule. */
#include "segments/span.h"

#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "base/list.h"
#include "os/platform.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/guard.h"
#include "segments/huge.h"
#include "segments/pool.h"
#include "segments/segment.h"

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
static void slices_release_locked(segment_set_t *set, segment_t *seg, uint64_t bits, bool now);

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
  slices_release_locked(set, seg, slice_bits(span_first_slice(seg, span), span->slice_count), false);
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
  if (n > SPAN_CACHE_SPAN_MAX || set->cached_n[n - 1] == SPAN_CACHE_DEPTH ||
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
  brisk_assert(n >= 1 && n <= SPAN_CACHE_SPAN_MAX && set->cached_n[n - 1] > 0);
  uint32_t top = set->cached_n[n - 1] - 1u;
  page_t *span = set->cached[n - 1][top]; /* read before the byte stores, which may alias it */
  set->cached_n[n - 1] = (uint8_t)top;
  set->cached_count--;
  set->cached_slices -= (uint32_t)n;
  return span;
}

/* Entry i of the stack of n-slice spans leaves the cache. */
static page_t *span_cache_remove(segment_set_t *set, size_t n, uint32_t i) {
  brisk_assert(n >= 1 && n <= SPAN_CACHE_SPAN_MAX && i < set->cached_n[n - 1]);
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
    page_t *head = span_head_init(seg, first, slices, false);
    /* Hardened: as span_carve, a guard at its end stays (its inside has
     * none: it was one span). */
    if (BRISK_HARDENED && (seg->guarded_slices & ((uint64_t)1 << (first + slices - 1))))
      head->span_bytes -= HARDENED_GUARD;
    return head;
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
  if (set->cache_at_ms == 0 || set->cached_n[n - 1] >= SPAN_CACHE_DEPTH ||
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
void span_cache_forget(segment_set_t *set) {
  for (size_t n = 1; n <= SPAN_CACHE_SPAN_MAX; n++) {
    for (uint32_t i = 0; i < set->cached_n[n - 1]; i++)
      span_cache_unkeep(segment_of_page(set->cached[n - 1][i]), set->cached[n - 1][i]);
    set->cached_n[n - 1] = 0;
  }
  set->cached_count = 0;
  set->cached_slices = 0;
  set->cache_at_ms = 0;
}

void span_cache_flush_locked(segment_set_t *set) {
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
void span_cache_expire(segment_set_t *set, uint64_t now, bool force) {
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

/* A run of resident slices out of the spans the cache keeps for smaller
 * sizes (never its own size or larger ones, which later blocks of those
 * sizes take back whole), before any slice that is not resident: they go
 * back to their segments, the largest of those sizes first and the oldest
 * of a size first, until such a run appears. (A program that moved on to
 * larger blocks would otherwise fault in fresh slices while the cache held
 * the smaller ones' spans for their deadline.) */
static BRISK_NOINLINE page_t *span_cache_yield(segment_set_t *set, size_t slices, size_t align_slices, bool large) {
  for (size_t n = slices - 1 < SPAN_CACHE_SPAN_MAX ? slices - 1 : SPAN_CACHE_SPAN_MAX; n >= 1; n--) {
    while (set->cached_n[n - 1] > 0) {
      span_cache_drop(set, span_cache_remove(set, n, 0));
      page_t *span = span_find(set, slices, align_slices, FIND_RESIDENT, false, large);
      if (span != NULL) return span;
    }
  }
  if (set->cached_count == 0) set->cache_at_ms = 0;
  return NULL;
}

static page_t *span_alloc_locked(segment_set_t *set, size_t slices, size_t align_slices, bool large) {
  page_t *span = set->cached_count ? span_cache_take(set, slices, align_slices, large) : NULL;
  if (span == NULL) span = span_find(set, slices, align_slices, FIND_RESIDENT, false, large);
  if (span == NULL && set->cached_count) span = span_cache_yield(set, slices, align_slices, large);
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

/* How span_free_locked gives a span back: kept whole in the span cache
 * where it fits, or its slices free (purged after the delay, or now). */
enum { SPAN_TO_SLICES = 0, SPAN_TO_CACHE = 1, SPAN_PURGE_NOW = 2 };

static void span_free_locked(segment_set_t *set, page_t *span, int how) {
  segment_t *seg = segment_of_page(span);
  size_t first = (size_t)(span - seg->pages);
  size_t n = span->slice_count;
  uint64_t bits = slice_bits(first, n);
  brisk_assert((seg->free_slices & bits) == 0);
  brisk_assert(span->span == span && (span->flags & PAGE_IN_USE));
  brisk_assert((span->flags & PAGE_LARGE) || page_used(span) == 0);
  seg->tails &= ~bits;
  seg->tails_later &= ~bits;
  bool large = (span->flags & PAGE_LARGE) != 0, may_cache = how == SPAN_TO_CACHE;
  if (may_cache && large && span_cache_put(set, span, n)) {
    span_keep_large(span); /* its slices still point at it (the span cache) */
    return;
  }
  for (size_t i = first; i < first + n; i++) seg->pages[i].span = &brisk_dead_page;
  page_desc_clear(span);
  if (may_cache && !large && span_cache_put(set, span, n)) return;
  slices_release_locked(set, seg, bits, how == SPAN_PURGE_NOW);
}

/* Slices no span uses any more become free; they are purged after the
 * delay (at once when it is 0, or when `now`). */
static void slices_release_locked(segment_set_t *set, segment_t *seg, uint64_t bits, bool now) {
  seg->free_slices |= bits;
  if (set_note_free(set, seg)) return;
  uint64_t delay = options_purge_delay_ms();
  if (now || delay == 0) { /* what the OS refused stays dirty */
    seg->dirty_slices &= ~bits | segment_purge_slices(seg, bits);
  }
  dir_sync(set, seg);
  if (now || delay == 0) return;
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
  span_free_locked(set, span, SPAN_TO_CACHE);
  set_unlock(set);
}

void span_free_large(segment_set_t *set, page_t *span) {
  lock_acquire(&set->lock);
  span_free_large_held(set, span);
  set_unlock(set);
}

void span_free_kept_held(segment_set_t *set, page_t *span, bool purge) {
  span_mark_taken(span);
  if (purge) span_free_locked(set, span, SPAN_PURGE_NOW);
  else span_free_large_held(set, span);
}

int span_free_foreign(segment_set_t *set, segment_t *seg, page_t *span, const void *p, uintptr_t keep_owner) {
  lock_acquire(&set->lock);
  int r;
  if (atomic_load_explicit(&seg->heap, memory_order_relaxed) != set->heap || seg->destroyed) {
    r = FOREIGN_NOT_IN_USE; /* its heap was destroyed meanwhile */
  } else if (atomic_load_relaxed(&seg->owner_tid) == keep_owner) {
    r = FOREIGN_BATCH;
  } else if (span->span != span || (span->flags & (PAGE_IN_USE | PAGE_HUGE)) != (PAGE_IN_USE | PAGE_HUGE) ||
             span->start != (const uint8_t *)p) {
    r = FOREIGN_NOT_IN_USE; /* freed meanwhile by another thread */
  } else if (span->prof_slot != 0) {
    r = FOREIGN_BATCH; /* a sample: the owner tells the profiler */
  } else {
    LIST_REMOVE(&set->huge, seg, next, prev);
    atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed); /* as segment_set_free_huge */
    set_unlock(set);
    huge_free(span);
    return FOREIGN_FREED;
  }
  set_unlock(set);
  return r;
}

void span_free_large_held(segment_set_t *set, page_t *span) {
  if (span->slice_count > SPAN_CACHE_SPAN_MAX || !span_cache_put_large_locked(set, span))
    span_free_locked(set, span, SPAN_TO_CACHE);
}

void span_free_uncached(segment_set_t *set, page_t *span) {
  lock_acquire(&set->lock);
  span_free_locked(set, span, SPAN_TO_SLICES);
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
  span->tail_marked = tail && options_purge_delay_ms() != 0;
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
