/* Statistics as text and JSON: the counters of counters.h, the figures a
 * walk of what brisk holds gives (usage.c) and the process's own as the OS
 * sees it. */
#ifndef BRISK_STATS_H
#define BRISK_STATS_H

#include <stddef.h>

#include "base/config.h"
#include "base/counters.h"

/* Figures counted by walking what brisk holds (usage.c: each heap's
 * segments under its lock, the pool, the huge cache), in bytes unless
 * said otherwise. X(name, description) */
#define BRISK_USAGE_FIELDS(X)                                                   \
  X(span_bytes, "bytes of pages and large blocks in use, free blocks of those pages included") \
  X(free_bytes, "bytes mapped but not in use: free slices, empty segments, kept huge memory") \
  X(free_resident_bytes, "the part of free_bytes not yet returned to the OS")  \
  X(free_chunks, "free runs of slices, empty segments and kept huge mappings") \
  X(huge_block_bytes, "bytes mapped for huge blocks in use, their kept tails not included")

typedef struct stats_usage_s {
#define BRISK_USAGE_MEMBER(name, desc) int64_t name;
  BRISK_USAGE_FIELDS(BRISK_USAGE_MEMBER)
#undef BRISK_USAGE_MEMBER
} stats_usage_t;

/* The process as the OS sees it (platform.h's os_process_figures).
 * X(name, member of os_process_figures_t, description) */
#define BRISK_PROCESS_FIELDS(X)                                                 \
  X(process_rss_bytes, rss_bytes, "resident set size of the process")          \
  X(process_rss_peak_bytes, rss_peak_bytes, "the most the process ever had resident") \
  X(process_minor_faults, minor_faults, "page faults of the process served without I/O") \
  X(process_major_faults, major_faults, "page faults of the process that waited for I/O")

/* One JSON object with every field; returns the length it needed. */
BRISK_INTERNAL size_t stats_json(char *buf, size_t len, const stats_usage_t *usage);
/* Human-readable lines, each handed to `emit`. */
BRISK_INTERNAL void stats_text(void (*emit)(const char *line, void *arg), void *arg,
                               const stats_usage_t *usage);
/* The lines of stats_text on stderr, each after "brisk: ". */
BRISK_INTERNAL void stats_print_stderr(const stats_usage_t *usage);
/* Counts back to 0, the peak of each level to its current value. */
BRISK_INTERNAL void stats_reset(void);

#endif
