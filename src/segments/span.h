/* The spans of slices cut from a heap's segments (span.c): pages of a
 * size class and large blocks; and the set's purges, release and reset
 * (set_maintain.c). Only the owner of the set's heap calls these (the
 * thread of `owner_tid`, or one that won the heap's state). The set
 * itself is set.h's. */
#ifndef BRISK_SPAN_H
#define BRISK_SPAN_H

#include "base/atomics.h"
#include "segments/set.h"

/* A span of `slices` slices whose first slice index is a multiple of
 * `align_slices`, from the set's segments or a new one; NULL when the OS
 * has no memory. The head descriptor has start, span_bytes, slice_count,
 * flags = PAGE_IN_USE (| PAGE_ZERO when the memory is fresh). sample: for
 * a small class block the profiler sampled, which touches only the first
 * pages of its span: taken from the slices earlier such samples used, else
 * from slices that are not resident (span.c, span_alloc_sample_locked). */
BRISK_INTERNAL page_t *span_alloc(segment_set_t *set, size_t slices, size_t align_slices, bool sample);
/* The span of a new large block of `size` bytes (not a sample), made a
 * large block's (PAGE_LARGE) with its usable size (block_size) and its
 * resident tail's purge arranged (span_large_resize), all under one hold
 * of the lock. The newest span the cache kept for a large block of as
 * many slices comes first, with its old descriptor (the caller sets what
 * a block's life changes). */
BRISK_INTERNAL page_t *span_alloc_large(segment_set_t *set, size_t slices, size_t align_slices, size_t size);
/* Slices of a large block of `size` bytes (with room for its guard page in
 * the hardened build). */
BRISK_INLINE size_t large_slices(size_t size) {
  size_t guard = BRISK_HARDENED ? HARDENED_GUARD : 0;
  return (size + guard + SLICE_SIZE - 1) >> SLICE_SHIFT;
}
/* The usable size a new large block of `size` bytes gets (brisk_good_size
 * asks it): the request rounded up to the OS page, or in the hardened build
 * its whole span, the guard page aside. large_usable below is the same rule
 * for a block already in a span. */
BRISK_INLINE size_t large_usable_size(size_t size) {
  if (BRISK_HARDENED) return (large_slices(size) << SLICE_SHIFT) - HARDENED_GUARD;
  return OS_PAGE_CEIL(size);
}
/* Give a span back: kept whole in the set's span cache for the next span
 * of its size, or to its segment; either way its memory is purged after
 * the delay. */
BRISK_INTERNAL void span_free(segment_set_t *set, page_t *span);
/* span_free of a large block's span (not sampled), in one hold of the
 * lock: kept whole for a block of its size with its descriptor as it is,
 * in the common case, else as span_free gives it. */
BRISK_INTERNAL void span_free_large(segment_set_t *set, page_t *span);
/* The same, never cached: the slices are free for any span at once (the
 * span of a block the profiler sampled, which class pages should reuse:
 * cached, such spans kept a class page's worth of slices each from them,
 * and the heap grew into fresh ones). */
BRISK_INTERNAL void span_free_uncached(segment_set_t *set, page_t *span);
/* A huge block of the set at p, freed by a thread that does not own the
 * set's heap (a large one goes through the inbox): taken off the set's
 * list under its lock and freed without it: FOREIGN_FREED. Nothing is
 * done, and the answer says why, when under the lock the block is no
 * block of this set in use any more (freed twice, or its heap destroyed:
 * FOREIGN_NOT_IN_USE), or when its segment's owner id is keep_owner (the
 * heap is being walked by its owner) or the block is a profiler's sample
 * (FOREIGN_BATCH: the owner must take it back itself, through its inbox). */
enum { FOREIGN_FREED = 0, FOREIGN_BATCH = 1, FOREIGN_NOT_IN_USE = 2 };
BRISK_INTERNAL int span_free_foreign(segment_set_t *set, segment_t *seg, page_t *span, const void *p,
                                     uintptr_t keep_owner);
/* A large block's span freed by a thread that holds the set's lock and
 * has checked, under it, that the block is one of the set's in use (the
 * background thread, for a large block in an idle owner's inbox): to the
 * span cache, or to the free slices. */
BRISK_INTERNAL void span_free_large_held(segment_set_t *set, page_t *span);
/* A large block's span its heap keeps without the set's lock (the large
 * keep, heaps/large_keep.h): marked not in use as the span cache marks
 * its spans (no PAGE_IN_USE, reserved and capacity 0: a second free, a
 * usable size or a realloc of the block is reported as one of free
 * memory, and a remote free goes no further than free's checks), the rest
 * as it was: the set still has it in use, with its usable size
 * (block_size) and its tail's purge. The flags are stored relaxed: the
 * purger reads them under the set's lock (PAGE_LARGE, which stays). */
BRISK_INLINE void span_mark_kept(page_t *span) {
  field_store_relaxed(&span->flags, (uint8_t)PAGE_LARGE);
  span->reserved = 0;
  span->capacity = 0;
}
/* A kept span in use again (its block's fields are the caller's to set). */
BRISK_INLINE void span_mark_taken(page_t *span) {
  field_store_relaxed(&span->flags, (uint8_t)(PAGE_IN_USE | PAGE_LARGE));
}
/* A kept span given back by a thread that holds the set's lock (the
 * background thread, once the span has waited unused for a whole delay):
 * with purge (its owner idle), its slices freed and purged at once; else as
 * span_free_large gives one, for the set's next spans of any size. (Its
 * owner takes it back first and frees it as span_free_large does.) */
BRISK_INTERNAL void span_free_kept_held(segment_set_t *set, page_t *span, bool purge);
/* Give every cached span back to its segment (the owner's collect). */
BRISK_INTERNAL void span_cache_flush(segment_set_t *set);
/* Grow a large span in place by taking the free slices after it. */
BRISK_INTERNAL bool span_try_grow(segment_set_t *set, page_t *span, size_t slices);
/* The usable size of a large block in its span (at most span_bytes): the
 * request rounded up to the OS page (the whole span in the hardened build,
 * whose guard page ends the span). A span carved from resident slices
 * keeps what an earlier block wrote past the new block's end: that tail
 * is purged with the segment's next deadline. */
BRISK_INTERNAL void span_large_resize(segment_set_t *set, page_t *span, size_t size);
BRISK_INLINE size_t large_usable(const page_t *span, size_t size) {
  size_t rounded = OS_PAGE_CEIL(size);
  return BRISK_HARDENED || rounded > span->span_bytes ? span->span_bytes : rounded;
}

/* The owner purges what is due (everything when force), and maintains the
 * memory kept for every heap when no background thread does (or when
 * forced); cheap when nothing is due. */
BRISK_INTERNAL void segment_set_purge(segment_set_t *set, bool force);
/* The background purger: purge what is due in a set whose owner may be
 * running. Returns the set's next deadline (0: none), or a retry time
 * when the owner held the lock. */
BRISK_INTERNAL uint64_t segment_set_purge_idle(segment_set_t *set, uint64_t now);
/* Move every segment of the set to the pool, in use or not, and unmap its
 * huge blocks (heap destroy). */
BRISK_INTERNAL void segment_set_release_all(segment_set_t *set);
/* Change the owner thread recorded in every segment of the set. */
BRISK_INTERNAL void segment_set_set_owner(segment_set_t *set, uintptr_t tid);
/* Tie a huge block to a set: its frees then go through the set's owner,
 * and segment_set_release_all unmaps it. */
BRISK_INTERNAL void segment_set_adopt_huge(segment_set_t *set, segment_t *seg);
/* The owner frees a huge block of its set. */
BRISK_INTERNAL void segment_set_free_huge(segment_set_t *set, page_t *pg);

/* A set for a heap's new life (heap creation and reuse): empty, owned by
 * tid, under its lock (a thread walking every heap may hold it). */
BRISK_INTERNAL void segment_set_reset(segment_set_t *set, struct heap_s *heap, uintptr_t tid, bool page_lists);
/* malloc_trim: purge every free slice of a set that may be resident, due
 * or not, while its owner may be running (as segment_set_purge_idle, but
 * waiting for the lock). Returns the set's next deadline (0: none). */
BRISK_INTERNAL uint64_t segment_set_purge_forced(segment_set_t *set);
/* A new, shorter purge delay: no deadline of the set lies beyond
 * now + delay any more. Returns the set's next deadline (0: none). */
BRISK_INTERNAL uint64_t segment_set_reschedule(segment_set_t *set, uint64_t now, uint64_t delay);

/* The memory kept for all heaps: the pool of empty segments and the huge
 * cache and tails; returns what is past the delay at `now` (all when
 * force) and gives the next deadline (0: none). */
BRISK_INTERNAL uint64_t segments_maintain(uint64_t now, bool force);

/* The span cache (span.c), for the purges and the set's release
 * (set_maintain.c), under the set's lock: drop it without giving its
 * spans back (a destroyed heap's), give every span back, or those past
 * their deadline (all when force). */
BRISK_INTERNAL void span_cache_forget(segment_set_t *set);
BRISK_INTERNAL void span_cache_flush_locked(segment_set_t *set);
BRISK_INTERNAL void span_cache_expire(segment_set_t *set, uint64_t now, bool force);

#endif
