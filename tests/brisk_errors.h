/* Statistics of brisk_stats_json() for the tests.
 *
 * brisk_stat(key): a numeric member, or -1 when there is none.
 *
 * brisk_errors_reported(): the number of bad inputs brisk has reported in
 * this process (the "errors" member). A test that makes only correct calls
 * checks at its end that it is 0: a correct call that brisk took for a bad
 * one (a free reported as a double free, say) prints one line and is
 * ignored, which the test's content checks alone would not notice. */
#ifndef BRISK_TEST_BRISK_ERRORS_H
#define BRISK_TEST_BRISK_ERRORS_H

#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __attribute__((unused)) double brisk_stat(const char *key) {
  char buf[4096], pat[64];
  size_t n = brisk_stats_json(buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) return -1;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *s = strstr(buf, pat);
  return s ? strtod(s + strlen(pat), NULL) : -1;
}

static __attribute__((unused)) long brisk_errors_reported(void) { return (long)brisk_stat("errors"); }

#endif
