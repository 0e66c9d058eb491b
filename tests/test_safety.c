/* Safety in the default build: heap-corruption detection.
 *
 * ctest-labels: sanitize
 *
 * Every bad input of docs/SECURITY.md, one scenario each, with the exact
 * "brisk: error:" line (function, pointer, reason, size class where there
 * is one) and a check that every other allocation is intact afterwards:
 *   - double frees of small and medium blocks in many orders (a b a; a, 50
 *     others, a; across size classes; after the page's free list was
 *     partly reused; through free, brisk_free, free_sized, brisk_free_sized,
 *     realloc and brisk_realloc), the last block freed by a thread that
 *     does not own it, a block freed by its owner and by another thread in
 *     either order (reported when the owner takes the other thread's frees
 *     back), and a block of a page that went back to its segment;
 *   - interior pointers (small, medium, large) through brisk_free_sized and
 *     realloc;
 *   - pointers into memory brisk returned to the OS: a huge block freed
 *     twice, and a segment unmapped at once (BRISK_SEGMENT_CACHE=0);
 *   - blocks of a destroyed first-class heap, while its memory is cached
 *     and after it went back to the OS;
 *   - a write after free that breaks a free-list link (and an overflow into
 *     a free neighbour): reported when malloc follows the link, the page
 *     is taken out of use, and malloc keeps handing out valid blocks; a
 *     link rewritten to a live block of the page is reported one block
 *     later, when the live block's data is read as a link (the live block
 *     is handed out again first: a known limit);
 *   - pointers brisk never owned.
 * Each scenario also runs with BRISK_ON_ERROR=abort ("abort_<name>"): the
 * child must die by SIGABRT right after the first line.
 * The scenario marked "info" is a known limit (a thread that does not own
 * a block frees it twice with another free in between: not detected): its
 * outcome is printed, never failed.
 *
 * As in test_bad_input.c, each scenario runs in a re-executed child
 * (scenario_runner.h), which checks:
 *   - stderr is exactly the expected line(s): the child computes each with
 *     printf("%p") and sends it as "EXPECT <line>" on stdout before the bad
 *     call ("EXPECTR <prefix>\t<reason>...": the prefix and one of the
 *     reasons);
 *   - the child printed "DONE" and exited 0 (it verified that blocks
 *     allocated before the bad call are intact and that malloc/free still
 *     hand out correct, distinct blocks), or, for the abort variants, died
 *     by SIGABRT right after the first line.
 * Run one scenario by hand: build/tests/test_safety df_aba
 *                      (or: BRISK_ON_ERROR=abort build/tests/test_safety df_aba)
 */
#define _GNU_SOURCE
#include <brisk.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C23; exported by libbrisk.so (older glibc headers do not declare it). */
extern void free_sized(void *p, size_t size);

static void *opaque_ptr(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

#define SMALL_PAGE ((uintptr_t)64 * 1024)
#define SEG_SIZE ((uintptr_t)4 * 1024 * 1024)

/* ================================================================== */
/* child side                                                          */

#include "child_expect.h"
#include "scenario_runner.h"

static void after_bad_calls(void) {
  printf("AFTER\n");
  fflush(stdout);
}


/* Blocks allocated before the bad calls; they must be intact afterwards.
 * Several share a size class with the blocks the scenarios misuse. */
static const size_t k_guard_sizes[] = {8,    16,   24,    32,    32,    48,     48,     64,     64,     64,
                                       100,  128,  256,   512,   1000,  1000,   4096,   8192,   10000,  20000,
                                       70000, 200000, 300000, 1u << 20, 2u << 20, 3u << 20};
enum { NGUARD = sizeof k_guard_sizes / sizeof k_guard_sizes[0] };
static void *g_guard[NGUARD];

static void guards_alloc(void) {
  for (int i = 0; i < NGUARD; i++) {
    g_guard[i] = malloc(k_guard_sizes[i]);
    if (!g_guard[i]) { child_fail("malloc(%zu) failed", k_guard_sizes[i]); continue; }
    fill(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i);
  }
}
static void guards_check(const char *when) {
  for (int i = 0; i < NGUARD; i++) {
    if (!g_guard[i]) continue;
    if (!brisk_owns(g_guard[i])) child_fail("%s: brisk_owns(%p) false for a live block", when, g_guard[i]);
    size_t off = check(g_guard[i], k_guard_sizes[i], 100u + (unsigned)i);
    if (off != (size_t)-1)
      child_fail("%s: block of %zu bytes at %p allocated before the bad call was changed at offset %zu", when,
                 k_guard_sizes[i], g_guard[i], off);
  }
}
static void guards_free(void) {
  for (int i = 0; i < NGUARD; i++) free(g_guard[i]);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* After the bad calls: allocation still works, blocks are distinct, do not
 * overlap each other or the guards, and none is `bad` (a pointer that must
 * never be handed out, e.g. the garbage of a broken link). */
static void workload_after(size_t cls, const void *bad) {
  enum { N = 900 };
  static void *b[N];
  static size_t sz[N];
  for (int i = 0; i < N; i++) {
    sz[i] = (i % 3 == 0) ? cls : (size_t)(i % 37) * 24 + 8 + (size_t)(i % 5) * 1000;
    if (i % 100 == 99) sz[i] = 150000;
    b[i] = malloc(sz[i]);
    if (!b[i]) { child_fail("malloc(%zu) after the bad call returned NULL", sz[i]); continue; }
    if (bad && b[i] == bad) child_fail("malloc(%zu) returned %p, the pointer that must never be handed out", sz[i], bad);
    if (brisk_usable_size(b[i]) < sz[i]) child_fail("usable size %zu < %zu after the bad call", brisk_usable_size(b[i]), sz[i]);
    fill(b[i], sz[i], (unsigned)i);
  }
  static void *sorted[N];
  memcpy(sorted, b, sizeof b);
  qsort(sorted, N, sizeof sorted[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    if (sorted[i] && sorted[i] == sorted[i - 1])
      child_fail("malloc returned the same block %p twice after the bad call", sorted[i]);
  for (int i = 0; i < N; i++) {
    if (!b[i]) continue;
    size_t off = check(b[i], sz[i], (unsigned)i);
    if (off != (size_t)-1)
      child_fail("block %d (%zu bytes at %p) allocated after the bad call was overwritten at offset %zu (overlap)", i,
                 sz[i], b[i], off);
  }
  guards_check("after the post-error workload");
  for (int i = 0; i < N; i++) free(b[i]);
  void *p = calloc(100, 10);
  if (!p) child_fail("calloc after the bad call failed");
  else {
    for (int i = 0; i < 1000; i++)
      if (((unsigned char *)p)[i]) { child_fail("calloc after the bad call is not zeroed at %d", i); break; }
    free(p);
  }
}

static void finish(void) {
  guards_check("after the bad call");
  guards_free();
  if (g_child_fail) exit(1);
  printf("DONE\n");
  fflush(stdout);
  exit(0);
}

/* ---- how a pointer is released -------------------------------------- */

typedef enum { VIA_FREE, VIA_BRISK_FREE, VIA_FREE_SIZED, VIA_BRISK_FREE_SIZED, VIA_REALLOC, VIA_BRISK_REALLOC,
               VIA_REALLOC_SAME, VIA_COUNT } via_t;
static const char *const k_via_fn[VIA_COUNT] = {"free",    "brisk_free",    "free_sized", "brisk_free_sized",
                                                "realloc", "brisk_realloc", "realloc"};

/* Hand p to the function; realloc's result must not be p (a block that is
 * not live cannot come back as one), and a new block it returns is freed. */
static void release_via(via_t via, void *p, size_t size) {
  p = opaque_ptr(p);
  void *r = NULL;
  switch (via) {
    case VIA_FREE: free(p); return;
    case VIA_BRISK_FREE: brisk_free(p); return;
    case VIA_FREE_SIZED: free_sized(p, size); return;
    case VIA_BRISK_FREE_SIZED: brisk_free_sized(p, size); return;
    case VIA_REALLOC: r = realloc(p, size * 2 + 100); break;
    case VIA_BRISK_REALLOC: r = brisk_realloc(p, size * 2 + 100); break;
    case VIA_REALLOC_SAME: r = realloc(p, size); break;
    default: return;
  }
  if (r == p) {
    child_fail("%s(%p, ...) of a pointer that is not a live block returned that pointer as a live block",
               k_via_fn[via], p);
  } else if (r != NULL) {
    if (!brisk_owns(r)) child_fail("%s(%p, ...) returned %p, which brisk does not own", k_via_fn[via], p, r);
    else free(r);
  }
}

/* ---- double free ---------------------------------------------------- */

/* free a, free b, free a */
static void df_aba(size_t size, via_t via) {
  guards_alloc();
  char *a = malloc(size), *b = malloc(size);
  if (!a || !b) { child_fail("malloc(%zu) failed", size); finish(); }
  size_t cls = brisk_usable_size(a);
  fill(a, size, 1);
  fill(b, size, 2);
  free(a);
  free(b);
  expect_line("brisk: error: %s(%p): double free (size class %zu)", k_via_fn[via], (void *)a, cls);
  release_via(via, a, size);
  after_bad_calls();
  workload_after(size, NULL);
  finish();
}
static void sc_df_aba(void) { df_aba(32, VIA_FREE); }
static void sc_df_aba_brisk_free(void) { df_aba(48, VIA_BRISK_FREE); }
static void sc_df_aba_free_sized(void) { df_aba(64, VIA_FREE_SIZED); }
static void sc_df_aba_brisk_free_sized(void) { df_aba(96, VIA_BRISK_FREE_SIZED); }
static void sc_df_aba_realloc(void) { df_aba(128, VIA_REALLOC); }
static void sc_df_aba_realloc_same(void) { df_aba(128, VIA_REALLOC_SAME); }
static void sc_df_aba_brisk_realloc(void) { df_aba(160, VIA_BRISK_REALLOC); }
static void sc_df_aba_medium(void) { df_aba(20000, VIA_FREE); }
static void sc_df_aba_medium_realloc(void) { df_aba(40000, VIA_REALLOC); }
static void sc_df_aba_8k(void) { df_aba(8192, VIA_BRISK_FREE); }
static void sc_df_aba_64k(void) { df_aba(65536, VIA_FREE); }

/* free a, free 50 others of the same class (some allocated before a,
 * some after), free a */
static void sc_df_after_50(void) {
  guards_alloc();
  enum { N = 51 };
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(64);
    if (!b[i]) { child_fail("malloc(64) failed"); finish(); }
    fill(b[i], 64, (unsigned)i);
  }
  char *a = b[20];
  size_t cls = brisk_usable_size(a);
  free(a);
  for (int i = 0; i < N; i++)
    if (i != 20) free(b[i]);
  expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)a, cls);
  free(opaque_ptr(a));
  after_bad_calls();
  workload_after(64, NULL);
  finish();
}

/* Blocks of many classes freed, then each freed again, in another order. */
static void sc_df_classes(void) {
  guards_alloc();
  static const size_t sizes[] = {16, 32, 48, 80, 112, 200, 520, 1000, 3000, 8000, 9000, 30000, 60000};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  char *p[NS], *other[NS];
  size_t cls[NS];
  for (int i = 0; i < NS; i++) {
    p[i] = malloc(sizes[i]);
    other[i] = malloc(sizes[i]);
    if (!p[i] || !other[i]) { child_fail("malloc(%zu) failed", sizes[i]); finish(); }
    cls[i] = brisk_usable_size(p[i]);
    fill(p[i], sizes[i], (unsigned)i);
    fill(other[i], sizes[i], 50u + (unsigned)i);
  }
  for (int i = 0; i < NS; i++) free(p[i]);
  for (int i = NS - 1; i >= 0; i -= 2) {
    expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)p[i], cls[i]);
    free(opaque_ptr(p[i]));
  }
  for (int i = NS - 2; i >= 0; i -= 2) {
    expect_line("brisk: error: brisk_free(%p): double free (size class %zu)", (void *)p[i], cls[i]);
    brisk_free(opaque_ptr(p[i]));
  }
  after_bad_calls();
  for (int i = 0; i < NS; i++) {
    size_t off = check(other[i], sizes[i], 50u + (unsigned)i);
    if (off != (size_t)-1) child_fail("block %p of class %zu changed at offset %zu", (void *)other[i], cls[i], off);
    free(other[i]);
  }
  workload_after(48, NULL);
  finish();
}

/* 200 blocks freed, 80 allocated again (the page's lists partly reused),
 * then a block still free is freed again; the reused ones are live and
 * their correct frees print nothing. */
static void df_reused(via_t via) {
  guards_alloc();
  enum { N = 200, R = 80 };
  char *b[N], *r[R];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(40);
    if (!b[i]) { child_fail("malloc(40) failed"); finish(); }
  }
  size_t cls = brisk_usable_size(b[0]);
  for (int i = 0; i < N; i++) free(b[i]);
  for (int i = 0; i < R; i++) {
    r[i] = malloc(40);
    if (!r[i]) { child_fail("malloc(40) failed"); finish(); }
    fill(r[i], 40, 7u + (unsigned)i);
  }
  /* one freed block that was not handed out again, and one that was */
  char *victim = NULL;
  for (int i = N - 1; i >= 0 && !victim; i--) {
    int reused = 0;
    for (int j = 0; j < R; j++) reused |= r[j] == b[i];
    if (!reused) victim = b[i];
  }
  if (!victim) { child_fail("every freed block was reused (test setup)"); finish(); }
  expect_line("brisk: error: %s(%p): double free (size class %zu)", k_via_fn[via], (void *)victim, cls);
  release_via(via, victim, 40);
  /* a second one, from the other end of the list */
  char *victim2 = NULL;
  for (int i = 0; i < N && !victim2; i++) {
    int reused = 0;
    for (int j = 0; j < R; j++) reused |= r[j] == b[i];
    if (!reused && b[i] != victim) victim2 = b[i];
  }
  if (victim2) {
    expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)victim2, cls);
    free(opaque_ptr(victim2));
  }
  after_bad_calls();
  for (int i = 0; i < R; i++) {
    size_t off = check(r[i], 40, 7u + (unsigned)i);
    if (off != (size_t)-1) child_fail("reused block %p changed at offset %zu", (void *)r[i], off);
  }
  for (int i = 0; i < R; i += 2) free(r[i]);
  workload_after(40, NULL);
  for (int i = 1; i < R; i += 2) {
    size_t off = check(r[i], 40, 7u + (unsigned)i);
    if (off != (size_t)-1) child_fail("reused block %p changed at offset %zu by later allocations", (void *)r[i], off);
    free(r[i]);
  }
  finish();
}
static void sc_df_reused(void) { df_reused(VIA_FREE); }
static void sc_df_reused_realloc(void) { df_reused(VIA_REALLOC); }
static void sc_df_reused_free_sized(void) { df_reused(VIA_BRISK_FREE_SIZED); }

/* Double free of a block in a first-class heap (the heap's thread frees). */
static void sc_df_heap(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  char *a = brisk_heap_malloc(h, 72), *b = brisk_heap_malloc(h, 72), *c = brisk_heap_malloc(h, 5000);
  if (!a || !b || !c) { child_fail("brisk_heap_malloc failed"); finish(); }
  size_t cls = brisk_usable_size(a), ccls = brisk_usable_size(c);
  fill(b, 72, 3);
  brisk_free(a);
  brisk_free(c);
  expect_line("brisk: error: brisk_free(%p): double free (size class %zu)", (void *)a, cls);
  brisk_free(opaque_ptr(a));
  expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)c, ccls);
  free(opaque_ptr(c));
  after_bad_calls();
  if (check(b, 72, 3) != (size_t)-1) child_fail("the heap's live block changed");
  /* a and c may come back once each (they were freed once), never twice,
   * and the live b never */
  enum { M = 500 };
  static char *x[M];
  for (int i = 0; i < M; i++) {
    x[i] = brisk_heap_malloc(h, i % 2 ? 72 : 5000);
    if (!x[i] || x[i] == b) { child_fail("brisk_heap_malloc after the double free returned %p", (void *)x[i]); break; }
    memset(x[i], 0x66, i % 2 ? 72 : 5000);
  }
  qsort(x, M, sizeof x[0], cmp_ptr);
  for (int i = 1; i < M; i++)
    if (x[i] && x[i] == x[i - 1]) child_fail("brisk_heap_malloc returned %p twice", (void *)x[i]);
  if (check(b, 72, 3) != (size_t)-1) child_fail("the heap's live block changed");
  brisk_heap_destroy(h);
  workload_after(72, NULL);
  finish();
}

/* Another thread frees a block of the main thread twice in a row: the
 * last block it freed, which it still holds in its outbox. */
static void *free_twice_body(void *arg) {
  free(arg);
  free(opaque_ptr(arg));
  return NULL;
}
static void sc_df_remote_last(void) {
  guards_alloc();
  char *a = malloc(56);
  if (!a) { child_fail("malloc failed"); finish(); }
  size_t cls = brisk_usable_size(a);
  expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)a, cls);
  pthread_t t;
  pthread_create(&t, NULL, free_twice_body, a);
  pthread_join(t, NULL);
  after_bad_calls();
  workload_after(56, NULL);
  finish();
}

/* A double free found after the page went back to its segment: the
 * reason differs ("not in use"), but it is one line and nothing breaks.
 * Of the reasons free gives a pointer into a page that is not in use, the
 * others cannot occur here: "double free" needs the page still in use
 * (checked below), "returned to the OS" a segment that was unmapped (this
 * one holds live blocks), "not allocated by brisk" a segment's header
 * slice, and "block of a destroyed heap" a destroyed heap. */
static void sc_df_retired_page(void) {
  guards_alloc();
  /* Fill many pages of the class, then empty one in the middle: it holds
   * none of the guards (the first page of the class may) and is not the
   * current page (the last one). */
  enum { N = 3000 };
  static char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(1008);
    if (!b[i]) { child_fail("malloc failed"); finish(); }
  }
  char *victim = b[N / 2];
  uintptr_t page = (uintptr_t)victim & ~(SMALL_PAGE - 1);
  for (int i = 0; i < N; i++)
    if (((uintptr_t)b[i] & ~(SMALL_PAGE - 1)) == page) { free(b[i]); b[i] = NULL; }
  if (brisk_owns(victim)) { child_fail("setup: the emptied page %p is still in use", (void *)page); finish(); }
  printf("EXPECTR brisk: error: free(%p): \tpointer into memory that is not in use (freed twice?)\n", (void *)victim);
  fflush(stdout);
  free(opaque_ptr(victim));
  after_bad_calls();
  for (int i = 0; i < N; i++) free(b[i]);
  workload_after(1008, NULL);
  finish();
}

/* Large blocks (64 KiB .. 2 MiB) freed twice: reported as memory not in
 * use (the span went back to its segment). */
static void df_large(size_t size, via_t via) {
  guards_alloc();
  char *p = malloc(size);
  char *keep = malloc(size);
  if (!p || !keep) { child_fail("malloc(%zu) failed", size); finish(); }
  fill(keep, size, 5);
  free(p);
  expect_line("brisk: error: %s(%p): pointer into memory that is not in use (freed twice?)", k_via_fn[via],
              (void *)p);
  release_via(via, p, size);
  after_bad_calls();
  if (check(keep, size, 5) != (size_t)-1) child_fail("the other large block changed");
  free(keep);
  workload_after(size, NULL);
  finish();
}
static void sc_df_large(void) { df_large(200000, VIA_FREE); }
static void sc_df_large_realloc(void) { df_large(500000, VIA_REALLOC); }

/* ---- memory returned to the OS -------------------------------------- */

/* A huge block (its own mapping, unmapped on free) freed twice; then
 * pointers into it. */
static void huge_twice(via_t via, size_t into) {
  guards_alloc();
  size_t size = (size_t)5 << 20;
  char *p = malloc(size);
  if (!p) { child_fail("malloc(5 MiB) failed"); finish(); }
  memset(p, 0x5a, size);
  free(p);
  expect_line("brisk: error: %s(%p): pointer into memory that brisk returned to the OS (freed twice?)",
              k_via_fn[via], (void *)(p + into));
  release_via(via, p + into, size);
  if (brisk_owns(p)) child_fail("brisk_owns(%p) true after the huge block was freed", (void *)p);
  after_bad_calls();
  workload_after(64, NULL);
  char *q = malloc(size);
  if (!q) child_fail("malloc(5 MiB) after the bad call failed");
  else { memset(q, 0x44, size); free(q); }
  finish();
}
static void sc_huge_twice(void) { huge_twice(VIA_FREE, 0); }
static void sc_huge_twice_brisk_free(void) { huge_twice(VIA_BRISK_FREE, 0); }
static void sc_huge_twice_brisk_free_sized(void) { huge_twice(VIA_BRISK_FREE_SIZED, 0); }
static void sc_huge_twice_realloc(void) { huge_twice(VIA_REALLOC, 0); }
static void sc_huge_interior_after_free(void) { huge_twice(VIA_FREE, 4096 + 8); }
static void sc_huge_far_interior_after_free(void) { huge_twice(VIA_FREE, (size_t)4 << 20); }

/* A thread's segment that went back to the OS (BRISK_SEGMENT_CACHE=0):
 * a thread fills a segment of its own with blocks, frees them and exits. */
enum { TB = 3000 };
static char *g_thread_blocks[TB];
static void *fill_segment_body(void *arg) {
  for (int i = 0; i < TB; i++) g_thread_blocks[i] = malloc(1000);
  for (int i = 0; i < TB; i++) free(g_thread_blocks[i]);
  return NULL;
}
static void unmapped_segment(via_t via) {
  guards_alloc();
  pthread_t t;
  pthread_create(&t, NULL, fill_segment_body, NULL);
  pthread_join(t, NULL);
  brisk_collect(true);
  /* a block in a segment that holds no guard block */
  char *p = NULL;
  for (int i = TB - 1; i >= 0 && !p; i--) {
    uintptr_t s = (uintptr_t)g_thread_blocks[i] & ~(SEG_SIZE - 1);
    int shared = 0;
    for (int g = 0; g < NGUARD; g++)
      if (((uintptr_t)g_guard[g] & ~(SEG_SIZE - 1)) == s) shared = 1;
    if (!shared && g_thread_blocks[i] && !brisk_owns(g_thread_blocks[i])) p = g_thread_blocks[i];
  }
  if (!p) { child_fail("no block of the exited thread lies in memory that went back to the OS (setup)"); finish(); }
  expect_line("brisk: error: %s(%p): pointer into memory that brisk returned to the OS (freed twice?)",
              k_via_fn[via], (void *)p);
  release_via(via, p, 1000);
  after_bad_calls();
  workload_after(1000, NULL);
  finish();
}
static void sc_unmapped_segment(void) { unmapped_segment(VIA_FREE); }
static void sc_unmapped_segment_realloc(void) { unmapped_segment(VIA_REALLOC); }
static void sc_unmapped_segment_brisk_free_sized(void) { unmapped_segment(VIA_BRISK_FREE_SIZED); }

/* ---- destroyed heaps ------------------------------------------------ */

/* Blocks of a destroyed heap freed through several functions. cached: the
 * heap's segments stay mapped in the pool (default BRISK_SEGMENT_CACHE);
 * otherwise the scenario runs with BRISK_SEGMENT_CACHE=0 and they go back
 * to the OS (at once, or at the brisk_collect(true) below). */
static void destroyed_common(int cached) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  static const size_t sizes[] = {32, 700, 20000, 100000, 32, 5000, 48, 300000};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  static const via_t vias[NS] = {VIA_BRISK_FREE, VIA_FREE, VIA_BRISK_FREE_SIZED, VIA_REALLOC,
                                 VIA_FREE_SIZED, VIA_BRISK_REALLOC, VIA_REALLOC_SAME, VIA_FREE};
  char *p[NS];
  for (int i = 0; i < NS; i++) {
    p[i] = brisk_heap_malloc(h, sizes[i]);
    if (!p[i]) { child_fail("brisk_heap_malloc(h, %zu) failed", sizes[i]); finish(); }
    fill(p[i], sizes[i], (unsigned)i);
  }
  for (int i = 0; i < 300; i++) { /* die with the heap */
    void *d = brisk_heap_malloc(h, 24);
    if (d) memset(d, 1, 24);
  }
  brisk_heap_destroy(h);
  /* With BRISK_SEGMENT_CACHE=0 the pool keeps none of them; brisk_collect
   * returns them now rather than after the purge delay. */
  if (!cached) brisk_collect(true);
  for (int i = 0; i < NS; i++) {
    if (cached)
      expect_line("brisk: error: %s(%p): block of a destroyed heap", k_via_fn[vias[i]], (void *)p[i]);
    else
      expect_line("brisk: error: %s(%p): block of a destroyed heap (its memory went back to the OS)",
                  k_via_fn[vias[i]], (void *)p[i]);
    release_via(vias[i], p[i], sizes[i]);
  }
  after_bad_calls();
  for (int i = 0; i < NS; i++)
    if (brisk_owns(p[i])) child_fail("brisk_owns(%p) true for a block of a destroyed heap", (void *)p[i]);
  workload_after(32, NULL);
  finish();
}
static void sc_destroyed_cached(void) { destroyed_common(1); }
static void sc_destroyed_unmapped(void) { destroyed_common(0); }

/* A huge block of a destroyed heap is unmapped with it, whatever the cache. */
static void sc_destroyed_huge(void) {
  guards_alloc();
  brisk_heap_t *h = brisk_heap_new();
  if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  char *p = brisk_heap_malloc(h, (size_t)3 << 20);
  if (!p) { child_fail("brisk_heap_malloc(3 MiB) failed"); finish(); }
  memset(p, 1, (size_t)3 << 20);
  brisk_heap_destroy(h);
  expect_line("brisk: error: brisk_free_sized(%p): block of a destroyed heap (its memory went back to the OS)",
              (void *)p);
  brisk_free_sized(opaque_ptr(p), (size_t)3 << 20);
  expect_line("brisk: error: realloc(%p): block of a destroyed heap (its memory went back to the OS)", (void *)p);
  release_via(VIA_REALLOC, p, 100);
  after_bad_calls();
  workload_after(64, NULL);
  finish();
}

/* ---- writes after free that break a free-list link ------------------ */

/* The per-process link key, from two blocks freed one after the other on
 * the page's local list: the second's link is the first, encoded. */
static uintptr_t derive_key(size_t size) {
  char *x = malloc(size), *y = malloc(size);
  if (!x || !y) { child_fail("malloc failed"); return 0; }
  free(x);
  free(y);
  return *(volatile uintptr_t *)y ^ (uintptr_t)x;
}

enum waf_kind { WAF_MALLOC, WAF_HEAP, WAF_MIDDLE, WAF_OVERFLOW, WAF_TO_OTHER_PAGE };

static void waf_common(enum waf_kind kind, size_t size) {
  guards_alloc();
  brisk_heap_t *h = NULL;
  if (kind == WAF_HEAP) {
    h = brisk_heap_new();
    if (!h) { child_fail("brisk_heap_new failed"); finish(); }
  }
#define WAF_ALLOC(n) (h ? brisk_heap_malloc(h, (n)) : malloc(n))
  uintptr_t key = derive_key(size);
  /* check the key on another pair */
  {
    char *x = WAF_ALLOC(size), *y = WAF_ALLOC(size);
    free(x);
    free(y);
    if ((*(volatile uintptr_t *)y ^ key) != (uintptr_t)x) {
      child_fail("setup: could not derive the link key");
      finish();
    }
    void *a1 = WAF_ALLOC(size), *a2 = WAF_ALLOC(size);
    (void)a1;
    (void)a2;
  }
  size_t cls = 0;
  uintptr_t garbage = 0x4141414141414141ull;
  char *victim = NULL;
  char *other_page_block = NULL;
  /* pre-allocated blocks of the class, live, not in the victim's page */
  if (kind == WAF_TO_OTHER_PAGE) {
    other_page_block = g_guard[7]; /* 64 bytes; the victim must be in another page */
    uintptr_t gp = (uintptr_t)other_page_block & ~(SMALL_PAGE - 1);
    for (int i = 0; i < 3000; i++) {
      char *f = WAF_ALLOC(size);
      if (!f) break;
      if (((uintptr_t)f & ~(SMALL_PAGE - 1)) != gp) break;
    }
  }
  if (kind == WAF_OVERFLOW) {
    /* x's neighbour x+cls is still free (carved, on the free list): an
     * overflow from x breaks its link. */
    char *x = WAF_ALLOC(size);
    cls = brisk_usable_size(x);
    char *nb = x + cls;
    uintptr_t link = *(volatile uintptr_t *)nb ^ key;
    if (((link ^ (uintptr_t)nb) >> 22) != 0) {
      child_fail("setup: the neighbour %p of %p is not a free block", (void *)nb, (void *)x);
      finish();
    }
    victim = nb;
    memset(x, 0x77, cls);
    *(volatile uintptr_t *)(x + cls) = garbage; /* the overflow */
  } else {
    char *b = WAF_ALLOC(size), *a = WAF_ALLOC(size), *c = WAF_ALLOC(size);
    if (!a || !b || !c) { child_fail("malloc failed"); finish(); }
    cls = brisk_usable_size(a);
    free(c);
    free(b);
    free(a); /* local list: a -> b -> c -> ... */
    victim = kind == WAF_MIDDLE ? b : a;
    if (kind == WAF_TO_OTHER_PAGE) {
      if (((uintptr_t)other_page_block & ~(SMALL_PAGE - 1)) == ((uintptr_t)a & ~(SMALL_PAGE - 1))) {
        child_fail("setup: the guard block shares the victim's page");
        finish();
      }
      garbage = (uintptr_t)other_page_block ^ key; /* decodes to a live block of another page */
    }
    *(volatile uintptr_t *)victim = garbage; /* the write after free */
  }
  uintptr_t decoded = garbage ^ key;
  uintptr_t page = (uintptr_t)victim & ~(SMALL_PAGE - 1);
  expect_line("brisk: error: malloc(): the free list of the page at %p (size class %zu) holds %p, not one of its "
              "blocks: a write after free? The page is taken out of use",
              (void *)page, cls, (void *)decoded);
  /* allocate the class until well past the victim */
  enum { N = 4000 };
  static char *got[N];
  int victim_at = -1;
  for (int i = 0; i < N; i++) {
    got[i] = WAF_ALLOC(size);
    if (!got[i]) { child_fail("malloc(%zu) returned NULL after the corruption", size); break; }
    if ((uintptr_t)got[i] == garbage || (uintptr_t)got[i] == decoded)
      child_fail("malloc returned the corrupted link %p", (void *)got[i]);
    if (got[i] == victim) victim_at = i;
    if (victim_at >= 0 && i > victim_at && ((uintptr_t)got[i] & ~(SMALL_PAGE - 1)) == page)
      child_fail("malloc returned %p from the broken page after the report", (void *)got[i]);
    memset(got[i], 0x33, size);
  }
  after_bad_calls();
  if (victim_at < 0) child_fail("the block holding the broken link was never handed out again");
  qsort(got, N, sizeof got[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    if (got[i] && got[i] == got[i - 1]) child_fail("malloc returned %p twice", (void *)got[i]);
  if (other_page_block && check(other_page_block, 64, 100u + 7u) != (size_t)-1)
    child_fail("the live block the corrupted link pointed to was changed");
  guards_check("after the corruption");
  for (int i = 0; i < N; i++) free(got[i]);
  if (h) brisk_heap_destroy(h);
  workload_after(size, (void *)decoded);
  finish();
#undef WAF_ALLOC
}
static void sc_waf_local(void) { waf_common(WAF_MALLOC, 48); }
static void sc_waf_local_1k(void) { waf_common(WAF_MALLOC, 1024); }
static void sc_waf_middle(void) { waf_common(WAF_MIDDLE, 80); }
static void sc_waf_heap(void) { waf_common(WAF_HEAP, 48); }
static void sc_waf_overflow(void) { waf_common(WAF_OVERFLOW, 112); }
static void sc_waf_to_other_page(void) { waf_common(WAF_TO_OTHER_PAGE, 64); }

/* A write after free that rewrites a link to a live block of the same
 * page: the link itself looks valid, so malloc hands out the freed block,
 * then the live one again (a known limit: its first word is cleared, and
 * the child does not fail on it), and reports the live block's data as a
 * broken link when it reads it as the next one. */
static void sc_waf_valid_link(void) {
  guards_alloc();
  uintptr_t key = derive_key(48);
  char *live = malloc(48), *a = malloc(48);
  if (!live || !a) { child_fail("malloc failed"); finish(); }
  size_t cls = brisk_usable_size(a);
  uintptr_t page = (uintptr_t)a & ~(SMALL_PAGE - 1);
  if (((uintptr_t)live & ~(SMALL_PAGE - 1)) != page) { child_fail("setup: the blocks are in different pages"); finish(); }
  fill(live, 48, 9);
  uintptr_t decoded = *(volatile uintptr_t *)live ^ key; /* the live block's data, read as a link */
  free(a);
  expect_line("brisk: error: malloc(): the free list of the page at %p (size class %zu) holds %p, not one of its "
              "blocks: a write after free? The page is taken out of use",
              (void *)page, cls, (void *)decoded);
  *(volatile uintptr_t *)a = (uintptr_t)live ^ key; /* the write after free */
  enum { N = 3000 };
  static char *got[N];
  int live_at = -1;
  for (int i = 0; i < N; i++) {
    got[i] = malloc(48);
    if (!got[i]) { child_fail("malloc(48) returned NULL after the corruption"); break; }
    if ((uintptr_t)got[i] == decoded) child_fail("malloc returned the corrupted link %p", (void *)got[i]);
    if (got[i] == live) live_at = i;
    else if (live_at >= 0 && ((uintptr_t)got[i] & ~(SMALL_PAGE - 1)) == page)
      child_fail("malloc returned %p from the broken page after the report", (void *)got[i]);
  }
  after_bad_calls();
  if (live_at >= 0) printf("INFO the live block the link pointed to was handed out again\n");
  qsort(got, N, sizeof got[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    if (got[i] && got[i] == got[i - 1]) child_fail("malloc returned %p twice", (void *)got[i]);
  guards_check("after the corruption");
  for (int i = 0; i < N; i++) free(got[i]); /* live among them, if it came back */
  if (live_at < 0) free(live);
  workload_after(48, (void *)decoded);
  finish();
}

/* ---- interior pointers ---------------------------------------------- */

static void interior(size_t size, size_t offset, via_t via) {
  guards_alloc();
  char *p = malloc(size);
  if (!p) { child_fail("malloc(%zu) failed", size); finish(); }
  size_t cls = brisk_usable_size(p);
  fill(p, cls, 77);
  expect_line("brisk: error: %s(%p): interior pointer, %zu bytes into the block at %p (size class %zu)",
              k_via_fn[via], (void *)(p + offset), offset, (void *)p, cls);
  release_via(via, p + offset, size);
  after_bad_calls();
  size_t off = check(p, cls, 77);
  if (off != (size_t)-1) child_fail("the block %p changed at offset %zu by the rejected call", (void *)p, off);
  if (brisk_usable_size(p) != cls) child_fail("usable size of %p changed after the rejected call", (void *)p);
  workload_after(size, NULL);
  off = check(p, cls, 77);
  if (off != (size_t)-1) child_fail("the live block %p was handed out again (changed at offset %zu)", (void *)p, off);
  free(p);
  finish();
}
static void sc_interior_free_sized(void) { interior(64, 8, VIA_BRISK_FREE_SIZED); }
static void sc_interior_free_sized_c23(void) { interior(300, 100, VIA_FREE_SIZED); }
static void sc_interior_medium_realloc(void) { interior(30000, 4096, VIA_REALLOC); }
static void sc_interior_medium_brisk_realloc(void) { interior(12000, 16, VIA_BRISK_REALLOC); }
static void sc_interior_large_free_sized(void) { interior(400000, 65536, VIA_BRISK_FREE_SIZED); }
static void sc_interior_huge_realloc(void) { interior((size_t)3 << 20, 100000, VIA_REALLOC); }

/* ---- pointers brisk never owned ------------------------------------- */

static char g_global[256] __attribute__((aligned(64)));

static void not_ours(void *p, via_t via) {
  guards_alloc();
  expect_line("brisk: error: %s(%p): pointer was not allocated by brisk", k_via_fn[via], p);
  release_via(via, p, 64);
  after_bad_calls();
  workload_after(64, NULL);
  finish();
}
static void sc_not_ours_stack(void) {
  char buf[128] __attribute__((aligned(16)));
  memset(buf, 0, sizeof buf);
  not_ours(buf + 16, VIA_FREE);
}
static void sc_not_ours_global_free_sized(void) { not_ours(g_global + 64, VIA_BRISK_FREE_SIZED); }
static void sc_not_ours_global_realloc(void) { not_ours(g_global + 32, VIA_REALLOC); }
/* the header slice of a segment is brisk's memory, but no block */
static void sc_not_ours_segment_header(void) {
  char *x = malloc(32);
  not_ours((void *)(((uintptr_t)x & ~(SEG_SIZE - 1)) + 128), VIA_FREE);
}

/* ---- double frees across threads ------------------------------------ */

static void *free_list_body(void *arg) {
  char **v = arg;
  for (int i = 0; v[i]; i++) free(opaque_ptr(v[i]));
  return NULL;
}
/* The owner frees a block a of `size`, then another thread frees a and a
 * second block; the owner takes those frees back (brisk_collect). The
 * double free must be reported then. Returns a; *cls is its class size. */
static char *free_then_free_remotely(size_t size, size_t *cls) {
  char *a = malloc(size), *b = malloc(size);
  if (!a || !b) { child_fail("malloc failed"); finish(); }
  *cls = brisk_usable_size(a);
  free(a);
  expect_line("brisk: error: free(%p): double free (size class %zu), the second from another thread", (void *)a,
              *cls);
  char *v[] = {a, b, NULL};
  pthread_t t;
  pthread_create(&t, NULL, free_list_body, v);
  pthread_join(t, NULL);
  brisk_collect(true);
  after_bad_calls();
  return a;
}

/* The owner frees a block, then another thread frees a and b. The second
 * free of a is found when the owner takes the other thread's frees back
 * (brisk_collect here; otherwise a later malloc). That free wrote its
 * chain link into a, which stays on the page's list: when malloc reaches
 * it, the link is reported as broken and the page is taken out of use. */
static void sc_df_local_then_remote(void) {
  guards_alloc();
  uintptr_t key = derive_key(56);
  size_t cls;
  char *a = free_then_free_remotely(56, &cls);
  uintptr_t page = (uintptr_t)a & ~(SMALL_PAGE - 1);
  uintptr_t decoded = *(volatile uintptr_t *)a ^ key;
  expect_line("brisk: error: malloc(): the free list of the page at %p (size class %zu) holds %p, not one of its "
              "blocks: a write after free? The page is taken out of use",
              (void *)page, cls, (void *)decoded);
  workload_after(56, (void *)decoded);
  finish();
}
/* Another thread frees a and b, then the owner frees a again before it
 * took them back: they wait on their page's remote list, which the owner's
 * check of a block that looks free reads too. */
static void sc_df_remote_then_local(void) {
  guards_alloc();
  char *a = malloc(56), *b = malloc(56);
  if (!a || !b) { child_fail("malloc failed"); finish(); }
  char *v[] = {a, b, NULL};
  pthread_t t;
  pthread_create(&t, NULL, free_list_body, v);
  pthread_join(t, NULL);
  expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)a, brisk_usable_size(b));
  free(opaque_ptr(a));
  brisk_collect(true);
  after_bad_calls();
  workload_after(56, NULL);
  finish();
}

/* Blocks above 1 KiB wait in their heap's class cache after a free (up to
 * 8 per class), the rest go back to their pages: a second free is found
 * in either place, and no block is handed out twice afterwards. */
static void sc_df_class_cache(void) {
  guards_alloc();
  enum { N = 20, SIZE = 3000 };
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(SIZE);
    if (!b[i]) { child_fail("malloc(%d) failed", SIZE); finish(); }
    fill(b[i], SIZE, (unsigned)i);
  }
  size_t cls = brisk_usable_size(b[0]);
  for (int i = 0; i < N; i++) free(b[i]);
  /* b[3] was among the first freed (cached), b[15] among the last (page) */
  expect_line("brisk: error: free(%p): double free (size class %zu)", (void *)b[3], cls);
  free(opaque_ptr(b[3]));
  expect_line("brisk: error: brisk_free(%p): double free (size class %zu)", (void *)b[15], cls);
  brisk_free(opaque_ptr(b[15]));
  after_bad_calls();
  workload_after(SIZE, NULL);
  finish();
}
/* The owner frees a medium block (into its class cache), then another
 * thread frees it again: reported when the owner takes the remote frees
 * back, and the block is handed out once only. */
static void sc_df_cached_then_remote(void) {
  guards_alloc();
  size_t cls;
  free_then_free_remotely(4000, &cls);
  workload_after(4000, NULL);
  finish();
}

/* ---- known limits: printed as information, never failed -------------- */

/* A thread that does not own the blocks frees a, b, a. a and b wait on
 * their page's remote list; the second free of a, which looked free, goes
 * to the inbox marked (its chain link written into a). The owner's drain
 * (brisk_collect here; otherwise a later malloc) finds a on the remote
 * list and reports it; then the remote list goes back to the page, a once. */
static void sc_df_remote_not_last(void) {
  guards_alloc();
  char *a = malloc(56), *b = malloc(56);
  if (!a || !b) { child_fail("malloc failed"); finish(); }
  size_t cls = brisk_usable_size(a);
  expect_line("brisk: error: free(%p): double free (size class %zu), the second from another thread", (void *)a,
              cls);
  char *v[] = {a, b, a, NULL};
  pthread_t t;
  pthread_create(&t, NULL, free_list_body, v);
  pthread_join(t, NULL);
  brisk_collect(true);
  after_bad_calls();
  workload_after(56, NULL);
  finish();
}

/* A large block freed twice after its span went to a new block of the same
 * size: the stale pointer names the live new block, which the second free
 * releases (a known limit: the memory was reused). Nothing else may be
 * harmed, and the allocator must stay whole. */
static void sc_info_df_after_reuse(void) {
  guards_alloc();
  char *a = malloc(200000);
  memset(a, 1, 200000);
  free(a);
  char *b = malloc(200000); /* most likely a's span again */
  memset(b, 2, 200000);
  free(a);                  /* b's memory, if it was a's span */
  if (b != a) free(b);
  after_bad_calls();
  workload_after(200000, NULL);
  finish();
}

/* ---- no error at all ------------------------------------------------- */

static void sc_clean(void) {
  guards_alloc();
  /* frees of every kind, done right, in the orders the scenarios use */
  char *a = malloc(32), *b = malloc(32);
  free(a);
  free(b);
  a = malloc(32);
  free(a);
  char *v[60];
  for (int i = 0; i < 60; i++) v[i] = malloc(64);
  for (int i = 0; i < 60; i++) brisk_free_sized(v[i], 64);
  char *r = realloc(NULL, 100);
  r = realloc(r, 100000);
  r = realloc(r, (size_t)3 << 20);
  r = realloc(r, 10);
  free_sized(r, 10);
  brisk_heap_t *h = brisk_heap_new();
  char *x = brisk_heap_malloc(h, 100);
  brisk_free(x);
  brisk_heap_destroy(h);
  after_bad_calls();
  workload_after(64, NULL);
  finish();
}

/* ================================================================== */

static const scenario_t k_scenarios[] = {
    {"clean", NULL, 0, 0, sc_clean},
    {"df_aba", NULL, 0, 0, sc_df_aba},
    {"df_aba_brisk_free", NULL, 0, 0, sc_df_aba_brisk_free},
    {"df_aba_free_sized", NULL, 0, 0, sc_df_aba_free_sized},
    {"df_aba_brisk_free_sized", NULL, 0, 0, sc_df_aba_brisk_free_sized},
    {"df_aba_realloc", NULL, 0, 0, sc_df_aba_realloc},
    {"df_aba_realloc_same", NULL, 0, 0, sc_df_aba_realloc_same},
    {"df_aba_brisk_realloc", NULL, 0, 0, sc_df_aba_brisk_realloc},
    {"df_aba_medium", NULL, 0, 0, sc_df_aba_medium},
    {"df_aba_medium_realloc", NULL, 0, 0, sc_df_aba_medium_realloc},
    {"df_aba_8k", NULL, 0, 0, sc_df_aba_8k},
    {"df_aba_64k", NULL, 0, 0, sc_df_aba_64k},
    {"df_after_50", NULL, 0, 0, sc_df_after_50},
    {"df_classes", NULL, 0, 0, sc_df_classes},
    {"df_reused", NULL, 0, 0, sc_df_reused},
    {"df_reused_realloc", NULL, 0, 0, sc_df_reused_realloc},
    {"df_reused_free_sized", NULL, 0, 0, sc_df_reused_free_sized},
    {"df_heap", NULL, 0, 0, sc_df_heap},
    {"df_remote_last", NULL, 0, 0, sc_df_remote_last},
    {"df_local_then_remote", NULL, 0, 0, sc_df_local_then_remote},
    {"df_remote_then_local", NULL, 0, 0, sc_df_remote_then_local},
    {"df_class_cache", NULL, 0, 0, sc_df_class_cache},
    {"df_cached_then_remote", NULL, 0, 0, sc_df_cached_then_remote},
    {"df_retired_page", NULL, 0, 0, sc_df_retired_page},
    {"df_large", NULL, 0, 0, sc_df_large},
    {"df_large_realloc", NULL, 0, 0, sc_df_large_realloc},
    {"huge_twice", NULL, 0, 0, sc_huge_twice},
    {"huge_twice_brisk_free", NULL, 0, 0, sc_huge_twice_brisk_free},
    {"huge_twice_brisk_free_sized", NULL, 0, 0, sc_huge_twice_brisk_free_sized},
    {"huge_twice_realloc", NULL, 0, 0, sc_huge_twice_realloc},
    {"huge_interior_after_free", NULL, 0, 0, sc_huge_interior_after_free},
    {"huge_far_interior_after_free", NULL, 0, 0, sc_huge_far_interior_after_free},
    {"unmapped_segment", "BRISK_SEGMENT_CACHE=0", 0, 0, sc_unmapped_segment},
    {"unmapped_segment_realloc", "BRISK_SEGMENT_CACHE=0", 0, 0, sc_unmapped_segment_realloc},
    {"unmapped_segment_brisk_free_sized", "BRISK_SEGMENT_CACHE=0", 0, 0, sc_unmapped_segment_brisk_free_sized},
    {"destroyed_cached", NULL, 0, 0, sc_destroyed_cached},
    {"destroyed_unmapped", "BRISK_SEGMENT_CACHE=0", 0, 0, sc_destroyed_unmapped},
    {"destroyed_huge", NULL, 0, 0, sc_destroyed_huge},
    {"waf_local", NULL, 0, 0, sc_waf_local},
    {"waf_local_1k", NULL, 0, 0, sc_waf_local_1k},
    {"waf_middle", NULL, 0, 0, sc_waf_middle},
    {"waf_heap", NULL, 0, 0, sc_waf_heap},
    {"waf_overflow", NULL, 0, 0, sc_waf_overflow},
    {"waf_to_other_page", NULL, 0, 0, sc_waf_to_other_page},
    {"waf_valid_link", NULL, 0, 0, sc_waf_valid_link},
    {"interior_free_sized", NULL, 0, 0, sc_interior_free_sized},
    {"interior_free_sized_c23", NULL, 0, 0, sc_interior_free_sized_c23},
    {"interior_medium_realloc", NULL, 0, 0, sc_interior_medium_realloc},
    {"interior_medium_brisk_realloc", NULL, 0, 0, sc_interior_medium_brisk_realloc},
    {"interior_large_free_sized", NULL, 0, 0, sc_interior_large_free_sized},
    {"interior_huge_realloc", NULL, 0, 0, sc_interior_huge_realloc},
    {"not_ours_stack", NULL, 0, 0, sc_not_ours_stack},
    {"not_ours_global_free_sized", NULL, 0, 0, sc_not_ours_global_free_sized},
    {"not_ours_global_realloc", NULL, 0, 0, sc_not_ours_global_realloc},
    {"not_ours_segment_header", NULL, 0, 0, sc_not_ours_segment_header},
    {"df_remote_not_last", NULL, 0, 0, sc_df_remote_not_last},
    {"info_df_after_reuse", NULL, 0, 1, sc_info_df_after_reuse},
};
enum { NSCEN = sizeof k_scenarios / sizeof k_scenarios[0] };

/* Every scenario again with BRISK_ON_ERROR=abort; each line is announced
 * right before its bad call. */
static const suite_t k_suite = {.name = "safety", .scenarios = k_scenarios, .count = NSCEN, .abort_pass = 1,
                                .start_line = 1};

int main(int argc, char **argv) { return scenario_main(&k_suite, argc, argv); }
