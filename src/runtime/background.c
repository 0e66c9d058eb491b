#include "runtime/background.h"

#include "base/atomics.h"
#include "base/counters.h"
#include "os/checker.h"
#include "os/platform.h"
#include "runtime/options.h"

/* Deadlines are set from the coarse clock (os_now_ms) and the thread reads
 * the precise one, so it may find a deadline up to a tick early (4 ms at
 * 250 Hz, 10 ms at 100 Hz): it purges what is due within this much of now,
 * and what a round asks to retry is further away than this. */
#define ROUND_SLACK_MS 10
/* Rounds are at least this far apart, so each is followed by a sleep. */
#define ROUND_MIN_MS (ROUND_SLACK_MS + 1)

enum { BG_OFF = 0, BG_STARTING = 1, BG_RUNNING = 2 };

static background_round_fn round_fn;
static background_start_fn start_fn;
static _Atomic(int) state;                 /* BG_* */
static _Atomic(uint64_t) next_deadline;    /* earliest known; 0: none */
static _Atomic(uint32_t) wake_word;        /* the futex the thread sleeps on */
static _Atomic(int) sleeping_for_good;     /* asleep with no deadline */
static brisk_lock_t round_lock = BRISK_LOCK_INIT; /* held for a round; fork waits */

void background_init(background_round_fn round, background_start_fn start) {
  round_fn = round;
  start_fn = start;
}

bool background_running(void) {
  return atomic_load_relaxed(&state) == BG_RUNNING && option_load(background);
}

/* Sleeping for good and a new deadline form a store-load pair on each
 * side (the thread: sleeping_for_good = 1, then next_deadline; a
 * scheduler: next_deadline, then sleeping_for_good), so those four are
 * sequentially consistent: one of the two sees the other's store, and no
 * deadline is left with the thread asleep for good. */
static void deadline_lower(uint64_t d) {
  uint64_t cur = atomic_load_relaxed(&next_deadline);
  while ((cur == 0 || d < cur) && !atomic_compare_exchange_weak(&next_deadline, &cur, d)) {
  }
}

void background_schedule(uint64_t deadline_ms, bool worth_a_thread) {
  if (!option_load(background)) return;
  deadline_lower(deadline_ms);
  int s = atomic_load_relaxed(&state);
  if (s == BG_RUNNING) {
    /* The first to see it asleep wakes it; the others see the flag clear. */
    if (atomic_load(&sleeping_for_good) && atomic_exchange(&sleeping_for_good, 0)) {
      atomic_add_relaxed(&wake_word, 1);
      STAT_COUNT(background_wake_calls, 1);
      os_wake(&wake_word);
    }
  } else if (s == BG_OFF && worth_a_thread) {
    atomic_store_relaxed(&brisk_read_mostly.background_wanted, 1);
  }
}

static void *background_main(void *arg) {
  (void)arg;
  STAT_LEVEL(background_threads, 1);
  uint64_t last_end = 0; /* when the last round ended */
  for (;;) {
    uint32_t seen = atomic_load_acquire(&wake_word);
    if (!atomic_load(&brisk_options.background)) {
      /* Switched off while running (brisk_option_set): no rounds, asleep
       * until it is switched on again (background_kick's seq_cst add to
       * wake_word comes after its store of the option: if `seen` holds
       * that add, the load below sees the option on). */
      atomic_store(&sleeping_for_good, 1);
      if (!atomic_load(&brisk_options.background)) {
        os_wait(&wake_word, seen, 0);
        STAT_COUNT(background_wakeups, 1);
      }
      atomic_store_relaxed(&sleeping_for_good, 0);
      continue;
    }
    lock_acquire(&round_lock);
    uint64_t now = os_now_precise_ms();
    uint64_t due = atomic_load_relaxed(&next_deadline);
    if (due != 0 && due <= now + ROUND_SLACK_MS && now >= last_end + ROUND_MIN_MS) {
      /* Taken before the round: a deadline set while it runs lowers it
       * again, and the round's own answer is merged in. */
      atomic_exchange(&next_deadline, 0);
      STAT_COUNT(background_rounds, 1);
      checker_quiet_begin(); /* a round reads and writes free blocks' links */
      uint64_t next = round_fn(now + ROUND_SLACK_MS);
      checker_quiet_end();
      if (next != 0) deadline_lower(next);
      last_end = os_now_precise_ms();
      due = atomic_load_relaxed(&next_deadline);
    }
    lock_release(&round_lock);
    if (due == 0) {
      atomic_store(&sleeping_for_good, 1);
      /* A deadline set after our read either shows here or bumps wake_word. */
      if (atomic_load(&next_deadline) == 0) {
        os_wait(&wake_word, seen, 0);
        STAT_COUNT(background_wakeups, 1);
      }
      atomic_store_relaxed(&sleeping_for_good, 0);
    } else {
      /* Never two rounds in a row without a sleep, whatever deadline was
       * set (one already past, or one a round keeps answering). */
      uint64_t until = due > last_end + ROUND_MIN_MS ? due : last_end + ROUND_MIN_MS;
      if (until > os_now_precise_ms() + ROUND_SLACK_MS || until > last_end + ROUND_SLACK_MS) {
        os_wait(&wake_word, seen, until);
        STAT_COUNT(background_wakeups, 1);
      }
    }
  }
  return NULL;
}

void background_poll_slow(void) {
  int expected = BG_OFF;
  if (!atomic_cas_strong_acq_rel(&state, &expected, BG_STARTING)) return;
  atomic_store_relaxed(&brisk_read_mostly.background_wanted, 0);
  if (!option_load(background) || round_fn == NULL || start_fn == NULL) {
    atomic_store_release(&state, BG_OFF);
    return;
  }
  /* Running before it starts: a schedule meanwhile must not ask again. */
  atomic_store_release(&state, BG_RUNNING);
  if (start_fn(background_main, NULL) != 0) atomic_store_release(&state, BG_OFF);
}

void background_kick(uint64_t now) {
  if (!atomic_load(&brisk_options.background)) return;
  deadline_lower(now != 0 ? now : 1);
  int s = atomic_load_relaxed(&state);
  if (s == BG_RUNNING) {
    /* Whatever it sleeps until: the deadline it knows may be later than
     * the one just set. */
    atomic_fetch_add(&wake_word, 1);
    STAT_COUNT(background_wake_calls, 1);
    os_wake(&wake_word);
  } else if (s == BG_OFF) {
    atomic_store_relaxed(&brisk_read_mostly.background_wanted, 1);
  }
}

void background_set_enabled(bool on) {
  atomic_store(&brisk_options.background, on ? 1 : 0);
  if (on) background_kick(os_now_ms());
}

void background_fork_prepare(void) { lock_acquire(&round_lock); }
void background_fork_parent(void) { lock_release(&round_lock); }
void background_fork_child(void) {
  lock_reset(&round_lock);
  if (atomic_load_relaxed(&brisk_stats.background_threads) > 0) STAT_LEVEL(background_threads, -1);
  atomic_store_relaxed(&sleeping_for_good, 0);
  /* No thread here: the next safe point starts one if memory waits. */
  if (atomic_load_relaxed(&state) != BG_OFF) {
    atomic_store_relaxed(&state, BG_OFF);
    if (atomic_load_relaxed(&next_deadline) != 0) atomic_store_relaxed(&brisk_read_mostly.background_wanted, 1);
  }
}
