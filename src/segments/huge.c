/* Huge blocks. The header occupies the first slice; the block starts at
 * the first multiple of the alignment past it.
 *
 * Retained huge memory. Mapping a huge block costs a page fault per 4 KiB
 * when it is first written, and its unmap a TLB shootdown: a program that
 * frees one and allocates the next pays both every time. So brisk keeps
 * two kinds of huge memory resident for the next block, at most
 * HUGE_RETAIN_MAX bytes in all, each returned at the first check after
 * the purge delay (huge_cache_put, huge_maintain; default build only):
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
 *
 * The hardened build keeps the same cache and tails. Its guard page ends
 * the block, so a tail lies behind that guard; a freed mapping's first
 * HUGE_CLOSED_HEAD bytes are closed (PROT_NONE) while it waits, so a use
 * after free there faults. Not the whole block: closing and opening a
 * resident mapping costs the kernel a walk of every page's entry, twice
 * the time of writing the block, where these few pages cost a few
 * microseconds. A mapping taken again is made accessible whole (its head
 * and its old guard opened) before it is resized, as mremap needs one
 * mapping of one kind.
 */
#include "segments/huge.h"

#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "base/list.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "segments/guard.h"
#include "segments/registry.h"
#include "segments/segment.h"

#define HUGE_CACHE_SLOTS 4
#define HUGE_RETAIN_MAX ((size_t)128 << 20)

/* Everything below is under huge_guard: the cache (newest first, linked
 * by next/prev), the blocks with a tail (newest first, by tail_next /
 * tail_prev), and their byte counts. The counts read without the lock are
 * hints. */
static brisk_lock_t huge_guard = BRISK_LOCK_INIT;
static segment_list_t huge_cache;
static size_t huge_cache_bytes;
static _Atomic(size_t) huge_cache_count;
static segment_list_t huge_tails;
static size_t huge_tail_bytes;
static _Atomic(size_t) huge_tail_count;

void huge_lock(void) { lock_acquire(&huge_guard); }
void huge_unlock(void) { lock_release(&huge_guard); }
void huge_reset_lock(void) { lock_reset(&huge_guard); }

static bool huge_retain_allowed(size_t offset) {
  return offset == SLICE_SIZE && options_purge_delay_ms() != 0;
}

#define HUGE_CLOSED_HEAD ((size_t)256 << 10)

/* Hardened: the bytes of a freed block that stay closed while its mapping
 * waits in the cache (a page multiple: huge spans are). */
static size_t huge_closed_head(const page_t *pg) {
  return pg->span_bytes < HUGE_CLOSED_HEAD ? pg->span_bytes : HUGE_CLOSED_HEAD;
}

/* Hardened: an mprotect of a cached mapping; on a refusal the caller
 * unmaps the mapping. */
static bool huge_protect(void *p, size_t bytes, bool accessible) {
  return os_protect(p, bytes, accessible) == 0;
}

/* Hardened: a cached mapping (its block's page still describes the block
 * that left it) made accessible whole: the closed head and the guard page
 * that ended the block opened. */
static bool huge_reopen(segment_t *seg) {
  const page_t *pg = &seg->pages[0];
  return huge_protect(pg->start, huge_closed_head(pg), true) &&
         huge_protect(pg->start + pg->span_bytes, HARDENED_GUARD, true);
}

static size_t huge_retained_locked(void) { return huge_cache_bytes + huge_tail_bytes; }

static void huge_cache_unlink_locked(segment_t *seg) {
  LIST_REMOVE(&huge_cache, seg, next, prev);
  huge_cache_bytes -= seg->mapped_size;
  STAT_LEVEL(huge_retained, -(int64_t)seg->mapped_size);
  atomic_sub_relaxed(&huge_cache_count, 1);
}

static void huge_tail_link_locked(segment_t *seg, size_t bytes, uint64_t now) {
  seg->tail_bytes = bytes;
  seg->tail_since_ms = now;
  LIST_PUSH_FRONT(&huge_tails, seg, tail_next, tail_prev);
  huge_tail_bytes += bytes;
  STAT_LEVEL(huge_retained, (int64_t)bytes);
  atomic_add_relaxed(&huge_tail_count, 1);
}

/* The tail stays mapped: it is part of the block's mapping again. */
static void huge_tail_unlink_locked(segment_t *seg) {
  LIST_REMOVE(&huge_tails, seg, tail_next, tail_prev);
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
    registry_set(gone, end - gone, segment_marker(seg));
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

/* A tail to trim: the block keeps `keep` bytes of its mapping. */
typedef struct {
  segment_t *seg;
  size_t keep;
} huge_trim_t;

#define HUGE_TRIMS_PER_PASS 16

/* Take the tails older than the delay (all when forced) off the tail list
 * into trims[] and mark their blocks trimming; returns how many. The trim
 * itself (mremap) runs without the lock; meanwhile the block's own free or
 * realloc waits in huge_tail_detach, so it never sees a trim half done. */
static size_t huge_tails_expire_locked(uint64_t now, bool force, huge_trim_t *trims) {
  uint64_t delay = options_purge_delay_ms();
  size_t n = 0;
  segment_t *seg = huge_tails.first;
  while (seg && n < HUGE_TRIMS_PER_PASS) {
    segment_t *next = seg->tail_next;
    if (force || now >= seg->tail_since_ms + delay) {
      trims[n++] = (huge_trim_t){seg, seg->mapped_size - seg->tail_bytes};
      huge_tail_unlink_locked(seg);
      seg->trimming = 1;
    }
    seg = next;
  }
  return n;
}

static void huge_trim(huge_trim_t *trims, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t old = trims[i].seg->mapped_size;
    if (huge_shrink(trims[i].seg, trims[i].keep))
      STAT_LEVEL(huge_bytes, (int64_t)trims[i].keep - (int64_t)old);
  }
  if (n == 0) return;
  lock_acquire(&huge_guard);
  for (size_t i = 0; i < n; i++) trims[i].seg->trimming = 0;
  lock_release(&huge_guard);
}

/* Move expired entries (all when forced) to *out, linked by next. */
static void huge_cache_expire_locked(uint64_t now, bool force, segment_t **out) {
  uint64_t delay = options_purge_delay_ms();
  segment_t *seg = huge_cache.first;
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
  while (huge_cache.last && (atomic_load_relaxed(&huge_cache_count) > slots ||
                             huge_retained_locked() + bytes > HUGE_RETAIN_MAX)) {
    segment_t *oldest = huge_cache.last;
    huge_cache_unlink_locked(oldest);
    oldest->next = *out;
    *out = oldest;
  }
  return huge_retained_locked() + bytes <= HUGE_RETAIN_MAX;
}

/* Unmap a huge mapping that holds no block (freed or cached). If the OS
 * refuses (a split past vm.max_map_count), the mapping is left unused:
 * the registry names it returned, so no free can reach it, and its pages
 * are purged; it stays counted as mapped. */
static void huge_unmap(segment_t *seg) {
  if (segment_unmap(seg)) return;
  registry_set((uintptr_t)seg, seg->mapped_size, segment_marker(seg));
  os_purge(seg, seg->mapped_size);
}

static void huge_unmap_list(segment_t *list) {
  while (list) {
    segment_t *next = list->next;
    huge_unmap(list);
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
  lock_acquire(&huge_guard);
  for (segment_t *seg = huge_cache.first; seg; seg = seg->next) {
    if (seg->mapped_size >= need && (!fit || seg->mapped_size < fit->mapped_size)) fit = seg;
    if (!largest || seg->mapped_size > largest->mapped_size) largest = seg;
  }
  /* None fits: the largest is grown (in place, or moved with its resident
   * pages), and the others stay for later requests. */
  segment_t *take = fit ? fit : largest;
  if (take) huge_cache_unlink_locked(take);
  if (fit && take->mapped_size > need &&
      huge_make_room_locked(take->mapped_size - need, HUGE_CACHE_SLOTS, &drop)) {
    /* Counted as a tail from now; huge_alloc links it once the header is
     * written. */
    *tail = take->mapped_size - need;
    huge_tail_bytes += *tail;
    STAT_LEVEL(huge_retained, (int64_t)*tail);
  }
  lock_release(&huge_guard);
  huge_unmap_list(drop);
  if (take == NULL) return NULL;
  /* Hardened: opened whole first (mremap needs one mapping of one kind);
   * huge_alloc places the guard page again. */
  if (BRISK_HARDENED && !huge_reopen(take)) {
    if (*tail) { /* no tail after all */
      lock_acquire(&huge_guard);
      huge_tail_bytes -= *tail;
      STAT_LEVEL(huge_retained, -(int64_t)*tail);
      lock_release(&huge_guard);
      *tail = 0;
    }
    huge_unmap(take);
    return NULL;
  }
  size_t old = take->mapped_size;
  if (*tail == 0 && old > need && !huge_shrink(take, need)) {
    huge_unmap(take);
    return NULL;
  }
  if (old < need && !huge_grow(take, need)) {
    void *moved;
    if (os_remap_move(take, old, need, SEGMENT_SIZE, &moved) != 0) {
      huge_unmap(take);
      return NULL;
    }
    /* The registry still names the old range returned (it was cached). */
    take = moved;
    field_store_relaxed(&take->mapped_size, need);
  }
  return take;
}

/* Keep a freed mapping in the cache; false if it must be unmapped. */
static bool huge_cache_put(segment_t *seg) {
  size_t offset = (size_t)(seg->pages[0].start - (uint8_t *)seg);
  if (!huge_retain_allowed(offset) || seg->mapped_size > HUGE_RETAIN_MAX) return false;
  if (BRISK_HARDENED && !huge_protect(seg->pages[0].start, huge_closed_head(&seg->pages[0]), false))
    return false;
  registry_set((uintptr_t)seg, seg->mapped_size, segment_marker(seg));
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  atomic_store_relaxed(&seg->owner_tid, 0);
  uint64_t now = os_now_ms();
  seg->idle_since_ms = now;
  segment_t *drop = NULL;
  lock_acquire(&huge_guard);
  /* Make room: the oldest go first. */
  bool kept = huge_make_room_locked(seg->mapped_size, HUGE_CACHE_SLOTS - 1, &drop);
  if (kept) {
    LIST_PUSH_FRONT(&huge_cache, seg, next, prev);
    huge_cache_bytes += seg->mapped_size;
    STAT_LEVEL(huge_retained, (int64_t)seg->mapped_size);
    atomic_add_relaxed(&huge_cache_count, 1);
  }
  lock_release(&huge_guard);
  huge_unmap_list(drop);
  if (kept) background_schedule(now + options_purge_delay_ms(), true);
  huge_maintain(now, false);
  return kept;
}

page_t *huge_alloc(size_t size, size_t alignment) {
  size_t offset = SLICE_SIZE;
  if (alignment > offset) offset = alignment;
  if (size > SIZE_MAX - offset - SEGMENT_SIZE) return NULL;
  size_t mapped = huge_map_bytes(offset, size);
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
    int err = option_load(huge_pages) ? os_map_huge_pages(mapped, map_align, &p)
                                      : os_map_aligned(mapped, map_align, &p);
    if (err != 0) return NULL;
    seg = p;
  }
  segment_init_header(seg, mapped + tail, SEGMENT_HUGE);
  seg->destroyed = 0;
  seg->free_slices = 0;
  seg->tail_bytes = 0;
  seg->trimming = 0;
  page_t *pg = &seg->pages[0];
  memset(pg, 0, sizeof(*pg));
  pg->start = (uint8_t *)seg + offset;
  pg->block_size = (uint32_t)(size > UINT32_MAX ? 0 : size);
  pg->span_bytes = mapped - guard - offset;
  if (guard) guard_huge_tail(seg, mapped);
  pg->inv = 1;
  pg->capacity = 1;
  pg->reserved = 1;
  page_set_used(pg, 1);
  pg->flags = PAGE_IN_USE | PAGE_HUGE | (zero ? PAGE_ZERO : 0);
  for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) seg->pages[i].span = pg;
  atomic_store_relaxed(&seg->owner_tid, 0);
  atomic_store_explicit(&seg->heap, NULL, memory_order_relaxed);
  STAT_COUNT(huge_allocs, 1);
  STAT_LEVEL(huge_blocks, 1);
  STAT_LEVEL(huge_bytes, (int64_t)(mapped + tail));
  registry_set((uintptr_t)seg, mapped + tail, seg);
  if (tail) {
    lock_acquire(&huge_guard);
    huge_tail_bytes -= tail; /* counted since huge_cache_take */
    STAT_LEVEL(huge_retained, -(int64_t)tail);
    uint64_t now = os_now_ms();
    huge_tail_link_locked(seg, tail, now);
    lock_release(&huge_guard);
    background_schedule(now + options_purge_delay_ms(), true);
  }
  return pg;
}

/* Detach a block's tail; afterwards the whole mapping is the block's.
 * Always under the lock, even with no tail listed: another thread may be
 * trimming this block's tail right now (huge_tails_expire_locked), and
 * the lock is what orders its new mapped_size before our reads. */
static void huge_tail_detach(segment_t *seg) {
  lock_acquire(&huge_guard);
  while (seg->trimming) { /* a trim of this block's tail is under way */
    lock_release(&huge_guard);
    os_yield();
    lock_acquire(&huge_guard);
  }
  if (seg->tail_bytes) huge_tail_unlink_locked(seg);
  lock_release(&huge_guard);
}

void huge_free(page_t *pg) {
  segment_t *seg = segment_of_page(pg);
  huge_tail_detach(seg);
  STAT_LEVEL(huge_blocks, -1);
  STAT_LEVEL(huge_bytes, -(int64_t)seg->mapped_size);
  if (!huge_cache_put(seg)) huge_unmap(seg);
}

/* Resize the mapping of a huge block (its tail detached: the whole mapping
 * is the block's) to `need` bytes; false when it cannot be done in place. */
static bool huge_resize_mapping(segment_t *seg, page_t *pg, size_t offset, size_t need,
                                size_t guard) {
  size_t old = seg->mapped_size;
  if (need < old && huge_retain_allowed(offset)) {
    /* Keep the rest as the tail if the budget has room: growing back into
     * it costs nothing. */
    segment_t *drop = NULL;
    uint64_t now = os_now_ms();
    lock_acquire(&huge_guard);
    bool keep = huge_make_room_locked(old - need, HUGE_CACHE_SLOTS, &drop);
    if (keep) huge_tail_link_locked(seg, old - need, now);
    lock_release(&huge_guard);
    if (keep) background_schedule(now + options_purge_delay_ms(), true);
    huge_unmap_list(drop);
    if (keep) {
      pg->span_bytes = need - guard - offset;
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
  pg->span_bytes = need - guard - offset;
  return true;
}

bool huge_try_resize(page_t *pg, size_t new_size) {
  segment_t *seg = segment_of_page(pg);
  size_t offset = (size_t)(pg->start - (uint8_t *)seg);
  size_t page = OS_PAGE_BYTES;
  size_t guard = BRISK_HARDENED ? HARDENED_GUARD : 0;
  if (new_size > SIZE_MAX - offset - page - guard) return false;
  size_t need = ((offset + new_size + page - 1) & ~(page - 1)) + guard;
  huge_tail_detach(seg);
  if (guard == 0) return huge_resize_mapping(seg, pg, offset, need, 0);
  /* Hardened: the guard page that ends the block moves to the new end. It
   * is opened first (mremap needs one mapping of one kind), and placed
   * again at the old end if the resize fails; a refused placement leaves
   * the block without a guard, with a warning (guard.h). */
  uint8_t *old_guard = pg->start + pg->span_bytes;
  bool moves = (uint8_t *)seg + need - guard != old_guard;
  if (moves && !huge_protect(old_guard, guard, true)) return false;
  bool ok = huge_resize_mapping(seg, pg, offset, need, guard);
  if (moves) guard_huge_tail(seg, ok ? need : (size_t)(old_guard + guard - (uint8_t *)seg));
  return ok;
}

uint64_t huge_maintain(uint64_t now, bool force) {
  if (atomic_load_relaxed(&huge_cache_count) == 0 && atomic_load_relaxed(&huge_tail_count) == 0)
    return 0;
  segment_t *expired = NULL;
  huge_trim_t trims[HUGE_TRIMS_PER_PASS];
  uint64_t delay = options_purge_delay_ms(), next = 0;
  lock_acquire(&huge_guard);
  huge_cache_expire_locked(now, force, &expired);
  size_t ntrims = huge_tails_expire_locked(now, force, trims);
  for (segment_t *seg = huge_cache.first; seg; seg = seg->next)
    if (next == 0 || seg->idle_since_ms + delay < next) next = seg->idle_since_ms + delay;
  for (segment_t *seg = huge_tails.first; seg; seg = seg->tail_next)
    if (next == 0 || seg->tail_since_ms + delay < next) next = seg->tail_since_ms + delay;
  lock_release(&huge_guard);
  huge_unmap_list(expired);
  huge_trim(trims, ntrims);
  if (next != 0 && next <= now) next = now + 1; /* more than one pass could take */
  return next;
}

void huge_usage(int64_t *cached, int64_t *cached_bytes, int64_t *tail_bytes) {
  lock_acquire(&huge_guard);
  *cached = (int64_t)atomic_load_relaxed(&huge_cache_count);
  *cached_bytes = (int64_t)huge_cache_bytes;
  *tail_bytes = (int64_t)huge_tail_bytes;
  lock_release(&huge_guard);
}
