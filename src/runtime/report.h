/* Messages to stderr, formatted without allocating: "brisk: error: ...",
 * "brisk: warning: ...", "brisk: ..." (info). Formats understand %s, %d,
 * %zu, %p, %x and %%. */
#ifndef BRISK_REPORT_H
#define BRISK_REPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/config.h"

/* Reports bad input; aborts afterwards when set to do so (BRISK_ON_ERROR). */
BRISK_INTERNAL void report_error(const char *fmt, ...) BRISK_COLD;
/* report_error for a caller that ends the process itself, or lets it go
 * on by request (a fault in a guarded block): never aborts. */
BRISK_INTERNAL void report_error_only(const char *fmt, ...) BRISK_COLD;
/* The end of a report made with report_error_only and more lines: abort
 * when BRISK_ON_ERROR says so. */
BRISK_INTERNAL void report_abort_if_asked(void) BRISK_COLD;
BRISK_INTERNAL void report_warning(const char *fmt, ...) BRISK_COLD;
BRISK_INTERNAL void report_info(const char *fmt, ...) BRISK_COLD;
BRISK_INTERNAL void report_set_abort_on_error(bool abort_on_error);

/* Format into buf (always NUL-terminated); returns the length it needed. */
BRISK_INTERNAL size_t format_string(char *buf, size_t len, const char *fmt, ...);
BRISK_INTERNAL size_t format_string_v(char *buf, size_t len, const char *fmt, va_list ap);

#endif
