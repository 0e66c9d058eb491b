/* The read-mostly line (read_mostly.h). */
#include "base/read_mostly.h"

brisk_read_mostly_t brisk_read_mostly;
