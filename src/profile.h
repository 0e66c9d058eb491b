/* The sampling heap profiler: which stacks allocated the memory that is in
 * use, estimated from a random sample of the bytes allocated.
 *
 *   BRISK_PROFILE=<prefix> (or brisk_profile_start) ──► sampling on
 *
 *   allocation slow paths (heap.c)          profile_count.c, profile.c
 *   ── count against the class's countdown   prof_heap_t: bytes to the next
 *      (prof_heap_t.left[c]) ──────────────►   sample, per heap and class
 *   ── sampled: a cached class's block in a  stack (stackwalk.c) + record,
 *      page marked PAGE_HOLDS_SAMPLE, else   its slot in the descriptor
 *      a large block ──────────────────────►
 *   ── a page's free list handed to the      prof_expose: cut where the
 *      inline fast path ──────────────────►    next sample falls
 *   frees of large and huge blocks, and of a marked page's sample (page.c,
 *   free.c):
 *   ── descriptor's prof_slot != 0 ────────► prof_forget
 *   dumps: at exit, brisk_profile_dump, every BRISK_PROFILE_INTERVAL bytes of
 *   growth, on BRISK_PROFILE_SIGNAL (the handler sets a flag and wakes the
 *   background thread, which writes the files; without it, the next
 *   counted slow path does)
 *
 * Every byte allocated is sampled with probability 1 / BRISK_PROFILE_RATE:
 * each heap keeps, per size class, the bytes left to the next sampled byte,
 * drawn from the exponential distribution of mean RATE (a memoryless
 * Poisson process: per-class countdowns sample each byte alike). The fast
 * paths count nothing: only slow paths hand blocks to them (a page's free
 * list), so in a heap that samples every list of a current page ends at
 * page_list_cut, and the slow path that hands a list over counts it (its
 * length is the page's free blocks) or, when the class's countdown runs
 * out within it, cuts it there (the rest waits on the page's local list):
 * the allocation that finds the cut is the sample, in the slow path.
 * Classes above DIRECT_MAX, large and huge blocks have no inline path: each
 * of their allocations is counted in the slow path while sampling is on.
 * A sampled block of a class with a cache is the block it would have been,
 * in a page marked PAGE_HOLDS_SAMPLE (one live sample per page), whose
 * frees all reach page_notify_sampled while it lives; any other is served as
 * a large block (a span of its own, usable size rounded up to 4 KiB),
 * whose free always takes a slow path. Either way the descriptor's
 * prof_slot is looked at: O(1).
 *
 * Layer 5, after heap_types.h and before page.h (profile_count.c keeps the
 * countdowns and cut lists, profile.c the record and the dumps, calling
 * profile_count.c and profile_out.c): it calls the platform layer,
 * options, reports, the background thread and stackwalk.c; page.c,
 * heap.c, thread.c, free.c, api.c and settings.c call it. */
#ifndef BRISK_PROFILE_H
#define BRISK_PROFILE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "background.h"
#include "block.h"
#include "heap_types.h"
#include "profile_count.h"

/* Sampling is on: the slow paths count allocations. */
BRISK_INLINE bool prof_active(void) {
  return atomic_load_explicit(&brisk_read_mostly.prof_active, memory_order_relaxed) != 0;
}

/* h's state, created on first use (NULL when the OS has no memory for it:
 * then h samples nothing). A thread's heap sends every allocation above
 * DIRECT_MAX past malloc_above's unprofiled class-cache branch
 * (cache_path_max) while it samples. */
BRISK_INTERNAL prof_heap_t *prof_heap_state(heap_t *h);
BRISK_INLINE prof_heap_t *prof_heap_of(heap_t *h) {
  if (BRISK_UNLIKELY(h->prof == NULL || (h->cache_path_max > DIRECT_MAX && h->kind == HEAP_KIND_THREAD) ||
                     h->prof->epoch != sampler_epoch()))
    return prof_heap_state(h);
  return h->prof;
}
/* Record the sampled block (a large or huge block, descriptor pg) of
 * `requested` bytes, counted as `sampled` bytes of class c (0: a large or
 * huge block): the stack is captured here. */
BRISK_INTERNAL void prof_sampled(heap_t *h, page_t *pg, size_t requested, unsigned c, size_t sampled);
/* A large or huge block whose descriptor has a prof_slot is freed, by the
 * thread whose heap is `caller` (NULL: none). */
BRISK_INTERNAL void prof_forget(page_t *pg, heap_t *caller) BRISK_NOINLINE;
/* The same for a block of owner's own segments freed on its behalf (a
 * large block, a first-class heap's huge block): forgotten in owner's
 * batch, under the record's lock at owner's next sample. */
BRISK_INTERNAL void prof_forget_owned(page_t *pg, heap_t *owner) BRISK_NOINLINE;
/* Every sampled block of h goes (heap_destroy). */
BRISK_INTERNAL void prof_forget_heap(heap_t *h);
/* A round of the background thread (heaps_background_round): a dump that
 * was asked for (by the signal or the interval, which wake the thread);
 * returns the next deadline (0: none). */
BRISK_INTERNAL uint64_t prof_background(uint64_t now);
/* A safe point (a slow path with no lock held, not brisk's own heap):
 * start the background thread if it is wanted, write a dump that was
 * asked for if no background thread will. */
BRISK_INTERNAL void prof_poll_slow(void);
BRISK_INLINE void prof_poll(void) {
  background_poll();
  if (BRISK_UNLIKELY(atomic_load_explicit(&brisk_read_mostly.prof_dump_requested, memory_order_relaxed)))
    prof_poll_slow();
}

/* Start-up (after the options are read; again when they are read late). */
BRISK_INTERNAL void prof_init(void);
BRISK_INTERNAL void prof_at_exit(void);
/* BRISK_PROFILE_LEAKS set while running (settings.c). */
BRISK_INTERNAL void prof_leaks_changed(bool on);
BRISK_INTERNAL void prof_fork_prepare(void);
BRISK_INTERNAL void prof_fork_parent(void);
BRISK_INTERNAL void prof_fork_child(void);

/* The API (brisk_profile_*): 0 or an errno value. */
BRISK_INTERNAL int prof_start(const char *prefix);
BRISK_INTERNAL void prof_stop(void);
BRISK_INTERNAL int prof_dump(const char *path);

#endif
