/* Options changed while the program runs: brisk_option_set and mallopt. */
#ifndef BRISK_SETTINGS_H
#define BRISK_SETTINGS_H

#include <stdint.h>

#include "runtime/options.h"

/* Set option `id` (which may change at run time) to `value`, checked to lie
 * in its range, and make the change take effect: 0, or EINVAL for a value
 * out of range, EPERM for an option read at start-up only. Reports
 * nothing. */
BRISK_INTERNAL int settings_apply(int id, int64_t value);

#endif
