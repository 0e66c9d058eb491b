/* First-class heaps and session arenas (the C API of include/brisk.h).
 *
 * ctest-labels: sanitize tsan
 *
 * Only brisk_* functions are used for what is checked (under the
 * ThreadSanitizer build malloc/free are TSan's, brisk_* are brisk's).
 * Sections, each printing "[heaps] <section> ok" or its failures:
 *   - heap malloc/calloc/realloc/aligned_alloc (alignments 16..1 MiB), all
 *     size ranges (small, medium, large, huge), content checks;
 *   - brisk_heap_stats_json: valid JSON (checked by a small parser), the
 *     keys "segments", "pages", "blocks_in_use", snprintf-like length,
 *     blocks_in_use growing with allocations and falling with frees;
 *   - blocks freed with brisk_free on the owning thread and on other
 *     threads, and the memory coming back to the heap;
 *   - heap destroy while other threads still hold frees of its blocks in
 *     their outboxes / its inbox (threads brisk_free some blocks, block on
 *     a barrier while main destroys the heap); then the threads keep
 *     working in their own heaps, a new heap made after the destroy is
 *     filled and checked (the stale frees must not touch it), and the
 *     threads' frees of the new heap's blocks reach it;
 *   - destroy releases every block, huge ones (> 2 MiB) included;
 *   - a huge block over 4 GiB whose first word looks like a free-list
 *     link is freed by its owner without a report;
 *   - isolation: two heaps with content, destroy one, the other intact;
 *   - many heaps created and destroyed in a loop (heap objects and memory
 *     are reused);
 *   - destroy of a heap with 1M live small blocks; the memory is reusable
 *     (times printed for information, not asserted);
 *   - arenas: brisk_arena_new(NULL or heap), every alignment 1..4096, no
 *     overlap (patterns checked at the end), overflow from a 4 KiB first
 *     buffer up to several MiB, reset keeps the first buffer, destroy.
 * Environment: BRISKTEST_SCALE=<float> scales the big loops (default 1,
 * 0.1 under TSan, 0.5 when UBSAN_OPTIONS is set).
 * Run by hand: build/tests/test_heaps
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "under_tsan.h"

/* ------------------------------------------------------------------ */
/* failure accounting                                                   */

static long g_failures;
static long g_section_failures;
static const char *g_section = "?";
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_at(int line, const char *fmt, ...) {
  pthread_mutex_lock(&g_fail_lock);
  g_failures++;
  g_section_failures++;
  if (g_section_failures <= 20) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("[heaps] FAIL %s (test_heaps.c:%d): %s\n", g_section, line, msg);
    fflush(stdout);
  }
  pthread_mutex_unlock(&g_fail_lock);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

static double now_ms(void);
static double g_section_start;
static void section_begin(const char *name) {
  g_section = name;
  g_section_failures = 0;
  g_section_start = now_ms();
}
static void section_end(void) {
  double ms = now_ms() - g_section_start;
  if (g_section_failures == 0)
    printf("[heaps] %-44s ok (%.0f ms)\n", g_section, ms);
  else
    printf("[heaps] %-44s FAILED (%ld failed checks%s)\n", g_section, g_section_failures,
           g_section_failures > 20 ? ", first 20 shown" : "");
  fflush(stdout);
}

static double test_scale(void) {
  const char *s = getenv("BRISKTEST_SCALE");
  if (s && *s) return atof(s) > 0 ? atof(s) : 1.0;
  if (UNDER_TSAN) return 0.1;
  if (getenv("UBSAN_OPTIONS")) return 0.5;
  return 1.0;
}
static double g_scale = 1.0;
static long scaled(long n, long min) {
  long v = (long)((double)n * g_scale);
  return v < min ? min : v;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t opaque_size(size_t n) {
  __asm__ volatile("" : "+r"(n));
  return n;
}

static int is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* ------------------------------------------------------------------ */
/* patterns                                                             */

/* Word-wise: 8 bytes per access (the sanitizer builds check each access). */
static inline uint64_t patw(size_t w, unsigned seed) {
  return ((uint64_t)w * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)seed * 0xD1B54A32D192ED03ull) ^ 0x5555;
}
static void fill_pat(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = patw(i / 8, seed);
    memcpy(b + i, &v, 8);
  }
  if (i < n) { /* the tail: the same bytes a longer fill puts there */
    uint64_t v = patw(i / 8, seed);
    memcpy(b + i, &v, n - i);
  }
}
/* First offset that differs, or (size_t)-1. */
static size_t check_pat(const void *p, size_t n, unsigned seed) {
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, b + i, 8);
    if (v != patw(i / 8, seed)) {
      uint64_t want = patw(i / 8, seed);
      for (size_t k = 0; k < 8; k++)
        if (((unsigned char *)&v)[k] != ((unsigned char *)&want)[k]) return i + k;
    }
  }
  if (i < n) {
    uint64_t want = patw(i / 8, seed);
    for (size_t k = 0; i + k < n; k++)
      if (b[i + k] != ((unsigned char *)&want)[k]) return i + k;
  }
  return (size_t)-1;
}
/* Cheap stamp for many small blocks: a seed word at both ends and a byte
 * pattern in between (at most the first 64 bytes). */
static void stamp(void *p, size_t n, uint64_t seed) {
  if (n >= 16) {
    memcpy(p, &seed, 8);
    memcpy((char *)p + n - 8, &seed, 8);
    size_t m = n - 16 < 64 ? n - 16 : 64;
    memset((char *)p + 8, (int)(seed & 0xff), m);
  } else {
    memset(p, (int)(seed & 0xff), n);
  }
}
static int stamp_ok(const void *p, size_t n, uint64_t seed) {
  if (n >= 16) {
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, (const char *)p + n - 8, 8);
    if (a != seed || b != seed) return 0;
    size_t m = n - 16 < 64 ? n - 16 : 64;
    for (size_t i = 0; i < m; i++)
      if (((const unsigned char *)p)[8 + i] != (unsigned char)(seed & 0xff)) return 0;
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed & 0xff)) return 0;
  return 1;
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ */
/* a small JSON parser (RFC 8259 subset: everything but \u escapes'     */
/* meaning) that also collects the numeric members of the top object   */

typedef struct {
  const char *s;
  const char *err;
  int depth;
  char keys[48][40];
  double vals[48];
  int nkeys;
} json_t;

static void js_ws(json_t *j) {
  while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r') j->s++;
}
static int js_value(json_t *j, double *num_out, int *is_num);
static int js_string(json_t *j, char *out, size_t outlen) {
  if (*j->s != '"') { j->err = "expected a string"; return 0; }
  j->s++;
  size_t k = 0;
  while (*j->s != '"') {
    unsigned char c = (unsigned char)*j->s;
    if (c == 0) { j->err = "unterminated string"; return 0; }
    if (c < 0x20) { j->err = "control character in a string"; return 0; }
    if (c == '\\') {
      j->s++;
      if (!strchr("\"\\/bfnrtu", *j->s) || *j->s == 0) { j->err = "bad escape"; return 0; }
      if (*j->s == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", j->s[i]) || j->s[i] == 0) { j->err = "bad \\u escape"; return 0; }
        j->s += 4;
      }
    }
    if (out && k + 1 < outlen) out[k++] = (char)*j->s;
    j->s++;
  }
  if (out) out[k] = 0;
  j->s++;
  return 1;
}
static int js_number(json_t *j, double *out) {
  const char *p = j->s;
  if (*p == '-') p++;
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
  else { j->err = "bad number"; return 0; }
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9')) { j->err = "bad fraction"; return 0; }
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) { j->err = "bad exponent"; return 0; }
    while (*p >= '0' && *p <= '9') p++;
  }
  *out = strtod(j->s, NULL);
  j->s = p;
  return 1;
}
static int js_object(json_t *j) {
  j->s++; /* { */
  int top = j->depth == 1;
  js_ws(j);
  if (*j->s == '}') { j->s++; return 1; }
  for (;;) {
    char key[40];
    js_ws(j);
    if (!js_string(j, key, sizeof key)) return 0;
    js_ws(j);
    if (*j->s != ':') { j->err = "expected ':'"; return 0; }
    j->s++;
    double v = 0;
    int isn = 0;
    if (!js_value(j, &v, &isn)) return 0;
    if (top && j->nkeys < 48) {
      snprintf(j->keys[j->nkeys], sizeof j->keys[0], "%s", key);
      j->vals[j->nkeys] = isn ? v : -1.0;
      j->nkeys++;
    }
    js_ws(j);
    if (*j->s == ',') { j->s++; continue; }
    if (*j->s == '}') { j->s++; return 1; }
    j->err = "expected ',' or '}'";
    return 0;
  }
}
static int js_array(json_t *j) {
  j->s++;
  js_ws(j);
  if (*j->s == ']') { j->s++; return 1; }
  for (;;) {
    double v;
    int isn;
    if (!js_value(j, &v, &isn)) return 0;
    js_ws(j);
    if (*j->s == ',') { j->s++; continue; }
    if (*j->s == ']') { j->s++; return 1; }
    j->err = "expected ',' or ']'";
    return 0;
  }
}
static int js_value(json_t *j, double *num_out, int *is_num) {
  js_ws(j);
  *is_num = 0;
  if (++j->depth > 32) { j->err = "too deep"; return 0; }
  int ok;
  char c = *j->s;
  if (c == '{') ok = js_object(j);
  else if (c == '[') ok = js_array(j);
  else if (c == '"') ok = js_string(j, NULL, 0);
  else if (c == '-' || (c >= '0' && c <= '9')) { ok = js_number(j, num_out); *is_num = ok; }
  else if (!strncmp(j->s, "true", 4)) { j->s += 4; ok = 1; }
  else if (!strncmp(j->s, "false", 5)) { j->s += 5; ok = 1; }
  else if (!strncmp(j->s, "null", 4)) { j->s += 4; ok = 1; }
  else { j->err = "unexpected character"; ok = 0; }
  j->depth--;
  return ok;
}
/* Parses text; 1 when it is one JSON object and nothing else. */
static int json_parse(json_t *j, const char *text) {
  memset(j, 0, sizeof *j);
  j->s = text;
  js_ws(j);
  if (*j->s != '{') { j->err = "not an object"; return 0; }
  double v;
  int isn;
  if (!js_value(j, &v, &isn)) return 0;
  js_ws(j);
  if (*j->s != 0) { j->err = "trailing characters"; return 0; }
  return 1;
}
/* -1 when absent or not a number */
static double json_get(const json_t *j, const char *key) {
  for (int i = 0; i < j->nkeys; i++)
    if (!strcmp(j->keys[i], key)) return j->vals[i];
  return -1.0;
}

/* The heap's stats, parsed and checked; returns blocks_in_use (or -1). */
static double heap_stat(brisk_heap_t *h, const char *key) {
  char buf[1024];
  size_t n = brisk_heap_stats_json(h, buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) {
    FAIL("brisk_heap_stats_json(%p) returned %zu", (void *)h, n);
    return -1;
  }
  json_t j;
  if (!json_parse(&j, buf)) {
    FAIL("brisk_heap_stats_json is not valid JSON (%s at offset %zu): %s", j.err, (size_t)(j.s - buf), buf);
    return -1;
  }
  double v = json_get(&j, key);
  if (v < 0) FAIL("brisk_heap_stats_json has no numeric \"%s\": %s", key, buf);
  return v;
}
/* One numeric member of the process-wide statistics. */
static double proc_stat(const char *key) {
  char buf[4096];
  size_t n = brisk_stats_json(buf, sizeof buf);
  if (n >= sizeof buf) { FAIL("brisk_stats_json needs %zu bytes", n); return -1; }
  json_t j;
  if (!json_parse(&j, buf)) { FAIL("brisk_stats_json is not valid JSON (%s): %s", j.err, buf); return -1; }
  double v = json_get(&j, key);
  if (v < 0) FAIL("brisk_stats_json has no numeric \"%s\"", key);
  return v;
}

/* ------------------------------------------------------------------ */
/* basic heap API                                                       */

static const size_t k_sizes[] = {0,    1,     8,     15,    16,     17,     24,     32,      48,     64,
                                 100,  128,   255,   256,   511,    512,    1000,   1024,    1025,   2000,
                                 4096, 5000,  8192,  8193,  16000,  32768,  65536,  65537,   100000, 262144,
                                 500000, 1u << 20, (2u << 20) - 100, 2u << 20, (2u << 20) + 1, 3u << 20, 9u << 20};
enum { NSIZES = sizeof k_sizes / sizeof k_sizes[0] };

static void test_basic(void) {
  section_begin("heap malloc/calloc/realloc/free");
  brisk_heap_t *h = brisk_heap_new();
  CHECK(h != NULL, "brisk_heap_new returned NULL");
  if (!h) { section_end(); return; }
  brisk_heap_t *h2 = brisk_heap_new();
  CHECK(h2 != NULL && h2 != h, "a second brisk_heap_new returned %p (first %p)", (void *)h2, (void *)h);

  /* malloc in every size range, content, usable size, ownership */
  void *blk[NSIZES];
  for (int i = 0; i < NSIZES; i++) {
    size_t n = k_sizes[i];
    blk[i] = brisk_heap_malloc(h, opaque_size(n));
    CHECK(blk[i] != NULL, "brisk_heap_malloc(h, %zu) returned NULL", n);
    if (!blk[i]) continue;
    CHECK(is_aligned(blk[i], 16), "brisk_heap_malloc(h, %zu) = %p is not 16-byte aligned", n, blk[i]);
    CHECK(brisk_owns(blk[i]), "brisk_owns(brisk_heap_malloc(h, %zu) = %p) is false", n, blk[i]);
    CHECK(brisk_usable_size(blk[i]) >= n, "usable size %zu < %zu", brisk_usable_size(blk[i]), n);
    fill_pat(blk[i], n, (unsigned)i);
  }
  for (int i = 0; i < NSIZES; i++) {
    if (!blk[i]) continue;
    size_t off = check_pat(blk[i], k_sizes[i], (unsigned)i);
    CHECK(off == (size_t)-1, "heap block of %zu bytes at %p changed at offset %zu", k_sizes[i], blk[i], off);
  }
  /* distinct zero-size blocks */
  void *z1 = brisk_heap_malloc(h, opaque_size(0)), *z2 = brisk_heap_malloc(h, opaque_size(0));
  CHECK(z1 && z2 && z1 != z2, "brisk_heap_malloc(h, 0) twice: %p %p (unique non-NULL expected)", z1, z2);
  brisk_free(z1);
  brisk_free(z2);

  /* calloc: zeroed even where a patterned block was freed before */
  for (int i = 0; i < NSIZES; i++) {
    size_t n = k_sizes[i];
    if (n == 0 || n > (1u << 20)) continue;
    void *dirty = brisk_heap_malloc(h, n);
    if (dirty) memset(dirty, 0xAB, n);
    brisk_free(dirty);
    unsigned char *c = brisk_heap_calloc(h, 1, n);
    CHECK(c != NULL, "brisk_heap_calloc(h, 1, %zu) returned NULL", n);
    if (!c) continue;
    for (size_t k = 0; k < n; k++)
      if (c[k] != 0) { FAIL("brisk_heap_calloc(h, 1, %zu) byte %zu is 0x%02x", n, k, c[k]); break; }
    brisk_free(c);
  }
  unsigned char *c2 = brisk_heap_calloc(h, 100, 24);
  CHECK(c2 != NULL, "brisk_heap_calloc(h, 100, 24) returned NULL");
  if (c2) {
    for (size_t k = 0; k < 2400; k++)
      if (c2[k]) { FAIL("brisk_heap_calloc(h, 100, 24) byte %zu not zero", k); break; }
    brisk_free(c2);
  }
  errno = 0;
  void *ov = brisk_heap_calloc(h, opaque_size((size_t)1 << 33), opaque_size((size_t)1 << 33));
  CHECK(ov == NULL && errno == ENOMEM, "brisk_heap_calloc with an overflowing product: %p, errno %d", ov, errno);

  /* realloc: content preserved across every size boundary, both ways */
  {
    size_t cur = 0;
    char *p = brisk_heap_realloc(h, NULL, 1);
    CHECK(p != NULL, "brisk_heap_realloc(h, NULL, 1) returned NULL");
    if (p) { fill_pat(p, 1, 500); cur = 1; }
    for (int i = 0; i < NSIZES && p; i++) {
      size_t n = k_sizes[i];
      if (n == 0) continue;
      char *q = brisk_heap_realloc(h, p, n);
      CHECK(q != NULL, "brisk_heap_realloc(h, %p, %zu) returned NULL", (void *)p, n);
      if (!q) break;
      size_t keep = cur < n ? cur : n;
      size_t off = check_pat(q, keep, 500);
      CHECK(off == (size_t)-1, "brisk_heap_realloc to %zu lost content at offset %zu", n, off);
      fill_pat(q, n, 500);
      p = q;
      cur = n;
    }
    for (int i = NSIZES - 1; i >= 0 && p; i--) {
      size_t n = k_sizes[i];
      if (n == 0) continue;
      char *q = brisk_heap_realloc(h, p, n);
      CHECK(q != NULL, "brisk_heap_realloc(h, %p, %zu) (shrinking) returned NULL", (void *)p, n);
      if (!q) break;
      size_t keep = cur < n ? cur : n;
      size_t off = check_pat(q, keep, 500);
      CHECK(off == (size_t)-1, "brisk_heap_realloc shrinking to %zu lost content at offset %zu", n, off);
      fill_pat(q, n, 500);
      p = q;
      cur = n;
    }
    void *r0 = brisk_heap_realloc(h, p, 0);
    CHECK(r0 == NULL, "brisk_heap_realloc(h, p, 0) returned %p, expected NULL (freed)", r0);
  }
  /* realloc of a block of another heap / of the default heap into h */
  {
    char *o = brisk_heap_malloc(h2, 100);
    char *d = brisk_malloc(300);
    if (o && d) {
      fill_pat(o, 100, 7);
      fill_pat(d, 300, 8);
      char *o2 = brisk_heap_realloc(h, o, 5000);
      char *d2 = brisk_heap_realloc(h, d, 7000);
      CHECK(o2 && check_pat(o2, 100, 7) == (size_t)-1, "brisk_heap_realloc of another heap's block lost content");
      CHECK(d2 && check_pat(d2, 300, 8) == (size_t)-1, "brisk_heap_realloc of a brisk_malloc block lost content");
      brisk_free(o2);
      brisk_free(d2);
    } else {
      FAIL("allocation failed");
    }
  }
  for (int i = 0; i < NSIZES; i++) brisk_free(blk[i]);
  brisk_heap_destroy(h);
  brisk_heap_destroy(h2);
  brisk_heap_destroy(NULL); /* ignored, like free(NULL) */
  section_end();
}

static void test_aligned(void) {
  section_begin("heap aligned_alloc 16..1 MiB");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new returned NULL"); section_end(); return; }
  enum { MAXB = 512 };
  static void *ptr[MAXB];
  static size_t len[MAXB];
  static unsigned seed[MAXB];
  int nb = 0;
  for (size_t a = 16; a <= ((size_t)1 << 20); a <<= 1) {
    size_t sizes[] = {1, 8, a / 2 + 1, a, a + 1, 3 * a + 5, 100, 5000, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      void *p = brisk_heap_aligned_alloc(h, opaque_size(a), opaque_size(n));
      CHECK(p != NULL, "brisk_heap_aligned_alloc(h, %zu, %zu) returned NULL", a, n);
      if (!p) continue;
      CHECK(is_aligned(p, a), "brisk_heap_aligned_alloc(h, %zu, %zu) = %p is not aligned", a, n, p);
      CHECK(brisk_usable_size(p) >= n, "usable size %zu < %zu (alignment %zu)", brisk_usable_size(p), n, a);
      CHECK(brisk_owns(p), "brisk_owns(%p) false for an aligned heap block", p);
      fill_pat(p, n, (unsigned)(a + k));
      if (nb < MAXB) { ptr[nb] = p; len[nb] = n; seed[nb] = (unsigned)(a + k); nb++; }
      else brisk_free(p);
    }
  }
  for (int i = 0; i < nb; i++) {
    size_t off = check_pat(ptr[i], len[i], seed[i]);
    CHECK(off == (size_t)-1, "aligned heap block %p (%zu bytes) changed at offset %zu (overlap?)", ptr[i], len[i], off);
  }
  /* every other freed, then destroy with the rest live */
  for (int i = 0; i < nb; i += 2) brisk_free(ptr[i]);
  for (int i = 1; i < nb; i += 2) {
    size_t off = check_pat(ptr[i], len[i], seed[i]);
    CHECK(off == (size_t)-1, "aligned heap block %p changed at offset %zu after freeing its neighbours", ptr[i], off);
  }
  /* bad alignments fail with EINVAL */
  size_t bad[] = {0, 3, 24, 48, 1000};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    errno = 0;
    void *p = brisk_heap_aligned_alloc(h, opaque_size(bad[k]), 64);
    CHECK(p == NULL && errno == EINVAL, "brisk_heap_aligned_alloc(h, %zu, 64) = %p, errno %d (NULL, EINVAL expected)",
          bad[k], p, errno);
  }
  /* small alignments (1..8) are plain heap blocks */
  for (size_t a = 1; a < 16; a <<= 1) {
    void *p = brisk_heap_aligned_alloc(h, a, 40);
    CHECK(p != NULL && is_aligned(p, 16), "brisk_heap_aligned_alloc(h, %zu, 40) = %p", a, p);
    brisk_free(p);
  }
  brisk_heap_destroy(h);
  section_end();
}

static void test_stats_json(void) {
  section_begin("brisk_heap_stats_json");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new returned NULL"); section_end(); return; }
  char buf[1024];
  size_t n = brisk_heap_stats_json(h, buf, sizeof buf);
  CHECK(n > 0 && n < sizeof buf && strlen(buf) == n, "brisk_heap_stats_json returned %zu, strlen %zu", n, strlen(buf));
  json_t j;
  if (!json_parse(&j, buf)) FAIL("not valid JSON (%s): %s", j.err, buf);
  const char *keys[] = {"segments", "pages", "blocks_in_use"};
  for (int k = 0; k < 3; k++) CHECK(json_get(&j, keys[k]) >= 0, "key \"%s\" missing or not a number: %s", keys[k], buf);
  CHECK(json_get(&j, "blocks_in_use") == 0, "a new heap has blocks_in_use %g: %s", json_get(&j, "blocks_in_use"), buf);
  /* snprintf-like: NULL/0 gives the length; truncation NUL-terminates */
  size_t need = brisk_heap_stats_json(h, NULL, 0);
  CHECK(need == n, "brisk_heap_stats_json(h, NULL, 0) = %zu, expected %zu", need, n);
  char small[8];
  memset(small, 'x', sizeof small);
  size_t n2 = brisk_heap_stats_json(h, small, sizeof small);
  CHECK(n2 == n, "brisk_heap_stats_json with a short buffer returned %zu, expected %zu", n2, n);
  CHECK(memchr(small, 0, sizeof small) != NULL && strncmp(small, buf, strlen(small)) == 0,
        "short buffer not a NUL-terminated prefix");

  /* blocks_in_use grows with allocations and falls with frees */
  enum { N = 3000 };
  static void *b[N];
  double prev = heap_stat(h, "blocks_in_use");
  double segs0 = heap_stat(h, "segments");
  for (int i = 0; i < N; i++) {
    b[i] = brisk_heap_malloc(h, 16 + (size_t)(i % 7) * 40 + (i % 100 == 0 ? 20000 : 0));
    if (!b[i]) { FAIL("brisk_heap_malloc failed"); continue; }
    if ((i + 1) % 500 == 0) {
      double cur = heap_stat(h, "blocks_in_use");
      CHECK(cur > prev, "blocks_in_use did not grow: %g after %d allocations, %g before", cur, i + 1, prev);
      prev = cur;
    }
  }
  double full = heap_stat(h, "blocks_in_use");
  CHECK(full >= N * 0.9 && full <= N, "blocks_in_use %g with %d live small/medium blocks", full, N);
  CHECK(heap_stat(h, "segments") >= segs0 && heap_stat(h, "segments") >= 1, "segments %g", heap_stat(h, "segments"));
  CHECK(heap_stat(h, "pages") >= 2, "pages %g with %d live blocks of several classes", heap_stat(h, "pages"), N);
  for (int i = 0; i < N; i += 2) brisk_free(b[i]);
  double half = heap_stat(h, "blocks_in_use");
  CHECK(half <= full - N / 2 + 1, "after freeing %d blocks blocks_in_use is %g (was %g)", N / 2, half, full);
  for (int i = 1; i < N; i += 2) brisk_free(b[i]);
  CHECK(heap_stat(h, "blocks_in_use") == 0, "after freeing everything blocks_in_use is %g",
        heap_stat(h, "blocks_in_use"));
  brisk_heap_destroy(h);
  section_end();
}

/* Freed blocks above 1 KiB wait in their heap's class cache, still
 * counted in their pages; what a thread that exits leaves in them goes
 * back at brisk_collect(true) at the latest, so none of its pages stays in
 * use. */
static void *class_cache_thread(void *arg) {
  if (arg == NULL) return NULL; /* the idle thread */
  enum { N = 200 };
  void *b[N];
  for (int i = 0; i < N; i++) {
    /* brisk_* (malloc is ThreadSanitizer's in that build) */
    b[i] = brisk_malloc(12000 + (size_t)(i % 3) * 3000); /* three classes, 5..10 per page */
    if (!b[i]) FAIL("brisk_malloc failed");
    else memset(b[i], i, 12000);
  }
  for (int i = 0; i < N; i++) brisk_free(b[i]);
  return NULL;
}

static void test_class_cache_exit(void) {
  section_begin("class cache given back at thread exit");
  /* An idle thread first: what creating a thread leaves in use (the
   * first time) is not what is measured. */
  double before = 0, after = 0;
  for (int run = 0; run < 2; run++) {
    pthread_t t;
    if (pthread_create(&t, NULL, class_cache_thread, run ? &run : NULL) != 0) {
      FAIL("pthread_create failed");
      section_end();
      return;
    }
    pthread_join(t, NULL);
    brisk_collect(true);
    if (run == 0) before = proc_stat("pages");
    else after = proc_stat("pages");
  }
  CHECK(after <= before, "pages in use %g after a thread freed all its blocks and exited, %g before", after,
        before);
  section_end();
}

/* A heap left by its thread keeps its class cache and each class's
 * current page for the thread that adopts it next. Nobody adopting it,
 * the background thread gives them back once a purge delay has passed;
 * the background thread switched off, they go back at once. */
static void *left_warm_thread(void *arg) {
  (void)arg;
  enum { N = 60 };
  void *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = brisk_malloc(3000 + (size_t)(i % 6) * 2000); /* six classes above 1 KiB */
    if (!b[i]) FAIL("brisk_malloc failed");
    else memset(b[i], i, 3000);
  }
  for (int i = 0; i < N; i++) brisk_free(b[i]);
  return NULL;
}

/* Pages in use right after a thread of left_warm_thread has exited. */
static double pages_after_left_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, left_warm_thread, NULL) != 0) {
    FAIL("pthread_create failed");
    return -1;
  }
  pthread_join(t, NULL);
  return proc_stat("pages");
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_left_heap_warm(void) {
  section_begin("a heap left by its thread: kept, then given back");
  long delay0 = 0;
  brisk_option_get("PURGE_DELAY", &delay0);
  /* 1 s: the pages are read well within it after the join, on a loaded
   * machine too */
  brisk_option_set("PURGE_DELAY", 1000);
  /* Kept only while a background thread runs to come back for it. */
  brisk_option_set("BACKGROUND", 1);
  double running = 0;
  for (int i = 0; i < 400 && running < 1; i++) {
    brisk_collect(false); /* a safe point, where the thread starts */
    running = proc_stat("background_threads");
    if (running < 1) sleep_ms(5);
  }
  CHECK(running >= 1, "the background thread did not start in 2 s");
  brisk_collect(true);
  double base = proc_stat("pages");
  double t0 = now_ms();
  double kept = pages_after_left_thread();
  CHECK(kept > base, "pages in use %g right after the thread exited, %g before: nothing kept for the next thread",
        kept, base);
  double back = kept;
  while (back > base && now_ms() - t0 < 5000) {
    sleep_ms(10);
    back = proc_stat("pages");
  }
  CHECK(back <= base, "pages in use %g 5 s after the thread exited (purge delay 1 s), %g before", back, base);
  kept = pages_after_left_thread();
  CHECK(kept > base, "pages in use %g right after the second thread exited, %g before", kept, base);
  brisk_option_set("BACKGROUND", 0);
  double off = proc_stat("pages");
  CHECK(off <= base, "pages in use %g once the background thread was switched off, %g before", off, base);
  brisk_option_set("BACKGROUND", 1);
  brisk_option_set("PURGE_DELAY", delay0);
  section_end();
}

/* Blocks in the class cache must not keep an otherwise empty page alive:
 * 16 blocks of 30000 B fill four 128 KiB pages (4 blocks each; the cache
 * holds 2 of that class); once all are freed only the current page of the
 * class stays in use, and the memory serves the next allocations. */
static void test_class_cache_empty_pages(void) {
  section_begin("class cache lets empty pages go");
  enum { N = 16, SIZE = 30000 };
  brisk_heap_t *h = brisk_heap_new();
  if (!h) {
    FAIL("brisk_heap_new failed");
    section_end();
    return;
  }
  for (int round = 0; round < 3; round++) {
    void *b[N];
    for (int i = 0; i < N; i++) {
      b[i] = brisk_heap_malloc(h, SIZE);
      if (!b[i]) {
        FAIL("brisk_heap_malloc(%d) failed", SIZE);
        brisk_heap_destroy(h);
        section_end();
        return;
      }
      memset(b[i], 0x30 + i, SIZE);
    }
    double full = heap_stat(h, "pages");
    CHECK(full >= 4, "round %d: %g pages for %d blocks of %d B", round, full, N, SIZE);
    for (int i = 0; i < N; i++) {
      const unsigned char *c = b[i];
      CHECK(c[0] == 0x30 + i && c[SIZE - 1] == 0x30 + i, "round %d: block %d overwritten", round, i);
    }
    for (int i = 0; i < N; i++) brisk_free(b[i]);
    double left = heap_stat(h, "pages");
    CHECK(left <= 1, "round %d: %g pages in use after every block was freed (1 expected: the current one)",
          round, left);
    CHECK(heap_stat(h, "blocks_in_use") == 0, "round %d: blocks in use after every block was freed", round);
  }
  brisk_heap_destroy(h);
  section_end();
}

/* ------------------------------------------------------------------ */
/* cross-thread frees                                                   */

typedef struct {
  void **blocks;
  size_t *sizes;
  uint64_t *seeds;
  long n;
  int bad;
} xfree_job_t;

static void *xfree_thread(void *arg) {
  xfree_job_t *job = arg;
  for (long i = 0; i < job->n; i++) {
    if (!stamp_ok(job->blocks[i], job->sizes[i], job->seeds[i])) job->bad++;
    brisk_free(job->blocks[i]);
  }
  brisk_collect(true); /* hand over what is still batched */
  return NULL;
}

static void test_cross_thread_free(void) {
  section_begin("heap blocks freed on other threads");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new returned NULL"); section_end(); return; }
  enum { T = 3 };
  long per = scaled(20000, 2000);
  xfree_job_t jobs[T];
  double huge0 = proc_stat("huge_bytes");
  for (int t = 0; t < T; t++) {
    jobs[t].blocks = calloc((size_t)per, sizeof(void *));
    jobs[t].sizes = calloc((size_t)per, sizeof(size_t));
    jobs[t].seeds = calloc((size_t)per, sizeof(uint64_t));
    jobs[t].n = per;
    jobs[t].bad = 0;
    for (long i = 0; i < per; i++) {
      size_t n = 16 + (size_t)((i * 37 + t * 11) % 500);
      if (i % 1000 == 0) n = 100000;              /* large */
      if (i == 500 || i == 1501) n = 3u << 20; /* huge: owned by the heap too */
      void *p = brisk_heap_malloc(h, n);
      if (!p) { FAIL("brisk_heap_malloc(h, %zu) failed", n); n = 0; }
      jobs[t].blocks[i] = p;
      jobs[t].sizes[i] = n;
      jobs[t].seeds[i] = (uint64_t)t << 40 | (uint64_t)i;
      if (p) stamp(p, n, jobs[t].seeds[i]);
    }
  }
  /* the owner frees some of its own blocks too, meanwhile */
  enum { L = 2000 };
  static void *mine[L];
  for (int i = 0; i < L; i++) mine[i] = brisk_heap_malloc(h, 64);
  double before = heap_stat(h, "blocks_in_use");
  pthread_t th[T];
  for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, xfree_thread, &jobs[t]);
  for (int i = 0; i < L; i++) brisk_free(mine[i]);
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < T; t++) CHECK(jobs[t].bad == 0, "thread %d found %d heap blocks changed before freeing them", t, jobs[t].bad);
  /* allocate again: the memory freed by the other threads comes back */
  long again = per * T;
  void **nb = calloc((size_t)again, sizeof(void *));
  for (long i = 0; i < again; i++) {
    nb[i] = brisk_heap_malloc(h, 16 + (size_t)((i * 37) % 500));
    if (!nb[i]) { FAIL("brisk_heap_malloc after remote frees failed"); break; }
    stamp(nb[i], 16, (uint64_t)i);
  }
  double after = heap_stat(h, "blocks_in_use");
  double huge1 = proc_stat("huge_bytes");
  CHECK(huge1 <= huge0, "huge blocks of the heap freed by other threads were not released once the owner "
        "allocated again: huge_bytes %g, %g before", huge1, huge0);
  CHECK(after <= (double)again + 0.1 * (double)again,
        "blocks freed by other threads did not come back to the heap: blocks_in_use %g with %ld live blocks "
        "(%g before the frees)", after, again, before);
  for (long i = 0; i < again; i++) {
    if (!nb[i]) break;
    if (!stamp_ok(nb[i], 16, (uint64_t)i)) { FAIL("block %p changed (handed out twice?)", nb[i]); break; }
  }
  qsort(nb, (size_t)again, sizeof nb[0], cmp_ptr);
  for (long i = 1; i < again; i++)
    if (nb[i] && nb[i] == nb[i - 1]) { FAIL("block %p handed out twice", nb[i]); break; }
  for (long i = 0; i < again; i++) brisk_free(nb[i]);
  free(nb);
  for (int t = 0; t < T; t++) { free(jobs[t].blocks); free(jobs[t].sizes); free(jobs[t].seeds); }
  brisk_heap_destroy(h);
  section_end();
}

/* ------------------------------------------------------------------ */
/* destroy with remote frees still pending                              */

enum { PD_THREADS = 3, PD_PER_THREAD = 300, PD_NEW = 6000 };

typedef struct {
  int id;
  void *to_free[PD_PER_THREAD]; /* blocks of the heap about to be destroyed */
  int nfree;
  void **new_blocks; /* blocks of the heap made after the destroy, to free */
  long nnew;
  long iters;
  int bad;
} pd_thread_t;

static pthread_barrier_t pd_bar;
static volatile int pd_stop;

static void own_heap_work(pd_thread_t *me, long iters, unsigned round) {
  /* allocate, stamp, check and free in the thread's own (default) heap */
  enum { K = 256 };
  void *live[K] = {0};
  size_t sz[K] = {0};
  for (long i = 0; i < iters; i++) {
    int k = (int)((i * 7919 + me->id * 31) % K);
    if (live[k]) {
      if (!stamp_ok(live[k], sz[k], (uint64_t)k << 20 | round)) me->bad++;
      brisk_free(live[k]);
    }
    sz[k] = 16 + (size_t)((i * 131 + k) % 2000);
    if (i % 500 == 0) sz[k] = 90000;
    live[k] = brisk_malloc(sz[k]);
    if (!live[k]) { me->bad++; continue; }
    stamp(live[k], sz[k], (uint64_t)k << 20 | round);
  }
  for (int k = 0; k < K; k++) {
    if (!live[k]) continue;
    if (!stamp_ok(live[k], sz[k], (uint64_t)k << 20 | round)) me->bad++;
    brisk_free(live[k]);
  }
}

static void *pd_thread(void *arg) {
  pd_thread_t *me = arg;
  unsigned round = 0;
  for (;;) {
    pthread_barrier_wait(&pd_bar); /* A: blocks handed out */
    if (pd_stop) break;
    round++;
    /* free a few blocks of the doomed heap: most stay in this thread's
     * outbox, the large ones (and every 64th) reach the heap's inbox */
    for (int i = 0; i < me->nfree; i++) brisk_free(me->to_free[i]);
    pthread_barrier_wait(&pd_bar); /* B: main destroys the heap now */
    pthread_barrier_wait(&pd_bar); /* C: destroyed; a new heap is filled */
    own_heap_work(me, me->iters, round);
    /* free blocks of the new heap (same object, likely) */
    for (long i = 0; i < me->nnew; i++) brisk_free(me->new_blocks[i]);
    brisk_collect(true);
    own_heap_work(me, me->iters / 4, round + 1000);
    pthread_barrier_wait(&pd_bar); /* D: main checks */
  }
  return NULL;
}

static void test_destroy_pending(void) {
  section_begin("destroy with remote frees pending");
  pthread_barrier_init(&pd_bar, NULL, PD_THREADS + 1);
  pd_stop = 0;
  static pd_thread_t th[PD_THREADS];
  pthread_t tid[PD_THREADS];
  int rounds = (int)scaled(12, 3);
  for (int t = 0; t < PD_THREADS; t++) {
    memset(&th[t], 0, sizeof th[t]);
    th[t].id = t;
    th[t].iters = scaled(20000, 2000);
    th[t].new_blocks = calloc(PD_NEW, sizeof(void *));
    pthread_create(&tid[t], NULL, pd_thread, &th[t]);
  }
  static void *nb[PD_NEW];
  static size_t nsz[PD_NEW];
  static char handed[PD_NEW];
  long leaked_rounds = 0;
  double worst_ratio = 0;
  double huge0 = proc_stat("huge_bytes");
  for (int r = 0; r < rounds; r++) {
    brisk_heap_t *h = brisk_heap_new();
    if (!h) { FAIL("brisk_heap_new failed"); break; }
    /* keep some blocks live as well: destroy must take them too */
    for (int i = 0; i < 500; i++) {
      void *p = brisk_heap_malloc(h, i == 0 ? (5u << 20) : 48 + (size_t)i % 300);
      if (p) memset(p, 0x5A, 48);
    }
    for (int t = 0; t < PD_THREADS; t++) {
      th[t].nfree = PD_PER_THREAD - 37 * t - r % 5;
      for (int i = 0; i < th[t].nfree; i++) {
        size_t n = 16 + (size_t)((i * 53 + t) % 1000);
        if (i % 97 == 0) n = 70000 + (size_t)i * 100; /* large: urgent hand-over */
        if (i == 50) n = (3u << 20) + (size_t)t * 4096; /* huge */
        th[t].to_free[i] = brisk_heap_malloc(h, n);
        if (!th[t].to_free[i]) FAIL("brisk_heap_malloc(h, %zu) failed", n);
        else memset(th[t].to_free[i], 0x33, 16);
      }
    }
    pthread_barrier_wait(&pd_bar); /* A */
    pthread_barrier_wait(&pd_bar); /* B: the threads have freed */
    brisk_heap_destroy(h);
    /* a new heap right away (the destroyed heap object is reused), taking
     * the memory the pending frees point into */
    brisk_heap_t *h2 = brisk_heap_new();
    if (!h2) { FAIL("brisk_heap_new after destroy failed"); break; }
    for (int i = 0; i < PD_NEW; i++) {
      nsz[i] = 16 + (size_t)((i * 53 + r) % 1000);
      if (i % 97 == 0) nsz[i] = 70000 + (size_t)i * 100;
      nb[i] = brisk_heap_malloc(h2, nsz[i]);
      if (!nb[i]) { FAIL("brisk_heap_malloc(h2, %zu) failed", nsz[i]); nsz[i] = 0; continue; }
      fill_pat(nb[i], nsz[i] < 512 ? nsz[i] : 512, (unsigned)(i + r));
      handed[i] = 0;
    }
    /* every third block of the new heap is freed by some other thread */
    for (int t = 0; t < PD_THREADS; t++) th[t].nnew = 0;
    for (int i = 0; i < PD_NEW; i += 3) {
      if (!nb[i]) continue;
      pd_thread_t *t = &th[(i / 3) % PD_THREADS];
      t->new_blocks[t->nnew++] = nb[i];
      handed[i] = 1;
    }
    double live_before = heap_stat(h2, "blocks_in_use");
    pthread_barrier_wait(&pd_bar); /* C */
    pthread_barrier_wait(&pd_bar); /* D: the threads worked and freed */
    long live = 0;
    for (int i = 0; i < PD_NEW; i++) {
      if (!nb[i] || handed[i]) continue;
      live++;
      size_t off = check_pat(nb[i], nsz[i] < 512 ? nsz[i] : 512, (unsigned)(i + r));
      CHECK(off == (size_t)-1,
            "round %d: block %p (%zu bytes) of the heap made after the destroy changed at offset %zu "
            "(stale frees of the destroyed heap reached it?)", r, nb[i], nsz[i], off);
    }
    /* allocate more from h2: its inbox is drained on the way; the live
     * blocks must not be handed out again */
    enum { MORE = 4000 };
    static void *more[MORE];
    for (int i = 0; i < MORE; i++) {
      more[i] = brisk_heap_malloc(h2, 16 + (size_t)((i * 53) % 1000));
      if (more[i]) stamp(more[i], 16, (uint64_t)i | 0xABC000000ull);
    }
    for (int i = 0; i < PD_NEW; i++) {
      if (!nb[i] || handed[i]) continue;
      size_t off = check_pat(nb[i], nsz[i] < 512 ? nsz[i] : 512, (unsigned)(i + r));
      CHECK(off == (size_t)-1, "round %d: live block %p of the new heap overwritten at offset %zu by a later "
            "allocation (handed out twice)", r, nb[i], off);
    }
    for (int i = 0; i < MORE; i++)
      if (more[i] && !stamp_ok(more[i], 16, (uint64_t)i | 0xABC000000ull)) {
        FAIL("round %d: block %p allocated after the drain handed out twice", r, more[i]);
        break;
      }
    /* the other threads' frees of h2's blocks must have reached h2 */
    double in_use = heap_stat(h2, "blocks_in_use");
    double expect = (double)live + MORE;
    double ratio = in_use / expect;
    if (ratio > worst_ratio) worst_ratio = ratio;
    if (in_use > expect * 1.05 + 64) leaked_rounds++;
    (void)live_before;
    brisk_heap_destroy(h2);
  }
  double huge1 = proc_stat("huge_bytes");
  CHECK(huge1 <= huge0, "huge_bytes %g after %d rounds, %g before: huge blocks of destroyed heaps (live or with "
        "their frees pending) leaked", huge1, rounds, huge0);
  pd_stop = 1;
  pthread_barrier_wait(&pd_bar);
  for (int t = 0; t < PD_THREADS; t++) {
    pthread_join(tid[t], NULL);
    CHECK(th[t].bad == 0, "thread %d: %d blocks of its own heap were changed or failed after the destroy", t, th[t].bad);
    free(th[t].new_blocks);
  }
  CHECK(leaked_rounds == 0,
        "in %ld of %d rounds the blocks of a heap made after a destroy, freed by other threads (then "
        "brisk_collect), never came back to it: blocks_in_use was up to %.2fx the live count. The threads' "
        "outbox slots still address the destroyed heap's old generation and drop the new batches",
        leaked_rounds, rounds, worst_ratio);
  pthread_barrier_destroy(&pd_bar);
  section_end();
}

/* The leak above, isolated: a thread that once freed a block of a heap
 * that was destroyed loses all its later remote frees to the heap made
 * next (which reuses the heap object). */
typedef struct {
  void **blocks;
  long n;
} free_all_job_t;
static void *free_all_thread(void *arg) {
  free_all_job_t *job = arg;
  for (long i = 0; i < job->n; i++) brisk_free(job->blocks[i]);
  brisk_collect(true);
  return NULL;
}
static pthread_barrier_t rr_bar;
static free_all_job_t rr_job;
static volatile int rr_stop;
static void *rr_thread(void *arg) {
  for (;;) {
    pthread_barrier_wait(&rr_bar);
    if (rr_stop) break;
    free_all_thread(&rr_job);
    pthread_barrier_wait(&rr_bar);
  }
  return NULL;
}
static double rr_round(brisk_heap_t *h, void **blocks, long n) {
  for (long i = 0; i < n; i++) blocks[i] = brisk_heap_malloc(h, 64);
  rr_job.blocks = blocks;
  rr_job.n = n;
  pthread_barrier_wait(&rr_bar);
  pthread_barrier_wait(&rr_bar); /* the thread freed them all and flushed */
  for (long i = 0; i < n; i++) blocks[i] = brisk_heap_malloc(h, 64);
  double in_use = heap_stat(h, "blocks_in_use");
  for (long i = 0; i < n; i++) brisk_free(blocks[i]);
  return in_use;
}

/* Classes whose last block would leave much of a 64 KiB page's last OS page
 * unused (3328, 4160 and 5632 B) take two-slice pages: a page of them holds
 * more blocks than 64 KiB can. */
static void test_page_fit(void) {
  section_begin("pages of the classes with a large tail");
  static const size_t sizes[] = {3300, 4100, 5600};
  enum { N = 620 };
  static void *blocks[N];
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    brisk_heap_t *h = brisk_heap_new();
    if (!h) { FAIL("brisk_heap_new returned NULL"); break; }
    size_t usable = 0;
    for (int i = 0; i < N; i++) {
      blocks[i] = brisk_heap_malloc(h, sizes[k]);
      if (!blocks[i]) { FAIL("brisk_heap_malloc(h, %zu) failed", sizes[k]); break; }
      usable = brisk_usable_size(blocks[i]);
    }
    double pages = heap_stat(h, "pages");
    double per_page = pages > 0 ? N / pages : 0;
    CHECK(usable > 0 && per_page > (double)(65536 / usable) + 1,
          "%d blocks of %zu B (class %zu) take %g pages: %.1f a page, a 64 KiB page holds %zu",
          N, sizes[k], usable, pages, per_page, usable ? 65536 / usable : 0);
    brisk_heap_destroy(h);
  }
  section_end();
}

/* A thread that allocates and frees one size in turn refills its page
 * from its own frees, mostly without the slow path (page_refill_pop); the
 * slow path's housekeeping still runs every few refills, so the blocks
 * that other threads freed come back to the heap while it runs. */
static void test_refill_housekeeping(void) {
  section_begin("allocation and free in turn: other threads' frees still come back");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new returned NULL"); section_end(); return; }
  /* The 1 KiB page exists (its first allocation took the slow path) and
   * holds freed blocks before the other thread's frees arrive. */
  for (int i = 0; i < 8; i++) brisk_free(brisk_heap_malloc(h, 1024));
  enum { N = 1000 };
  static void *blocks[N];
  for (long i = 0; i < N; i++) {
    blocks[i] = brisk_heap_malloc(h, 64);
    if (!blocks[i]) { FAIL("brisk_heap_malloc(h, 64) failed"); brisk_heap_destroy(h); section_end(); return; }
  }
  free_all_job_t job = {blocks, N};
  pthread_t t;
  if (pthread_create(&t, NULL, free_all_thread, &job) != 0) {
    FAIL("pthread_create failed");
    brisk_heap_destroy(h);
    section_end();
    return;
  }
  pthread_join(t, NULL);
  double waiting = heap_stat(h, "blocks_in_use");
  CHECK(waiting >= N, "blocks freed by another thread left the heap's count before its owner took "
        "them: blocks_in_use %g with %d in its inbox", waiting, N);
  /* 1 KiB: a refill hands out the few blocks the page has carved, so a
   * drain is due within a few dozen turns in the default build (a few
   * hundred in the hardened one); without the housekeeping on every 8th
   * refill it never comes. */
  double after = waiting;
  int turns = 0;
  while (after != 0 && turns < 4096) {
    for (int i = 0; i < 64; i++, turns++) {
      void *p = brisk_heap_malloc(h, 1024);
      if (!p) { FAIL("brisk_heap_malloc(h, 1024) failed"); break; }
      stamp(p, 1024, (uint64_t)turns);
      if (!stamp_ok(p, 1024, (uint64_t)turns)) FAIL("block %p changed while in use", p);
      brisk_free(p);
    }
    after = heap_stat(h, "blocks_in_use");
  }
  CHECK(after == 0, "after %d allocations and frees of 1 KiB, the %d blocks freed by another thread "
        "had not come back: blocks_in_use %g", turns, N, after);
  brisk_heap_destroy(h);
  section_end();
}

static void test_remote_after_reuse(void) {
  section_begin("remote frees reach a heap made after destroy");
  long n = scaled(20000, 5000);
  void **blocks = calloc((size_t)n, sizeof(void *));
  pthread_t t;
  rr_stop = 0;
  pthread_barrier_init(&rr_bar, NULL, 2);
  pthread_create(&t, NULL, rr_thread, NULL);
  /* take every destroyed heap object out of the free pool, so that the
   * heap made after destroying h is h's object again */
  enum { DRAIN = 32 };
  brisk_heap_t *drain[DRAIN];
  for (int i = 0; i < DRAIN; i++) drain[i] = brisk_heap_new();
  brisk_heap_t *h = brisk_heap_new();
  double fresh = rr_round(h, blocks, n);
  CHECK(fresh <= n * 1.05, "fresh heap %p: after another thread freed %ld blocks and %ld were allocated again, "
        "blocks_in_use is %g", (void *)h, n, n, fresh);
  brisk_heap_destroy(h);
  brisk_heap_t *h2 = brisk_heap_new();
  double reused = rr_round(h2, blocks, n);
  CHECK(reused <= n * 1.05,
        "heap %p made after destroying %p%s: the other thread (which had freed blocks of the destroyed heap) "
        "freed %ld of its blocks and called brisk_collect, %ld were allocated again, and blocks_in_use is %g "
        "(expected about %ld): the remote frees were dropped",
        (void *)h2, (void *)h, h2 == h ? " (the same heap object, reused)" : "", n, n, reused, n);
  brisk_heap_destroy(h2);
  for (int i = 0; i < DRAIN; i++) brisk_heap_destroy(drain[i]);
  rr_stop = 1;
  pthread_barrier_wait(&rr_bar);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&rr_bar);
  free(blocks);
  section_end();
}

/* ------------------------------------------------------------------ */
/* huge memory kept for reuse                                           */

/* A freed huge mapping serves the next huge block of any size up to its
 * own: a smaller block keeps the rest resident as its tail, realloc grows
 * into the tail without a system call, and the block's free returns block
 * and tail as one mapping. What is kept never exceeds 128 MiB and goes
 * back to the OS after the purge delay (or at once on brisk_collect).
 * The checks that something is still kept race with the purge delay: the
 * section runs in a child of its own with a delay of 500 ms (unless
 * BRISK_PURGE_DELAY is set), so that a thread stalled for the default
 * 50 ms on a loaded machine does not see it expire. */
static void test_huge_tails(void) {
  section_begin("huge memory kept for reuse (cache and tails)");
  const size_t mib = (size_t)1 << 20;
  const double budget = 128.0 * mib;
  brisk_collect(true);
  CHECK(proc_stat("huge_retained") == 0, "huge_retained %g after brisk_collect", proc_stat("huge_retained"));
  bool retains = proc_stat("purge_delay_ms") > 0;
  bool hardened = proc_stat("hardened") != 0;
  double delay_ms = proc_stat("purge_delay_ms");
  double huge0 = proc_stat("huge_bytes");
  unsigned char *a = brisk_malloc(24 * mib);
  if (!a) { FAIL("brisk_malloc(24 MiB) failed"); section_end(); return; }
  memset(a, 0xA1, 24 * mib);
  brisk_free(a);
  double kept = proc_stat("huge_retained");
  if (!retains) {
    /* A purge delay of 0 keeps nothing. */
    CHECK(kept == 0, "huge_retained %g with retention off", kept);
    section_end();
    return;
  }
  CHECK(kept >= 24.0 * mib && kept < 25.0 * mib, "huge_retained %g after freeing a 24 MiB block", kept);
  if (hardened) {
    /* The hardened build closes the freed block's first 256 KiB while the
     * mapping waits (a use after free there faults: the kernel's own read
     * of it fails), opens them for the next block, and keeps the rest of
     * the mapping as that block's tail behind its guard page. */
    char probe;
    struct iovec local = {&probe, 1}, remote = {a + 4096, 1};
    CHECK(process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == -1 && errno == EFAULT,
          "a freed huge block kept for reuse can be read at its start (errno %d)", errno);
    remote.iov_base = a + 256 * 1024 - 1;
    CHECK(process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == -1 && errno == EFAULT,
          "a freed huge block kept for reuse can be read 256 KiB in (errno %d)", errno);
    unsigned char *b = brisk_malloc(6 * mib);
    CHECK(b == a, "a 6 MiB block did not take the freed 24 MiB mapping (%p, freed %p)", (void *)b, (void *)a);
    if (b) {
      memset(b, 0xB2, 6 * mib);
      double tail = proc_stat("huge_retained");
      CHECK(tail <= kept - 6.0 * mib && tail >= kept - 6.0 * mib - 256 * 1024,
            "huge_retained %g with an 18 MiB tail (%g before)", tail, kept);
      remote.iov_base = b + brisk_usable_size(b);
      CHECK(process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == -1 && errno == EFAULT,
            "the page after a huge block with a tail can be read: no guard (errno %d)", errno);
      brisk_free(b);
    }
    brisk_collect(true);
    CHECK(proc_stat("huge_retained") == 0, "huge_retained %g after brisk_collect", proc_stat("huge_retained"));
    section_end();
    return;
  }
  double mapped = proc_stat("mapped_bytes");
  unsigned char *b = brisk_malloc(6 * mib);
  CHECK(b == a, "a 6 MiB block did not take the freed 24 MiB mapping (%p, freed %p)", (void *)b, (void *)a);
  if (b != a) { brisk_free(b); section_end(); return; }
  CHECK(proc_stat("mapped_bytes") == mapped, "mapped_bytes %g, %g before: the 6 MiB block's tail was not kept",
        proc_stat("mapped_bytes"), mapped);
  /* The tail: the mapping less the block and its header (one slice). */
  double tail = proc_stat("huge_retained");
  CHECK(tail <= kept - 6.0 * mib && tail >= kept - 6.0 * mib - 256 * 1024,
        "huge_retained %g with an 18 MiB tail (%g before)", tail, kept);
  size_t u = brisk_usable_size(b);
  CHECK(u >= 6 * mib && u < 6 * mib + 4096, "usable size %zu of a 6 MiB block with a tail", u);
  CHECK(!brisk_owns(b + 10 * mib), "brisk_owns says a pointer into the tail (past the block) is a block");
  memset(b, 0x5B, 6 * mib);
  /* Grow into the tail: same address, nothing mapped. */
  unsigned char *c = brisk_realloc(b, 20 * mib);
  CHECK(c == b, "realloc to 20 MiB moved the block (%p -> %p) with 24 MiB mapped", (void *)b, (void *)c);
  if (!c) { FAIL("brisk_realloc(20 MiB) failed"); brisk_free(b); section_end(); return; }
  CHECK(proc_stat("mapped_bytes") == mapped, "realloc into the tail mapped memory: mapped_bytes %g, %g before",
        proc_stat("mapped_bytes"), mapped);
  bool intact = true;
  for (size_t i = 0; i < 6 * mib; i += 4093) intact &= c[i] == 0x5B;
  CHECK(intact, "realloc into the tail changed the block's first 6 MiB");
  memset(c, 0x6C, 20 * mib);
  double huge1 = proc_stat("huge_bytes");
  CHECK(huge1 >= huge0 + 24.0 * mib, "huge_bytes %g with a 20 MiB block in a 24 MiB mapping (%g before)", huge1, huge0);
  CHECK(brisk_usable_size(c) >= 20 * mib, "usable size %zu after realloc to 20 MiB", brisk_usable_size(c));
  /* After the delay, the next huge free gives the tail back; the block
   * stays as it is. */
  struct timespec ts = {0, (long)(2 * delay_ms + 20) * 1000000L};
  while (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  nanosleep(&ts, NULL);
  void *d = brisk_malloc(3 * mib);
  CHECK(d != NULL, "brisk_malloc(3 MiB) failed");
  brisk_free(d);
  double huge2 = proc_stat("huge_bytes");
  CHECK(huge2 >= huge0 + 20.0 * mib && huge2 < huge0 + 21.0 * mib,
        "huge_bytes %g after the delay, %g with no huge block and %g with the 20 MiB block and its 4 MiB tail: "
        "the tail was not returned", huge2, huge0, huge1);
  intact = true;
  for (size_t i = 0; i < 20 * mib; i += 4093) intact &= c[i] == 0x6C;
  CHECK(intact, "the block changed when its tail was returned");
  brisk_free(c);
  /* The budget: three freed 60 MiB blocks, never more than 128 MiB kept. */
  void *big[3];
  for (int i = 0; i < 3; i++) {
    big[i] = brisk_malloc(60 * mib);
    CHECK(big[i] != NULL, "brisk_malloc(60 MiB) failed");
    if (big[i]) memset(big[i], i, 60 * mib);
  }
  for (int i = 0; i < 3; i++) {
    brisk_free(big[i]);
    CHECK(proc_stat("huge_retained") <= budget, "huge_retained %g after %d frees of 60 MiB blocks",
          proc_stat("huge_retained"), i + 1);
  }
  CHECK(proc_stat("huge_retained") >= 60.0 * mib, "huge_retained %g: no freed 60 MiB block was kept",
        proc_stat("huge_retained"));
  /* Small blocks from a 60 MiB mapping: the tails count in the budget too. */
  void *s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = brisk_malloc(3 * mib);
    CHECK(s[i] != NULL, "brisk_malloc(3 MiB) failed");
    CHECK(proc_stat("huge_retained") <= budget, "huge_retained %g with tails", proc_stat("huge_retained"));
  }
  for (int i = 0; i < 3; i++) brisk_free(s[i]);
  CHECK(proc_stat("huge_retained") <= budget, "huge_retained %g", proc_stat("huge_retained"));
  brisk_collect(true);
  CHECK(proc_stat("huge_retained") == 0, "huge_retained %g after brisk_collect", proc_stat("huge_retained"));
  section_end();
}

/* Huge blocks with tails across threads: each worker allocates, grows,
 * shrinks and frees blocks of 2..24 MiB, hands every third one to the next
 * worker to free, and checks a stamp on every 16th page; a fourth thread
 * calls brisk_collect, which trims every tail while its block is in use. */
enum { HT_WORKERS = 3 };
typedef struct {
  _Atomic(uintptr_t) handoff[HT_WORKERS]; /* a block for worker i to free */
  _Atomic(int) running;
  _Atomic(int) bad;
} huge_threads_t;
typedef struct {
  huge_threads_t *shared;
  int id;
  long ops;
} huge_worker_t;

static void ht_stamp(unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i += 16 * 4096) p[i] = v;
  p[n - 1] = v;
}
static bool ht_check_prefix(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i += 16 * 4096)
    if (p[i] != v) return false;
  return true;
}
static bool ht_check(const unsigned char *p, size_t n, unsigned char v) {
  return ht_check_prefix(p, n, v) && p[n - 1] == v;
}

/* The size and stamp of a handed-over block sit in its first 16 bytes. */
static void ht_free_checked(huge_threads_t *sh, unsigned char *p) {
  size_t n;
  memcpy(&n, p + 1, sizeof n);
  bool ok = p[n - 1] == p[0];
  for (size_t i = 16 * 4096; i < n; i += 16 * 4096) ok &= p[i] == p[0];
  if (!ok) atomic_fetch_add(&sh->bad, 1);
  brisk_free(p);
}

static void *huge_worker(void *arg) {
  huge_worker_t *w = arg;
  huge_threads_t *sh = w->shared;
  uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
  const size_t mib = (size_t)1 << 20;
  for (long k = 0; k < w->ops; k++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = 2 * mib + 1 + (size_t)(x % (22 * mib));
    unsigned char v = (unsigned char)(x >> 40);
    unsigned char *p = brisk_malloc(n);
    if (!p) { atomic_fetch_add(&sh->bad, 1); continue; }
    ht_stamp(p, n, v);
    size_t m = 2 * mib + 1 + (size_t)((x >> 20) % (22 * mib));
    unsigned char *q = brisk_realloc(p, m);
    if (!q) { brisk_free(p); atomic_fetch_add(&sh->bad, 1); continue; }
    if (!(m >= n ? ht_check(q, n, v) : ht_check_prefix(q, m, v))) atomic_fetch_add(&sh->bad, 1);
    ht_stamp(q, m, (unsigned char)(v + 1));
    uintptr_t mine = atomic_exchange(&sh->handoff[w->id], 0);
    if (mine) ht_free_checked(sh, (unsigned char *)mine);
    if (k % 3 == 0) {
      q[0] = (unsigned char)(v + 1);
      memcpy(q + 1, &m, sizeof m);
      uintptr_t old = atomic_exchange(&sh->handoff[(w->id + 1) % HT_WORKERS], (uintptr_t)q);
      if (old) ht_free_checked(sh, (unsigned char *)old);
    } else {
      if (!ht_check(q, m, (unsigned char)(v + 1))) atomic_fetch_add(&sh->bad, 1);
      brisk_free(q);
    }
  }
  return NULL;
}

static void *huge_collector(void *arg) {
  huge_threads_t *sh = arg;
  struct timespec ts = {0, 3000000};
  while (atomic_load(&sh->running)) {
    brisk_collect(true);
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void test_huge_threads(void) {
  section_begin("huge blocks with tails across threads, trimmed while in use");
  huge_threads_t sh;
  for (int i = 0; i < HT_WORKERS; i++) atomic_init(&sh.handoff[i], 0);
  atomic_init(&sh.running, 1);
  atomic_init(&sh.bad, 0);
  huge_worker_t w[HT_WORKERS];
  pthread_t th[HT_WORKERS], col;
  bool collector = pthread_create(&col, NULL, huge_collector, &sh) == 0;
  CHECK(collector, "pthread_create failed");
  int started = 0;
  for (int i = 0; i < HT_WORKERS; i++) {
    w[i] = (huge_worker_t){&sh, i, scaled(1500, 40)};
    if (pthread_create(&th[i], NULL, huge_worker, &w[i]) != 0) break;
    started++;
  }
  CHECK(started == HT_WORKERS, "pthread_create failed");
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  atomic_store(&sh.running, 0);
  if (collector) pthread_join(col, NULL);
  for (int i = 0; i < HT_WORKERS; i++) {
    uintptr_t p = atomic_exchange(&sh.handoff[i], 0);
    if (p) ht_free_checked(&sh, (unsigned char *)p);
  }
  CHECK(atomic_load(&sh.bad) == 0, "%d huge blocks failed or changed", atomic_load(&sh.bad));
  brisk_collect(true);
  CHECK(proc_stat("huge_retained") == 0, "huge_retained %g after brisk_collect", proc_stat("huge_retained"));
  section_end();
}

/* ------------------------------------------------------------------ */
/* destroy releases everything; isolation; reuse                        */

static void test_destroy_releases(void) {
  section_begin("destroy releases every block");
  double huge0 = proc_stat("huge_bytes");
  double heaps0 = proc_stat("heaps");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new failed"); section_end(); return; }
  CHECK(proc_stat("heaps") == heaps0 + 1, "process \"heaps\" %g after brisk_heap_new (was %g)", proc_stat("heaps"), heaps0);
  size_t sizes[] = {32, 1000, 20000, 100000, 1u << 20, 3u << 20, 16u << 20};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  void *p[NS];
  for (int i = 0; i < NS; i++) {
    p[i] = brisk_heap_malloc(h, sizes[i]);
    CHECK(p[i] != NULL, "brisk_heap_malloc(h, %zu) failed", sizes[i]);
    if (p[i]) memset(p[i], 0x77, sizes[i]);
  }
  void *a = brisk_heap_aligned_alloc(h, 1u << 20, 5u << 20);
  CHECK(a != NULL, "brisk_heap_aligned_alloc(h, 1 MiB, 5 MiB) failed");
  brisk_heap_destroy(h);
  CHECK(proc_stat("heaps") == heaps0, "process \"heaps\" %g after brisk_heap_destroy (was %g)", proc_stat("heaps"), heaps0);
  for (int i = 0; i < NS; i++)
    CHECK(!brisk_owns(p[i]),
          "brisk_owns(%p) is still true after brisk_heap_destroy: the heap's block of %zu bytes was not released%s",
          p[i], sizes[i], sizes[i] > (2u << 20) ? " (huge blocks are not tied to their heap)" : "");
  CHECK(!brisk_owns(a), "brisk_owns(%p) true after destroy: the heap's 5 MiB aligned block was not released", a);
  double huge1 = proc_stat("huge_bytes");
  CHECK(huge1 <= huge0, "huge_bytes %g after destroying a heap with 3+16+5 MiB blocks (before: %g): they leaked",
        huge1, huge0);
  section_end();
}

static void test_isolation(void) {
  section_begin("isolation: destroy one heap, other intact");
  enum { N = 5000 };
  static void *a[N], *b[N];
  static size_t sz[N];
  for (int round = 0; round < 3; round++) {
    brisk_heap_t *ha = brisk_heap_new(), *hb = brisk_heap_new();
    if (!ha || !hb) { FAIL("brisk_heap_new failed"); break; }
    for (int i = 0; i < N; i++) {
      sz[i] = 8 + (size_t)((i * 71 + round) % 3000);
      if (i % 500 == 7) sz[i] = 150000;
      if (i == 4321) sz[i] = 3u << 20;
      a[i] = brisk_heap_malloc(ha, sz[i]);
      b[i] = brisk_heap_malloc(hb, sz[i]);
      if (!a[i] || !b[i]) { FAIL("allocation failed"); continue; }
      fill_pat(a[i], sz[i], (unsigned)i + 1);
      fill_pat(b[i], sz[i], (unsigned)i + 77777);
    }
    brisk_heap_t *gone = round == 1 ? hb : ha;
    brisk_heap_t *kept = round == 1 ? ha : hb;
    void **kb = round == 1 ? a : b;
    unsigned kseed = round == 1 ? 1 : 77777;
    brisk_heap_destroy(gone);
    /* other heaps now take the released memory */
    brisk_heap_t *hc = brisk_heap_new();
    for (int i = 0; i < N; i++) {
      void *c = brisk_heap_malloc(hc, sz[i]);
      if (c) memset(c, 0xEE, sz[i]);
      void *d = brisk_malloc(sz[i] / 2 + 1);
      if (d) memset(d, 0xDD, sz[i] / 2 + 1);
      brisk_free(d);
    }
    for (int i = 0; i < N; i++) {
      if (!kb[i]) continue;
      size_t off = check_pat(kb[i], sz[i], (unsigned)i + kseed);
      CHECK(off == (size_t)-1, "round %d: block %d (%zu bytes at %p) of the surviving heap changed at offset %zu "
            "after the other heap was destroyed", round, i, sz[i], kb[i], off);
      CHECK(brisk_owns(kb[i]), "round %d: block %p of the surviving heap no longer owned", round, kb[i]);
    }
    for (int i = 0; i < N; i++) brisk_free(kb[i]);
    CHECK(heap_stat(kept, "blocks_in_use") == 0, "surviving heap: blocks_in_use %g after freeing all",
          heap_stat(kept, "blocks_in_use"));
    brisk_heap_destroy(kept);
    brisk_heap_destroy(hc);
  }
  section_end();
}

static void test_many_heaps(void) {
  section_begin("many heaps created and destroyed");
  long loops = scaled(3000, 300);
  double heaps0 = proc_stat("heaps");
  double mapped0 = 0;
  enum { DISTINCT = 64 };
  void *seen[DISTINCT];
  int nseen = 0, overflow = 0;
  for (long l = 0; l < loops; l++) {
    int nlive = 1 + (int)(l % 3);
    brisk_heap_t *hs[3];
    for (int k = 0; k < nlive; k++) {
      hs[k] = brisk_heap_new();
      if (!hs[k]) { FAIL("brisk_heap_new failed at loop %ld", l); return; }
      int known = 0;
      for (int s = 0; s < nseen; s++) known |= seen[s] == (void *)hs[k];
      if (!known) { if (nseen < DISTINCT) seen[nseen++] = hs[k]; else overflow = 1; }
    }
    for (int k = 0; k < nlive; k++) {
      void *ps[20];
      size_t pn[20];
      for (int i = 0; i < 20; i++) {
        size_t n = 16 + (size_t)((i * 97 + l) % 4000);
        if (i == 19 && l % 10 == 0) n = 200000;
        ps[i] = brisk_heap_malloc(hs[k], n);
        pn[i] = n;
        if (!ps[i]) { FAIL("brisk_heap_malloc failed at loop %ld", l); continue; }
        stamp(ps[i], n, (uint64_t)l * 64 + (uint64_t)i);
      }
      for (int i = 0; i < 20; i++)
        if (ps[i] && !stamp_ok(ps[i], pn[i], (uint64_t)l * 64 + (uint64_t)i)) FAIL("loop %ld: block %p changed", l, ps[i]);
      for (int i = 0; i < 20; i += 3) brisk_free(ps[i]); /* the rest go with the heap */
    }
    for (int k = nlive - 1; k >= 0; k--) brisk_heap_destroy(hs[k]);
    if (l == 50) mapped0 = proc_stat("mapped_bytes");
  }
  double heaps1 = proc_stat("heaps");
  double mapped1 = proc_stat("mapped_bytes");
  printf("[heaps]   %ld loops: %d distinct heap objects, mapped %.1f MiB after 50 loops, %.1f MiB at the end\n",
         loops, overflow ? -1 : nseen, mapped0 / 1048576.0, mapped1 / 1048576.0);
  CHECK(heaps1 == heaps0, "process \"heaps\" is %g after the loop, %g before", heaps1, heaps0);
  CHECK(!overflow && nseen <= 8, "heap objects are not reused: %s distinct heaps for at most 3 live at a time",
        overflow ? "more than 64" : "several");
  CHECK(mapped1 <= mapped0 + 64.0 * 1048576, "mapped bytes grew from %.1f to %.1f MiB over the loop (memory of "
        "destroyed heaps not reused)", mapped0 / 1048576.0, mapped1 / 1048576.0);
  section_end();
}

static void test_destroy_million(void) {
  section_begin("destroy with 1M live blocks");
  long n = scaled(1000000, 100000);
  void **ptrs = calloc((size_t)n, sizeof(void *));
  if (!ptrs) { FAIL("calloc failed"); section_end(); return; }
  /* (a) destroy */
  brisk_heap_t *h = brisk_heap_new();
  double t0 = now_ms();
  for (long i = 0; i < n; i++) {
    ptrs[i] = brisk_heap_malloc(h, 16 + (size_t)(i % 4) * 16);
    if (!ptrs[i]) { FAIL("brisk_heap_malloc failed at block %ld", i); break; }
    *(uint64_t *)ptrs[i] = (uint64_t)i;
  }
  double t_alloc = now_ms() - t0;
  CHECK(heap_stat(h, "blocks_in_use") == (double)n, "blocks_in_use %g with %ld live blocks", heap_stat(h, "blocks_in_use"), n);
  double mapped_full = proc_stat("mapped_bytes");
  t0 = now_ms();
  brisk_heap_destroy(h);
  double t_destroy = now_ms() - t0;
  CHECK(!brisk_owns(ptrs[0]) && !brisk_owns(ptrs[n - 1]), "blocks still owned after destroying their heap");
  /* (b) the same blocks freed one by one */
  h = brisk_heap_new();
  for (long i = 0; i < n; i++) {
    ptrs[i] = brisk_heap_malloc(h, 16 + (size_t)(i % 4) * 16);
    if (!ptrs[i]) { FAIL("brisk_heap_malloc after destroy failed at block %ld", i); break; }
    *(uint64_t *)ptrs[i] = (uint64_t)i;
  }
  double mapped_again = proc_stat("mapped_bytes");
  CHECK(mapped_again <= mapped_full * 1.25 + 8.0 * 1048576,
        "mapped bytes %.1f MiB after re-allocating %ld blocks in a new heap, %.1f MiB before the destroy: "
        "the destroyed heap's memory was not reused", mapped_again / 1048576.0, n, mapped_full / 1048576.0);
  long bad = 0;
  for (long i = 0; i < n; i++)
    if (ptrs[i] && *(uint64_t *)ptrs[i] != (uint64_t)i) bad++;
  CHECK(bad == 0, "%ld blocks of the new heap changed (handed out twice)", bad);
  t0 = now_ms();
  for (long i = 0; i < n; i++) brisk_free(ptrs[i]);
  double t_free = now_ms() - t0;
  CHECK(heap_stat(h, "blocks_in_use") == 0, "blocks_in_use %g after freeing all", heap_stat(h, "blocks_in_use"));
  brisk_heap_destroy(h);
  printf("[heaps]   %ld blocks of 16..64 B: allocate %.2f ms, destroy %.3f ms, free one by one %.2f ms "
         "(destroy/free = %.4f; information only)\n",
         n, t_alloc, t_destroy, t_free, t_free > 0 ? t_destroy / t_free : 0.0);
  free(ptrs);
  section_end();
}

/* ------------------------------------------------------------------ */
/* arenas                                                               */

typedef struct {
  unsigned char *p;
  size_t n;
  unsigned seed;
} ablk_t;

static void check_blocks(ablk_t *b, int nb, const char *what) {
  for (int i = 0; i < nb; i++) {
    size_t off = check_pat(b[i].p, b[i].n, b[i].seed);
    if (off != (size_t)-1) {
      FAIL("%s: arena block %d (%zu bytes at %p) changed at offset %zu (overlap)", what, i, b[i].n, (void *)b[i].p, off);
      return;
    }
  }
  /* no overlap, by address */
  ablk_t *s = malloc(sizeof(ablk_t) * (size_t)nb);
  memcpy(s, b, sizeof(ablk_t) * (size_t)nb);
  for (int i = 1; i < nb; i++) { /* insertion sort: small counts */
    ablk_t x = s[i];
    int j = i - 1;
    while (j >= 0 && (uintptr_t)s[j].p > (uintptr_t)x.p) { s[j + 1] = s[j]; j--; }
    s[j + 1] = x;
  }
  for (int i = 1; i < nb; i++)
    if (s[i - 1].p + s[i - 1].n > s[i].p) {
      FAIL("%s: arena blocks [%p,+%zu) and [%p,+%zu) overlap", what, (void *)s[i - 1].p, s[i - 1].n, (void *)s[i].p, s[i].n);
      break;
    }
  free(s);
}

static void arena_alignment_run(brisk_arena_t *a, const char *what) {
  enum { NB = 1200 };
  static ablk_t b[NB];
  int nb = 0;
  for (int rep = 0; rep < 3; rep++)
    for (size_t al = 1; al <= 4096; al <<= 1) {
      size_t sizes[] = {1, 3, al, al + 1, 7 * al / 2 + 3, 100, 1000};
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && nb < NB; k++) {
        size_t n = sizes[k];
        void *p = brisk_arena_alloc(a, n, al);
        CHECK(p != NULL, "%s: brisk_arena_alloc(a, %zu, %zu) returned NULL", what, n, al);
        if (!p) continue;
        CHECK(is_aligned(p, al), "%s: brisk_arena_alloc(a, %zu, %zu) = %p is not aligned", what, n, al, p);
        CHECK(is_aligned(p, 16), "%s: brisk_arena_alloc(a, %zu, %zu) = %p is not 16-byte aligned", what, n, al, p);
        b[nb].p = p;
        b[nb].n = n;
        b[nb].seed = (unsigned)(nb * 3 + 1);
        fill_pat(p, n, b[nb].seed);
        nb++;
      }
    }
  /* alignment 0 means 16 */
  for (int i = 0; i < 20 && nb < NB; i++) {
    void *p = brisk_arena_alloc(a, 24, 0);
    CHECK(p && is_aligned(p, 16), "%s: brisk_arena_alloc(a, 24, 0) = %p", what, p);
    if (!p) continue;
    b[nb].p = p; b[nb].n = 24; b[nb].seed = 999u + (unsigned)i;
    fill_pat(p, 24, b[nb].seed);
    nb++;
  }
  check_blocks(b, nb, what);
}

static void test_arena_alignment(void) {
  section_begin("arena alignments 1..4096, no overlap");
  brisk_arena_t *a = brisk_arena_new(NULL, 64 * 1024);
  CHECK(a != NULL, "brisk_arena_new(NULL, 64 KiB) returned NULL");
  if (a) { arena_alignment_run(a, "default-heap arena"); brisk_arena_destroy(a); }
  brisk_heap_t *h = brisk_heap_new();
  brisk_arena_t *b = brisk_arena_new(h, 1000);
  CHECK(b != NULL, "brisk_arena_new(h, 1000) returned NULL");
  if (b) {
    arena_alignment_run(b, "heap arena");
    brisk_arena_reset(b);
    arena_alignment_run(b, "heap arena after reset");
    brisk_arena_destroy(b);
  }
  brisk_arena_t *c = brisk_arena_new(h, 0);
  CHECK(c != NULL, "brisk_arena_new(h, 0) returned NULL");
  if (c) { arena_alignment_run(c, "arena with initial 0"); brisk_arena_destroy(c); }
  CHECK(heap_stat(h, "blocks_in_use") == 0, "after destroying its arenas the heap has blocks_in_use %g",
        heap_stat(h, "blocks_in_use"));
  brisk_heap_destroy(h);
  brisk_arena_destroy(NULL); /* ignored */
  section_end();
}

static void test_arena_overflow(void) {
  section_begin("arena overflow, reset, destroy");
  for (int variant = 0; variant < 2; variant++) {
    brisk_heap_t *h = variant ? brisk_heap_new() : NULL;
    const char *what = variant ? "heap arena" : "default-heap arena";
    brisk_arena_t *a = brisk_arena_new(h, 4096);
    CHECK(a != NULL, "%s: brisk_arena_new(%p, 4096) returned NULL", what, (void *)h);
    if (!a) continue;
    enum { NB = 400 };
    static ablk_t b[NB];
    void *first_after_new = NULL;
    for (int cycle = 0; cycle < 4; cycle++) {
      int nb = 0;
      /* 100 allocations of 256 B: the first buffer holds about 15 */
      for (int i = 0; i < 100; i++) {
        void *p = brisk_arena_alloc(a, 256, 16);
        CHECK(p != NULL, "%s cycle %d: brisk_arena_alloc(a, 256, 16) #%d returned NULL", what, cycle, i);
        if (!p) continue;
        if (i == 0) {
          if (cycle == 0) first_after_new = p;
          else CHECK(p == first_after_new, "%s: after reset the first allocation is %p, not the start of the kept "
                     "first buffer %p", what, p, first_after_new);
        }
        b[nb].p = p; b[nb].n = 256; b[nb].seed = (unsigned)(cycle * 1000 + i);
        fill_pat(p, 256, b[nb].seed);
        nb++;
      }
      /* then bigger ones, up to several MiB */
      size_t big[] = {4096, 10000, 65536, 100000, 1u << 20, 3u << 20, 6u << 20, 300, 8u << 20, 17};
      for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        void *p = brisk_arena_alloc(a, big[k], k % 2 ? 64 : 4096);
        CHECK(p != NULL, "%s cycle %d: brisk_arena_alloc(a, %zu) returned NULL", what, cycle, big[k]);
        if (!p) continue;
        b[nb].p = p; b[nb].n = big[k]; b[nb].seed = (unsigned)(cycle * 1000 + 500 + (int)k);
        fill_pat(p, big[k], b[nb].seed);
        nb++;
      }
      /* and many small ones again */
      for (int i = 0; i < 200 && nb < NB; i++) {
        size_t n = 1 + (size_t)(i * 37 % 700);
        void *p = brisk_arena_alloc(a, n, (size_t)1 << (i % 8));
        if (!p) { FAIL("%s: brisk_arena_alloc(a, %zu) returned NULL", what, n); continue; }
        b[nb].p = p; b[nb].n = n; b[nb].seed = (unsigned)(cycle * 1000 + 600 + i);
        fill_pat(p, n, b[nb].seed);
        nb++;
      }
      check_blocks(b, nb, what);
      if (h) {
        double biu = heap_stat(h, "blocks_in_use");
        CHECK(biu >= 1, "%s: the heap shows %g blocks in use while the arena holds buffers", what, biu);
      }
      brisk_arena_reset(a);
    }
    brisk_arena_destroy(a);
    if (h) {
      CHECK(heap_stat(h, "blocks_in_use") == 0, "%s: after brisk_arena_destroy the heap has blocks_in_use %g", what,
            heap_stat(h, "blocks_in_use"));
      brisk_heap_destroy(h);
    }
  }
  /* an arena that is only reset keeps working over many sessions */
  brisk_heap_t *h = brisk_heap_new();
  brisk_arena_t *a = brisk_arena_new(h, 16 * 1024);
  double huge0 = proc_stat("huge_bytes");
  for (int s = 0; s < 200; s++) {
    char *msgs[300];
    for (int i = 0; i < 300; i++) {
      msgs[i] = brisk_arena_alloc(a, 256, 16);
      if (!msgs[i]) { FAIL("session %d: brisk_arena_alloc failed", s); break; }
      memset(msgs[i], (s + i) & 0xff, 256);
    }
    if (s % 50 == 0) (void)brisk_arena_alloc(a, 3u << 20, 16);
    for (int i = 0; i < 300; i++)
      if (msgs[i] && (unsigned char)msgs[i][255] != (unsigned char)((s + i) & 0xff)) {
        FAIL("session %d: message %d changed", s, i);
        break;
      }
    brisk_arena_reset(a);
  }
  CHECK(proc_stat("huge_bytes") <= huge0, "huge_bytes grew from %g to %g over arena sessions with reset",
        huge0, proc_stat("huge_bytes"));
  double biu = heap_stat(h, "blocks_in_use");
  CHECK(biu <= 2, "after 200 sessions with reset the arena's heap has %g blocks in use (the arena and its first "
        "buffer expected)", biu);
  brisk_arena_destroy(a);
  brisk_heap_destroy(h);
  section_end();
}

/* ------------------------------------------------------------------ */

/* test_huge_tails in a re-executed child ("test_heaps huge_tails"). */
static void run_huge_tails_child(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { FAIL("fork failed"); return; }
  if (pid == 0) {
    if (!getenv("BRISK_PURGE_DELAY")) setenv("BRISK_PURGE_DELAY", "500", 1);
    execl("/proc/self/exe", "test_heaps", "huge_tails", (char *)NULL);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) { FAIL("waitpid failed"); return; }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    g_section = "huge memory kept for reuse (cache and tails)";
    FAIL("the child that ran this section %s %d", WIFEXITED(st) ? "exited with status" : "was killed by signal",
         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  }
}

/* A huge block over 4 GiB of a heap its thread owns, whose first word
 * decodes like a free-list link (by chance, 1 in 2^25; made here from a
 * freed block's link), takes the owner's full checks on free: freed as
 * usual, with no report (it divided by its block size of 0 once). */
static void test_huge_owned_looks_free(void) {
  section_begin("owned huge block over 4 GiB whose first word looks free");
  brisk_heap_t *h = brisk_heap_new();
  uint64_t *a = h ? brisk_heap_malloc(h, 64) : NULL;
  uint64_t *b = h ? brisk_heap_malloc(h, 64) : NULL;
  if (a == NULL || b == NULL) {
    FAIL("brisk_heap_new or brisk_heap_malloc(64) failed");
    if (h) brisk_heap_destroy(h);
    section_end();
    return;
  }
  brisk_free(a);
  brisk_free(b);
  uint64_t link = *(volatile uint64_t *)b; /* a's address, encoded */
  size_t size = ((size_t)5 << 30) + 4096;
  uint64_t *p = brisk_heap_malloc(h, size);
  if (p == NULL) {
    printf("[heaps] no 5 GiB of address space here: section not checked\n");
    g_failures++;
  } else {
    long before = brisk_errors_reported();
    *p = (uint64_t)(uintptr_t)p ^ link ^ (uint64_t)(uintptr_t)a;
    brisk_free(p);
    CHECK(brisk_errors_reported() == before, "freeing it reported %ld bad inputs", brisk_errors_reported() - before);
    CHECK(heap_stat(h, "blocks_in_use") == 0, "%g blocks in use after it was freed", heap_stat(h, "blocks_in_use"));
  }
  brisk_heap_destroy(h);
  section_end();
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  g_scale = test_scale();
  if (argc > 1) {
    if (strcmp(argv[1], "huge_tails") != 0) {
      printf("[heaps] unknown section %s (the only one run alone is huge_tails)\n", argv[1]);
      return 2;
    }
    test_huge_tails();
    long errors = brisk_errors_reported();
    if (errors != 0) {
      printf("[heaps] FAIL: brisk reported %ld bad inputs; this test makes none\n", errors);
      g_failures++;
    }
    return g_failures ? 1 : 0;
  }
  printf("[heaps] scale %.2f%s\n", g_scale, UNDER_TSAN ? " (ThreadSanitizer build)" : "");
  double t0 = now_ms();
  test_basic();
  test_aligned();
  test_stats_json();
  test_class_cache_exit();
  test_left_heap_warm();
  test_class_cache_empty_pages();
  test_cross_thread_free();
  test_destroy_pending();
  test_remote_after_reuse();
  test_refill_housekeeping();
  test_page_fit();
  run_huge_tails_child();
  test_huge_threads();
  test_huge_owned_looks_free();
  test_destroy_releases();
  test_isolation();
  test_many_heaps();
  test_destroy_million();
  test_arena_alignment();
  test_arena_overflow();
  long errors = brisk_errors_reported();
  if (errors != 0) {
    printf("[heaps] FAIL: brisk reported %ld bad inputs; this test makes none\n", errors);
    g_failures++;
  }
  printf("[heaps] %.0f ms\n", now_ms() - t0);
  if (g_failures) {
    printf("[heaps] FAILED: %ld failed checks\n", g_failures);
    return 1;
  }
  printf("[heaps] all checks passed\n");
  return 0;
}
