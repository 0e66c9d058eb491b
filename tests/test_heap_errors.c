/* Bad input to the heap and arena API: each is reported with one exact
 * line on stderr ("brisk: error: <function>(<pointer>): <reason>"), the
 * call fails cleanly, and nothing else is damaged.
 *
 * ctest-labels: sanitize
 *
 * As in test_bad_input.c, each scenario runs in a re-executed child
 * (scenario_runner.h), which checks:
 *   - stderr is exactly the expected line(s), in order: the child computes
 *     each with printf("%p") and sends it on stdout before the bad call as
 *     "EXPECT <line>";
 *   - the child printed "DONE" and exited 0 (it verified that the bad call
 *     failed as documented, that blocks allocated before it are intact, and
 *     that heaps and malloc still work), or, for the abort scenario, died by
 *     SIGABRT right after the line.
 * Run one scenario by hand: build/tests/test_heap_errors wrong_thread_malloc
 */
#define _GNU_SOURCE
#include <brisk.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *opaque_ptr(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

/* ================================================================== */
/* child side                                                          */

#include "child_expect.h"
#include "scenario_runner.h"

/* A free of a destroyed heap's block, as docs/SECURITY.md words it: while
 * the heap's segments are cached (the default BRISK_SEGMENT_CACHE keeps
 * them, and these scenarios use few), "block of a destroyed heap"; a huge
 * block goes back to the OS with its heap. */
static void expect_freed_heap_block(const char *fn, void *p) {
  expect_line("brisk: error: %s(%p): block of a destroyed heap", fn, p);
}
static void expect_freed_huge_heap_block(const char *fn, void *p) {
  expect_line("brisk: error: %s(%p): block of a destroyed heap (its memory went back to the OS)", fn, p);
}

/* Blocks allocated before the bad call, in the default heap (malloc and
 * brisk_malloc) and in a heap of their own; all must be intact after. */
static const size_t k_guard_sizes[] = {8, 16, 32, 48, 64, 100, 256, 1000, 4096, 10000, 70000, 300000, 3u << 20};
enum { NGUARD = sizeof k_guard_sizes / sizeof k_guard_sizes[0] };
static void *g_guard[NGUARD], *g_hguard[NGUARD];
static brisk_heap_t *g_guard_heap;

static void guards_alloc(void) {
  g_guard_heap = brisk_heap_new();
  if (!g_guard_heap) child_fail("brisk_heap_new for the guard heap failed");
  for (int i = 0; i < NGUARD; i++) {
    g_guard[i] = (i % 2) ? malloc(k_guard_sizes[i]) : brisk_malloc(k_guard_sizes[i]);
    g_hguard[i] = g_guard_heap ? brisk_heap_malloc(g_guard_heap, k_guard_sizes[i]) : NULL;
    if (!g_guard[i] || !g_hguard[i]) { child_fail("guard allocation of %zu failed", k_guard_sizes[i]); continue; }
    fill(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i);
    fill(g_hguard[i], k_guard_sizes[i], 200u + (unsigned)i);
  }
}
static void guards_check(const char *when) {
  for (int i = 0; i < NGUARD; i++) {
    if (g_guard[i]) {
      size_t off = check(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i);
      if (off != (size_t)-1)
        child_fail("%s: default-heap block of %zu bytes at %p changed at offset %zu", when, k_guard_sizes[i],
                   g_guard[i], off);
    }
    if (g_hguard[i]) {
      size_t off = check(g_hguard[i], k_guard_sizes[i], 200u + (unsigned)i);
      if (off != (size_t)-1)
        child_fail("%s: block of %zu bytes at %p of another heap changed at offset %zu", when, k_guard_sizes[i],
                   g_hguard[i], off);
    }
  }
}
static void guards_free(void) {
  for (int i = 0; i < NGUARD; i++) {
    if (i % 2) free(g_guard[i]);
    else brisk_free(g_guard[i]);
    brisk_free(g_hguard[i]);
  }
  brisk_heap_destroy(g_guard_heap);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* After the bad call: a new heap, its arena and malloc hand out distinct
 * blocks that keep their content. */
static void workload_after(void) {
  enum { N = 600 };
  static void *b[N];
  static size_t sz[N];
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new after the bad call failed"); return; }
  brisk_arena_t *a = brisk_arena_new(h, 4096);
  if (!a) child_fail("brisk_arena_new after the bad call failed");
  for (int i = 0; i < N; i++) {
    sz[i] = (size_t)(i % 37) * 24 + 8 + (size_t)(i % 5) * 1000;
    if (i % 3 == 0) b[i] = brisk_heap_malloc(h, sz[i]);
    else if (i % 3 == 1) b[i] = malloc(sz[i]);
    else b[i] = a ? brisk_arena_alloc(a, sz[i], 16) : NULL;
    if (!b[i]) { child_fail("allocation of %zu after the bad call returned NULL", sz[i]); continue; }
    fill(b[i], sz[i], (unsigned)i);
  }
  static void *sorted[N];
  memcpy(sorted, b, sizeof b);
  qsort(sorted, N, sizeof sorted[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    if (sorted[i] && sorted[i] == sorted[i - 1]) child_fail("block %p handed out twice after the bad call", sorted[i]);
  for (int i = 0; i < N; i++) {
    if (!b[i]) continue;
    size_t off = check(b[i], sz[i], (unsigned)i);
    if (off != (size_t)-1)
      child_fail("block %d (%zu bytes at %p) allocated after the bad call was overwritten at offset %zu", i, sz[i],
                 b[i], off);
  }
  guards_check("after the post-error workload");
  for (int i = 0; i < N; i += 3) brisk_free(b[i]);
  for (int i = 1; i < N; i += 3) free(b[i]);
  brisk_arena_destroy(a);
  brisk_heap_destroy(h);
}

static void finish(void) {
  guards_check("after the bad call");
  workload_after();
  guards_free();
  if (g_child_fail) exit(1);
  printf("DONE\n");
  fflush(stdout);
  exit(0);
}

/* ---- allocating on a thread that did not create the heap ------------ */

typedef enum { OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_ALIGNED } heap_op_t;
static const char *const k_op_names[] = {"brisk_heap_malloc", "brisk_heap_calloc", "brisk_heap_realloc",
                                         "brisk_heap_aligned_alloc"};

static void *do_op(heap_op_t op, brisk_heap_t *h) {
  switch (op) {
    case OP_MALLOC: return brisk_heap_malloc(h, 48);
    case OP_CALLOC: return brisk_heap_calloc(h, 3, 16);
    case OP_REALLOC: return brisk_heap_realloc(h, NULL, 48);
    case OP_ALIGNED: return brisk_heap_aligned_alloc(h, 256, 48);
  }
  return NULL;
}

typedef struct {
  brisk_heap_t *h;
  heap_op_t op;
  void *result;
  int err;
} wt_arg_t;

static void *wrong_thread_body(void *arg) {
  wt_arg_t *w = arg;
  errno = 0;
  w->result = do_op(w->op, (brisk_heap_t *)opaque_ptr(w->h));
  w->err = errno;
  return NULL;
}

static void wrong_thread_common(heap_op_t op) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  enum { N = 50 };
  void *mine[N];
  for (int i = 0; i < N; i++) {
    mine[i] = brisk_heap_malloc(h, 40 + (size_t)i * 8);
    if (mine[i]) fill(mine[i], 40 + (size_t)i * 8, 300u + (unsigned)i);
  }
  expect_line("brisk: error: %s(%p): the heap allocates only on the thread that created it", k_op_names[op], (void *)h);
  wt_arg_t w = {h, op, (void *)1, 0};
  pthread_t t;
  pthread_create(&t, NULL, wrong_thread_body, &w);
  pthread_join(t, NULL);
  printf("AFTER\n");
  fflush(stdout);
  if (w.result != NULL) child_fail("%s on another thread returned %p, expected NULL", k_op_names[op], w.result);
  if (w.err != EINVAL) child_fail("%s on another thread set errno %d, expected EINVAL (%d)", k_op_names[op], w.err, EINVAL);
  /* the heap still works on its own thread, its blocks intact */
  for (int i = 0; i < N; i++) {
    if (!mine[i]) continue;
    size_t off = check(mine[i], 40 + (size_t)i * 8, 300u + (unsigned)i);
    if (off != (size_t)-1) child_fail("block %p of the heap changed at offset %zu", mine[i], off);
  }
  void *p = do_op(op, h);
  if (!p) child_fail("%s on the heap's own thread failed after the error", k_op_names[op]);
  else if (!brisk_owns(p)) child_fail("%s on the heap's own thread returned %p, not brisk's", k_op_names[op], p);
  brisk_free(p);
  for (int i = 0; i < N; i++) brisk_free(mine[i]);
  brisk_heap_destroy(h);
  finish();
}
static void sc_wrong_thread_malloc(void) { wrong_thread_common(OP_MALLOC); }
static void sc_wrong_thread_aligned(void) { wrong_thread_common(OP_ALIGNED); }
static void sc_wrong_thread_calloc(void) { wrong_thread_common(OP_CALLOC); }
static void sc_wrong_thread_realloc(void) { wrong_thread_common(OP_REALLOC); }

/* ---- a destroyed heap ---------------------------------------------- */

static void destroyed_common(heap_op_t op) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  void *p = brisk_heap_malloc(h, 100);
  if (p) memset(p, 1, 100);
  brisk_heap_destroy(h);
  /* no brisk_heap_new before the bad call: it would reuse h's object */
  expect_line("brisk: error: %s(%p): the heap was destroyed", k_op_names[op], (void *)h);
  errno = 0;
  void *r = do_op(op, (brisk_heap_t *)opaque_ptr(h));
  int err = errno;
  printf("AFTER\n");
  fflush(stdout);
  if (r != NULL) child_fail("%s on a destroyed heap returned %p, expected NULL", k_op_names[op], r);
  if (err != EINVAL) child_fail("%s on a destroyed heap set errno %d, expected EINVAL (%d)", k_op_names[op], err, EINVAL);
  finish();
}
static void sc_destroyed_malloc(void) { destroyed_common(OP_MALLOC); }
static void sc_destroyed_aligned(void) { destroyed_common(OP_ALIGNED); }
static void sc_destroyed_calloc(void) { destroyed_common(OP_CALLOC); }
static void sc_destroyed_realloc(void) { destroyed_common(OP_REALLOC); }

static void sc_destroyed_stats_and_destroy(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  brisk_heap_destroy(h);
  expect_line("brisk: error: brisk_heap_stats_json(%p): the heap was destroyed", (void *)h);
  expect_line("brisk: error: brisk_heap_destroy(%p): the heap was destroyed", (void *)h);
  char buf[256];
  memset(buf, 'x', sizeof buf);
  size_t n = brisk_heap_stats_json((brisk_heap_t *)opaque_ptr(h), buf, sizeof buf);
  brisk_heap_destroy((brisk_heap_t *)opaque_ptr(h)); /* destroyed twice */
  printf("AFTER\n");
  fflush(stdout);
  if (n != 0 || buf[0] != '\0')
    child_fail("brisk_heap_stats_json on a destroyed heap returned %zu and \"%.20s\", expected 0 and \"\"", n, buf);
  finish();
}

/* ---- pointers that are not heaps ------------------------------------ */

static void not_a_heap_common(brisk_heap_t *bad) {
  const char *fns[] = {"brisk_heap_malloc", "brisk_heap_aligned_alloc", "brisk_heap_stats_json", "brisk_heap_destroy"};
  for (int i = 0; i < 4; i++) expect_line("brisk: error: %s(%p): not a heap made by brisk_heap_new", fns[i], (void *)bad);
  errno = 0;
  void *a = brisk_heap_malloc((brisk_heap_t *)opaque_ptr(bad), 32);
  int ea = errno;
  errno = 0;
  void *b = brisk_heap_aligned_alloc((brisk_heap_t *)opaque_ptr(bad), 64, 32);
  int eb = errno;
  char buf[64] = "x";
  size_t n = brisk_heap_stats_json((brisk_heap_t *)opaque_ptr(bad), buf, sizeof buf);
  brisk_heap_destroy((brisk_heap_t *)opaque_ptr(bad));
  printf("AFTER\n");
  fflush(stdout);
  if (a || ea != EINVAL) child_fail("brisk_heap_malloc(not a heap) = %p, errno %d (NULL, EINVAL expected)", a, ea);
  if (b || eb != EINVAL) child_fail("brisk_heap_aligned_alloc(not a heap) = %p, errno %d (NULL, EINVAL expected)", b, eb);
  if (n != 0 || buf[0] != '\0') child_fail("brisk_heap_stats_json(not a heap) returned %zu, \"%s\"", n, buf);
}

static void sc_not_a_heap_null(void) {
  guards_alloc();
  brisk_heap_destroy(NULL); /* like free(NULL): silent */
  const char *fns[] = {"brisk_heap_malloc", "brisk_heap_aligned_alloc", "brisk_heap_stats_json"};
  for (int i = 0; i < 3; i++) expect_line("brisk: error: %s((nil)): not a heap made by brisk_heap_new", fns[i]);
  void *a = brisk_heap_malloc((brisk_heap_t *)opaque_ptr(NULL), 32);
  void *b = brisk_heap_aligned_alloc((brisk_heap_t *)opaque_ptr(NULL), 64, 32);
  char buf[64] = "x";
  size_t n = brisk_heap_stats_json((brisk_heap_t *)opaque_ptr(NULL), buf, sizeof buf);
  printf("AFTER\n");
  fflush(stdout);
  if (a || b || n != 0 || buf[0] != '\0') child_fail("NULL heap: malloc %p, aligned %p, stats %zu \"%s\"", a, b, n, buf);
  finish();
}

static unsigned char g_zero_area[8192] __attribute__((aligned(64)));

static void sc_not_a_heap_global(void) {
  guards_alloc();
  not_a_heap_common((brisk_heap_t *)g_zero_area);
  for (size_t i = 0; i < sizeof g_zero_area; i++)
    if (g_zero_area[i]) { child_fail("brisk wrote into the non-heap memory at offset %zu", i); break; }
  finish();
}

static void sc_not_a_heap_block(void) {
  guards_alloc();
  unsigned char *blk = brisk_malloc(8192);
  if (!blk) { child_fail("brisk_malloc failed"); finish(); }
  memset(blk, 0xA5, 8192);
  not_a_heap_common((brisk_heap_t *)blk);
  for (size_t i = 0; i < 8192; i++)
    if (blk[i] != 0xA5) { child_fail("brisk wrote into the non-heap block at offset %zu", i); break; }
  brisk_free(blk);
  finish();
}

/* ---- freeing a block after its heap was destroyed ------------------- */

static void sc_free_after_destroy(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  size_t sizes[] = {32, 1000, 20000, 100000};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  void *p[NS];
  for (int i = 0; i < NS; i++) {
    p[i] = brisk_heap_malloc(h, sizes[i]);
    if (!p[i]) { child_fail("brisk_heap_malloc(h, %zu) failed", sizes[i]); finish(); }
    fill(p[i], sizes[i], 7u + (unsigned)i);
  }
  void *q = brisk_heap_malloc(h, 64); /* freed with free(), not brisk_free */
  void *keep_alive[200];
  for (int i = 0; i < 200; i++) keep_alive[i] = brisk_heap_malloc(h, 48); /* die with the heap */
  (void)keep_alive;
  for (int i = 0; i < NS; i++) expect_freed_heap_block("brisk_free", p[i]);
  expect_freed_heap_block("free", q);
  brisk_heap_destroy(h);
  for (int i = 0; i < NS; i++) brisk_free(opaque_ptr(p[i]));
  free(opaque_ptr(q));
  printf("AFTER\n");
  fflush(stdout);
  for (int i = 0; i < NS; i++)
    if (brisk_owns(p[i])) child_fail("brisk_owns(%p) true for a block of a destroyed heap", p[i]);
  finish();
}

static void *free_one_body(void *arg) {
  brisk_free(arg);
  return NULL;
}

static void sc_free_after_destroy_thread(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  void *p = brisk_heap_malloc(h, 96);
  void *l = brisk_heap_malloc(h, 200000);
  if (!p || !l) { child_fail("brisk_heap_malloc failed"); finish(); }
  expect_freed_heap_block("brisk_free", p);
  expect_freed_heap_block("brisk_free", l);
  brisk_heap_destroy(h);
  pthread_t t;
  pthread_create(&t, NULL, free_one_body, p);
  pthread_join(t, NULL);
  pthread_create(&t, NULL, free_one_body, l);
  pthread_join(t, NULL);
  printf("AFTER\n");
  fflush(stdout);
  finish();
}

/* A huge block (> 2 MiB) of a destroyed heap: released with the heap, so
 * freeing it afterwards is reported like the others. */
static void sc_free_after_destroy_huge(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  void *p = brisk_heap_malloc(h, 3u << 20);
  if (!p) { child_fail("brisk_heap_malloc(h, 3 MiB) failed"); finish(); }
  memset(p, 0x11, 3u << 20);
  expect_freed_huge_heap_block("brisk_free", p);
  brisk_heap_destroy(h);
  brisk_free(opaque_ptr(p));
  printf("AFTER\n");
  fflush(stdout);
  finish();
}

/* ---- arenas ---------------------------------------------------------- */

static void arena_bad_alignment_common(const size_t *bad, int nbad) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  brisk_arena_t *a = h ? brisk_arena_new(h, 4096) : NULL;
  if (!a) { child_fail("brisk_arena_new failed"); finish(); }
  char *first = brisk_arena_alloc(a, 100, 16);
  if (first) fill(first, 100, 5);
  for (int i = 0; i < nbad; i++)
    expect_line("brisk: error: brisk_arena_alloc(%p): alignment %zu is not a power of two", (void *)a, bad[i]);
  void *r[8];
  int e[8];
  for (int i = 0; i < nbad; i++) {
    errno = 0;
    r[i] = brisk_arena_alloc((brisk_arena_t *)opaque_ptr(a), 10, bad[i]);
    e[i] = errno;
  }
  printf("AFTER\n");
  fflush(stdout);
  for (int i = 0; i < nbad; i++)
    if (r[i] || e[i] != EINVAL)
      child_fail("brisk_arena_alloc(a, 10, %zu) = %p, errno %d (NULL, EINVAL expected)", bad[i], r[i], e[i]);
  if (!first || check(first, 100, 5) != (size_t)-1) child_fail("the arena's first block changed");
  char *next = brisk_arena_alloc(a, 100, 64);
  if (!next || ((uintptr_t)next & 63) || next < first + 100) child_fail("the arena misbehaves after the error: %p", (void *)next);
  brisk_arena_destroy(a);
  brisk_heap_destroy(h);
  finish();
}
static void sc_arena_bad_alignment(void) {
  static const size_t bad[] = {24, 4097, 100000};
  arena_bad_alignment_common(bad, 3);
}
/* Below 16 too: the API takes "a power of two, or 0 for 16". */
static void sc_arena_bad_alignment_small(void) {
  static const size_t bad[] = {3, 12};
  arena_bad_alignment_common(bad, 2);
}

/* ---- correct use prints nothing -------------------------------------- */

static void sc_clean(void) {
  guards_alloc();
  brisk_heap_destroy(NULL);
  brisk_arena_destroy(NULL);
  brisk_heap_t *h = brisk_heap_new();
  void *p = brisk_heap_malloc(h, 10);
  p = brisk_heap_realloc(h, p, 5000);
  void *c = brisk_heap_calloc(h, 10, 10);
  void *al = brisk_heap_aligned_alloc(h, 4096, 10);
  char buf[512];
  brisk_heap_stats_json(h, buf, sizeof buf);
  brisk_arena_t *a = brisk_arena_new(h, 100);
  for (int i = 0; i < 1000; i++) (void)brisk_arena_alloc(a, 100, (size_t)1 << (i % 12));
  brisk_arena_reset(a);
  brisk_arena_destroy(a);
  brisk_free(p);
  free(c);
  brisk_free(al);
  brisk_heap_destroy(h);
  /* blocks of a live heap freed on another thread: not an error */
  h = brisk_heap_new();
  p = brisk_heap_malloc(h, 64);
  pthread_t t;
  pthread_create(&t, NULL, free_one_body, p);
  pthread_join(t, NULL);
  brisk_heap_destroy(h);
  printf("AFTER\n");
  finish();
}

static const scenario_t k_scenarios[] = {
    {"clean", NULL, 0, 0, sc_clean},
    {"wrong_thread_malloc", NULL, 0, 0, sc_wrong_thread_malloc},
    {"wrong_thread_aligned", NULL, 0, 0, sc_wrong_thread_aligned},
    {"wrong_thread_calloc", NULL, 0, 0, sc_wrong_thread_calloc},
    {"wrong_thread_realloc", NULL, 0, 0, sc_wrong_thread_realloc},
    {"destroyed_malloc", NULL, 0, 0, sc_destroyed_malloc},
    {"destroyed_aligned", NULL, 0, 0, sc_destroyed_aligned},
    {"destroyed_calloc", NULL, 0, 0, sc_destroyed_calloc},
    {"destroyed_realloc", NULL, 0, 0, sc_destroyed_realloc},
    {"destroyed_stats_and_destroy", NULL, 0, 0, sc_destroyed_stats_and_destroy},
    {"not_a_heap_null", NULL, 0, 0, sc_not_a_heap_null},
    {"not_a_heap_global", NULL, 0, 0, sc_not_a_heap_global},
    {"not_a_heap_block", NULL, 0, 0, sc_not_a_heap_block},
    {"free_after_destroy", NULL, 0, 0, sc_free_after_destroy},
    {"free_after_destroy_thread", NULL, 0, 0, sc_free_after_destroy_thread},
    {"free_after_destroy_huge", NULL, 0, 0, sc_free_after_destroy_huge},
    {"arena_bad_alignment", NULL, 0, 0, sc_arena_bad_alignment},
    {"arena_bad_alignment_small", NULL, 0, 0, sc_arena_bad_alignment_small},
    {"abort_wrong_thread", NULL, 1, 0, sc_wrong_thread_malloc},
    {"abort_destroyed", NULL, 1, 0, sc_destroyed_malloc},
};
enum { NSCEN = sizeof k_scenarios / sizeof k_scenarios[0] };

/* Scenarios announce all their lines before the first bad call: with
 * BRISK_ON_ERROR=abort only the first is printed. */
static const suite_t k_suite = {.name = "heap_errors", .scenarios = k_scenarios, .count = NSCEN,
                                .expect_upfront = 1};

int main(int argc, char **argv) { return scenario_main(&k_suite, argc, argv); }
