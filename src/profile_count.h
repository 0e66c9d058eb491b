/* The profiler's countdowns: when the next sample falls, and the cut
 * lists that make the allocation it falls on take the slow path. Only the
 * owner of a heap touches its countdowns and its pages' lists; nothing here
 * takes a lock or allocates. profile.h (the record, included by the slow
 * paths) includes it; profile.c and heap.c call it. */
#ifndef BRISK_PROFILE_COUNT_H
#define BRISK_PROFILE_COUNT_H

#include <stdint.h>

#include "block.h"
#include "heap_types.h"
#include "stackwalk.h"

#define PROF_DROP_BATCH 64
#define PROF_PENDING_BATCH 64
/* A descriptor's prof_slot with this bit: the sample is entry (slot &
 * ~PROF_SLOT_PENDING) of its heap's pending batch, not yet in the record. */
#define PROF_SLOT_PENDING 0x80000000u

typedef struct prof_stack_s prof_stack_t; /* a stack in the record (profile_record.c) */

/* A sample of a large block not yet in the record. */
typedef struct prof_pending_s {
  prof_stack_t *stack;
  page_t *pg; /* the block's descriptor; NULL once freed */
  double weight, bytes;
} prof_pending_t;

/* The profiler's state of one heap (owner only, like the heap, but for
 * its batch of forgotten samples). */
typedef struct prof_heap_s {
  /* Two samplers count the same bytes: the profiler's, and the guarded
   * samples' (guarded.h). left[c] is the nearer of their countdowns (the
   * one the cut lists use), lag[c] how much further the other runs out,
   * guard_first[c] whether the nearer is the guard's. Counting moves both
   * alike, so only a draw changes lag. A sampler that is off is a
   * countdown that never runs out (SAMPLER_NEVER). */
  int64_t left[CLASS_COUNT]; /* bytes to the next sample; [0]: large and huge */
  int64_t lag[CLASS_COUNT];
  uint8_t guard_first[CLASS_COUNT];
  uint32_t epoch;            /* the samplers' settings the countdowns were drawn for */
  uint64_t rng;
  uint32_t busy;             /* the owner is in the profiler (a stack walk, the
                                record's lock): an allocation or free that
                                interrupts it (a signal handler) neither
                                samples nor waits for the lock */
  uint32_t live;             /* its sampled blocks still live (under the lock) */
  /* Batches, so that the record's lock (shared by every thread) is taken
   * once per PROF_PENDING_BATCH samples rather than twice per sample: the
   * samples of large blocks (any block the profiler samples but a huge
   * one) not yet entered in the record, each with its stack (found without
   * the lock), and the record's entries of this heap's blocks freed and
   * not yet forgotten. Both are emptied into the record by the owner when
   * one is full; a dump reads the pending samples and empties the drops of
   * every heap. drops_lock guards both (the owner, a dump, a free on an
   * abandoned heap's behalf). Lock order: drops_lock, then the record's. */
  brisk_lock_t drops_lock;
  uint32_t drop_count;
  uint32_t pending_count;
  uint32_t drops[PROF_DROP_BATCH];
  prof_pending_t pending[PROF_PENDING_BATCH];
  struct prof_heap_s *all_next; /* every heap state (the record's lock) */
  walk_memo_t walk_memo;     /* the last sample's frames (stackwalk.h) */
  struct prof_stack_s *last_stack; /* the last sample's stack record (NULL: none) */
  double weight_rate;        /* the rate weight[] was computed for */
  double weight[CLASS_COUNT]; /* 1 / the probability that a block of the
                                class is sampled; 0: not computed yet */
  double weight_large[LARGE_MAX / OS_PAGE_BYTES + 1]; /* the same for a large
                                block of [i] pages (a sample is counted for
                                its size rounded up to pages) */
} prof_heap_t;

/* Where a free list cut by the profiler ends: inside the segment header
 * like page_list_end (so its last block still looks free to free()), but
 * not that address. page_refill_pop takes no local list in a heap that
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

/* The samplers' settings: the profiler records (prof_recording), one
 * allocation in guard_rate is guarded; each change counts in an epoch that
 * makes every heap draw its countdowns again at its next counted
 * allocation, and sets brisk_read_mostly.prof_active (the heaps count)
 * while either sampler is on. */
BRISK_INTERNAL extern _Atomic(uint32_t) sampler_epoch_now;
BRISK_INTERNAL extern _Atomic(int) prof_recording_on;
BRISK_INLINE bool prof_recording(void) {
  return atomic_load_explicit(&prof_recording_on, memory_order_relaxed) != 0;
}
BRISK_INLINE uint32_t sampler_epoch(void) {
  return atomic_load_explicit(&sampler_epoch_now, memory_order_relaxed);
}
BRISK_INTERNAL void sampler_settings_changed(void);
/* Every class's countdowns drawn afresh, for the settings in force. */
BRISK_INTERNAL void sampler_draw_all(prof_heap_t *ph);
/* Class c's countdown (left[c]) ran out on this allocation: which samples
 * fall on it (SAMPLE_*); their countdowns are drawn again. */
BRISK_INTERNAL unsigned sampler_expired(prof_heap_t *ph, unsigned c);
/* pg, the current page of class c (<= DIRECT_MAX), will serve the inline
 * path: cut its free list where the countdown runs out, and count what it
 * hands out as allocated. */
BRISK_INTERNAL void prof_expose(prof_heap_t *ph, unsigned c, page_t *pg);
/* The current page of class c (<= DIRECT_MAX) changes from old to pg
 * (either NULL: none): what old's list still held is counted back, and
 * pg's list waits behind a cut until the slow path exposes it. */
BRISK_INTERNAL void prof_head_change(prof_heap_t *ph, unsigned c, page_t *old, page_t *pg);

/* The sampling rate in force (BRISK_PROFILE_RATE, which may change while
 * running: each countdown takes the new one at its next draw). */
BRISK_INTERNAL double prof_current_rate(void);
/* The probability that a block of `bytes` holds at least one sampled byte
 * at `rate`: its sample stands for 1 / this many blocks. */
BRISK_INTERNAL double prof_sample_probability(double bytes, double rate);
/* What a sample of `bytes` (class c, or 0 for a large or huge block)
 * stands for at the rate in force: 1 / its probability (computed once per
 * class and rate, and per page count of large blocks: `bytes` is a
 * whole number of pages when c is 0). */
BRISK_INTERNAL double prof_sample_weight(prof_heap_t *ph, unsigned c, size_t bytes);
/* Start counting h's allocations: the lists its inline path pops from are
 * withdrawn (cut), so the next allocation of each class is counted. */
BRISK_INTERNAL void prof_attach(heap_t *h);

#endif
