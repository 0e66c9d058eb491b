/* Statistics as text and JSON, from the counters of counters.h. */
#ifndef BRISK_STATS_H
#define BRISK_STATS_H

#include <stddef.h>

#include "config.h"
#include "counters.h"

/* One JSON object with every field; returns the length it needed. */
BRISK_INTERNAL size_t stats_json(char *buf, size_t len);
/* Human-readable lines, each handed to `emit`. */
BRISK_INTERNAL void stats_text(void (*emit)(const char *line, void *arg), void *arg);
BRISK_INTERNAL void stats_print_at_exit(void);

#endif
