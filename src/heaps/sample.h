/* Sampled allocations: which allocation is the next sample, for the two
 * samplers that share one count of the bytes a heap allocates (the heap
 * profiler's, profiler.h, and the guarded samples', guarded.h), and the
 * cut lists that make the allocation it falls on take a slow path.
 *
 *   a heap that samples (h->sampler set)
 *   ── per class c: left[c], the bytes to the nearer sample
 *   ── the current page of an inline class (<= DIRECT_MAX): its list ends
 *      at page_list_cut, and the slow path that hands it to the inline
 *      path counts it (sampler_expose), or cuts it where the countdown runs
 *      out: the allocation that finds the cut is counted in the slow path
 *   ── every other allocation is counted in the slow path (heap.c)
 *   ── a countdown runs out (sampler_expired): a guarded sample
 *      (guarded_alloc), or a profiler sample (sample_taken ──► prof_sample)
 *   a sampled block's free (its descriptor's prof_slot != 0):
 *   ── sample_freed / sample_freed_owned ──► prof_forget*
 *
 * The fast paths count nothing. Only the owner of a heap touches its
 * sampler and its pages' lists; nothing here takes a lock or allocates.
 * The profiler is reached through profiler.h alone, and only from here
 * and the process's life (thread.c); it knows nothing of heaps or pages
 * (a sample is its descriptor's slot and address).
 *
 * Layer: heaps, after heap_types.h and before page.h. */
#ifndef BRISK_SAMPLE_H
#define BRISK_SAMPLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "heaps/block.h"
#include "heaps/heap_types.h"

/* The sampler of one heap (owner only). */
typedef struct sampler_s {
  /* left[c] is the nearer of the two countdowns (the one the cut lists
   * use), lag[c] how much further the other runs out, guard_first[c]
   * whether the nearer is the guard's. Counting moves both alike, so only
   * a draw changes lag. A sampler that is off is a countdown that never
   * runs out (SAMPLER_NEVER). */
  int64_t left[CLASS_COUNT]; /* bytes to the next sample; [0]: large and huge */
  int64_t lag[CLASS_COUNT];
  uint8_t guard_first[CLASS_COUNT];
  uint32_t epoch; /* the samplers' settings the countdowns were drawn for */
  uint64_t rng;
  /* The owner is in the profiler (a stack walk, its locks): an allocation
   * or free that interrupts it (a signal handler) neither samples nor
   * waits for the profiler's locks. */
  uint32_t busy;
  struct prof_heap_s *prof; /* the profiler's state of this heap (profiler.h) */
} sampler_t;

/* Where a free list cut for sampling ends: inside the segment header like
 * page_list_end (so its last block still looks free to free()), but not
 * that address. page_refill_pop takes no local list in a heap that
 * samples, whatever its list ends at: the next allocation reaches the
 * counted refill in heap_alloc. page_collect reads it as an empty list. */
BRISK_INLINE block_t *page_list_cut(const page_t *pg) {
  return (block_t *)((uintptr_t)page_list_end(pg) + 16);
}

/* A countdown that never runs out: its sampler is off. */
#define SAMPLER_NEVER ((int64_t)4000000000000000000)
/* What a run-out countdown sampled (sampler_expired). */
#define SAMPLE_PROFILE 1u
#define SAMPLE_GUARD 2u

/* Either sampler is on: the slow paths count allocations. */
BRISK_INLINE bool sampling_active(void) {
  return atomic_load_explicit(&brisk_read_mostly.sampling, memory_order_relaxed) != 0;
}

/* The samplers' settings (the profiler records, one allocation in
 * guard_rate is guarded): each change counts in an epoch that makes every
 * heap draw its countdowns again at its next counted allocation. */
BRISK_INTERNAL extern _Atomic(uint32_t) sampler_epoch_now;
BRISK_INLINE uint32_t sampler_epoch(void) {
  return atomic_load_explicit(&sampler_epoch_now, memory_order_relaxed);
}
/* A sampler was switched on or off, or its rate changed: the epoch moves,
 * and brisk_read_mostly.sampling says whether either is on. */
BRISK_INTERNAL void sampler_settings_changed(void);
/* s, zeroed, takes its seed and draws every countdown. */
BRISK_INTERNAL void sampler_init(sampler_t *s, uint64_t seed);
/* Every class's countdowns drawn afresh, for the settings in force. */
BRISK_INTERNAL void sampler_draw_all(sampler_t *s);
/* Class c's countdown (left[c]) ran out on this allocation: which samples
 * fall on it (SAMPLE_*); their countdowns are drawn again. */
BRISK_INTERNAL unsigned sampler_expired(sampler_t *s, unsigned c);

/* An allocation of class c counted against s's countdown; false,
 * counting nothing, when the countdown runs out on it (the sample: the
 * counted slow path takes it). */
BRISK_INLINE bool sampler_count_class(sampler_t *s, unsigned c) {
  int64_t left = s->left[c] - (int64_t)class_size(c);
  if (left <= 0) return false;
  s->left[c] = left;
  return true;
}

/* Start counting h's allocations: the lists its inline path pops from are
 * withdrawn (cut), so the next allocation of each class is counted. */
BRISK_INTERNAL void sampler_attach(heap_t *h);
/* pg, the current page of class c (<= DIRECT_MAX), will serve the inline
 * path: cut its free list where the countdown runs out, and count what it
 * hands out as allocated. */
BRISK_INTERNAL void sampler_expose(sampler_t *s, unsigned c, page_t *pg);
/* The current page of class c (<= DIRECT_MAX) changes from old to pg
 * (either NULL: none): what old's list still held is counted back, and
 * pg's list waits behind a cut until the slow path exposes it. */
BRISK_INTERNAL void sampler_head_change(sampler_t *s, unsigned c, page_t *old, page_t *pg);

/* The calls out to the profiler (profiler.h), with s->busy around them. A
 * block of `requested` bytes (class c, 0: large or huge, counted for
 * `counted` bytes), whose descriptor is pg, is the profiler's sample; its
 * stack is taken here. */
BRISK_INTERNAL void sample_taken(sampler_t *s, page_t *pg, size_t requested, unsigned c, size_t counted);
/* pg's sampled block (large or huge) is freed by the thread whose heap is
 * `caller` (NULL: none). */
BRISK_INTERNAL void sample_freed(page_t *pg, heap_t *caller) BRISK_NOINLINE;
/* The same for a block of owner's own segments freed on its behalf (a
 * large block, a first-class heap's huge block, a class page's sample):
 * forgotten in owner's batch. */
BRISK_INTERNAL void sample_freed_owned(page_t *pg, heap_t *owner) BRISK_NOINLINE;
/* Every sample of h's blocks goes (heap_destroy). */
BRISK_INTERNAL void sample_heap_gone(heap_t *h);

#endif
