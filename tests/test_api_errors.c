/* Bad input to the calls around allocation: options (brisk_option_get,
 * brisk_option_set), brisk_expand and brisk_rezalloc, the heap walk and
 * its relatives (brisk_heap_visit, brisk_heap_contains, brisk_heap_zalloc,
 * brisk_heap_stats_json), glibc's malloc_info and the heap profiler's
 * brisk_profile_start and brisk_profile_dump. Each is reported with one
 * exact line on stderr ("brisk: error: <function>(<args>): <reason>"), the
 * call fails as documented, and nothing else is damaged.
 *
 * ctest-labels: sanitize
 *
 * As test_heap_errors.c, each scenario runs in a re-executed child
 * (scenario_runner.h), which checks that stderr is exactly the announced
 * lines and that the child finished its checks (blocks allocated before the
 * bad call intact, malloc and heaps working); every scenario runs again
 * with BRISK_ON_ERROR=abort, where the child must die by SIGABRT right
 * after the first line. "clean" makes the same calls correctly and must
 * print nothing.
 * Run one scenario by hand: build/tests/test_api_errors visit_wrong_thread
 */
#define _GNU_SOURCE
#include <brisk.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static void *opaque_ptr(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

#include "child_expect.h"
#include "scenario_runner.h"

/* Blocks allocated before the bad call, in malloc's heap and in a heap of
 * their own; all must be intact after it. */
static const size_t k_guard_sizes[] = {8, 16, 48, 64, 100, 1000, 4096, 10000, 70000, 300000, 3u << 20};
enum { NGUARD = sizeof k_guard_sizes / sizeof k_guard_sizes[0] };
static void *g_guard[NGUARD], *g_hguard[NGUARD];
static brisk_heap_t *g_guard_heap;

static void guards_alloc(void) {
  g_guard_heap = brisk_heap_new();
  if (!g_guard_heap) child_fail("brisk_heap_new for the guard heap failed");
  for (int i = 0; i < NGUARD; i++) {
    g_guard[i] = malloc(k_guard_sizes[i]);
    g_hguard[i] = g_guard_heap ? brisk_heap_malloc(g_guard_heap, k_guard_sizes[i]) : NULL;
    if (!g_guard[i] || !g_hguard[i]) { child_fail("guard allocation of %zu failed", k_guard_sizes[i]); continue; }
    fill(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i);
    fill(g_hguard[i], k_guard_sizes[i], 200u + (unsigned)i);
  }
}

static void finish(void) {
  for (int i = 0; i < NGUARD; i++) {
    if (g_guard[i] && check(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i) != (size_t)-1)
      child_fail("malloc's block of %zu bytes changed after the bad call", k_guard_sizes[i]);
    if (g_hguard[i] && check(g_hguard[i], k_guard_sizes[i], 200u + (unsigned)i) != (size_t)-1)
      child_fail("the guard heap's block of %zu bytes changed after the bad call", k_guard_sizes[i]);
  }
  /* still working */
  void *p = malloc(5000), *q = g_guard_heap ? brisk_heap_malloc(g_guard_heap, 5000) : NULL;
  if (!p || !q) child_fail("allocation after the bad call failed");
  free(p);
  brisk_free(q);
  for (int i = 0; i < NGUARD; i++) free(g_guard[i]);
  brisk_heap_destroy(g_guard_heap);
  if (g_child_fail) exit(1);
  printf("DONE\n");
  fflush(stdout);
  exit(0);
}

static void after(void) {
  printf("AFTER\n");
  fflush(stdout);
}

/* ---- options -------------------------------------------------------- */

static void sc_option_unknown(void) {
  guards_alloc();
  expect_line("brisk: error: brisk_option_get(NOSUCH): unknown option");
  expect_line("brisk: error: brisk_option_set(NOSUCH): unknown option");
  expect_line("brisk: error: brisk_option_set(BRISK_PURGE): unknown option");
  expect_line("brisk: error: brisk_option_set(purge_delay): unknown option");
  long v = 77;
  int a = brisk_option_get("NOSUCH", &v);
  int b = brisk_option_set("NOSUCH", 1);
  int c = brisk_option_set("BRISK_PURGE", 1);
  int d = brisk_option_set("purge_delay", 1);
  after();
  if (a != ENOENT || b != ENOENT || c != ENOENT || d != ENOENT || v != 77)
    child_fail("unknown names: %d %d %d %d (ENOENT = %d expected), value %ld", a, b, c, d, ENOENT, v);
  finish();
}

static void sc_option_null(void) {
  guards_alloc();
  expect_line("brisk: error: brisk_option_get(NULL): no option name");
  expect_line("brisk: error: brisk_option_set(NULL): no option name");
  expect_line("brisk: error: brisk_option_get(PURGE_DELAY): no place for the value (NULL)");
  long v = 5;
  int a = brisk_option_get((const char *)opaque_ptr(NULL), &v);
  int b = brisk_option_set((const char *)opaque_ptr(NULL), 1);
  int c = brisk_option_get("PURGE_DELAY", (long *)opaque_ptr(NULL));
  after();
  if (a != EINVAL || b != EINVAL || c != EINVAL || v != 5) child_fail("NULL: %d %d %d (EINVAL expected)", a, b, c);
  finish();
}

static void sc_option_bad_value(void) {
  guards_alloc();
  static const struct { const char *name; long value; const char *range; } bad[] = {
      {"PURGE_DELAY", -2, "-1 .. 1099511627776"}, {"ON_ERROR", 2, "0 .. 1"},  {"BACKGROUND", -1, "0 .. 1"},
      {"SEGMENT_CACHE", -1, "0 .. 1048576"},     {"SEGMENT_CACHE", 1048577, "0 .. 1048576"},
      {"BRISK_SHOW_STATS", 5, "0 .. 1"},         {"PROFILE_RATE", 1000, "1024 .. 1099511627776"},
      {"PROFILE_INTERVAL", -1, "0 .. 1099511627776"}, {"PROFILE_LEAKS", 2, "0 .. 1"},
  };
  enum { NB = sizeof bad / sizeof bad[0] };
  for (int i = 0; i < NB; i++) {
    const char *o = strncmp(bad[i].name, "BRISK_", 6) == 0 ? bad[i].name + 6 : bad[i].name;
    expect_line("brisk: error: brisk_option_set(%s, %ld): bad value (BRISK_%s takes %s)", bad[i].name, bad[i].value,
                o, bad[i].range);
  }
  int r[NB];
  for (int i = 0; i < NB; i++) r[i] = brisk_option_set(bad[i].name, bad[i].value);
  after();
  for (int i = 0; i < NB; i++)
    if (r[i] != EINVAL) child_fail("brisk_option_set(%s, %ld) = %d, EINVAL expected", bad[i].name, bad[i].value, r[i]);
  long pd = 0, oe = 9, bg = 0, sc = 0, ss = 9;
  brisk_option_get("PURGE_DELAY", &pd);
  brisk_option_get("ON_ERROR", &oe);
  brisk_option_get("BACKGROUND", &bg);
  brisk_option_get("SEGMENT_CACHE", &sc);
  brisk_option_get("SHOW_STATS", &ss);
  if (pd != 50 || oe != 0 || bg != 1 || sc != 32 || ss != 0)
    child_fail("a refused value changed an option: %ld %ld %ld %ld %ld", pd, oe, bg, sc, ss);
  finish();
}

static void sc_option_read_only(void) {
  guards_alloc();
  expect_line("brisk: error: brisk_option_set(VERBOSE, 1): BRISK_VERBOSE is read at start-up only");
  expect_line("brisk: error: brisk_option_set(FAULT_AFTER, 0): BRISK_FAULT_AFTER is read at start-up only");
  expect_line("brisk: error: brisk_option_set(BRISK_FAULT_RATE, 1000000): BRISK_FAULT_RATE is read at start-up only");
  expect_line("brisk: error: brisk_option_set(PROFILE_SIGNAL, 12): BRISK_PROFILE_SIGNAL is read at start-up only");
  expect_line("brisk: error: brisk_option_set(PROFILE, 1): BRISK_PROFILE is read at start-up only");
  int a = brisk_option_set("VERBOSE", 1);
  int b = brisk_option_set("FAULT_AFTER", 0);
  int c = brisk_option_set("BRISK_FAULT_RATE", 1000000);
  int d = brisk_option_set("PROFILE_SIGNAL", 12);
  int e = brisk_option_set("PROFILE", 1);
  after();
  if (a != EPERM || b != EPERM || c != EPERM || d != EPERM || e != EPERM)
    child_fail("read-only options: %d %d %d %d %d (EPERM expected)", a, b, c, d, e);
  long fa = 0;
  brisk_option_get("FAULT_AFTER", &fa);
  void *big = malloc(64u << 20); /* no fault injection came on */
  if (fa != -1 || !big) child_fail("FAULT_AFTER reads %ld, malloc(64 MiB) = %p", fa, big);
  free(big);
  finish();
}

/* ---- brisk_expand, brisk_rezalloc --------------------------------------- */

typedef void *(*resize_fn)(void *, size_t);
static void *call(int rez, void *p, size_t n) { return rez ? brisk_rezalloc(p, n) : brisk_expand(p, n); }
static const char *name_of(int rez) { return rez ? "brisk_rezalloc" : "brisk_expand"; }

static void foreign_common(int rez) {
  guards_alloc();
  char buf[256] __attribute__((aligned(16)));
  fill(buf, sizeof buf, 3);
  expect_line("brisk: error: %s(%p): pointer was not allocated by brisk", name_of(rez), (void *)buf);
  void *r = call(rez, opaque_ptr(buf), 100);
  after();
  if (r != NULL) child_fail("%s(stack) returned %p", name_of(rez), r);
  if (check(buf, sizeof buf, 3) != (size_t)-1) child_fail("%s wrote into the stack", name_of(rez));
  finish();
}
static void sc_expand_foreign(void) { foreign_common(0); }
static void sc_rezalloc_foreign(void) { foreign_common(1); }

static void interior_common(int rez) {
  guards_alloc();
  char *p = malloc(64);
  fill(p, 64, 4);
  expect_line("brisk: error: %s(%p): interior pointer, 16 bytes into the block at %p (size class 64)", name_of(rez),
              (void *)(p + 16), (void *)p);
  void *r = call(rez, opaque_ptr(p + 16), 100);
  after();
  if (r != NULL) child_fail("%s(interior) returned %p", name_of(rez), r);
  if (check(p, 64, 4) != (size_t)-1 || brisk_usable_size(p) != 64) child_fail("the block changed");
  free(p);
  finish();
}
static void sc_expand_interior(void) { interior_common(0); }
static void sc_rezalloc_interior(void) { interior_common(1); }

static void double_common(int rez, size_t size, const char *reason_fmt) {
  guards_alloc();
  char *p = malloc(size);
  size_t cls = brisk_usable_size(p);
  free(p);
  char reason[128];
  snprintf(reason, sizeof reason, reason_fmt, cls);
  expect_line("brisk: error: %s(%p): %s", name_of(rez), (void *)p, reason);
  void *r = call(rez, opaque_ptr(p), size * 2);
  after();
  if (r != NULL) child_fail("%s(freed block) returned %p", name_of(rez), r);
  finish();
}
static void sc_expand_double_free(void) { double_common(0, 64, "double free (size class %zu)"); }
static void sc_rezalloc_double_free(void) { double_common(1, 64, "double free (size class %zu)"); }
static void sc_expand_freed_large(void) {
  double_common(0, 200000, "pointer into memory that is not in use (freed twice?)");
}

/* ---- heaps ---------------------------------------------------------- */

static int count_visitor(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)h;
  (void)block;
  (void)size;
  ++*(long *)arg;
  return 0;
}

typedef enum { H_VISIT, H_CONTAINS, H_ZALLOC, H_STATS } heap_call_t;
static const char *const k_heap_fn[] = {"brisk_heap_visit", "brisk_heap_contains", "brisk_heap_zalloc",
                                        "brisk_heap_stats_json"};

typedef struct {
  brisk_heap_t *h;
  heap_call_t call;
  void *probe;
  long result, visited;
  int err;
} hc_t;

static void heap_call(hc_t *c) {
  errno = 0;
  char buf[256] = "x";
  switch (c->call) {
    case H_VISIT: c->result = brisk_heap_visit((brisk_heap_t *)opaque_ptr(c->h), count_visitor, &c->visited); break;
    case H_CONTAINS: c->result = brisk_heap_contains((brisk_heap_t *)opaque_ptr(c->h), c->probe); break;
    case H_ZALLOC: c->result = (long)(uintptr_t)brisk_heap_zalloc((brisk_heap_t *)opaque_ptr(c->h), 48); break;
    case H_STATS:
      c->result = (long)brisk_heap_stats_json((brisk_heap_t *)opaque_ptr(c->h), buf, sizeof buf);
      if (buf[0] != '\0') c->result = -2;
      break;
  }
  c->err = errno;
}
static void *heap_call_thread(void *arg) {
  heap_call((hc_t *)arg);
  return NULL;
}

/* The call failed as documented: -1 and EINVAL (visit), 0 (contains),
 * NULL and EINVAL (zalloc), 0 and "" (stats). */
static void expect_failed(const hc_t *c) {
  int ok = c->call == H_VISIT ? c->result == -1 && c->err == EINVAL && c->visited == 0
           : c->call == H_ZALLOC ? c->result == 0 && c->err == EINVAL
                                 : c->result == 0;
  if (!ok) child_fail("%s: result %ld, errno %d, %ld blocks visited", k_heap_fn[c->call], c->result, c->err, c->visited);
}

static void wrong_thread_common(heap_call_t call) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  void *b = brisk_heap_malloc(h, 100);
  fill(b, 100, 6);
  if (call == H_ZALLOC)
    expect_line("brisk: error: brisk_heap_zalloc(%p): the heap allocates only on the thread that created it", (void *)h);
  else
    expect_line("brisk: error: %s(%p): the heap can be looked at only on the thread that created it", k_heap_fn[call],
                (void *)h);
  hc_t c = {h, call, b, 1, 0, 0};
  pthread_t t;
  pthread_create(&t, NULL, heap_call_thread, &c);
  pthread_join(t, NULL);
  after();
  expect_failed(&c);
  long n = 0;
  if (brisk_heap_visit(h, count_visitor, &n) != 0 || n != 1 || !brisk_heap_contains(h, b) || check(b, 100, 6) != (size_t)-1)
    child_fail("on its own thread, the heap's walk found %ld blocks", n);
  brisk_heap_destroy(h);
  finish();
}
static void sc_visit_wrong_thread(void) { wrong_thread_common(H_VISIT); }
static void sc_contains_wrong_thread(void) { wrong_thread_common(H_CONTAINS); }
static void sc_zalloc_wrong_thread(void) { wrong_thread_common(H_ZALLOC); }
static void sc_stats_wrong_thread(void) { wrong_thread_common(H_STATS); }

static void sc_destroyed(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  void *b = brisk_heap_malloc(h, 100);
  brisk_heap_destroy(h);
  for (int k = 0; k < 3; k++) expect_line("brisk: error: %s(%p): the heap was destroyed", k_heap_fn[k], (void *)h);
  hc_t c[3];
  for (int k = 0; k < 3; k++) {
    c[k] = (hc_t){h, (heap_call_t)k, b, 1, 0, 0};
    heap_call(&c[k]);
  }
  after();
  for (int k = 0; k < 3; k++) expect_failed(&c[k]);
  finish();
}

static void sc_not_a_heap(void) {
  guards_alloc();
  for (int k = 0; k < 3; k++) expect_line("brisk: error: %s((nil)): not a heap made by brisk_heap_new", k_heap_fn[k]);
  hc_t c[3];
  for (int k = 0; k < 3; k++) {
    c[k] = (hc_t){NULL, (heap_call_t)k, g_guard[0], 1, 0, 0};
    heap_call(&c[k]);
  }
  after();
  for (int k = 0; k < 3; k++) expect_failed(&c[k]);
  finish();
}

static void sc_visit_no_visitor(void) {
  guards_alloc();
  expect_line("brisk: error: brisk_heap_visit(%p): no visitor function (NULL)", (void *)g_guard_heap);
  errno = 0;
  int r = brisk_heap_visit(g_guard_heap, (brisk_block_visitor_t)opaque_ptr(NULL), NULL);
  int e = errno;
  after();
  if (r != -1 || e != EINVAL) child_fail("brisk_heap_visit(h, NULL) = %d, errno %d", r, e);
  finish();
}

/* Inside the visitor: allocating from the heap, destroying it, visiting it
 * again (first block only). */
typedef struct {
  int what, done;
  void *results[5];
  int errs[5], visit_again;
} inside_t;

static int inside_visitor(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)block;
  (void)size;
  inside_t *in = arg;
  if (in->done++) return 0;
  if (in->what == 0) {
    void *b = brisk_heap_malloc(h, 10);
    errno = 0; in->results[0] = brisk_heap_malloc(h, 10); in->errs[0] = errno;
    errno = 0; in->results[1] = brisk_heap_zalloc(h, 10); in->errs[1] = errno;
    errno = 0; in->results[2] = brisk_heap_calloc(h, 2, 10); in->errs[2] = errno;
    errno = 0; in->results[3] = brisk_heap_aligned_alloc(h, 64, 10); in->errs[3] = errno;
    errno = 0; in->results[4] = brisk_heap_realloc(h, NULL, 10); in->errs[4] = errno;
    (void)b;
  } else if (in->what == 1) {
    brisk_heap_destroy(h);
  } else {
    long n = 0;
    in->visit_again = brisk_heap_visit(h, count_visitor, &n);
  }
  return 0;
}

static void inside_common(int what) {
  guards_alloc();
  brisk_heap_t *h = g_guard_heap;
  if (what == 0) {
    expect_prefix("brisk: error: brisk_heap_malloc(%p): the heap is being visited", (void *)h);
    const char *fns[] = {"brisk_heap_malloc", "brisk_heap_zalloc", "brisk_heap_calloc", "brisk_heap_aligned_alloc",
                         "brisk_heap_realloc"};
    for (int i = 0; i < 5; i++)
      expect_line("brisk: error: %s(%p): the heap is being visited (brisk_heap_visit): it allocates again once the "
                  "walk has ended", fns[i], (void *)h);
  } else if (what == 1) {
    expect_line("brisk: error: brisk_heap_destroy(%p): the heap is being visited (brisk_heap_visit)", (void *)h);
  } else {
    expect_line("brisk: error: brisk_heap_visit(%p): the heap is being visited already", (void *)h);
  }
  inside_t in = {what, 0, {0}, {0}, 0};
  int r = brisk_heap_visit(h, inside_visitor, &in);
  after();
  if (r != 0 || in.done != NGUARD) child_fail("the walk returned %d after %d blocks, %d live", r, in.done, NGUARD);
  if (what == 0)
    for (int i = 0; i < 5; i++)
      if (in.results[i] || in.errs[i] != EINVAL) child_fail("allocation %d inside the walk: %p, errno %d", i, in.results[i], in.errs[i]);
  if (what == 2 && in.visit_again != -1) child_fail("the walk inside the walk returned %d", in.visit_again);
  void *p = brisk_heap_malloc(h, 10); /* allocates again after the walk */
  if (!p) child_fail("the heap does not allocate after the walk");
  brisk_free(p);
  finish();
}
static void sc_malloc_during_visit(void) { inside_common(0); }
static void sc_destroy_during_visit(void) { inside_common(1); }
static void sc_visit_during_visit(void) { inside_common(2); }

/* ---- malloc_info ------------------------------------------------------ */

static void sc_malloc_info_null(void) {
  guards_alloc();
  expect_line("brisk: error: malloc_info(0, NULL): no stream to write to");
  errno = 0;
  int r = malloc_info(0, (FILE *)opaque_ptr(NULL));
  int e = errno;
  after();
  if (r != -1 || e != EINVAL) child_fail("malloc_info(0, NULL) = %d, errno %d", r, e);
  finish();
}

static void sc_malloc_info_options(void) {
  guards_alloc();
  FILE *f = tmpfile();
  expect_line("brisk: error: malloc_info(1, %p): options must be 0", (void *)f);
  errno = 0;
  int r = malloc_info(1, f);
  int e = errno;
  after();
  if (r != -1 || e != EINVAL || ftell(f) != 0) child_fail("malloc_info(1, f) = %d, errno %d, %ld bytes", r, e, ftell(f));
  fclose(f);
  finish();
}

/* ---- the heap profiler's calls ------------------------------------------- */

/* `call` with "" and NULL (both EINVAL) and a 5000-byte string
 * (ENAMETOOLONG), each reported with its line. */
static void profile_bad_calls(const char *name, int (*call)(const char *), const char *const lines[3]) {
  guards_alloc();
  static char long_text[5001];
  memset(long_text, 'p', sizeof long_text - 1);
  for (int i = 0; i < 3; i++) expect_line("%s", lines[i]);
  int a = call("");
  int b = call((const char *)opaque_ptr(NULL));
  int c = call(long_text);
  after();
  if (a != EINVAL || b != EINVAL || c != ENAMETOOLONG)
    child_fail("%s: %d %d %d (EINVAL, EINVAL, ENAMETOOLONG expected)", name, a, b, c);
  finish();
}

static void sc_profile_start_bad(void) {
  static const char *const lines[3] = {
      "brisk: error: brisk_profile_start(\"\"): the dumps need a path prefix",
      "brisk: error: brisk_profile_start(NULL): the dumps need a path prefix",
      "brisk: error: brisk_profile_start(): a prefix of 5000 bytes is too long (at most 4031)"};
  profile_bad_calls("brisk_profile_start", brisk_profile_start, lines);
}

static void sc_profile_dump_bad(void) {
  static const char *const lines[3] = {
      "brisk: error: brisk_profile_dump(\"\"): an empty path",
      "brisk: error: brisk_profile_dump(NULL): no path, and no prefix from BRISK_PROFILE or brisk_profile_start",
      "brisk: error: brisk_profile_dump(): a path of 5000 bytes is too long (at most 4079)"};
  profile_bad_calls("brisk_profile_dump", brisk_profile_dump, lines);
}

/* ---- the same calls, made correctly: nothing printed ------------------- */

static void sc_clean(void) {
  guards_alloc();
  long v;
  if (brisk_option_get("BRISK_SEGMENT_CACHE", &v) || brisk_option_set("SEGMENT_CACHE", v)) child_fail("options");
  char *g = __libc_malloc(100);
  if (brisk_expand(g, 50) != NULL) child_fail("brisk_expand of a glibc block did not fail");
  __libc_free(g);
  if (brisk_expand(NULL, 10) != NULL) child_fail("brisk_expand(NULL)");
  char *p = brisk_rezalloc(NULL, 100);
  p = brisk_rezalloc(p, 1000);
  if (brisk_expand(p, 10) != p) child_fail("brisk_expand within the block");
  brisk_rezalloc(p, 0);
  long n = 0;
  if (brisk_heap_visit(g_guard_heap, count_visitor, &n) != 0 || n != NGUARD) child_fail("visit found %ld", n);
  if (!brisk_heap_contains(g_guard_heap, g_hguard[0]) || brisk_heap_contains(g_guard_heap, g_guard[0]))
    child_fail("brisk_heap_contains");
  free(brisk_heap_zalloc(g_guard_heap, 100));
  if (mallopt(12345, 1) != 0) child_fail("mallopt of an unknown parameter");
  FILE *f = tmpfile();
  if (malloc_info(0, f) != 0) child_fail("malloc_info(0, f)");
  fclose(f);
  malloc_trim(0);
  char dir[] = "/tmp/brisk-api-errors-XXXXXX", path[64], other[64];
  if (!mkdtemp(dir)) child_fail("mkdtemp");
  snprintf(path, sizeof path, "%s/off.heap", dir);
  snprintf(other, sizeof other, "%s/off.collapsed", dir);
  if (brisk_profile_dump(path) != 0) child_fail("brisk_profile_dump(%s) with the profiler off", path);
  FILE *h = fopen(path, "r");
  char line[128] = "";
  if (!h || !fgets(line, sizeof line, h) || strcmp(line, "heap profile: 0: 0 [ 0: 0] @ heapprofile\n") != 0)
    child_fail("a dump with the profiler off begins %s", line);
  if (h) fclose(h);
  if (unlink(path) != 0 || unlink(other) != 0 || rmdir(dir) != 0) child_fail("the dump's files");
  after();
  finish();
}

static const scenario_t k_scenarios[] = {
    {"clean", NULL, 0, 0, sc_clean},
    {"option_unknown", NULL, 0, 0, sc_option_unknown},
    {"option_null", NULL, 0, 0, sc_option_null},
    {"option_bad_value", NULL, 0, 0, sc_option_bad_value},
    {"option_read_only", NULL, 0, 0, sc_option_read_only},
    {"expand_foreign", NULL, 0, 0, sc_expand_foreign},
    {"rezalloc_foreign", NULL, 0, 0, sc_rezalloc_foreign},
    {"expand_interior", NULL, 0, 0, sc_expand_interior},
    {"rezalloc_interior", NULL, 0, 0, sc_rezalloc_interior},
    {"expand_double_free", NULL, 0, 0, sc_expand_double_free},
    {"rezalloc_double_free", NULL, 0, 0, sc_rezalloc_double_free},
    {"expand_freed_large", NULL, 0, 0, sc_expand_freed_large},
    {"visit_wrong_thread", NULL, 0, 0, sc_visit_wrong_thread},
    {"contains_wrong_thread", NULL, 0, 0, sc_contains_wrong_thread},
    {"zalloc_wrong_thread", NULL, 0, 0, sc_zalloc_wrong_thread},
    {"stats_wrong_thread", NULL, 0, 0, sc_stats_wrong_thread},
    {"destroyed_heap", NULL, 0, 0, sc_destroyed},
    {"not_a_heap", NULL, 0, 0, sc_not_a_heap},
    {"visit_no_visitor", NULL, 0, 0, sc_visit_no_visitor},
    {"malloc_during_visit", NULL, 0, 0, sc_malloc_during_visit},
    {"destroy_during_visit", NULL, 0, 0, sc_destroy_during_visit},
    {"visit_during_visit", NULL, 0, 0, sc_visit_during_visit},
    {"malloc_info_null", NULL, 0, 0, sc_malloc_info_null},
    {"malloc_info_options", NULL, 0, 0, sc_malloc_info_options},
    {"profile_start_bad", NULL, 0, 0, sc_profile_start_bad},
    {"profile_dump_bad", NULL, 0, 0, sc_profile_dump_bad},
};
enum { NSCEN = sizeof k_scenarios / sizeof k_scenarios[0] };

static const suite_t k_suite = {.name = "api_errors", .scenarios = k_scenarios, .count = NSCEN, .abort_pass = 1,
                                .expect_upfront = 1};

int main(int argc, char **argv) { return scenario_main(&k_suite, argc, argv); }
