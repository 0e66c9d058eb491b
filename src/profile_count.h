/* The profiler's countdowns: when the next sample falls, and the cut
 * lists that make the allocation it falls on take the slow path. Only the
 * owner of a heap touches its countdowns and its pages' lists; nothing here
 * takes a lock or allocates. profile.c (the record) is its only user. */
#ifndef BRISK_PROFILE_COUNT_H
#define BRISK_PROFILE_COUNT_H

#include "profile.h"

/* The sampling rate in force (BRISK_PROFILE_RATE, which may change while
 * running: each countdown takes the new one at its next draw). */
BRISK_INTERNAL double prof_current_rate(void);
/* The probability that a block of `bytes` holds at least one sampled byte
 * at `rate`: its sample stands for 1 / this many blocks. */
BRISK_INTERNAL double prof_sample_probability(double bytes, double rate);
/* Start counting h's allocations: the lists its inline path pops from are
 * withdrawn (cut), so the next allocation of each class is counted. */
BRISK_INTERNAL void prof_attach(heap_t *h);

#endif
