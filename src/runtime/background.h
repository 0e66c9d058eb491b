/* The background purger: a thread that returns memory at its purge
 * deadline whether or not the program calls brisk again.
 *
 *   layers below (span, pool, huge)       background.c            purge round
 *   ── background_schedule(deadline) ──►  earliest deadline ──►  (registered by
 *      when memory starts to wait         wakes the thread        thread.c: every
 *   ── background_poll() at safe points   if it sleeps for good   heap, the pool,
 *      (no lock held): starts the thread                          the huge cache)
 *      once something worth it waits
 *
 * The thread sleeps on a futex until the earliest deadline it knows of, and
 * without a timeout when nothing waits: an idle process sees no wake-up.
 * Deadlines only grow (now + delay), so a new one never needs to wake a
 * thread that sleeps until an earlier one; only a thread asleep for good
 * is woken. Off with BRISK_BACKGROUND=0: then memory goes back from the
 * allocating threads' slow paths only. */
#ifndef BRISK_BACKGROUND_H
#define BRISK_BACKGROUND_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "base/read_mostly.h"

/* The earlier of two deadlines in ms, 0 meaning none. */
BRISK_INLINE uint64_t deadline_earlier(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* The work of one round at time `now`: purge what is due and return the
 * next deadline (0: nothing waits). Registered once, before any thread,
 * with the function that starts the thread (os_thread_start, run so that
 * what the C library allocates for the thread pins no heap of a thread
 * that may exit). */
typedef uint64_t (*background_round_fn)(uint64_t now);
typedef int (*background_start_fn)(void *(*fn)(void *), void *arg);
BRISK_INTERNAL void background_init(background_round_fn round, background_start_fn start);

/* Memory waits until deadline_ms. worth_a_thread: enough of it (a segment
 * or more) that the thread should be started if it is not running. */
BRISK_INTERNAL void background_schedule(uint64_t deadline_ms, bool worth_a_thread);

/* Start the thread if it is wanted and not running. Call only where
 * malloc may be entered again and no lock of brisk's is held. */
BRISK_INTERNAL void background_poll_slow(void);
static inline void background_poll(void) {
  if (__builtin_expect(__atomic_load_n((int *)&brisk_read_mostly.background_wanted, __ATOMIC_RELAXED), 0))
    background_poll_slow();
}

/* Is the thread running and switched on? (a purge round may then be left
 * to it) */
BRISK_INTERNAL bool background_running(void);

/* Run a round soon (at `now`): deadlines may have come forward (a shorter
 * purge delay, set while running), so the thread is woken whatever it
 * sleeps until; when it is not running it is wanted at the next safe
 * point. Nothing when the thread is switched off. */
BRISK_INTERNAL void background_kick(uint64_t now);
/* BRISK_BACKGROUND changed while running. On: the thread starts at the
 * next safe point (background_poll), or a sleeping one runs a round at
 * once. Off: a running thread finishes its round and then sleeps for good
 * (a thread cannot be stopped safely from outside; asleep it costs
 * nothing), and the allocating threads return memory themselves, as
 * with BRISK_BACKGROUND=0 (background_running() is false). */
BRISK_INTERNAL void background_set_enabled(bool on);

/* Around fork: no round runs while the process forks; the child has no
 * thread and starts one again when needed. */
BRISK_INTERNAL void background_fork_prepare(void);
BRISK_INTERNAL void background_fork_parent(void);
BRISK_INTERNAL void background_fork_child(void);

#endif
