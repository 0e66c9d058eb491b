/* Options: read from BRISK_<NAME> environment variables at start-up, and
 * those marked so changed while the program runs (brisk_option_set). */
#ifndef BRISK_OPTIONS_H
#define BRISK_OPTIONS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "base/config.h"

enum { ON_ERROR_REPORT = 0, ON_ERROR_ABORT = 1 };

/* The largest value of an option without a bound of its own. */
#define OPTION_MAX ((int64_t)1 << 40)
/* BRISK_SEGMENT_CACHE: 2^20 segments are 4 TiB of address space. */
#define SEGMENT_CACHE_MAX ((int64_t)1 << 20)
/* BRISK_PROFILE_RATE: 512 KiB by default; below 1 KiB a sample would be
 * taken every few allocations. */
#define PROFILE_RATE_DEFAULT ((int64_t)512 << 10)
#define PROFILE_RATE_MIN ((int64_t)1024)

/* X(field, NAME, default, min, max, runtime, description)
 * runtime: 1 when brisk_option_set may change it while the program runs
 * (its readers then load it as a relaxed atomic, option_load); 0 when it is
 * read at start-up only. A value outside [min, max] is refused, from the
 * environment (a warning, the default stays) and from brisk_option_set. */
#define BRISK_OPTIONS(X)                                                        \
  X(verbose, VERBOSE, 0, 0, 1, 0, "print brisk's settings at start-up (0/1)")    \
  X(show_stats, SHOW_STATS, 0, 0, 1, 1, "print statistics to stderr at exit (0/1)") \
  X(purge_delay_ms, PURGE_DELAY, 50, -1, OPTION_MAX, 1,                          \
    "milliseconds before unused memory goes back to the OS (-1: never)")         \
  X(on_error, ON_ERROR, ON_ERROR_REPORT, 0, 1, 1,                                \
    "on bad input: report (print and continue) or abort")                        \
  X(background, BACKGROUND, 1, 0, 1, 1,                                         \
    "a background thread returns memory at its purge deadline (0/1)")          \
  X(segment_cache, SEGMENT_CACHE, 32, 0, SEGMENT_CACHE_MAX, 1,                  \
    "empty 4 MiB segments kept mapped for reuse (their pages are purged)")     \
  X(huge_pages, HUGE_PAGES, 0, 0, 1, 1,                                         \
    "blocks over 2 MiB may be backed by transparent huge pages (0/1)")         \
  X(fault_after, FAULT_AFTER, -1, -1, OPTION_MAX, 0,                            \
    "testing: OS memory requests fail after this many (-1: never)")            \
  X(fault_rate, FAULT_RATE, 0, 0, 1000000, 0,                                   \
    "testing: OS memory requests fail with this probability per million")      \
  X(fault_calls, FAULT_CALLS, 1, 1, 127, 0,                                      \
    "testing: which calls fail (bits: 1 mmap, 2 munmap, 4 madvise, 8 mremap, 16 mprotect, 32 thread start, 64 membarrier)") \
  X(profile, PROFILE, 0, 0, 1, 0,                                               \
    "heap profile on: BRISK_PROFILE=<prefix> dumps to <prefix>.<pid>.<seq>.heap") \
  X(profile_rate, PROFILE_RATE, PROFILE_RATE_DEFAULT, PROFILE_RATE_MIN, OPTION_MAX, 1, \
    "heap profile: mean bytes allocated between two samples")                  \
  X(profile_interval, PROFILE_INTERVAL, 0, 0, OPTION_MAX, 1,                    \
    "heap profile: dump each time the in-use heap grew by this many bytes (0: never)") \
  X(profile_signal, PROFILE_SIGNAL, 0, 0, 64, 0,                                \
    "heap profile: dump when this signal arrives (SIGUSR2, USR2, a real-time number)") \
  X(profile_leaks, PROFILE_LEAKS, 0, 0, 1, 1,                                   \
    "heap profile: report the sampled blocks still live at exit (0/1)")         \
  X(guard_rate, GUARD_RATE, 0, 0, OPTION_MAX, 1,                                \
    "guarded samples: one allocation in this many, on average, on a page of its own between guard pages (0: off)") \
  X(guard_underflow, GUARD_UNDERFLOW, 0, 0, 1, 1,                               \
    "guarded samples: the block starts after a guard page (underflows) rather than ending at one (0/1)") \
  X(guard_continue, GUARD_CONTINUE, 0, 0, 1, 1,                                 \
    "guarded samples: after a report, the program goes on (the page is opened) (0/1)") \
  X(guard_slots, GUARD_SLOTS, 256, 16, 65536, 0,                                \
    "guarded samples: blocks guarded at once, live or freed (freed ones stay closed until reused)")

/* Every field is an atomic: those that change at run time are read by any
 * thread while another may set them. */
typedef struct brisk_options_s {
#define BRISK_OPTION_FIELD(field, NAME, def, lo, hi, rt, desc) _Atomic(int64_t) field;
  BRISK_OPTIONS(BRISK_OPTION_FIELD)
#undef BRISK_OPTION_FIELD
} brisk_options_t;

/* Valid (with defaults) before options_init runs. */
extern brisk_options_t brisk_options BRISK_INTERNAL;

/* The value in force: any value it held is a right answer for a reader. */
#define option_load(field) atomic_load_explicit(&brisk_options.field, memory_order_relaxed)

/* The options by index, in the table's order. */
enum option_id {
#define BRISK_OPTION_ID(field, NAME, def, lo, hi, rt, desc) OPTION_##field,
  BRISK_OPTIONS(BRISK_OPTION_ID)
#undef BRISK_OPTION_ID
  OPTION_COUNT
};

typedef struct option_info_s {
  const char *name; /* NAME, without BRISK_ */
  int64_t min, max;
  bool runtime;
  const char *desc;
} option_info_t;

extern const option_info_t brisk_option_info[OPTION_COUNT] BRISK_INTERNAL;

/* The index of an option named NAME or BRISK_NAME; -1 when there is none. */
BRISK_INTERNAL int options_find(const char *name);
/* The option's value and its storage. */
BRISK_INTERNAL int64_t options_get(int id);
BRISK_INTERNAL _Atomic(int64_t) *options_slot(int id);

/* The purge delay in milliseconds; "never" (-1) is a delay no deadline
 * reaches. */
static inline uint64_t options_purge_delay_ms(void) {
  int64_t d = option_load(purge_delay_ms);
  return d < 0 ? UINT64_MAX / 2 : (uint64_t)d;
}

/* Reads the environment without allocating; reports unknown BRISK_*
 * names and bad values as warnings. */
BRISK_INTERNAL void options_init(void);
/* options_init, unless the environment was read already. */
BRISK_INTERNAL void options_init_if_pending(void);

#endif
