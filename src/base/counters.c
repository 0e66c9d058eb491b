#include "base/counters.h"

brisk_stats_t brisk_stats;
