/* The sampling heap profiler, as the rest of brisk sees it: which stacks
 * allocated the memory that is in use, estimated from a random sample of
 * the bytes allocated.
 *
 *   BRISK_PROFILE=<prefix> (or brisk_profile_start) ──► prof_recording()
 *
 *   the heaps' samplers (sample.c)            the profiler (profile*.c)
 *   ── a countdown runs out on an ──────────► prof_sample: the stack
 *      allocation                               (stackwalk.c), the record,
 *                                               the slot in the descriptor
 *   ── a sampled block is freed ────────────► prof_forget*
 *   the background round, slow paths ──────► prof_background, prof_poll_slow:
 *                                               dumps asked for
 *   the process's life (thread.c) ─────────► init, exit, fork
 *   the API (api.c, settings.c) ───────────► start, stop, dump, leaks
 *
 * Every byte allocated is sampled with probability 1 / BRISK_PROFILE_RATE:
 * the heaps count bytes to the next sample (sample.h), drawn from the
 * exponential distribution of mean RATE (a memoryless Poisson process:
 * per-class countdowns sample each byte alike). A sample is known here by
 * its descriptor's slot (the 32-bit prof_slot the profiler writes and the
 * heaps test for 0) and its address, and a heap by the state the profiler
 * makes for it in *state: nothing here knows a page or a heap.
 *
 * Dumps: at exit, brisk_profile_dump, every BRISK_PROFILE_INTERVAL bytes of
 * growth, on BRISK_PROFILE_SIGNAL (the handler sets a flag and wakes the
 * background thread, which writes the files; without it, the next counted
 * slow path does).
 *
 * Layer: the profiler, above the runtime services and below the segments
 * and heaps; this is the only header of it that files outside it include.
 * The heaps' callers own the busy flag that keeps a signal handler out of
 * these calls (sample.c). */
#ifndef BRISK_PROFILER_H
#define BRISK_PROFILER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/read_mostly.h"

typedef struct prof_heap_s prof_heap_t; /* a heap's state (profile_record.h) */

/* The profiler records samples (BRISK_PROFILE, brisk_profile_start, or
 * BRISK_PROFILE_LEAKS). A change takes effect in the heaps once
 * sampler_settings_changed (sample.h) is called after it. */
BRISK_INTERNAL extern _Atomic(int) prof_recording_on;
BRISK_INLINE bool prof_recording(void) {
  return atomic_load_explicit(&prof_recording_on, memory_order_relaxed) != 0;
}

/* A sample: the block of `requested` bytes, counted as `counted` bytes of
 * class c (0: a large or huge block), at address addr (not 0), whose
 * descriptor's slot is *slot; `batch`: only its owner frees it (not a huge
 * block), so it may wait in the heap's batch. *state is made on first use
 * (it stays NULL when the OS has no memory for it: no sample then). The
 * stack is taken here. */
BRISK_INTERNAL void prof_sample(prof_heap_t **state, uint32_t *slot, uintptr_t addr, bool batch,
                                size_t requested, unsigned c, size_t counted);
/* The sampled block of *slot is freed (any thread); *slot becomes 0. */
BRISK_INTERNAL void prof_forget(uint32_t *slot);
/* The same by the owner of the heap whose state is ph (or on its behalf),
 * in its batch. interrupted: the owner is inside this profiler (a signal
 * handler): no lock is taken. */
BRISK_INTERNAL void prof_forget_owned(uint32_t *slot, prof_heap_t *ph, bool interrupted);
/* Every sample of ph's heap goes (the heap is destroyed). */
BRISK_INTERNAL void prof_forget_heap(prof_heap_t *ph);

/* A round of the background thread: a dump that was asked for (by the
 * signal or the interval, which wake the thread); returns the next
 * deadline (0: none). */
BRISK_INTERNAL uint64_t prof_background(uint64_t now);
/* A dump was asked for (by the signal or the interval): at a safe point
 * (a slow path with no lock held, not brisk's own heap) the caller calls
 * prof_poll_slow, which writes it if no background thread will. */
BRISK_INLINE bool prof_dump_wanted(void) {
  return atomic_load_explicit(&brisk_read_mostly.prof_dump_requested, memory_order_relaxed) != 0;
}
BRISK_INTERNAL void prof_poll_slow(void);

/* Start-up (after the options are read; again when they are read late). */
BRISK_INTERNAL void prof_init(void);
BRISK_INTERNAL void prof_at_exit(void);
/* BRISK_PROFILE_LEAKS set while running (settings.c). */
BRISK_INTERNAL void prof_leaks_changed(bool on);
BRISK_INTERNAL void prof_fork_prepare(void);
BRISK_INTERNAL void prof_fork_parent(void);
BRISK_INTERNAL void prof_fork_child(void);

/* The API (brisk_profile_*): 0 or an errno value. */
BRISK_INTERNAL int prof_start(const char *path_prefix);
BRISK_INTERNAL void prof_stop(void);
BRISK_INTERNAL int prof_dump(const char *path);

#endif
