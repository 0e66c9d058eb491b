/* The number of bad inputs brisk has reported in this process: the
 * "errors" member of brisk_stats_json(). A test that makes only correct
 * calls checks at its end that it is 0: a correct call that brisk took for
 * a bad one (a free reported as a double free, say) prints one line and is
 * ignored, which the test's content checks alone would not notice.
 * Returns -1 when the statistics have no such member. */
#ifndef BRISK_TEST_BRISK_ERRORS_H
#define BRISK_TEST_BRISK_ERRORS_H

#include <brisk.h>

#include <stdlib.h>
#include <string.h>

static __attribute__((unused)) long brisk_errors_reported(void) {
  char buf[4096];
  size_t n = brisk_stats_json(buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) return -1;
  const char *s = strstr(buf, "\"errors\":");
  if (!s) return -1;
  return strtol(s + 9, NULL, 10);
}

#endif
