/* The heap profiler's record: every stack that holds a sample, with its
 * counts scaled back from the samples; every sampled block still live, by
 * slot (the number in its descriptor's prof_slot); the heaps' batches of
 * samples and frees not yet entered; and a snapshot of
 * it all for a dump.
 *
 *   prof_sample  ──► stack_seen (no lock) ──► the heap's pending batch
 *                    (new stack, full batch, huge block: under the lock)
 *                    ──► stack_find, pending_flush, sample_enter
 *   prof_forget* ──► the heap's drop batch ──► drops_flush ──► the slot freed
 *   a dump       ──► snapshot: every batch lock, the record's lock,
 *                    stacks + pending samples - dropped ones
 *
 * "Locked": the caller holds record_lock() (and, for a heap's batches, its
 * drops_lock, taken first). profile.c calls this; it calls nothing of
 * profile.c. */
#ifndef BRISK_PROFILE_RECORD_H
#define BRISK_PROFILE_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "os/platform.h"
#include "profiler/profile_out.h"
#include "profiler/profiler.h"
#include "profiler/stackwalk.h"

#define PROF_DROP_BATCH 64
#define PROF_PENDING_BATCH 64
/* A descriptor's prof_slot with this bit: the sample is entry (slot &
 * ~PROF_SLOT_PENDING) of its heap's pending batch, not yet in the record. */
#define PROF_SLOT_PENDING 0x80000000u

typedef struct prof_stack_s prof_stack_t; /* a stack in the record */

/* A sample of a block only its owner frees, not yet in the record. */
typedef struct prof_pending_s {
  prof_stack_t *stack;
  uint32_t *slot; /* the block's descriptor's slot; NULL once freed */
  uintptr_t addr;
  double weight, bytes;
} prof_pending_t;

/* The profiler's state of one heap: written by the heap's owner, but for
 * its batch of forgotten samples. Batches, so that the record's lock
 * (shared by every thread) is taken once per PROF_PENDING_BATCH samples
 * rather than twice per sample: the samples of blocks only the owner frees
 * (any block the profiler samples but a huge one) not yet entered in the
 * record, each with its stack (found without the lock), and the record's
 * entries of this heap's blocks freed and not yet forgotten. Both are
 * emptied into the record by the owner when one is full; a dump reads the
 * pending samples and empties the drops of every heap. drops_lock guards
 * both (the owner, a dump, a free on an abandoned heap's behalf). Lock
 * order: drops_lock, then the record's. */
struct prof_heap_s {
  brisk_lock_t drops_lock;
  uint32_t live; /* its sampled blocks still live (under the record's lock) */
  uint32_t drop_count;
  uint32_t pending_count;
  uint32_t drops[PROF_DROP_BATCH];
  prof_pending_t pending[PROF_PENDING_BATCH];
  struct prof_heap_s *all_next;    /* every heap state (the record's lock) */
  walk_memo_t walk_memo;           /* the last sample's frames (stackwalk.h) */
  struct prof_stack_s *last_stack; /* the last sample's stack record (NULL: none) */
  double weight_rate;              /* the rate weight[] was computed for */
  double weight[CLASS_COUNT];      /* 1 / the probability that a block of the
                                      class is sampled; 0: not computed yet */
  double weight_large[LARGE_MAX / OS_PAGE_BYTES + 1]; /* the same for a large
                                      block of [i] pages (a sample is counted
                                      for its size rounded up to pages) */
};

BRISK_INTERNAL void record_lock(void);
BRISK_INTERNAL void record_unlock(void);

/* Memory for the profiler, from the platform layer (never brisk's heaps). */
BRISK_INTERNAL void *record_map(size_t size);
/* A heap's profiler state: zeroed, on cache lines of its own, in the list
 * that snapshots walk; NULL when out of memory. Not locked. */
BRISK_INTERNAL prof_heap_t *record_heap_new(void);

BRISK_INTERNAL uint64_t record_stack_hash(const uintptr_t *pcs, size_t n);
/* The stack's record if it was seen before, else NULL. Not locked. */
BRISK_INTERNAL prof_stack_t *record_stack_seen(const uintptr_t *pcs, size_t n, uint64_t hash);
/* The stack's record, made if new; NULL when out of memory. Locked. */
BRISK_INTERNAL prof_stack_t *record_stack_find(const uintptr_t *pcs, size_t n, uint64_t hash);

/* Locked: a sample of stack s (the block at addr, standing for `weight` blocks and
 * `bytes` bytes) entered; its slot, 0 when the record has no room (then
 * counted as allocated only). *dump is set when the in-use estimate grew
 * by BRISK_PROFILE_INTERVAL. */
BRISK_INTERNAL uint32_t record_sample_enter(prof_heap_t *ph, prof_stack_t *s, uintptr_t addr, double weight,
                                            double bytes, bool *dump);
/* Locked: the block of this slot was freed. */
BRISK_INTERNAL void record_sample_forget(uint32_t slot);
/* Locked, with ph's drops_lock: ph's batch of freed samples forgotten. */
BRISK_INTERNAL void record_drops_flush(prof_heap_t *ph);
/* Locked, with ph's drops_lock: ph's pending samples entered. live: by the
 * owner, which gives each live block its slot; else (the heap goes with
 * its blocks) counted as allocated only, their slots untouched.
 * Returns whether a dump is due, as record_sample_enter. */
BRISK_INTERNAL bool record_pending_flush(prof_heap_t *ph, bool live);
/* Locked: every sample of ph's blocks forgotten (the heap is destroyed). */
BRISK_INTERNAL void record_heap_forget(prof_heap_t *ph);

/* Not locked: the counts of every stack at one instant, pending samples
 * included, largest in use first, in a buffer of the record's (valid to
 * the next snapshot; one dump at a time). false when out of memory. */
BRISK_INTERNAL bool record_snapshot(const prof_snap_t **snap, size_t *count);

BRISK_INTERNAL void record_fork_prepare(void);
BRISK_INTERNAL void record_fork_parent(void);
BRISK_INTERNAL void record_fork_child(void);

#endif
