/* Walking a heap and asking about its blocks: brisk_heap_visit,
 * brisk_heap_contains, and brisk_heap_stats_json's counts of large and
 * huge blocks.
 *
 * ctest-labels: sanitize tsan
 *
 *   - live blocks: after allocations of every kind (size classes with and
 *     without the class cache, large, huge), local frees (some waiting in
 *     the class cache) and frees by another thread that handed them over,
 *     the walk visits exactly the blocks still allocated, once each, with
 *     their usable size; blocks another thread freed but still holds in its
 *     batch are visited until it hands them over (brisk_collect), then not;
 *   - a visitor that returns non-zero ends the walk: brisk_heap_visit
 *     returns its value after exactly that many calls;
 *   - a visitor may free blocks of the heap, ahead of the walk too: they go
 *     back when the walk ends (every block is visited once, the heap is
 *     empty afterwards and works); it may ask brisk_heap_contains and
 *     brisk_heap_stats_json about the heap, and use malloc;
 *   - brisk_heap_contains: 1 for the start of each block of the heap, 0 for
 *     interior pointers, other heaps' and malloc's blocks, glibc's, the
 *     stack, globals, NULL and garbage, and a freed large block;
 *   - brisk_heap_stats_json counts large and huge blocks: blocks_in_use,
 *     large_blocks, large_bytes, huge_blocks, huge_bytes;
 *   - while the owner walks the heap again and again, three threads free
 *     its blocks and others walk every heap (brisk_stats_json): every
 *     visited block is one that was allocated, and once they are done the
 *     walk finds exactly the rest (TSan runs this too).
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define TEST_TAG "[visit]"
#define TEST_FILE "test_heap_visit.c"
#define TEST_WIDTH 34
#define TEST_SHOWN_PER_SECTION 20L
#include "sections.h"

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static double heap_stat(brisk_heap_t *h, const char *key) {
  char buf[1024], pat[64];
  size_t n = brisk_heap_stats_json(h, buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) return -1;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *s = strstr(buf, pat);
  return s ? strtod(s + strlen(pat), NULL) : -1;
}

/* The sizes of block i: small, cached classes (1088 B and up), large, huge. */
static size_t size_of(int i) {
  if (i % 97 == 0) return 70000 + (size_t)(i % 5) * 100000;
  if (i == 500 || i == 1500) return (3u << 20) + (size_t)i;
  if (i % 3 == 0) return 1100 + (size_t)(i % 40) * 700;
  return 16 + (size_t)(i * 37 % 900);
}

typedef struct {
  void **seen;
  size_t *sizes;
  size_t n, cap;
  long calls, stop_after;
  int stop_value;
} record_t;

static int record_visitor(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)h;
  record_t *r = arg;
  r->calls++;
  if (r->n < r->cap) {
    r->seen[r->n] = block;
    r->sizes[r->n] = size;
    r->n++;
  }
  return r->stop_after && r->calls >= r->stop_after ? r->stop_value : 0;
}

/* Visit h; the blocks seen, sorted, in *r. */
static int visit_all(brisk_heap_t *h, record_t *r) {
  r->n = 0;
  r->calls = 0;
  int ret = brisk_heap_visit(h, record_visitor, r);
  /* sizes travel with their blocks: sort pairs */
  for (size_t i = 0; i < r->n; i++) CHECK(brisk_usable_size(r->seen[i]) == r->sizes[i],
                                          "block %p visited with size %zu, usable %zu", r->seen[i], r->sizes[i],
                                          brisk_usable_size(r->seen[i]));
  qsort(r->seen, r->n, sizeof(void *), cmp_ptr);
  return ret;
}

/* Are the visited blocks exactly the live ones (live[0..n), any order)? */
static void expect_exactly(record_t *r, void **live, size_t n, const char *when) {
  void **want = malloc(n * sizeof(void *) + 1);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (live[i]) want[k++] = live[i];
  qsort(want, k, sizeof(void *), cmp_ptr);
  CHECK(r->n == k, "%s: %zu blocks visited, %zu live", when, r->n, k);
  size_t i = 0, j = 0, missing = 0, extra = 0;
  while (i < k || j < r->n) {
    if (j >= r->n || (i < k && (uintptr_t)want[i] < (uintptr_t)r->seen[j])) { if (missing++ < 3) FAIL("%s: live block %p not visited", when, want[i]); i++; }
    else if (i >= k || (uintptr_t)r->seen[j] < (uintptr_t)want[i]) { if (extra++ < 3) FAIL("%s: %p visited but not live", when, r->seen[j]); j++; }
    else { i++; j++; }
  }
  for (size_t q = 1; q < r->n; q++) CHECK(r->seen[q] != r->seen[q - 1], "%s: %p visited twice", when, r->seen[q]);
  free(want);
}

typedef struct {
  void **blocks;
  size_t n;
  pthread_barrier_t *bar;
  int hold; /* free, wait at the barrier, then hand over */
} freer_t;

static void *freer(void *arg) {
  freer_t *f = arg;
  for (size_t i = 0; i < f->n; i++) brisk_free(f->blocks[i]);
  if (f->hold) {
    pthread_barrier_wait(f->bar); /* A: freed, still in this thread's batch */
    pthread_barrier_wait(f->bar); /* B: the owner has looked */
  }
  brisk_collect(true); /* hand the batch over */
  return NULL;
}

enum { N = 3000 };
static void *g_blocks[N];
static void *g_seen[N + 100];
static size_t g_sizes[N + 100];

static void test_live_blocks(void) {
  section("the live blocks, exactly");
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { FAIL("brisk_heap_new failed"); section_end(); return; }
  record_t r = {g_seen, g_sizes, 0, N + 100, 0, 0, 0};
  CHECK(visit_all(h, &r) == 0 && r.n == 0, "a new heap: %zu blocks visited", r.n);
  for (int i = 0; i < N; i++) {
    g_blocks[i] = brisk_heap_malloc(h, size_of(i));
    if (!g_blocks[i]) FAIL("brisk_heap_malloc(%zu) failed", size_of(i));
    else memset(g_blocks[i], i & 0xff, 16);
  }
  CHECK(visit_all(h, &r) == 0, "brisk_heap_visit did not return 0");
  expect_exactly(&r, g_blocks, N, "all allocated");
  /* local frees: every 3rd (cached classes among them) */
  for (int i = 0; i < N; i += 3) { brisk_free(g_blocks[i]); g_blocks[i] = NULL; }
  visit_all(h, &r);
  expect_exactly(&r, g_blocks, N, "after local frees");
  /* another thread frees every 4th of the rest and hands them over */
  static void *theirs[N];
  size_t nt = 0;
  for (int i = 1; i < N; i += 4)
    if (g_blocks[i]) { theirs[nt++] = g_blocks[i]; g_blocks[i] = NULL; }
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  freer_t f = {theirs, nt, &bar, 0};
  pthread_t t;
  pthread_create(&t, NULL, freer, &f);
  pthread_join(t, NULL);
  visit_all(h, &r);
  expect_exactly(&r, g_blocks, N, "after another thread freed and handed over");
  /* freed by another thread, still in its batch: visited until handed over */
  void *held[5];
  size_t nh = 0;
  for (int i = 2; i < N && nh < 5; i += 3)
    if (g_blocks[i] && size_of(i) < 1000) { held[nh++] = g_blocks[i]; g_blocks[i] = NULL; }
  freer_t f2 = {held, nh, &bar, 1};
  pthread_create(&t, NULL, freer, &f2);
  pthread_barrier_wait(&bar); /* A */
  visit_all(h, &r);
  for (size_t k = 0; k < nh; k++)
    CHECK(bsearch(&held[k], r.seen, r.n, sizeof(void *), cmp_ptr) != NULL,
          "a block still in another thread's batch was not visited (the documented limit changed?)");
  pthread_barrier_wait(&bar); /* B */
  pthread_join(t, NULL);
  visit_all(h, &r);
  expect_exactly(&r, g_blocks, N, "after the held batch was handed over");
  pthread_barrier_destroy(&bar);

  section_end();
  section("a visitor ends the walk");
  record_t s = {g_seen, g_sizes, 0, N + 100, 0, 10, 42};
  int ret = brisk_heap_visit(h, record_visitor, &s);
  CHECK(ret == 42 && s.calls == 10, "a visitor returning 42 at its 10th call: brisk_heap_visit returned %d after %ld calls",
        ret, s.calls);
  section_end();

  section("brisk_heap_contains");
  size_t live = 0;
  for (int i = 0; i < N; i++) {
    if (!g_blocks[i]) continue;
    live++;
    CHECK(brisk_heap_contains(h, g_blocks[i]) == 1, "block %p (%zu B) of the heap not contained", g_blocks[i], size_of(i));
    CHECK(brisk_heap_contains(h, (char *)g_blocks[i] + 16) == 0 && brisk_heap_contains(h, (char *)g_blocks[i] + 1) == 0,
          "an interior pointer of %p (%zu B) is contained", g_blocks[i], size_of(i));
  }
  brisk_heap_t *other = brisk_heap_new();
  void *o = brisk_heap_malloc(other, 100), *m = malloc(100), *ml = malloc(300000), *g = __libc_malloc(100);
  int local = 0;
  static char global[64];
  CHECK(!brisk_heap_contains(h, o) && !brisk_heap_contains(h, m) && !brisk_heap_contains(h, ml) &&
            !brisk_heap_contains(h, g) && !brisk_heap_contains(h, &local) && !brisk_heap_contains(h, global) &&
            !brisk_heap_contains(h, NULL) && !brisk_heap_contains(h, (void *)0xdeadbeef) &&
            !brisk_heap_contains(h, (void *)UINTPTR_MAX),
        "a pointer that is no block of the heap is contained");
  CHECK(brisk_heap_contains(other, o) == 1 && !brisk_heap_contains(other, g_blocks[2]), "the other heap's view");
  void *big = brisk_heap_malloc(h, 200000);
  CHECK(brisk_heap_contains(h, big) == 1, "a large block of the heap not contained");
  brisk_free(big);
  CHECK(brisk_heap_contains(h, big) == 0, "a freed large block is still contained");
  brisk_free(o);
  free(m);
  free(ml);
  __libc_free(g);
  brisk_heap_destroy(other);
  section_end();

  section("heap stats count large and huge");
  size_t large = 0, large_bytes = 0, huge = 0, huge_bytes = 0;
  for (int i = 0; i < N; i++) {
    if (!g_blocks[i]) continue;
    size_t u = brisk_usable_size(g_blocks[i]);
    if (size_of(i) > (2u << 20)) { huge++; huge_bytes += u; }
    else if (size_of(i) > 65536) { large++; large_bytes += u; }
  }
  CHECK(large > 0 && huge > 0, "test premise: %zu large and %zu huge blocks live", large, huge);
  CHECK(heap_stat(h, "blocks_in_use") == (double)live, "blocks_in_use %g with %zu live blocks",
        heap_stat(h, "blocks_in_use"), live);
  CHECK(heap_stat(h, "large_blocks") == (double)large && heap_stat(h, "large_bytes") == (double)large_bytes,
        "large_blocks %g, large_bytes %g: %zu blocks of %zu bytes live", heap_stat(h, "large_blocks"),
        heap_stat(h, "large_bytes"), large, large_bytes);
  CHECK(heap_stat(h, "huge_blocks") == (double)huge && heap_stat(h, "huge_bytes") == (double)huge_bytes,
        "huge_blocks %g, huge_bytes %g: %zu blocks of %zu bytes live", heap_stat(h, "huge_blocks"),
        heap_stat(h, "huge_bytes"), huge, huge_bytes);
  section_end();

  for (int i = 0; i < N; i++) brisk_free(g_blocks[i]);
  CHECK(heap_stat(h, "blocks_in_use") == 0 && heap_stat(h, "large_blocks") == 0 && heap_stat(h, "huge_blocks") == 0,
        "all freed: blocks_in_use %g", heap_stat(h, "blocks_in_use"));
  brisk_heap_destroy(h);
}

/* ------------------------------------------------------------------ */

typedef struct {
  void **blocks; /* the heap's blocks, by index */
  size_t n;
  char *freed;   /* freed by this visitor already */
  long calls, contained, viewed;
} freeing_t;

static int freeing_visitor(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)size;
  freeing_t *f = arg;
  f->calls++;
  f->contained += brisk_heap_contains(h, block);
  char buf[512];
  if (brisk_heap_stats_json(h, buf, sizeof buf) > 0) f->viewed++;
  free(malloc(64)); /* the thread's own heap works meanwhile */
  /* free this block, and a block ahead of the walk */
  for (size_t i = 0; i < f->n; i++) {
    if (f->blocks[i] != block) continue;
    if (!f->freed[i]) { brisk_free(block); f->freed[i] = 1; }
    size_t ahead = (i * 7 + 3) % f->n;
    if (!f->freed[ahead]) { brisk_free(f->blocks[ahead]); f->freed[ahead] = 1; }
    break;
  }
  return 0;
}

static void test_free_during_walk(void) {
  section("frees during the walk");
  enum { M = 600 };
  static void *b[M];
  static char freed[M];
  brisk_heap_t *h = brisk_heap_new();
  for (int i = 0; i < M; i++) b[i] = brisk_heap_malloc(h, size_of(i * 5 + 1));
  memset(freed, 0, sizeof freed);
  freeing_t f = {b, M, freed, 0, 0, 0};
  int ret = brisk_heap_visit(h, freeing_visitor, &f);
  CHECK(ret == 0, "brisk_heap_visit returned %d", ret);
  CHECK(f.calls == M, "%ld blocks visited of %d: blocks freed ahead of the walk are visited too", f.calls, M);
  CHECK(f.contained == M && f.viewed == M, "during the walk: contains said 1 for %ld, stats answered %ld of %d",
        f.contained, f.viewed, M);
  CHECK(heap_stat(h, "blocks_in_use") == 0, "after the walk that freed every block: blocks_in_use %g",
        heap_stat(h, "blocks_in_use"));
  record_t r = {g_seen, g_sizes, 0, N + 100, 0, 0, 0};
  visit_all(h, &r);
  CHECK(r.n == 0, "%zu blocks visited after all were freed", r.n);
  void *p = brisk_heap_malloc(h, 100);
  CHECK(p != NULL && brisk_heap_contains(h, p), "the heap does not allocate after the walk");
  brisk_free(p);
  brisk_heap_destroy(h);
  section_end();
}

/* ------------------------------------------------------------------ */

enum { C = 4000, FREERS = 3 };
static void *c_blocks[C];
static volatile int c_stop;

static void *stats_walker(void *arg) {
  (void)arg;
  char buf[4096];
  while (!__atomic_load_n(&c_stop, __ATOMIC_RELAXED)) brisk_stats_json(buf, sizeof buf);
  return NULL;
}

static int check_visitor(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)h;
  (void)size;
  long *bad = arg;
  if (!bsearch(&block, c_blocks, C, sizeof(void *), cmp_ptr)) ++*bad;
  return 0;
}

static void test_concurrent(void) {
  section("walks while other threads free");
  brisk_heap_t *h = brisk_heap_new();
  for (int i = 0; i < C; i++) c_blocks[i] = brisk_heap_malloc(h, size_of(i));
  qsort(c_blocks, C, sizeof(void *), cmp_ptr);
  static void *parts[FREERS][C];
  freer_t f[FREERS];
  pthread_t t[FREERS + 1];
  for (int k = 0; k < FREERS; k++) {
    size_t n = 0;
    for (int i = k; i < C; i += 4) parts[k][n++] = c_blocks[i]; /* every 4th block stays */
    f[k] = (freer_t){parts[k], n, NULL, 0};
  }
  c_stop = 0;
  pthread_create(&t[FREERS], NULL, stats_walker, NULL);
  for (int k = 0; k < FREERS; k++) pthread_create(&t[k], NULL, freer, &f[k]);
  long bad = 0, walks = 0;
  for (; walks < 20; walks++) CHECK(brisk_heap_visit(h, check_visitor, &bad) == 0, "a walk did not return 0");
  for (int k = 0; k < FREERS; k++) pthread_join(t[k], NULL);
  __atomic_store_n(&c_stop, 1, __ATOMIC_RELAXED);
  pthread_join(t[FREERS], NULL);
  CHECK(bad == 0, "%ld visited blocks were never allocated", bad);
  record_t r = {g_seen, g_sizes, 0, N + 100, 0, 0, 0};
  visit_all(h, &r);
  static void *rest[C];
  for (int i = 0; i < C; i++) rest[i] = (i % 4 == 3) ? c_blocks[i] : NULL;
  expect_exactly(&r, rest, C, "after the threads were done");
  brisk_heap_destroy(h);
  section_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_live_blocks();
  test_free_during_walk();
  test_concurrent();
  long errors = brisk_errors_reported();
  CHECK(errors == 0, "brisk reported %ld bad inputs; this test makes none", errors);
  if (g_failures) {
    printf("[visit] FAILED: %ld checks\n", g_failures);
    return 1;
  }
  printf("[visit] all checks passed\n");
  return 0;
}
