/* Values that every allocation or free reads and that change about once
 * per process: the keys of free-block links, whether the heap profiler
 * samples, and the two flags a slow path polls (a dump asked for, the
 * background thread wanted). They share one cache line with nothing that is written often.
 * As plain globals the linker put them beside the profiler's running
 * totals and the segment pool's count, so that every sample or pool
 * change took the line away from the other core's fast paths (a sampling
 * run of `linear` spent 4% of its time on the load of the profiler's
 * flag).
 *
 * Base layer (defined in read_mostly.c): written by block.c (the keys,
 * once, at start-up), profile.c (its flag), sample.c (sampling) and
 * background.c (its flag); read through block.h, sample.h, profiler.h
 * and background.h. */
#ifndef BRISK_READ_MOSTLY_H
#define BRISK_READ_MOSTLY_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/config.h"

#define CACHE_LINE_BYTES 64

typedef struct {
  _Alignas(CACHE_LINE_BYTES) uintptr_t link_key; /* free-list links (block.h) */
  uintptr_t remote_key;                          /* remote-free chains, drawn apart from link_key */
  _Atomic(int) sampling;                         /* the heaps count allocations (sample.h) */
  _Atomic(int) prof_dump_requested;              /* by a signal or the interval (profiler.h) */
  _Atomic(int) background_wanted;                /* start the thread at the next safe point */
  /* the rest of the line stays empty */
} brisk_read_mostly_t;

_Static_assert(sizeof(brisk_read_mostly_t) == CACHE_LINE_BYTES, "one cache line");

extern brisk_read_mostly_t brisk_read_mostly BRISK_INTERNAL;

#endif
