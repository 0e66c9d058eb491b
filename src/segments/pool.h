/* The pool of empty segments, shared by all heaps: kept mapped for reuse
 * up to BRISK_SEGMENT_CACHE of them, their pages purged after the delay,
 * the surplus unmapped. */
#ifndef BRISK_POOL_H
#define BRISK_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "segments/layout.h"

/* A segment whose slices are all free. keep_until_due: a destroyed heap's
 * segment, unmapped only once the delay has passed even beyond the cap,
 * so that heap destruction stays one quick call. */
BRISK_INTERNAL void pool_put(segment_t *seg, bool keep_until_due);
/* After pool_put, once no lock is held: the surplus goes back to the OS
 * (pool_maintain). One relaxed load when nothing arrived. */
extern _Atomic(int) pool_wanted BRISK_INTERNAL;
BRISK_INTERNAL void pool_poll_slow(void);
static inline void pool_poll(void) {
  if (__builtin_expect(atomic_load_explicit(&pool_wanted, memory_order_relaxed) != 0, 0)) pool_poll_slow();
}
/* The newest pooled segment, one of a destroyed heap only when no other
 * is there (and take_destroyed); NULL if none. */
BRISK_INTERNAL segment_t *pool_take(bool take_destroyed);
/* The newest pooled segment with slices that may still be resident (not
 * yet purged), never a destroyed heap's; NULL if none (one relaxed load
 * when there is none). A set takes it before faulting in clean slices of
 * its own: memory another heap gave back is reused rather than kept
 * resident beside fresh memory until its deadline. */
BRISK_INTERNAL segment_t *pool_take_resident(void);
/* Purge what is due at `now` (everything when force) and unmap the
 * surplus; returns the next deadline (0: none). */
BRISK_INTERNAL uint64_t pool_maintain(uint64_t now, bool force);

/* For mallinfo and the statistics: the segments in the pool, the bytes
 * of their page slices, and how many of those may be resident. */
BRISK_INTERNAL void pool_usage(int64_t *segments, int64_t *free_bytes, int64_t *resident_bytes);

/* Around fork (thread.c). */
BRISK_INTERNAL void pool_lock(void);
BRISK_INTERNAL void pool_unlock(void);
BRISK_INTERNAL void pool_reset_lock(void);

#endif
