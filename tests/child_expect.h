/* The child side of the bad-input tests (test_bad_input.c, test_safety.c,
 * test_heap_errors.c): each scenario runs in a re-executed child that
 * tells the parent, on stdout, which stderr lines to expect ("EXPECT",
 * "EXPECTP" for a prefix, "EXPECTR" for a prefix and one of several
 * reasons) and what failed ("FAIL"); the parent (scenario_runner.h)
 * compares.
 * Blocks are filled with a pattern of their index and a seed so that the
 * child can check that a bad call harmed nothing else. */
#ifndef BRISK_TEST_CHILD_EXPECT_H
#define BRISK_TEST_CHILD_EXPECT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#define CHILD_HELPER static __attribute__((unused))

static int g_child_fail;

CHILD_HELPER void child_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CHILD_HELPER void child_fail(const char *fmt, ...) {
  g_child_fail = 1;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

/* The exact stderr line brisk must print next. */
CHILD_HELPER void expect_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CHILD_HELPER void expect_line(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  printf("EXPECT %s\n", line);
  fflush(stdout);
}

/* A line that must start with the given text (the reason may vary). */
CHILD_HELPER void expect_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CHILD_HELPER void expect_prefix(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  printf("EXPECTP %s\n", line);
  fflush(stdout);
}

CHILD_HELPER unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)(i * 167u + seed * 31u + 3u);
}
CHILD_HELPER void fill(void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = pat(i, seed);
}
/* The offset of the first byte that differs, or (size_t)-1. */
CHILD_HELPER size_t check(const void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != pat(i, seed)) return i;
  return (size_t)-1;
}

#endif
