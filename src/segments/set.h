/* A heap's set of segments: its type, and its lowest part (set.c), all
 * under the set's lock: the lock's release, the directory of segments,
 * segments joining. span.c (spans: runs, carving, the span cache) and
 * set_maintain.c (purges on deadlines, release, reset) build on it, each
 * calling only the ones before it; their interface is span.h. */
#ifndef BRISK_SET_H
#define BRISK_SET_H

#include <stdbool.h>

#include "os/platform.h"
#include "segments/layout.h"

struct heap_s;

/* A segment's slice masks as its set's search reads them: a copy, kept
 * equal to the segment's own under the set's lock (set.c, dir_sync).
 * Side by side in one array, a search for free slices reads a few cache
 * lines, where reading each segment's header line costs a cache and a TLB
 * miss per segment (each lies in a page of its own). */
typedef struct segment_dir_s {
  uint64_t free_slices;
  uint64_t dirty_slices;
  uint64_t light_slices;
  segment_t *seg;
} segment_dir_t;

/* The segments of one heap. `lock` guards segs, count, dir, next_purge_ms
 * and the slice masks of those segments: the owner takes it in every function
 * below, the background purger to purge the free slices of a heap whose
 * owner does not come by (segment_set_purge_idle). The purger only tries
 * it, and holds it for bookkeeping. The system calls under it: the madvise
 * of a live large block's tail, which in-place growth (under the lock)
 * must not meet half done, the purges of BRISK_PURGE_DELAY=0, and the
 * hardened build's guard mprotects; every other one is made with the lock
 * let go (docs/DESIGN.md, "Locks and system calls"). */
typedef struct segment_set_s {
  brisk_lock_t lock;
  segment_list_t segs;    /* its segments, in no order (the search reads dir) */
  segment_list_t huge;    /* huge blocks owned by the set (first-class heaps), under the lock */
  size_t count;
  segment_dir_t *dir;     /* count entries, one per segment of segs (in the
                             order they joined, but for removals, which move
                             the last entry into the gap): dir_inline, or
                             once more segments joined, a mapping of its own */
  size_t dir_cap;         /* entries there; the array grows, never shrinks */
  uint64_t next_purge_ms; /* 0: nothing waits; written under the lock, read by the
                             owner without it (relaxed accesses) */
  uintptr_t owner_tid;
  struct heap_s *heap;
  uint32_t heap_generation; /* the heap's life, which joining segments take */
  uint8_t page_lists;       /* joining segments take it (segment_t.page_lists); set
                               with the lock held (segment_set_reset) */
  bool fresh_only;        /* never a destroyed heap's segment (brisk's own heap) */
  /* Spans freed whole and kept for the next span of the same size (span.c,
   * "the span cache"): a stack per slice count (cached[n - 1], cached_n[n -
   * 1] of them), newest on top; their slices are in no free mask and point
   * at brisk_dead_page, or at a large block's kept descriptor. Under the
   * lock. */
  uint32_t cached_count;  /* spans, all sizes */
  uint32_t cached_slices;
  uint64_t cache_at_ms;   /* when they go back to their segments; 0: no deadline */
  uint8_t cached_n[SPAN_CACHE_SPAN_MAX];
  page_t *cached[SPAN_CACHE_SPAN_MAX][SPAN_CACHE_DEPTH];
  segment_dir_t dir_inline[SET_DIR_INLINE];
} segment_set_t;


/* Free slices waiting for the purge: at least this many in a segment (or
 * in the span cache) make it worth starting the background thread. */
#define PURGE_WORTH_A_THREAD 16


/* set.c */
/* Every release of a set's lock: then the pool's surplus, if a segment
 * went there under the lock, goes back to the OS (no unmap under it). */
BRISK_INTERNAL void set_unlock(segment_set_t *set);
/* seg's directory entry made to agree with its masks again. */
BRISK_INTERNAL void dir_sync(segment_set_t *set, segment_t *seg);
BRISK_INTERNAL void dir_remove(segment_set_t *set, segment_t *seg);
/* Debug builds: the directory against the segments (nothing otherwise). */
BRISK_INTERNAL void dir_check(const segment_set_t *set);
/* seg has free slices again: true when the set should know (its list
 * order or deadline changed). */
BRISK_INTERNAL bool set_note_free(segment_set_t *set, segment_t *seg);
/* A segment from the pool or new, joined to the set; NULL: no memory. */
BRISK_INTERNAL segment_t *set_add_segment(segment_set_t *set, bool resident_only);
/* Lowers the set's next deadline to `at`. */
BRISK_INTERNAL void set_deadline_lower(segment_set_t *set, uint64_t at);

#endif
