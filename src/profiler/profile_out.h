/* The profiler's output: the legacy heap profile, the collapsed stacks and
 * the leak report, written from a snapshot of the record (profile.c) into a
 * buffer of PROF_OUT_BYTES that the caller maps (never brisk's heaps). */
#ifndef BRISK_PROFILE_OUT_H
#define BRISK_PROFILE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

#define PROF_OUT_BYTES ((size_t)64 << 10)

/* One stack's counts at one instant, scaled back from the samples. */
typedef struct prof_snap_s {
  const uintptr_t *pc; /* return addresses, innermost first */
  uint32_t depth;
  uint64_t live_n, live_b, alloc_n, alloc_b, samples;
} prof_snap_t;

/* Largest in-use bytes first (then allocated bytes); no allocation. */
BRISK_INTERNAL void prof_snap_sort(prof_snap_t *v, size_t n);
/* Write to fd; 0 or an errno value. buf: PROF_OUT_BYTES. */
BRISK_INTERNAL int prof_write_heap(int fd, const prof_snap_t *v, size_t n, char *buf);
BRISK_INTERNAL int prof_write_collapsed(int fd, const prof_snap_t *v, size_t n, char *buf);
/* The leak report on stderr: the stacks still holding sampled blocks,
 * largest first (the first PROF_LEAK_STACKS of them). */
BRISK_INTERNAL void prof_write_leaks(const prof_snap_t *v, size_t n, char *buf, int64_t rate);

#endif
