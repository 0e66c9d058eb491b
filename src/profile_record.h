/* The heap profiler's record: every stack that holds a sample, with its
 * counts scaled back from the samples; every sampled block still live, by
 * slot (the number in its descriptor's prof_slot); the heaps' batches of
 * samples and frees not yet entered (profile_count.h); and a snapshot of
 * it all for a dump.
 *
 *   prof_sampled ──► stack_seen (no lock) ──► the heap's pending batch
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

#include "profile_count.h"
#include "profile_out.h"

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

/* Locked: a sample of stack s (block pg, standing for `weight` blocks and
 * `bytes` bytes) entered; its slot, 0 when the record has no room (then
 * counted as allocated only). *dump is set when the in-use estimate grew
 * by BRISK_PROFILE_INTERVAL. */
BRISK_INTERNAL uint32_t record_sample_enter(prof_heap_t *ph, prof_stack_t *s, page_t *pg, double weight,
                                            double bytes, bool *dump);
/* Locked: the block of this slot was freed. */
BRISK_INTERNAL void record_sample_forget(uint32_t slot);
/* Locked, with ph's drops_lock: ph's batch of freed samples forgotten. */
BRISK_INTERNAL void record_drops_flush(prof_heap_t *ph);
/* Locked, with ph's drops_lock: ph's pending samples entered. live: by the
 * owner, which gives each live block its slot; else (the heap goes with
 * its blocks) counted as allocated only, their descriptors untouched.
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
