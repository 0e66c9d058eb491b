/* Spans within segments, the purge of free slices, the pool of empty
 * segments, and huge blocks. Depends on platform and registry only. */
#include "segment.h"

#include <errno.h>
#include <string.h>

#include "atomics.h"
#include "options.h"
#include "platform.h"
#include "registry.h"
#include "counters.h"

uintptr_t brisk_link_key;
uintptr_t brisk_remote_key;

void segment_init_key(uint64_t random) {
  /* Never 0, so that a zero-filled word is no free block's link. */
  brisk_link_key = (uintptr_t)(random | ((uint64_t)1 << 63) | 1);
  /* Remote chains use a second key, derived from the first once. */
  brisk_remote_key = brisk_link_key * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}

page_t brisk_dead_page = {
    .start = (uint8_t *)UINTPTR_MAX,
    .span = &brisk_dead_page,
};

#define RETIRED_SEGMENT_INIT                                                   \
  {                                                                            \
    .kind = SEGMENT_RETIRED,                                                   \
    .pages = {[0 ... SLICES_PER_SEGMENT - 1] = {.start = (uint8_t *)UINTPTR_MAX, \
                                                .span = &brisk_dead_page}},    \
  }
segment_t brisk_segment_returned = RETIRED_SEGMENT_INIT;
segment_t brisk_segment_destroyed = RETIRED_SEGMENT_INIT;

#define ALL_PAGE_SLICES (~(uint64_t)0 << SEGMENT_FIRST_SLICE)

/* ---------------------------------------------------------------------------
 * The pool: empty segments shared by all heaps, kept mapped for reuse up to
 * BRISK_SEGMENT_CACHE of them; their pages are purged after the delay and
 * the surplus is unmapped. Taken and put under one lock: a segment changes
 * hands once per 4 MiB, never on a fast path.
 * ------------------------------------------------------------------------- */
static brisk_lock_t pool_lock = BRISK_LOCK_INIT;
static segment_t *pool_first;
static _Atomic(size_t) pool_count; /* read without the lock as a hint */

/* Freed huge mappings kept for the next huge block (see huge_alloc); under
 * pool_lock. Newest first, linked by next/prev. */
static segment_t *huge_cache_first;
static size_t huge_cache_bytes;
static _Atomic(size_t) huge_cache_count; /* read without the lock as a hint */
static _Atomic(size_t) huge_tail_count; /* blocks with a tail; a hint, as above */
static void huge_cache_expire_locked(uint64_t now, bool force, segment_t **out);
static void huge_tails_expire_locked(uint64_t now, bool force);
static void huge_unmap_list(segment_t *list);

void segment_pool_lock(void) { lock_acquire(&pool_lock); }
void segment_pool_unlock(void) { lock_release(&pool_lock); }
void segment_pool_reset_lock(void) { lock_reset(&pool_lock); }

static uint64_t purge_delay(void) {
  int64_t d = brisk_options.purge_delay_ms;
  return d < 0 ? UINT64_MAX / 2 : (uint64_t)d;
}

/* madvise each run of set bits of `mask` in seg. */
static void purge_slices(segment_t *seg, uint64_t mask) {
  while (mask) {
    unsigned first = (unsigned)__builtin_ctzll(mask);
    uint64_t run = mask >> first;
    unsigned len = (~run == 0) ? 64 - first : (unsigned)__builtin_ctzll(~run);
    os_purge((uint8_t *)seg + (size_t)first * SLICE_SIZE, (size_t)len * SLICE_SIZE);
    uint64_t bits = (len == 64 ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1)) << first;
    mask &= ~bits;
  }
}

static void segment_unmap(segment_t *seg) {
  size_t size = seg->mapped_size;
  registry_set((uintptr_t)seg, size,
               seg->destroyed ? &brisk_segment_destroyed : &brisk_segment_returned);
  STAT_LEVEL(mapped_bytes, -(int64_t)size);
  if (seg->kind == SEGMENT_NORMAL) STAT_LEVEL(segments, -1);
  if (BRISK_HARDENED && seg->kinds != NULL) {
    os_unmap(seg->kinds, SEGMENT_SIZE / 16);
    STAT_LEVEL(mapped_bytes, -(int64_t)(SEGMENT_SIZE / 16));
  }
  os_unmap(seg, size);
}

/* Under pool_lock. */
static void pool_maintain_locked(uint64_t now, bool force) {
  uint64_t delay = purge_delay();
  size_t keep = brisk_options.segment_cache < 0 ? 0 : (size_t)brisk_options.segment_cache;
  segment_t **link = &pool_first;
  size_t seen = 0;
  while (*link) {
    segment_t *seg = *link;
    seen++;
    bool due = force || now >= seg->idle_since_ms + delay;
    if (due && seg->dirty_slices) {
      purge_slices(seg, seg->dirty_slices & ALL_PAGE_SLICES);
      seg->dirty_slices = 0;
      seg->purge_slices = 0;
      seg->purge_later = 0;
    }
    /* The newest `keep` stay mapped (purged once due); the rest go back to
     * the OS at once, so RSS falls right after a burst, except the segments
     * of a destroyed heap, which go after the delay (heap destroy is one
     * quick call; its memory is reused or returned afterwards). */
    if (seen > keep && (!seg->keep_until_due || due)) {
      *link = seg->next;
      atomic_sub_relaxed(&pool_count, 1);
      segment_unmap(seg);
      continue;
    }
    link = &seg->next;
  }
}

void segment_pool_maintain(bool force) {
  if (atomic_load_relaxed(&pool_count) == 0 && atomic_load_relaxed(&huge_cache_count) == 0 &&
      atomic_load_relaxed(&huge_tail_count) == 0 && !force)
    return;
  uint64_t now = os_now_ms();
  segment_t *expired = NULL;
  lock_acquire(&pool_lock);
  pool_maintain_locked(now, force);
  huge_cache_expire_locked(now, force, &expired);
  huge_tails_expire_locked(now, force);
  lock_release(&pool_lock);
  huge_unmap_list(expired);
}

static void pool_put(segment_t *seg, bool keep_until_due) {
  seg->keep_until_due = keep_until_due;
  /* The pool purges by idle time; a set that takes it starts afresh. */
  seg->purge_slices = 0;
  seg->purge_later = 0;
  seg->purge_at_ms = 0;
  atomic_store_relaxed(&seg->owner_tid, 0);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  uint64_t now = os_now_ms();
  seg->idle_since_ms = now;
  lock_acquire(&pool_lock);
  seg->next = pool_first; /* newest first */
  seg->prev = NULL;
  pool_first = seg;
  atomic_add_relaxed(&pool_count, 1);
  pool_maintain_locked(now, false);
  lock_release(&pool_lock);
}

static segment_t *pool_take(void) {
  if (atomic_load_relaxed(&pool_count) == 0) return NULL;
  lock_acquire(&pool_lock);
  segment_t *seg = pool_first;
  if (seg) {
    pool_first = seg->next;
    atomic_sub_relaxed(&pool_count, 1);
  }
  lock_release(&pool_lock);
  return seg;
}

static void segment_init_header(segment_t *seg, size_t mapped, uint32_t kind) {
  seg->kinds = NULL;
  seg->guarded_slices = 0;
  seg->mapped_size = mapped;
  seg->kind = kind;
  seg->free_slices = ALL_PAGE_SLICES;
  seg->dirty_slices = 0;
  seg->purge_slices = 0;
  seg->purge_later = 0;
  seg->purge_at_ms = 0;
  for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) seg->pages[i].span = &brisk_dead_page;
}

/* Hardened: guard pages at the end of the header slice (an underflow of
 * the first page does not reach the header) and at the end of the segment
 * (an overflow does not reach the next region), and the allocation-kind
 * table, one byte per 16 bytes, kept apart from the segment. */
static bool segment_harden(segment_t *seg) {
  void *kinds;
  if (os_map_aligned(SEGMENT_SIZE / 16, 4096, &kinds) != 0) return false;
  seg->kinds = kinds;
  os_protect((uint8_t *)seg + SLICE_SIZE - HARDENED_GUARD, HARDENED_GUARD, false);
  os_protect((uint8_t *)seg + SEGMENT_SIZE - HARDENED_GUARD, HARDENED_GUARD, false);
  seg->guarded_slices = 1 | ((uint64_t)1 << (SLICES_PER_SEGMENT - 1));
  return true;
}

static segment_t *segment_map(void) {
  void *p;
  if (os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE, &p) != 0) return NULL;
  segment_t *seg = p;
  segment_init_header(seg, SEGMENT_SIZE, SEGMENT_NORMAL);
  if (BRISK_HARDENED && !segment_harden(seg)) {
    os_unmap(p, SEGMENT_SIZE);
    STAT_LEVEL(mapped_bytes, -(int64_t)SEGMENT_SIZE);
    return NULL;
  }
  seg->destroyed = 0;
  STAT_LEVEL(segments, 1);
  registry_set((uintptr_t)seg, SEGMENT_SIZE, seg);
  return seg;
}

/* ---------------------------------------------------------------------------
 * A heap's set of segments.
 * ------------------------------------------------------------------------- */
static void set_unlink(segment_set_t *set, segment_t *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else set->first = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static void set_push_front(segment_set_t *set, segment_t *seg) {
  seg->prev = NULL;
  seg->next = set->first;
  if (set->first) set->first->prev = seg;
  set->first = seg;
}

static void set_push_back(segment_set_t *set, segment_t *seg) {
  segment_t *last = set->first;
  if (last == NULL) { set_push_front(set, seg); return; }
  while (last->next) last = last->next;
  last->next = seg;
  seg->prev = last;
  seg->next = NULL;
}

static segment_t *set_add_segment(segment_set_t *set) {
  segment_t *seg = pool_take();
  if (seg == NULL) seg = segment_map();
  if (seg == NULL) return NULL;
  seg->destroyed = 0;
  atomic_store_explicit(&seg->heap, set->heap, memory_order_relaxed);
  atomic_store_release(&seg->owner_tid, set->owner_tid);
  set_push_front(set, seg);
  set->count++;
  return seg;
}

/* Lowest slice index i (a multiple of align) with slices i..i+n-1 all in
 * mask; -1 if none. */
static int find_run(uint64_t mask, size_t n, size_t align) {
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
  return run ? __builtin_ctzll(run) : -1;
}

static uint64_t slice_bits(size_t first, size_t n) {
  uint64_t bits = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
  return bits << first;
}

/* Hardened: make the guard pages at the end of the slices in `mask`
 * accessible again (the segment's last slice keeps its guard for good). */
static void guards_lift(segment_t *seg, uint64_t mask) {
  uint64_t stale = seg->guarded_slices & mask & ~((uint64_t)1 << (SLICES_PER_SEGMENT - 1));
  while (stale) {
    unsigned i = (unsigned)__builtin_ctzll(stale);
    stale &= stale - 1;
    os_protect((uint8_t *)seg + (size_t)(i + 1) * SLICE_SIZE - HARDENED_GUARD, HARDENED_GUARD, true);
    seg->guarded_slices &= ~((uint64_t)1 << i);
  }
}

static page_t *span_carve(segment_t *seg, size_t first, size_t n) {
  uint64_t bits = slice_bits(first, n);
  page_t *head = &seg->pages[first];
  bool zero = (seg->dirty_slices & bits) == 0;
  seg->free_slices &= ~bits;
  seg->dirty_slices |= bits;
  seg->purge_slices &= ~bits;
  seg->purge_later &= ~bits;
  memset(head, 0, sizeof(*head));
  head->start = (uint8_t *)seg + first * SLICE_SIZE;
  head->span_bytes = n * SLICE_SIZE;
  if (BRISK_HARDENED) {
    /* Guards left by earlier large blocks stay where they are: inside the
     * new span they are lifted, at its end the span keeps it (and loses
     * those 4 KiB). The segment's last slice keeps its guard for good. */
    uint64_t last_bit = (uint64_t)1 << (first + n - 1);
    guards_lift(seg, bits & ~last_bit);
    if (seg->guarded_slices & last_bit) head->span_bytes -= HARDENED_GUARD;
  }
  head->slice_count = (uint8_t)n;
  head->flags = PAGE_IN_USE | (zero ? PAGE_ZERO : 0);
  for (size_t i = first; i < first + n; i++) seg->pages[i].span = head;
  return head;
}

page_t *span_alloc(segment_set_t *set, size_t slices, size_t align_slices) {
  if (slices == 0 || slices > SLICES_PER_SEGMENT - SEGMENT_FIRST_SLICE) return NULL;
  if (align_slices == 0) align_slices = 1;
  /* Resident free slices first (no page faults, and the purged ones stay
   * out of RSS); then any free run. */
  for (int resident = 1; resident >= 0; resident--) {
    for (segment_t *seg = set->first; seg && seg->free_slices; seg = seg->next) {
      uint64_t mask = seg->free_slices & (resident ? seg->dirty_slices : ~(uint64_t)0);
      int first = find_run(mask, slices, align_slices);
      if (first < 0) continue;
      page_t *span = span_carve(seg, (size_t)first, slices);
      if (seg->free_slices == 0 && seg->next) { /* full segments go last */
        set_unlink(set, seg);
        set_push_back(set, seg);
      }
      return span;
    }
  }
  segment_t *seg = set_add_segment(set);
  if (seg == NULL) return NULL;
  int first = find_run(seg->free_slices, slices, align_slices);
  if (first < 0) return NULL;
  return span_carve(seg, (size_t)first, slices);
}

void span_guard_tail(page_t *span) {
  segment_t *seg = segment_of_page(span);
  size_t last = (size_t)(span - seg->pages) + span->slice_count - 1;
  span->span_bytes = span->slice_count * SLICE_SIZE - HARDENED_GUARD;
  uint64_t bit = (uint64_t)1 << last;
  /* (span_carve took the guard's 4 KiB off span_bytes already if present) */
  if (seg->guarded_slices & bit) return; /* left by an earlier block: no system call */
  if (os_protect(span->start + span->span_bytes, HARDENED_GUARD, false) == 0) seg->guarded_slices |= bit;
}

void span_free(segment_set_t *set, page_t *span) {
  segment_t *seg = segment_of_page(span);
  size_t first = (size_t)(span - seg->pages);
  size_t n = span->slice_count;
  uint64_t bits = slice_bits(first, n);
  brisk_assert((seg->free_slices & bits) == 0);
  brisk_assert(span->span == span && (span->flags & PAGE_IN_USE));
  brisk_assert((span->flags & PAGE_LARGE) || span->used == 0);
  for (size_t i = first; i < first + n; i++) seg->pages[i].span = &brisk_dead_page;
  span->flags = 0;
  span->start = (uint8_t *)UINTPTR_MAX;
  span->block_size = 0;
  span->reserved = 0;
  bool was_full = seg->free_slices == 0;
  seg->free_slices |= bits;
  if (was_full) { /* has room again: to the front */
    set_unlink(set, seg);
    set_push_front(set, seg);
  }
  if (seg->free_slices == ALL_PAGE_SLICES) {
    set_unlink(set, seg);
    set->count--;
    pool_put(seg, false);
    return;
  }
  /* Slices wait between one and two delays: those freed while a deadline
   * is pending join the next round, so a slice freed just before the
   * deadline is not purged (and re-faulted) at once. */
  if (seg->purge_at_ms != 0) {
    seg->purge_later |= bits;
    return;
  }
  seg->purge_slices |= bits;
  seg->purge_at_ms = os_now_ms() + purge_delay();
  if (set->next_purge_ms == 0 || seg->purge_at_ms < set->next_purge_ms)
    set->next_purge_ms = seg->purge_at_ms;
}

bool span_try_grow(segment_set_t *set, page_t *span, size_t slices) {
  segment_t *seg = segment_of_page(span);
  size_t first = (size_t)(span - seg->pages);
  size_t have = span->slice_count;
  if (slices <= have) return true;
  if (first + slices > SLICES_PER_SEGMENT) return false;
  uint64_t extra = slice_bits(first + have, slices - have);
  if ((seg->free_slices & extra) != extra) return false;
  seg->free_slices &= ~extra;
  seg->dirty_slices |= extra;
  seg->purge_slices &= ~extra;
  seg->purge_later &= ~extra;
  for (size_t i = first + have; i < first + slices; i++) seg->pages[i].span = span;
  if (BRISK_HARDENED) { /* guards move to the new end */
    guards_lift(seg, slice_bits(first, slices - 1));
  }
  span->slice_count = (uint8_t)slices;
  span->span_bytes = slices * SLICE_SIZE;
  if (BRISK_HARDENED) span_guard_tail(span);
  if (seg->free_slices == 0 && seg->next) {
    set_unlink(set, seg);
    set_push_back(set, seg);
  }
  return true;
}

void segment_set_purge(segment_set_t *set, bool force) {
  if (set->next_purge_ms == 0 && !force) return;
  uint64_t now = os_now_ms();
  if (!force && now < set->next_purge_ms) return;
  uint64_t next = 0;
  for (segment_t *seg = set->first; seg; seg = seg->next) {
    if (seg->purge_slices == 0 && seg->purge_later == 0) continue;
    if (force || now >= seg->purge_at_ms) {
      uint64_t mask = (force ? seg->purge_slices | seg->purge_later : seg->purge_slices) &
                      seg->free_slices;
      purge_slices(seg, mask);
      seg->dirty_slices &= ~mask;
      seg->purge_slices = force ? 0 : seg->purge_later & ~mask;
      seg->purge_later = 0;
      seg->purge_at_ms = seg->purge_slices ? now + purge_delay() : 0;
    }
    if (seg->purge_at_ms != 0 && (next == 0 || seg->purge_at_ms < next)) next = seg->purge_at_ms;
  }
  set->next_purge_ms = next;
  segment_pool_maintain(force);
}

void segment_set_release_all(segment_set_t *set) {
  while (set->first) {
    segment_t *seg = set->first;
    set_unlink(set, seg);
    for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) {
      if (seg->pages[i].span == &seg->pages[i]) {
        page_t *pg = &seg->pages[i];
        pg->flags = 0;
        pg->start = (uint8_t *)UINTPTR_MAX;
        pg->block_size = 0;
        pg->reserved = 0;
        STAT_LEVEL(pages, -1);
      }
      seg->pages[i].span = &brisk_dead_page;
    }
    seg->free_slices = ALL_PAGE_SLICES;
    seg->destroyed = 1;
    pool_put(seg, true);
  }
  while (set->huge) {
    segment_t *seg = set->huge;
    set->huge = seg->next;
    seg->destroyed = 1;
    huge_free(&seg->pages[0]);
  }
  set->count = 0;
  set->next_purge_ms = 0;
}

void segment_set_adopt_huge(segment_set_t *set, segment_t *seg) {
  seg->prev = NULL;
  seg->next = set->huge;
  if (set->huge) set->huge->prev = seg;
  set->huge = seg;
  atomic_store_explicit(&seg->heap, set->heap, memory_order_relaxed);
  atomic_store_release(&seg->owner_tid, set->owner_tid);
}

void segment_set_free_huge(segment_set_t *set, page_t *pg) {
  segment_t *seg = segment_of_page(pg);
  if (seg->prev) seg->prev->next = seg->next;
  else set->huge = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  huge_free(pg);
}

void segment_set_release_empty(segment_set_t *set) {
  segment_t *seg = set->first;
  while (seg) {
    segment_t *next = seg->next;
    if (seg->free_slices == ALL_PAGE_SLICES) {
      set_unlink(set, seg);
      set->count--;
      pool_put(seg, false);
    }
    seg = next;
  }
}

void segment_set_set_owner(segment_set_t *set, uintptr_t tid) {
  set->owner_tid = tid;
  for (segment_t *seg = set->first; seg; seg = seg->next)
    atomic_store_release(&seg->owner_tid, tid);
  for (segment_t *seg = set->huge; seg; seg = seg->next)
    atomic_store_release(&seg->owner_tid, tid);
}

/* ---------------------------------------------------------------------------
 * Huge blocks. The header occupies the first slice; the block starts at
 * the first multiple of the alignment past it.
 *
 * Retained huge memory. Mapping a huge block costs a page fault per 4 KiB
 * when it is first written, and its unmap a TLB shootdown: a program that
 * frees one and allocates the next pays both every time. So brisk keeps
 * two kinds of huge memory resident for the next block, at most
 * HUGE_RETAIN_MAX bytes in all, each returned at the first check after
 * the purge delay (huge_cache_put, segment_pool_maintain; default build
 * only):
 *  - the cache: freed mappings, at most HUGE_CACHE_SLOTS of them;
 *  - tails: a block taken from a larger cached mapping keeps the rest of
 *    it resident behind its end. When the block is freed, block and tail
 *    go back to the cache as the one mapping they are, so the next block
 *    of any size up to the whole mapping faults nothing; realloc grows
 *    into a tail with no system call.
 * A new huge block takes the smallest cached mapping that fits; if none
 * fits, the largest is grown in place (mremap without moving), and if that
 * fails the cached ones are unmapped before a new mapping is made, so the
 * cache never holds memory beside a fresh mapping. Cached memory is no
 * block: the registry names it returned (or destroyed), so a late free of
 * the old block is reported as before. A pointer into a tail lies past its
 * block's end and is reported like any other.
 * ------------------------------------------------------------------------- */
#define HUGE_CACHE_SLOTS 4
#define HUGE_RETAIN_MAX ((size_t)128 << 20)

/* Huge blocks with a tail, newest first (tail_next/tail_prev); under
 * pool_lock. */
static segment_t *huge_tail_first;
static size_t huge_tail_bytes;

static bool huge_retain_allowed(size_t offset) {
  return !BRISK_HARDENED && offset == SLICE_SIZE && purge_delay() != 0;
}

static size_t huge_retained_locked(void) { return huge_cache_bytes + huge_tail_bytes; }

static void huge_cache_unlink_locked(segment_t *seg) {
  if (seg->prev) seg->prev->next = seg->next;
  else huge_cache_first = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  huge_cache_bytes -= seg->mapped_size;
  STAT_LEVEL(huge_retained, -(int64_t)seg->mapped_size);
  atomic_sub_relaxed(&huge_cache_count, 1);
}

static void huge_tail_link_locked(segment_t *seg, size_t bytes, uint64_t now) {
  seg->tail_bytes = bytes;
  seg->tail_since_ms = now;
  seg->tail_prev = NULL;
  seg->tail_next = huge_tail_first;
  if (huge_tail_first) huge_tail_first->tail_prev = seg;
  huge_tail_first = seg;
  huge_tail_bytes += bytes;
  STAT_LEVEL(huge_retained, (int64_t)bytes);
  atomic_add_relaxed(&huge_tail_count, 1);
}

/* The tail stays mapped: it is part of the block's mapping again. */
static void huge_tail_unlink_locked(segment_t *seg) {
  if (seg->tail_prev) seg->tail_prev->tail_next = seg->tail_next;
  else huge_tail_first = seg->tail_next;
  if (seg->tail_next) seg->tail_next->tail_prev = seg->tail_prev;
  huge_tail_bytes -= seg->tail_bytes;
  STAT_LEVEL(huge_retained, -(int64_t)seg->tail_bytes);
  seg->tail_bytes = 0;
  atomic_sub_relaxed(&huge_tail_count, 1);
}

/* Shrink a huge mapping in place to `keep` bytes. The registry entries of
 * what stays mapped are never touched (the block's owner may be freeing
 * it); those of what goes are changed before the unmap, as any new
 * mapping there registers itself after it. */
static bool huge_shrink(segment_t *seg, size_t keep) {
  size_t old = seg->mapped_size;
  uintptr_t end = (uintptr_t)seg + old;
  uintptr_t gone = ((uintptr_t)seg + keep + SEGMENT_SIZE - 1) & ~(uintptr_t)SEGMENT_MASK;
  if (gone < end)
    registry_set(gone, end - gone, seg->destroyed ? &brisk_segment_destroyed : &brisk_segment_returned);
  if (os_remap_in_place(seg, old, keep) != 0) {
    if (gone < end) registry_set(gone, end - gone, seg);
    return false;
  }
  STAT_LEVEL(mapped_bytes, (int64_t)keep - (int64_t)old);
  field_store_relaxed(&seg->mapped_size, keep); /* read unlocked by free's checks */
  return true;
}

/* Grow a huge mapping in place (mremap without moving) to `need` bytes. */
static bool huge_grow(segment_t *seg, size_t need) {
  size_t old = seg->mapped_size;
  if (os_remap_in_place(seg, old, need) != 0) return false;
  STAT_LEVEL(mapped_bytes, (int64_t)need - (int64_t)old);
  field_store_relaxed(&seg->mapped_size, need); /* read unlocked by free's checks */
  return true;
}

/* Give back the tails older than the delay (all when forced). Done under
 * the lock, so that the block's free or realloc never sees a trim half
 * done; a tail is trimmed once, at most once per delay. If the shrink
 * fails, the tail stays with its block until the block is freed. */
static void huge_tails_expire_locked(uint64_t now, bool force) {
  uint64_t delay = purge_delay();
  segment_t *seg = huge_tail_first;
  while (seg) {
    segment_t *next = seg->tail_next;
    if (force || now >= seg->tail_since_ms + delay) {
      size_t old = seg->mapped_size;
      size_t keep = old - seg->tail_bytes;
      huge_tail_unlink_locked(seg);
      if (huge_shrink(seg, keep)) STAT_LEVEL(huge_bytes, (int64_t)keep - (int64_t)old);
    }
    seg = next;
  }
}

/* Move expired entries (all when forced) to *out, linked by next. */
static void huge_cache_expire_locked(uint64_t now, bool force, segment_t **out) {
  uint64_t delay = purge_delay();
  segment_t *seg = huge_cache_first;
  while (seg) {
    segment_t *next = seg->next;
    if (force || now >= seg->idle_since_ms + delay) {
      huge_cache_unlink_locked(seg);
      seg->next = *out;
      *out = seg;
    }
    seg = next;
  }
}

/* Unmap the oldest cached mappings (to *out) until `bytes` more fit in
 * the budget; false if they do not even with the cache empty. */
static bool huge_make_room_locked(size_t bytes, size_t slots, segment_t **out) {
  while (huge_cache_first && (atomic_load_relaxed(&huge_cache_count) > slots ||
                              huge_retained_locked() + bytes > HUGE_RETAIN_MAX)) {
    segment_t *oldest = huge_cache_first;
    while (oldest->next) oldest = oldest->next;
    huge_cache_unlink_locked(oldest);
    oldest->next = *out;
    *out = oldest;
  }
  return huge_retained_locked() + bytes <= HUGE_RETAIN_MAX;
}

static void huge_unmap_list(segment_t *list) {
  while (list) {
    segment_t *next = list->next;
    segment_unmap(list);
    list = next;
  }
}

/* Take a cached mapping for a block of `need` bytes; NULL if none serves
 * (the cache is then emptied). The mapping is at least `need` bytes: the
 * rest stays resident as the block's tail when the budget has room for
 * it (*tail), and is unmapped otherwise. */
static segment_t *huge_cache_take(size_t need, size_t *tail) {
  *tail = 0;
  if (atomic_load_relaxed(&huge_cache_count) == 0) return NULL;
  segment_t *fit = NULL, *largest = NULL, *drop = NULL;
  lock_acquire(&pool_lock);
  for (segment_t *seg = huge_cache_first; seg; seg = seg->next) {
    if (seg->mapped_size >= need && (!fit || seg->mapped_size < fit->mapped_size)) fit = seg;
    if (!largest || seg->mapped_size > largest->mapped_size) largest = seg;
  }
  segment_t *take = fit ? fit : largest;
  if (take) huge_cache_unlink_locked(take);
  if (!fit) huge_cache_expire_locked(0, true, &drop);
  else if (take->mapped_size > need && huge_make_room_locked(take->mapped_size - need, HUGE_CACHE_SLOTS, &drop)) {
    /* Counted as a tail from now; huge_alloc links it once the header is
     * written. */
    *tail = take->mapped_size - need;
    huge_tail_bytes += *tail;
    STAT_LEVEL(huge_retained, (int64_t)*tail);
  }
  lock_release(&pool_lock);
  huge_unmap_list(drop);
  if (take == NULL) return NULL;
  size_t old = take->mapped_size;
  if (*tail == 0 && old != need && !(old > need ? huge_shrink(take, need) : huge_grow(take, need))) {
    segment_unmap(take);
    return NULL;
  }
  return take;
}

/* Keep a freed mapping in the cache; false if it must be unmapped. */
static bool huge_cache_put(segment_t *seg) {
  size_t offset = (size_t)(seg->pages[0].start - (uint8_t *)seg);
  if (!huge_retain_allowed(offset) || seg->mapped_size > HUGE_RETAIN_MAX) return false;
  registry_set((uintptr_t)seg, seg->mapped_size,
               seg->destroyed ? &brisk_segment_destroyed : &brisk_segment_returned);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  atomic_store_relaxed(&seg->owner_tid, 0);
  uint64_t now = os_now_ms();
  seg->idle_since_ms = now;
  segment_t *drop = NULL;
  lock_acquire(&pool_lock);
  huge_cache_expire_locked(now, false, &drop);
  huge_tails_expire_locked(now, false);
  /* Make room: the oldest go first. */
  bool kept = huge_make_room_locked(seg->mapped_size, HUGE_CACHE_SLOTS - 1, &drop);
  if (kept) {
    seg->prev = NULL;
    seg->next = huge_cache_first;
    if (huge_cache_first) huge_cache_first->prev = seg;
    huge_cache_first = seg;
    huge_cache_bytes += seg->mapped_size;
    STAT_LEVEL(huge_retained, (int64_t)seg->mapped_size);
    atomic_add_relaxed(&huge_cache_count, 1);
  }
  lock_release(&pool_lock);
  huge_unmap_list(drop);
  return kept;
}

page_t *huge_alloc(size_t size, size_t alignment) {
  size_t offset = SLICE_SIZE;
  if (alignment > offset) offset = alignment;
  size_t page = 4096;
  if (size > SIZE_MAX - offset - SEGMENT_SIZE) return NULL;
  size_t mapped = (offset + size + page - 1) & ~(page - 1);
  size_t guard = BRISK_HARDENED ? HARDENED_GUARD : 0;
  mapped += guard;
  segment_t *seg = NULL;
  size_t tail = 0;
  bool zero = true;
  if (huge_retain_allowed(offset) && mapped <= HUGE_RETAIN_MAX) {
    seg = huge_cache_take(mapped, &tail);
    zero = seg == NULL;
  }
  if (seg == NULL) {
    void *p;
    size_t map_align = alignment > SEGMENT_SIZE ? alignment : SEGMENT_SIZE;
    if (os_map_aligned(mapped, map_align, &p) != 0) return NULL;
    seg = p;
  }
  segment_init_header(seg, mapped + tail, SEGMENT_HUGE);
  seg->destroyed = 0;
  seg->free_slices = 0;
  seg->tail_bytes = 0;
  page_t *pg = &seg->pages[0];
  memset(pg, 0, sizeof(*pg));
  pg->start = (uint8_t *)seg + offset;
  pg->block_size = (uint32_t)(size > UINT32_MAX ? 0 : size);
  pg->span_bytes = mapped - guard - offset;
  if (guard) os_protect((uint8_t *)seg + mapped - guard, guard, false);
  pg->inv = 1;
  pg->capacity = 1;
  pg->reserved = 1;
  pg->used = 1;
  pg->flags = PAGE_IN_USE | PAGE_HUGE | (zero ? PAGE_ZERO : 0);
  for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) seg->pages[i].span = pg;
  atomic_store_relaxed(&seg->owner_tid, 0);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  STAT_COUNT(huge_allocs, 1);
  STAT_LEVEL(huge_bytes, (int64_t)(mapped + tail));
  registry_set((uintptr_t)seg, mapped + tail, seg);
  if (tail) {
    lock_acquire(&pool_lock);
    huge_tail_bytes -= tail; /* counted since huge_cache_take */
    STAT_LEVEL(huge_retained, -(int64_t)tail);
    huge_tail_link_locked(seg, tail, os_now_ms());
    lock_release(&pool_lock);
  }
  return pg;
}

/* Detach a block's tail; afterwards the whole mapping is the block's.
 * Always under the lock, even with no tail listed: another thread may be
 * trimming this block's tail right now (huge_tails_expire_locked), and
 * the lock is what orders its new mapped_size before our reads. */
static void huge_tail_detach(segment_t *seg) {
  lock_acquire(&pool_lock);
  if (seg->tail_bytes) huge_tail_unlink_locked(seg);
  lock_release(&pool_lock);
}

void huge_free(page_t *pg) {
  segment_t *seg = segment_of_page(pg);
  huge_tail_detach(seg);
  STAT_LEVEL(huge_bytes, -(int64_t)seg->mapped_size);
  if (!huge_cache_put(seg)) segment_unmap(seg);
}

bool huge_try_resize(page_t *pg, size_t new_size) {
  segment_t *seg = segment_of_page(pg);
  size_t offset = (size_t)(pg->start - (uint8_t *)seg);
  size_t page = 4096;
  if (new_size > SIZE_MAX - offset - page) return false;
  size_t need = (offset + new_size + page - 1) & ~(page - 1);
  huge_tail_detach(seg);
  size_t old = seg->mapped_size;
  if (need < old && huge_retain_allowed(offset)) {
    /* Keep the rest as the tail if the budget has room: growing back into
     * it costs nothing. */
    segment_t *drop = NULL;
    lock_acquire(&pool_lock);
    bool keep = huge_make_room_locked(old - need, HUGE_CACHE_SLOTS, &drop);
    if (keep) huge_tail_link_locked(seg, old - need, os_now_ms());
    lock_release(&pool_lock);
    huge_unmap_list(drop);
    if (keep) {
      pg->span_bytes = need - offset;
      return true;
    }
  }
  if (need < old) {
    if (!huge_shrink(seg, need)) return false;
  } else if (need > old) {
    if (!huge_grow(seg, need)) return false;
    registry_set((uintptr_t)seg, need, seg);
  }
  STAT_LEVEL(huge_bytes, (int64_t)seg->mapped_size - (int64_t)old);
  pg->span_bytes = need - offset;
  return true;
}
