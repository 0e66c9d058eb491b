/* Run-time options, read once from BRISK_<NAME> environment variables. */
#ifndef BRISK_OPTIONS_H
#define BRISK_OPTIONS_H

#include <stdint.h>
#include "config.h"

enum { ON_ERROR_REPORT = 0, ON_ERROR_ABORT = 1 };

/* X(field, NAME, default, description) */
#define BRISK_OPTIONS(X)                                                        \
  X(verbose, VERBOSE, 0, "print brisk's settings at start-up (0/1)")             \
  X(show_stats, SHOW_STATS, 0, "print statistics to stderr at exit (0/1)")       \
  X(purge_delay_ms, PURGE_DELAY, 50,                                             \
    "milliseconds before unused memory goes back to the OS (-1: never)")         \
  X(on_error, ON_ERROR, ON_ERROR_REPORT,                                          \
    "on bad input: report (print and continue) or abort")                        \
  X(background, BACKGROUND, 1,                                                  \
    "a background thread returns memory at its purge deadline (0/1)")          \
  X(segment_cache, SEGMENT_CACHE, 32,                                           \
    "empty 4 MiB segments kept mapped for reuse (their pages are purged)")     \
  X(fault_after, FAULT_AFTER, -1,                                               \
    "testing: OS memory requests fail after this many (-1: never)")            \
  X(fault_rate, FAULT_RATE, 0,                                                  \
    "testing: OS memory requests fail with this probability per million")      \
  X(profile, PROFILE, 0,                                                        \
    "heap profile: dumps to <prefix>.<pid>.<seq>.heap and .collapsed")         \
  X(profile_rate, PROFILE_RATE, 524288,                                         \
    "heap profile: mean bytes allocated between two samples")                  \
  X(profile_interval, PROFILE_INTERVAL, 0,                                      \
    "heap profile: dump each time the in-use heap grew by this many bytes")    \
  X(profile_signal, PROFILE_SIGNAL, 0,                                          \
    "heap profile: dump when this signal arrives (SIGUSR2, USR2 or a number)") \
  X(profile_leaks, PROFILE_LEAKS, 0,                                            \
    "heap profile: report the sampled blocks still live at exit (0/1)")

typedef struct brisk_options_s {
#define BRISK_OPTION_FIELD(field, NAME, def, desc) int64_t field;
  BRISK_OPTIONS(BRISK_OPTION_FIELD)
#undef BRISK_OPTION_FIELD
} brisk_options_t;

/* Valid (with defaults) before options_init runs. */
extern brisk_options_t brisk_options BRISK_INTERNAL;

/* The purge delay in milliseconds; "never" (-1) is a delay no deadline
 * reaches. */
static inline uint64_t options_purge_delay_ms(void) {
  int64_t d = brisk_options.purge_delay_ms;
  return d < 0 ? UINT64_MAX / 2 : (uint64_t)d;
}

/* Reads the environment without allocating; reports unknown BRISK_*
 * names and bad values as warnings. */
BRISK_INTERNAL void options_init(void);
/* options_init, unless the environment was read already. */
BRISK_INTERNAL void options_init_if_pending(void);

#endif
