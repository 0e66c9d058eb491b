/* Guarded samples: one allocation in BRISK_GUARD_RATE, at random points,
 * is served on a page of its own that ends at an inaccessible guard page
 * (or, with BRISK_GUARD_UNDERFLOW, starts after one), and its pages are
 * closed when it is freed and stay so until its slot is reused (the
 * slots are taken oldest-freed first: the quarantine is the slot count,
 * BRISK_GUARD_SLOTS). An access to a closed page is reported with the
 * kind of bug, the block and the stacks of its allocation and free; the
 * process then ends as it would have (or, with BRISK_GUARD_CONTINUE, the
 * page is opened and it goes on).
 *
 *   region:  | slot 0                 | slot 1                 | ... | guard |
 *   slot:    | guard page | data pages (64 KiB - 4 KiB)        |
 *   block:   ends at the slot's end, where the next slot's guard page
 *            starts (aligned as its size allows: 8 bytes for 40), or
 *            starts just after the slot's own guard page
 *
 * The heaps choose which allocation (sample.c: the countdowns of
 * the sampler the heap profiler uses, so the fast paths do not change);
 * only blocks of a thread's heap up to GUARDED_MAX bytes are guarded. A
 * guarded block is in no segment: free, realloc and the size queries find
 * it by its address (guarded_owns) where they handle pointers that are in
 * no segment of brisk's.
 *
 * Folder guarded/, above the profiler: calls the platform layer, options, reports
 * and the profiler's stack walk. */
#ifndef BRISK_GUARDED_H
#define BRISK_GUARDED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

#define GUARDED_MAX ((size_t)32 * 1024)

/* The region: its size is written before its base is published (release),
 * and the base is 0 until the first guarded allocation. */
extern _Atomic(uintptr_t) guarded_base BRISK_INTERNAL;
extern size_t guarded_size BRISK_INTERNAL;

BRISK_INLINE bool guarded_owns(const void *p) {
  uintptr_t base = atomic_load_explicit(&guarded_base, memory_order_acquire);
  return base != 0 && (uintptr_t)p - base < guarded_size;
}

/* A guarded block of `size` bytes (<= GUARDED_MAX) aligned to
 * `alignment` (0: as malloc); NULL when none can be had now (every slot
 * in use, or the OS refused memory): the caller serves the allocation as
 * usual. */
BRISK_INTERNAL void *guarded_alloc(size_t size, size_t alignment);
/* Free p (guarded_owns(p)); a pointer that is not a live guarded block's
 * start is reported, as `fn` (the caller's name), and left alone. */
BRISK_INTERNAL void guarded_free(void *p, const char *fn);
/* The size p was allocated with; 0 (reported) when p is not a live
 * guarded block's start. */
BRISK_INTERNAL size_t guarded_usable_size(const void *p, const char *fn);

#endif
