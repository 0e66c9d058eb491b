/* glibc's allocator extras answered by brisk: malloc_trim, mallinfo2,
 * mallinfo, malloc_info, malloc_stats and mallopt.
 *
 * ctest-labels: sanitize
 *
 * This file includes no brisk header: it is also compiled as a plain glibc
 * program by test_glibc_preload.sh and run there under LD_PRELOAD of
 * libbrisk.so, and without it (glibc's own functions: then the checks that
 * only brisk's answers pass are left out, and the run shows what glibc
 * says). brisk is recognised by its symbols (dlsym). Checks, with brisk:
 *   - malloc_trim(0) after freeing a burst of 96 MiB (small, large and huge
 *     blocks) returns 1 and RSS (/proc/self/statm) falls to within 8 MiB of
 *     where it was before the burst; at once again, it returns 0; with
 *     every unmap and purge refused (fault injection) it returns 0, and 1
 *     once the OS takes them again; the
 *     memory other threads freed goes too: that of a thread that is alive
 *     (its heap keeps a block in each segment, so what it freed are free
 *     slices of its heap) and that of a thread that has exited (its heap
 *     abandoned), each 36 MiB, within the purge delay;
 *   - mallinfo2: uordblks rises by what 20000 blocks of 1000 B take (their
 *     1024-byte class, within 10% and 2 MiB) and falls back when they are
 *     freed; large blocks count there too; a huge block counts in hblks
 *     (+1) and hblkhd (its size, page-rounded), not in uordblks; arena >=
 *     uordblks + fordblks and keepcost <= fordblks throughout; keepcost is
 *     0 right after malloc_trim; mallinfo's int fields equal mallinfo2's
 *     below INT_MAX and saturate at INT_MAX (a 3 GiB huge block, never
 *     touched: hblkhd);
 *   - malloc_info: options other than 0 and a NULL stream fail with -1 and
 *     errno EINVAL (glibc's manual; glibc's code returns EINVAL for the
 *     options, and crashes on NULL), the XML starts with
 *     <malloc version="brisk-... and ends with </malloc>; both bad calls
 *     are counted as errors (their lines are test_api_errors's);
 *   - malloc_stats writes glibc's totals and brisk's statistics to stderr;
 *   - mallopt: 0 for parameters brisk does not know (glibc answers 1) and
 *     values glibc refuses, 1 for the others, as glibc 2.36 answers them; M_TRIM_THRESHOLD and M_CHECK_ACTION change
 *     BRISK_SEGMENT_CACHE and BRISK_ON_ERROR (read back with
 *     brisk_option_get), Android's M_PURGE and M_PURGE_ALL purge.
 * With two arguments (XML and JSON file names) it also writes malloc_info's
 * output and, right after it, brisk_stats_json's, for the script to parse.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* mallinfo */

static size_t (*b_stats_json)(char *, size_t);
static int (*b_option_get)(const char *, long *);
static int (*b_option_set)(const char *, long);
static int g_brisk;

#define TEST_TAG "[extras]"
#define TEST_FILE "test_glibc_extras.c"
#define TEST_WIDTH 28
#include "sections.h"

/* Hide values from the optimiser, which may drop a malloc/free pair whose
 * block is not used (gcc without -fno-builtin). */
static size_t opaque(size_t n) {
  __asm__ volatile("" : "+r"(n));
  return n;
}
static void *used(void *p) {
  __asm__ volatile("" : "+r"(p) : : "memory");
  if (p) *(volatile char *)p = 1;
  return p;
}

static long rss_bytes(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long size, resident;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

static char g_json[16384];
static double json_num(const char *key) {
  if (!b_stats_json) return -1;
  size_t n = b_stats_json(g_json, sizeof g_json);
  if (n >= sizeof g_json) return -1;
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *s = strstr(g_json, pat);
  return s ? strtod(s + strlen(pat), NULL) : -1;
}

static long option(const char *name) {
  long v = -12345;
  if (b_option_get && b_option_get(name, &v) != 0) return -12345;
  return v;
}

#define MIB ((size_t)1 << 20)

static void check_invariants(const struct mallinfo2 *m, const char *when) {
  CHECK(m->arena >= m->uordblks + m->fordblks, "%s: arena %zu < uordblks %zu + fordblks %zu", when, m->arena,
        m->uordblks, m->fordblks);
  if (g_brisk)
    CHECK(m->keepcost <= m->fordblks, "%s: keepcost %zu > fordblks %zu", when, m->keepcost, m->fordblks);
}

/* ------------------------------------------------------------------ */

static void test_trim(void) {
  section("malloc_trim");
  enum { SMALL = 65536, LARGE = 128 };
  static void *small[SMALL], *large[LARGE];
  long before = rss_bytes();
  for (int i = 0; i < SMALL; i++) {
    small[i] = used(malloc(opaque(1000)));
    if (small[i]) memset(small[i], 1, 1000);
  }
  for (int i = 0; i < LARGE; i++) {
    large[i] = used(malloc(opaque(256 * 1024)));
    if (large[i]) memset(large[i], 2, 256 * 1024);
  }
  char *huge = used(malloc(opaque(16 * MIB)));
  if (huge) memset(huge, 3, 16 * MIB);
  long peak = rss_bytes();
  CHECK(peak > before + (long)(90 * MIB), "test premise: RSS %ld after touching 96 MiB, %ld before", peak, before);
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (int i = 0; i < LARGE; i++) free(large[i]);
  free(huge);
  long freed = rss_bytes();
  int r = malloc_trim(0);
  long after = rss_bytes();
  printf("[extras]   RSS before %ld MiB, burst %ld MiB, freed %ld MiB, after malloc_trim(0) = %d: %ld MiB\n",
         before >> 20, peak >> 20, freed >> 20, r, after >> 20);
  if (g_brisk) {
    CHECK(r == 1, "malloc_trim(0) after freeing 96 MiB returned %d, expected 1", r);
    CHECK(after < before + (long)(8 * MIB), "RSS %ld MiB after malloc_trim(0), %ld MiB before the burst",
          after >> 20, before >> 20);
    struct mallinfo2 m = mallinfo2();
    CHECK(m.keepcost == 0, "keepcost %zu right after malloc_trim(0)", m.keepcost);
    check_invariants(&m, "after malloc_trim");
    int again = malloc_trim(0);
    CHECK(again == 0, "a second malloc_trim(0) right after the first returned %d: nothing was left", again);
    /* pad is ignored: brisk has no top of heap */
    free(used(malloc(opaque(300000))));
    CHECK(malloc_trim(opaque(1u << 30)) == 1, "malloc_trim(1 GiB) after a freed large block did not return 1");
  }
  section_end();
}

/* malloc_trim says 0 when the OS refused every unmap and purge it asked
 * for (fault injection: munmap with ENOMEM, madvise with EINVAL): nothing
 * went back. Once the OS takes them again, the same memory goes and it
 * says 1. */
static void test_trim_refused(void) {
  section("malloc_trim when the OS refuses");
  void (*inject)(long, unsigned) = (void (*)(long, unsigned))dlsym(RTLD_DEFAULT, "brisk_fault_injection");
  void (*kinds)(unsigned) = (void (*)(unsigned))dlsym(RTLD_DEFAULT, "brisk_fault_injection_calls");
  if (!g_brisk) {
    section_end();
    return;
  }
  CHECK(inject != NULL && kinds != NULL, "brisk_fault_injection or brisk_fault_injection_calls not found");
  if (inject == NULL || kinds == NULL) {
    section_end();
    return;
  }
  enum { N = 64 };
  static void *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = used(malloc(opaque(256 * 1024)));
    if (b[i]) memset(b[i], 4, 256 * 1024);
  }
  for (int i = 0; i < N; i++) free(b[i]);
  double refused = json_num("unmap_failures") + json_num("purge_failures");
  kinds(2u | 4u); /* BRISK_FAULT_MUNMAP | BRISK_FAULT_MADVISE */
  inject(0, 0);
  int r = malloc_trim(0);
  inject(-1, 0);
  kinds(1u); /* the default: mmap */
  double now_refused = json_num("unmap_failures") + json_num("purge_failures");
  CHECK(now_refused > refused, "test premise: no unmap or purge was refused during malloc_trim (%g, %g before)",
        now_refused, refused);
  CHECK(r == 0, "malloc_trim(0) returned %d with every unmap and purge refused, expected 0", r);
  int again = malloc_trim(0);
  CHECK(again == 1, "malloc_trim(0) returned %d once the OS took the calls again, expected 1", again);
  section_end();
}

/* A thread's burst of large blocks (3 slices each), one in 20 kept: what
 * it freed stays in its heap's segments as free slices. */
enum { TB = 200, TSIZE = 3 * 65536 - 4096 };
typedef struct {
  void *blocks[TB];
  pthread_barrier_t bar;
  int stay; /* wait at the barrier before freeing the rest and exiting */
} burst_t;

static void *burst_thread(void *arg) {
  burst_t *b = arg;
  for (int i = 0; i < TB; i++) b->blocks[i] = used(malloc(opaque(TSIZE)));
  for (int i = 0; i < TB; i++)
    if (b->blocks[i]) memset(b->blocks[i], 7, TSIZE);
  for (int i = 0; i < TB; i++)
    if (i % 20 != 0) { free(b->blocks[i]); b->blocks[i] = NULL; }
  if (b->stay) {
    pthread_barrier_wait(&b->bar); /* freed */
    pthread_barrier_wait(&b->bar); /* trimmed */
  }
  return NULL;
}

static void test_trim_other_threads(void) {
  section("malloc_trim: other threads");
  for (int stay = 1; stay >= 0; stay--) {
    static burst_t b;
    memset(b.blocks, 0, sizeof b.blocks);
    b.stay = stay;
    pthread_barrier_init(&b.bar, NULL, 2);
    long before = rss_bytes();
    pthread_t t;
    pthread_create(&t, NULL, burst_thread, &b);
    if (stay) pthread_barrier_wait(&b.bar);
    else pthread_join(t, NULL);
    long freed = rss_bytes();
    int r = malloc_trim(0);
    long after = rss_bytes();
    printf("[extras]   a thread that %s: RSS %ld MiB, %ld MiB with its freed blocks, %ld MiB after malloc_trim(0) = %d\n",
           stay ? "is alive" : "has exited", before >> 20, freed >> 20, after >> 20, r);
    CHECK(freed > before + (long)(30 * MIB), "test premise: RSS %ld MiB with the thread's freed blocks, %ld before",
          freed >> 20, before >> 20);
    if (g_brisk) {
      CHECK(r == 1, "malloc_trim(0) returned %d", r);
      CHECK(after < freed - (long)(30 * MIB), "a thread that %s: RSS %ld MiB after malloc_trim(0), %ld MiB before",
            stay ? "is alive" : "has exited", after >> 20, freed >> 20);
    }
    if (stay) {
      pthread_barrier_wait(&b.bar);
      pthread_join(t, NULL);
    }
    for (int i = 0; i < TB; i++) free(b.blocks[i]);
    pthread_barrier_destroy(&b.bar);
  }
  section_end();
}

static void test_mallinfo(void) {
  section("mallinfo2 / mallinfo");
  enum { N = 20000, SIZE = 1000, LN = 10, LSIZE = 300000 };
  static void *b[N], *l[LN];
  malloc_trim(0);
  struct mallinfo2 m0 = mallinfo2();
  check_invariants(&m0, "start");
  for (int i = 0; i < N; i++) {
    b[i] = used(malloc(opaque(SIZE)));
    if (b[i]) memset(b[i], 5, SIZE);
  }
  struct mallinfo2 m1 = mallinfo2();
  check_invariants(&m1, "20000 blocks");
  size_t grew = m1.uordblks - m0.uordblks, want = (size_t)N * SIZE;
  printf("[extras]   20000 x 1000 B: uordblks +%zu (%zu asked), arena %zu -> %zu, fordblks %zu\n", grew, want,
         m0.arena, m1.arena, m1.fordblks);
  CHECK(m1.uordblks >= m0.uordblks + want, "uordblks rose by %zu for %zu bytes allocated", grew, want);
  if (g_brisk)
    CHECK(grew <= (size_t)N * 1024 * 11 / 10 + 2 * MIB, "uordblks rose by %zu for %d blocks of the 1024 B class",
          grew, N);
  for (int i = 0; i < N; i++) free(b[i]);
  struct mallinfo2 m2 = mallinfo2();
  check_invariants(&m2, "freed");
  CHECK(m2.uordblks <= m0.uordblks + 2 * MIB, "uordblks %zu after the blocks were freed, %zu before", m2.uordblks,
        m0.uordblks);

  for (int i = 0; i < LN; i++) l[i] = used(malloc(opaque(LSIZE)));
  struct mallinfo2 m3 = mallinfo2();
  check_invariants(&m3, "large");
  if (g_brisk) {
    CHECK(m3.uordblks >= m2.uordblks + (size_t)LN * LSIZE, "large blocks: uordblks %zu -> %zu for %d x %d B",
          m2.uordblks, m3.uordblks, LN, LSIZE);
    CHECK(m3.hblks == m2.hblks, "large blocks counted as mapped regions: hblks %zu -> %zu", m2.hblks, m3.hblks);
  }
  for (int i = 0; i < LN; i++) free(l[i]);
  struct mallinfo2 m4 = mallinfo2();
  CHECK(m4.uordblks <= m2.uordblks + MIB, "uordblks %zu after the large blocks were freed, %zu before",
        m4.uordblks, m2.uordblks);

  char *huge = used(malloc(opaque(20 * MIB + 5)));
  struct mallinfo2 m5 = mallinfo2();
  check_invariants(&m5, "huge");
  /* (glibc's own mmap threshold has grown with the blocks freed so far:
   * it keeps this one in its heap) */
  if (g_brisk) {
    CHECK(m5.hblks == m4.hblks + 1, "a 20 MiB block: hblks %zu -> %zu", m4.hblks, m5.hblks);
    CHECK(m5.hblkhd >= m4.hblkhd + 20 * MIB && m5.hblkhd <= m4.hblkhd + 21 * MIB,
          "a 20 MiB block: hblkhd %zu -> %zu", m4.hblkhd, m5.hblkhd);
    CHECK(m5.uordblks <= m4.uordblks + MIB, "a huge block counted in uordblks too: %zu -> %zu", m4.uordblks,
          m5.uordblks);
  }
  free(huge);
  struct mallinfo2 m6 = mallinfo2();
  CHECK(m6.hblks == m4.hblks && m6.hblkhd == m4.hblkhd, "after the free: hblks %zu, hblkhd %zu (%zu, %zu before)",
        m6.hblks, m6.hblkhd, m4.hblks, m4.hblkhd);

  if (g_brisk) {
    /* quiet (nothing left to purge): both calls see the same figures */
    malloc_trim(0);
    struct mallinfo2 a = mallinfo2();
    struct mallinfo i = mallinfo();
    CHECK((size_t)i.arena == a.arena && (size_t)i.uordblks == a.uordblks && (size_t)i.fordblks == a.fordblks &&
              (size_t)i.hblks == a.hblks && (size_t)i.hblkhd == a.hblkhd && (size_t)i.ordblks == a.ordblks &&
              (size_t)i.keepcost == a.keepcost,
          "mallinfo (%d %d %d) differs from mallinfo2 (%zu %zu %zu)", i.arena, i.uordblks, i.fordblks, a.arena,
          a.uordblks, a.fordblks);
    CHECK(i.smblks == 0 && i.usmblks == 0 && i.fsmblks == 0, "smblks %d, usmblks %d, fsmblks %d: brisk has none",
          i.smblks, i.usmblks, i.fsmblks);
    /* 3 GiB of address space, never touched: its bytes do not fit an int */
    void *big = used(malloc(opaque((size_t)3 << 30)));
    CHECK(big != NULL, "malloc(3 GiB) failed (a mapping brisk never touches)");
    if (big) {
      struct mallinfo i2 = mallinfo();
      struct mallinfo2 a2 = mallinfo2();
      CHECK(a2.hblkhd >= ((size_t)3 << 30), "mallinfo2().hblkhd %zu with a 3 GiB block", a2.hblkhd);
      CHECK(i2.hblkhd == INT_MAX, "mallinfo().hblkhd %d with a 3 GiB block: not saturated at INT_MAX", i2.hblkhd);
      CHECK(i2.hblks == (int)a2.hblks && i2.uordblks == (int)a2.uordblks, "small fields changed with saturation");
      free(big);
    }
  }
  section_end();
}

static void test_malloc_info(void) {
  section("malloc_info");
  FILE *f = tmpfile();
  CHECK(f != NULL, "tmpfile failed");
  if (!f) { section_end(); return; }
  /* The error lines brisk prints are test_api_errors's to check. */
  int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
  dup2(devnull, 2);
  errno = 0;
  int r = malloc_info(1, f);
  int e = errno;
  dup2(saved, 2);
  /* glibc's manual: -1 and errno EINVAL; glibc's code returns EINVAL */
  if (g_brisk) CHECK(r == -1 && e == EINVAL, "malloc_info(1, f) = %d, errno %d: expected -1, EINVAL", r, e);
  else CHECK(r == EINVAL || (r == -1 && e == EINVAL), "malloc_info(1, f) = %d, errno %d", r, e);
  if (g_brisk) {
    /* glibc would crash on a NULL stream */
    dup2(devnull, 2);
    errno = 0;
    r = malloc_info(0, NULL);
    e = errno;
    dup2(saved, 2);
    CHECK(r == -1 && e == EINVAL, "malloc_info(0, NULL) = %d, errno %d: expected -1, EINVAL", r, e);
  }
  close(saved);
  close(devnull);
  void *keep = used(malloc(opaque(5 * MIB)));
  r = malloc_info(0, f);
  CHECK(r == 0, "malloc_info(0, f) = %d", r);
  long len = ftell(f);
  rewind(f);
  char *xml = calloc(1, (size_t)len + 1);
  if (xml && fread(xml, 1, (size_t)len, f) == (size_t)len) {
    CHECK(strncmp(xml, "<malloc version=\"", 17) == 0, "malloc_info starts with %.40s", xml);
    if (g_brisk) CHECK(strncmp(xml, "<malloc version=\"brisk-0.1.0\">\n", 31) == 0, "malloc_info starts with %.40s", xml);
    CHECK(len > 10 && strcmp(xml + len - 10, "</malloc>\n") == 0, "malloc_info ends with %s", xml + (len > 20 ? len - 20 : 0));
    CHECK(strstr(xml, "<total type=\"mmap\" count=\"") != NULL, "no <total type=\"mmap\" ...> in %s", xml);
  } else {
    FAIL("could not read back %ld bytes of malloc_info", len);
  }
  free(xml);
  free(keep);
  fclose(f);
  section_end();
}

static void test_malloc_stats(void) {
  section("malloc_stats");
  FILE *f = tmpfile();
  if (!f) { FAIL("tmpfile failed"); section_end(); return; }
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(f), 2);
  malloc_stats();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long len = ftell(f);
  rewind(f);
  char *text = calloc(1, (size_t)len + 1);
  if (text && len > 0 && fread(text, 1, (size_t)len, f) == (size_t)len) {
    CHECK(strstr(text, "system bytes     = ") && strstr(text, "in use bytes     = "),
          "malloc_stats printed no glibc totals: %.200s", text);
    if (g_brisk) {
      CHECK(strstr(text, "Total (incl. mmap):\n") != NULL, "no \"Total (incl. mmap):\" line");
      CHECK(strstr(text, "\nbrisk: brisk statistics:\n") && strstr(text, "\nbrisk:   mapped_bytes: ") &&
                strstr(text, "\nbrisk:   process_rss_bytes: "),
            "malloc_stats printed no brisk statistics: %.300s", text);
    }
  } else {
    FAIL("malloc_stats wrote nothing to stderr (%ld bytes)", len);
  }
  free(text);
  fclose(f);
  section_end();
}

static void test_mallopt(void) {
  section("mallopt");
  int unknown[] = {12345, -12345, 2 /* M_NLBLKS */, 3 /* M_GRAIN */, 4 /* M_KEEP */, -9, -100, 0};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    int r = mallopt(unknown[i], 1);
    if (g_brisk) CHECK(r == 0, "mallopt(%d, 1) = %d for a parameter brisk does not know: expected 0", unknown[i], r);
  }
  struct { int param, value, want; } known[] = {
      {M_ARENA_MAX, 2, 1},      {M_ARENA_TEST, 8, 1},       {M_TOP_PAD, 0, 1},     {M_MMAP_MAX, 1000, 1},
      {M_PERTURB, 0, 1},        {M_MXFAST, 64, 1},          {M_MXFAST, 1000, 0},   {M_MXFAST, -1, 0},
      {M_MMAP_THRESHOLD, 1 << 20, 1}, {M_MMAP_THRESHOLD, 64 << 20, 1}, {M_MMAP_THRESHOLD, -1, 1},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    int r = mallopt(known[i].param, known[i].value);
    CHECK(r == known[i].want, "mallopt(%d, %d) = %d, expected %d (as glibc)", known[i].param, known[i].value, r,
          known[i].want);
  }
  if (g_brisk) {
    long cache = option("SEGMENT_CACHE");
    CHECK(mallopt(M_TRIM_THRESHOLD, 8 << 20) == 1, "mallopt(M_TRIM_THRESHOLD, 8 MiB) refused");
    CHECK(option("SEGMENT_CACHE") == 2, "M_TRIM_THRESHOLD 8 MiB: BRISK_SEGMENT_CACHE is %ld, expected 2 segments",
          option("SEGMENT_CACHE"));
    CHECK(mallopt(M_TRIM_THRESHOLD, -1) == 1, "mallopt(M_TRIM_THRESHOLD, -1) refused");
    CHECK(option("SEGMENT_CACHE") == 1 << 20, "M_TRIM_THRESHOLD -1 (never trim): BRISK_SEGMENT_CACHE is %ld",
          option("SEGMENT_CACHE"));
    CHECK(b_option_set("SEGMENT_CACHE", cache) == 0, "brisk_option_set(SEGMENT_CACHE, %ld) failed", cache);
    CHECK(mallopt(M_CHECK_ACTION, 3) == 1 && option("ON_ERROR") == 1, "M_CHECK_ACTION 3: ON_ERROR %ld, expected 1",
          option("ON_ERROR"));
    CHECK(mallopt(M_CHECK_ACTION, 1) == 1 && option("ON_ERROR") == 0, "M_CHECK_ACTION 1: ON_ERROR %ld, expected 0",
          option("ON_ERROR"));
    free(used(malloc(opaque(500000))));
    CHECK(mallopt(-101 /* M_PURGE */, 0) == 1, "mallopt(M_PURGE) refused");
    CHECK(mallopt(-104 /* M_PURGE_ALL */, 0) == 1, "mallopt(M_PURGE_ALL) refused");
    struct mallinfo2 m = mallinfo2();
    CHECK(m.keepcost == 0, "keepcost %zu after mallopt(M_PURGE_ALL)", m.keepcost);
  }
  section_end();
}

/* malloc_info's XML and, right after it, brisk's JSON, for the script. */
static int dump(const char *xml_path, const char *json_path) {
  void *keep[4] = {used(malloc(100)), used(malloc(200000)), used(malloc(3 * MIB)), used(malloc(40 * MIB))};
  for (int i = 0; i < 4; i++) memset(keep[i], 1, 100);
  free(keep[1]); /* some free memory too */
  FILE *x = fopen(xml_path, "w");
  if (!x) { perror(xml_path); return 1; }
  setvbuf(x, NULL, _IOFBF, 1 << 16); /* allocated now, not during malloc_info */
  int r = malloc_info(0, x);
  size_t n = b_stats_json ? b_stats_json(g_json, sizeof g_json) : 0;
  fclose(x);
  FILE *j = fopen(json_path, "w");
  if (!j) { perror(json_path); return 1; }
  fprintf(j, "%s\n", n ? g_json : "{}");
  fclose(j);
  free(keep[0]);
  free(keep[2]);
  free(keep[3]);
  return r == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  b_stats_json = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "brisk_stats_json");
  b_option_get = (int (*)(const char *, long *))dlsym(RTLD_DEFAULT, "brisk_option_get");
  b_option_set = (int (*)(const char *, long))dlsym(RTLD_DEFAULT, "brisk_option_set");
  g_brisk = b_stats_json && b_option_get && b_option_set;
  if (argc == 3) return dump(argv[1], argv[2]);
  printf("[extras] the allocator's extras are %s\n", g_brisk ? "brisk's" : "glibc's (brisk not loaded)");
  test_trim();
  test_trim_refused();
  test_trim_other_threads();
  test_mallinfo();
  test_malloc_info();
  test_malloc_stats();
  test_mallopt();
  section("bad input counted");
  if (g_brisk) CHECK(json_num("errors") == 2, "brisk counted %g errors: the two bad malloc_info calls expected",
                     json_num("errors"));
  section_end();
  if (g_failures) {
    printf("[extras] FAILED: %ld checks\n", g_failures);
    return 1;
  }
  printf("[extras] all checks passed\n");
  return 0;
}
