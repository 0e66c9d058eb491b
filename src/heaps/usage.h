/* What brisk holds, counted by walking every heap's segments (each under
 * its set's lock), the pool and the huge cache; and the calls that act on
 * every heap at once: malloc_trim, a new purge delay. */
#ifndef BRISK_USAGE_H
#define BRISK_USAGE_H

#include <stdbool.h>

#include "heaps/heap.h"
#include "runtime/stats.h"

/* The figures of stats.h's BRISK_USAGE_FIELDS. While other threads
 * allocate they are approximate: each heap is counted under its own lock,
 * one after another, and memory may move between heaps, the pool and the
 * huge cache meanwhile. */
BRISK_INTERNAL void usage_collect(stats_usage_t *u);

/* One heap's part of the figures (malloc_info's <heap> elements): false
 * when h holds no segment or is not in a state to be looked at. */
typedef struct usage_heap_s {
  int64_t segments;   /* 4 MiB segments it owns */
  int64_t in_use;     /* bytes of its spans in use */
  int64_t free_bytes; /* bytes of its free slices */
  int64_t free_runs;  /* runs of free slices */
} usage_heap_t;
BRISK_INTERNAL bool usage_heap(heap_t *h, usage_heap_t *out);

/* Return every heap's unused memory to the OS now: `mine` (the calling
 * thread's heap, or NULL) in full (heap_collect), the free slices of
 * every other owned heap, abandoned heaps whole, the pool and the huge
 * cache. True when memory went back (purged or unmapped). */
BRISK_INTERNAL bool usage_trim(heap_t *mine);

/* The purge delay changed: no deadline of any heap lies beyond now plus
 * the new delay. Returns the earliest deadline (0: none). */
BRISK_INTERNAL uint64_t usage_reschedule(uint64_t now);

#endif
