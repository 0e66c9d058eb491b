/* Checks grouped in named sections, for a test program that prints one
 * "ok" or "FAILED" line per section and every failed check with its line.
 * Before including, define TEST_TAG ("[name]"), TEST_FILE (the source
 * file's name) and TEST_WIDTH (the column of the section names); and
 * TEST_SHOWN_PER_SECTION to print only that many failures per section
 * (all are counted). */
#ifndef BRISK_TEST_SECTIONS_H
#define BRISK_TEST_SECTIONS_H

#include <stdarg.h>
#include <stdio.h>

#ifndef TEST_SHOWN_PER_SECTION
#define TEST_SHOWN_PER_SECTION (-1L)
#endif

static long g_failures, g_section_failures;
static const char *g_section = "?";

static void fail_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_at(int line, const char *fmt, ...) {
  g_failures++;
  long before = g_section_failures++;
  if (TEST_SHOWN_PER_SECTION >= 0 && before >= TEST_SHOWN_PER_SECTION) return;
  printf(TEST_TAG " FAIL %s (" TEST_FILE ":%d): ", g_section, line);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK(c, ...) do { if (!(c)) FAIL(__VA_ARGS__); } while (0)

static void section(const char *name) {
  g_section = name;
  g_section_failures = 0;
}
static void section_end(void) {
  if (g_section_failures == 0)
    printf(TEST_TAG " %-*s ok\n", TEST_WIDTH, g_section);
  else
    printf(TEST_TAG " %-*s FAILED (%ld failed checks%s)\n", TEST_WIDTH, g_section, g_section_failures,
           TEST_SHOWN_PER_SECTION >= 0 && g_section_failures > TEST_SHOWN_PER_SECTION
               ? ", the first ones shown" : "");
  fflush(stdout);
}

#endif
