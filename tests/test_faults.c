/* Faults from the system below brisk: OS memory requests fail.
 *
 * ctest-labels: sanitize
 *
 * brisk_fault_injection(after, rate) makes brisk's requests for memory
 * from the OS fail after `after` more, or at random with `rate` per
 * million. Under it, this test checks that
 *   - every allocation function (malloc, calloc, realloc growing a block,
 *     aligned_alloc, posix_memalign, the brisk_* forms, brisk_heap_new and
 *     brisk_heap_malloc/calloc/realloc/aligned_alloc, brisk_arena_new and
 *     brisk_arena_alloc overflowing its buffer) either succeeds with a
 *     correct block or returns NULL with errno == ENOMEM (posix_memalign:
 *     returns ENOMEM and leaves *out alone); a failed realloc leaves the old
 *     block intact and valid; with every request failing, each function's
 *     huge request does fail (the injection reaches it);
 *   - no earlier allocation is lost or changed: a few hundred blocks of many
 *     sizes (malloc, calloc, aligned, a first-class heap, an arena) are
 *     filled before and checked byte by byte after every phase;
 *   - no lock is left held: after the faults stop, several threads allocate
 *     at once (and the whole test runs under a watchdog: a phase that does
 *     not finish in time is reported as a deadlock);
 *   - the process keeps working when memory comes back: small, large and
 *     huge allocations succeed;
 *   - threads allocate, free each other's blocks and use heaps and arenas
 *     while faults switch on and off;
 *   - fork() while other threads allocate, with faults on and off: each
 *     child checks the parent's blocks, allocates (and, once it switches the
 *     faults off, must succeed), runs a thread and exits 0;
 *   - a child with RLIMIT_AS set to its current size + 64 MiB allocates
 *     until NULL (errno ENOMEM), finds its earlier blocks intact, frees
 *     everything and allocates again, and exits 0.
 * Run one phase by hand: build/tests/test_faults <phase> (see main()).
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static int g_failures;
static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_fail_lock);
  g_failures++;
  if (g_failures <= 40) {
    /* write(), not stdio: stdio may need memory brisk cannot give now */
    char line[700];
    int n = snprintf(line, sizeof line, "FAIL: %s\n", buf);
    if (n > 0) (void)!write(1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
  pthread_mutex_unlock(&g_fail_lock);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) (void)!write(1, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void faults_off(void) { brisk_fault_injection(-1, 0); }

/* ---- watchdog: a phase that hangs is a deadlock --------------------- */

static const char *volatile g_phase = "start";
static void on_alarm(int sig) {
  (void)sig;
  const char *p = g_phase;
  (void)!write(2, "test_faults: FAIL: phase '", 26);
  (void)!write(2, p, strlen(p));
  (void)!write(2, "' did not finish in time (deadlock: a lock left held?)\n", 55);
  _exit(3);
}
static double now_s(void);
static void phase(const char *name, unsigned budget_s) {
  static double last;
  double t = now_s();
  if (last != 0) say("  (%.2f s)\n", t - last);
  last = t;
  g_phase = name;
  alarm(budget_s);
  say("[faults] %s\n", name);
}

/* ---- content patterns ------------------------------------------------ */

static inline unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)((i * 167u) ^ (i >> 8) ^ (seed * 31u + 7u));
}
static void fill(void *p, size_t n, unsigned seed) {
  unsigned char *c = p;
  for (size_t i = 0; i < n; i++) c[i] = pat(i, seed);
}
static size_t check(const void *p, size_t n, unsigned seed) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i] != pat(i, seed)) return i;
  return (size_t)-1;
}
static int all_zero(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if (c[i]) return 0;
  return 1;
}

static uint64_t rng_next(uint64_t *s) {
  uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- blocks allocated before any fault --------------------------------- */

enum { NBEFORE = 360 };
typedef struct {
  void *p;
  size_t size;
  unsigned seed;
} blk_t;
static blk_t g_before[NBEFORE];
static brisk_heap_t *g_heap;    /* made before the faults, lives throughout */
static brisk_arena_t *g_arena;  /* over g_heap: the before-blocks; never reset */
static brisk_arena_t *g_farena; /* over g_heap: allocated under faults, reset after each round */
static blk_t g_arena_before[40];

static const size_t k_before_sizes[] = {8,    16,   24,    40,    64,     100,     128,    200,    256,
                                        500,  1000, 1024,  2000,  4096,   8192,    9000,   20000,  65536,
                                        70000, 24,  48,    32,    200000, 1u << 20, 3u << 20};
enum { NBS = sizeof k_before_sizes / sizeof k_before_sizes[0] };

static void before_alloc(void) {
  g_heap = brisk_heap_new();
  if (!g_heap) { fail("brisk_heap_new before the faults failed"); exit(1); }
  g_arena = brisk_arena_new(g_heap, 8192);
  g_farena = brisk_arena_new(g_heap, 8192);
  if (!g_arena || !g_farena) { fail("brisk_arena_new before the faults failed"); exit(1); }
  for (int i = 0; i < NBEFORE; i++) {
    size_t s = k_before_sizes[i % NBS];
    if (s >= MiB && i >= 2 * NBS) s = 700; /* big ones only in the first rounds */
    void *p;
    switch (i % 6) {
      case 0: p = calloc(1, s); break;
      case 1: p = aligned_alloc(256, s); break;
      case 2: p = brisk_heap_malloc(g_heap, s); break;
      case 3: p = brisk_malloc(s); break;
      default: p = malloc(s); break;
    }
    if (!p) { fail("allocation of %zu bytes before the faults failed", s); exit(1); }
    g_before[i] = (blk_t){p, s, (unsigned)i};
    fill(p, s, (unsigned)i);
  }
  for (int i = 0; i < 40; i++) {
    size_t s = 16 + (size_t)i * 40;
    void *p = brisk_arena_alloc(g_arena, s, (size_t)16 << (i % 4));
    if (!p) { fail("brisk_arena_alloc before the faults failed"); exit(1); }
    g_arena_before[i] = (blk_t){p, s, 1000u + (unsigned)i};
    fill(p, s, 1000u + (unsigned)i);
  }
}

static void before_check(const char *when) {
  for (int i = 0; i < NBEFORE; i++) {
    size_t off = check(g_before[i].p, g_before[i].size, g_before[i].seed);
    if (off != (size_t)-1)
      fail("%s: block %d (%zu bytes at %p) allocated before the faults changed at offset %zu", when, i,
           g_before[i].size, g_before[i].p, off);
    if (brisk_usable_size(g_before[i].p) < g_before[i].size)
      fail("%s: usable size of block %d shrank", when, i);
  }
  for (int i = 0; i < 40; i++) {
    size_t off = check(g_arena_before[i].p, g_arena_before[i].size, g_arena_before[i].seed);
    if (off != (size_t)-1) fail("%s: arena block %d changed at offset %zu", when, i, off);
  }
}

/* ---- one attempt of one allocation function ------------------------------ */

typedef enum {
  F_MALLOC, F_CALLOC, F_REALLOC, F_ALIGNED, F_POSIX_MEMALIGN, F_BRISK_MALLOC, F_BRISK_CALLOC, F_BRISK_REALLOC,
  F_BRISK_ALIGNED, F_HEAP_MALLOC, F_HEAP_CALLOC, F_HEAP_REALLOC, F_HEAP_ALIGNED, F_HEAP_NEW, F_ARENA_ALLOC,
  F_ARENA_NEW, NFN
} fn_t;
static const char *const k_fn_names[NFN] = {
    "malloc", "calloc", "realloc (grow)", "aligned_alloc", "posix_memalign", "brisk_malloc", "brisk_calloc",
    "brisk_realloc (grow)", "brisk_aligned_alloc", "brisk_heap_malloc", "brisk_heap_calloc",
    "brisk_heap_realloc (grow)", "brisk_heap_aligned_alloc", "brisk_heap_new + brisk_heap_malloc",
    "brisk_arena_alloc (overflow)", "brisk_arena_new + brisk_arena_alloc"};

/* Results kept until the faults are off: checked, then freed. */
typedef struct {
  void *p;
  size_t size;
  unsigned seed;
  int in_arena; /* not freed one by one */
} rec_t;

typedef struct {
  rec_t *recs;
  int n, cap;
  long ok[NFN], null[NFN];
  unsigned seed;
  brisk_heap_t *heap;   /* the heap this thread may allocate from */
  brisk_arena_t *arena; /* over heap */
} ctx_t;

static void ctx_keep(ctx_t *c, void *p, size_t size, unsigned seed, int in_arena) {
  if (c->n == c->cap) {
    /* grown with faults off only (the caller keeps cap large) */
    fail("internal: result table full");
    return;
  }
  c->recs[c->n++] = (rec_t){p, size, seed, in_arena};
}

static void ctx_init(ctx_t *c, int cap, brisk_heap_t *heap, brisk_arena_t *arena) {
  memset(c, 0, sizeof *c);
  c->recs = calloc((size_t)cap, sizeof *c->recs);
  if (!c->recs) { fail("calloc of the result table failed"); exit(1); }
  c->cap = cap;
  c->heap = heap;
  c->arena = arena;
  c->seed = 5000;
}

/* Check every kept result and free it (faults must be off). */
static void ctx_release(ctx_t *c, const char *when) {
  for (int i = 0; i < c->n; i++) {
    rec_t *r = &c->recs[i];
    size_t off = check(r->p, r->size, r->seed);
    if (off != (size_t)-1) fail("%s: block of %zu bytes at %p changed at offset %zu", when, r->size, r->p, off);
    if (!r->in_arena) free(r->p);
  }
  c->n = 0;
}

static void expect_enomem(ctx_t *c, fn_t f, size_t size, int err) {
  c->null[f]++;
  if (err != ENOMEM) fail("%s(%zu) returned NULL with errno %d (%s), expected ENOMEM", k_fn_names[f], size, err,
                          strerror(err));
}

/* A block returned by f: aligned, large enough, owned, then filled. */
static void accept(ctx_t *c, fn_t f, void *p, size_t size, size_t align, int in_arena) {
  c->ok[f]++;
  if (((uintptr_t)p & (align - 1)) != 0) fail("%s(%zu) = %p is not aligned to %zu", k_fn_names[f], size, p, align);
  if (!in_arena) {
    if (brisk_usable_size(p) < size)
      fail("%s(%zu) = %p has usable size %zu", k_fn_names[f], size, p, brisk_usable_size(p));
  }
  if (!brisk_owns(p) || !brisk_owns((char *)p + (size ? size - 1 : 0)))
    fail("%s(%zu) = %p: brisk_owns false", k_fn_names[f], size, p);
  unsigned seed = c->seed++;
  fill(p, size, seed);
  ctx_keep(c, p, size, seed, in_arena);
}

static const size_t k_aligns[] = {64, 4096, 1u << 20, 4u << 20, 128};

static void attempt(ctx_t *c, fn_t f, size_t size, unsigned k) {
  void *p = NULL;
  size_t align = 16;
  errno = 0;
  switch (f) {
    case F_MALLOC: p = malloc(size); break;
    case F_BRISK_MALLOC: p = brisk_malloc(size); break;
    case F_CALLOC:
    case F_BRISK_CALLOC:
      p = f == F_CALLOC ? calloc(size / 8 + 1, 8) : brisk_calloc(1, size / 8 * 8 + 8);
      size = size / 8 * 8 + 8;
      if (p && !all_zero(p, size)) fail("%s(%zu) = %p is not zeroed", k_fn_names[f], size, p);
      break;
    case F_HEAP_CALLOC:
      p = brisk_heap_calloc(c->heap, 1, size);
      if (p && !all_zero(p, size)) fail("%s(%zu) = %p is not zeroed", k_fn_names[f], size, p);
      break;
    case F_REALLOC:
    case F_BRISK_REALLOC:
    case F_HEAP_REALLOC: {
      /* a block with content, then grown */
      size_t s0 = 100 + k % 200;
      void *old = f == F_HEAP_REALLOC ? brisk_heap_malloc(c->heap, s0) : malloc(s0);
      if (!old) {
        expect_enomem(c, f, s0, errno);
        return;
      }
      unsigned seed = c->seed++;
      fill(old, s0, seed);
      errno = 0;
      p = f == F_REALLOC ? realloc(old, size) : f == F_BRISK_REALLOC ? brisk_realloc(old, size)
                                                                      : brisk_heap_realloc(c->heap, old, size);
      if (!p) {
        expect_enomem(c, f, size, errno);
        size_t off = check(old, s0, seed);
        if (off != (size_t)-1) fail("%s(%zu) failed and changed the old block at offset %zu", k_fn_names[f], size, off);
        if (brisk_usable_size(old) < s0) fail("%s(%zu) failed and the old block is no longer valid", k_fn_names[f], size);
        ctx_keep(c, old, s0, seed, 0);
        return;
      }
      size_t off = check(p, s0 < size ? s0 : size, seed);
      if (off != (size_t)-1) fail("%s(%zu) lost the content at offset %zu", k_fn_names[f], size, off);
      break;
    }
    case F_ALIGNED: align = k_aligns[k % 5]; p = aligned_alloc(align, size); break;
    case F_BRISK_ALIGNED: align = k_aligns[k % 5]; p = brisk_aligned_alloc(align, size); break;
    case F_HEAP_ALIGNED: align = k_aligns[k % 5]; p = brisk_heap_aligned_alloc(c->heap, align, size); break;
    case F_POSIX_MEMALIGN: {
      align = k_aligns[k % 5];
      void *sentinel = (void *)(uintptr_t)0x5157;
      void *out = sentinel;
      int saved = errno = 1234;
      int r = posix_memalign(&out, align, size);
      if (r == 0) {
        p = out;
      } else {
        c->null[f]++;
        if (r != ENOMEM) fail("posix_memalign(%zu, %zu) returned %d, expected 0 or ENOMEM", align, size, r);
        if (out != sentinel) fail("failed posix_memalign changed *out");
        if (errno != saved) fail("failed posix_memalign changed errno to %d", errno);
        return;
      }
      break;
    }
    case F_HEAP_MALLOC: p = brisk_heap_malloc(c->heap, size); break;
    case F_HEAP_NEW: {
      brisk_heap_t *h = brisk_heap_new();
      if (!h) {
        expect_enomem(c, f, 0, errno);
        return;
      }
      errno = 0;
      void *q = brisk_heap_malloc(h, size);
      if (!q) expect_enomem(c, f, size, errno);
      else {
        c->ok[f]++;
        memset(q, 0x3c, size);
        if (brisk_usable_size(q) < size) fail("brisk_heap_malloc(new heap, %zu): usable size too small", size);
      }
      void *q2 = brisk_heap_malloc(h, 48);
      if (q2) memset(q2, 1, 48);
      if (k & 1) brisk_free(q);
      brisk_heap_destroy(h); /* under the faults too */
      return;
    }
    case F_ARENA_ALLOC:
      align = (size_t)16 << (k % 3);
      p = brisk_arena_alloc(c->arena, size, align);
      if (!p) {
        expect_enomem(c, f, size, errno);
        /* the arena still works within its buffer or fails cleanly */
        errno = 0;
        void *s = brisk_arena_alloc(c->arena, 16, 16);
        if (!s && errno != ENOMEM) fail("brisk_arena_alloc(16) after a failure: NULL with errno %d", errno);
        if (s) accept(c, f, s, 16, 16, 1);
        return;
      }
      accept(c, f, p, size, align, 1);
      return;
    case F_ARENA_NEW: {
      brisk_arena_t *a = brisk_arena_new(NULL, 1000 + size / 4);
      if (!a) {
        expect_enomem(c, f, 0, errno);
        return;
      }
      errno = 0;
      void *q = brisk_arena_alloc(a, size, 64);
      if (!q) expect_enomem(c, f, size, errno);
      else {
        c->ok[f]++;
        if ((uintptr_t)q & 63) fail("brisk_arena_alloc(new arena, %zu, 64) = %p misaligned", size, q);
        memset(q, 0x2d, size);
      }
      brisk_arena_destroy(a);
      return;
    }
    default: return;
  }
  if (!p) {
    expect_enomem(c, f, size, errno);
    return;
  }
  accept(c, f, p, size, align, 0);
}

/* The sizes every function is tried with: small (from pages that may need
 * a new segment), medium, large, and huge (always a mapping of its own). */
static const size_t k_sizes[] = {32, 700, 5000, 40000, 300000, 3u << 20};
enum { NSIZES = sizeof k_sizes / sizeof k_sizes[0], HUGE_INDEX = NSIZES - 1 };

/* ---- phase: fail after N requests ------------------------------------------ */

static void phase_after(void) {
  phase("fault after N requests: every allocation function", 60);
  static const long afters[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 17, 25, 40};
  ctx_t c;
  ctx_init(&c, 4096, g_heap, g_farena);
  long total_ok[NFN] = {0}, total_null[NFN] = {0};
  for (size_t ai = 0; ai < sizeof afters / sizeof afters[0]; ai++) {
    long after = afters[ai];
    brisk_fault_injection(after, 0);
    for (int fi = 0; fi < NFN; fi++) {
      int f = (fi + (int)ai * 5) % NFN; /* each round starts with another function */
      for (int s = 0; s < NSIZES; s++) {
        long before_null = c.null[f];
        attempt(&c, (fn_t)f, k_sizes[s], (unsigned)(s + f + ai));
        if (after == 0 && s == HUGE_INDEX && c.null[f] == before_null && f != F_ARENA_NEW)
          fail("with every OS request failing, %s(%zu) did not fail: the fault injection does not reach it",
               k_fn_names[f], k_sizes[s]);
      }
      /* many small blocks, to need new pages and segments */
      for (int i = 0; i < 200 && (f == F_MALLOC || f == F_HEAP_MALLOC); i++) attempt(&c, (fn_t)f, 4000, (unsigned)i);
    }
    /* the arena of the before-blocks overflows too (never reset: its blocks stay) */
    c.arena = g_arena;
    attempt(&c, F_ARENA_ALLOC, 100000, (unsigned)ai);
    c.arena = g_farena;
    faults_off();
    before_check("after a round of failing requests");
    ctx_release(&c, "a block allocated under faults");
    for (int f = 0; f < NFN; f++) {
      total_ok[f] += c.ok[f];
      total_null[f] += c.null[f];
      c.ok[f] = c.null[f] = 0;
    }
    brisk_arena_reset(g_farena);
  }
  for (int f = 0; f < NFN; f++) {
    say("  %-36s %5ld ok %5ld NULL/ENOMEM\n", k_fn_names[f], total_ok[f], total_null[f]);
    if (total_null[f] == 0) fail("%s never failed under fault injection", k_fn_names[f]);
  }
  free(c.recs);
}

/* ---- phase: random failures ---------------------------------------------- */

static void random_ops(ctx_t *c, uint64_t *rs, int ops, rec_t *slots, int nslots) {
  for (int i = 0; i < ops; i++) {
    uint64_t r = rng_next(rs);
    int s = (int)(r % (uint64_t)nslots);
    rec_t *sl = &slots[s];
    if (sl->p && (r >> 20) % 3 == 0) {
      size_t off = check(sl->p, sl->size, sl->seed);
      if (off != (size_t)-1) fail("random phase: live block %p (%zu bytes) changed at offset %zu", sl->p, sl->size, off);
      if ((r >> 24) % 4 == 0) {
        /* grow or shrink it */
        size_t ns = 16 + (r >> 30) % 70000;
        errno = 0;
        void *q = realloc(sl->p, ns);
        if (!q) {
          if (errno != ENOMEM) fail("realloc(%zu) NULL with errno %d", ns, errno);
          if (check(sl->p, sl->size, sl->seed) != (size_t)-1) fail("failed realloc changed the block");
        } else {
          size_t keep = sl->size < ns ? sl->size : ns;
          if (check(q, keep, sl->seed) != (size_t)-1) fail("realloc lost the content");
          sl->p = q;
          sl->size = ns;
          fill(q, ns, sl->seed);
        }
      } else {
        free(sl->p);
        sl->p = NULL;
      }
      continue;
    }
    if (sl->p) continue;
    /* a new block in this slot: malloc-like, through any function */
    static const size_t sizes[] = {24, 64, 200, 1000, 3000, 8000, 20000, 60000, 100000, 700000, 2500000};
    size_t size = sizes[(r >> 8) % (sizeof sizes / sizeof sizes[0])];
    int before = c->n;
    attempt(c, (fn_t)((r >> 40) % NFN), size, (unsigned)(r >> 50));
    if (c->n > before) {
      /* move the (non-arena) result into the slot, check it later */
      rec_t last = c->recs[c->n - 1];
      if (!last.in_arena) {
        c->n--;
        *sl = last;
      }
    }
  }
}

static void phase_random(void) {
  phase("random failures (30%, then 100%)", 60);
  enum { NSLOTS = 300 };
  static rec_t slots[NSLOTS];
  ctx_t c;
  ctx_init(&c, 20000, g_heap, g_farena);
  uint64_t rs = 42;
  static const unsigned rates[] = {300000, 1000000, 50000};
  for (int round = 0; round < 3; round++) {
    brisk_fault_injection(-1, rates[round]);
    random_ops(&c, &rs, 5000, slots, NSLOTS);
    /* every function once more at this rate */
    for (int f = 0; f < NFN; f++)
      for (int s = 0; s < NSIZES; s++) attempt(&c, (fn_t)f, k_sizes[s], (unsigned)(s * 7 + f));
    faults_off();
    before_check("after random failures");
    for (int i = 0; i < NSLOTS; i++)
      if (slots[i].p && check(slots[i].p, slots[i].size, slots[i].seed) != (size_t)-1)
        fail("random phase: block in slot %d changed", i);
    ctx_release(&c, "random phase");
    brisk_arena_reset(g_farena);
  }
  long nulls = 0, oks = 0;
  for (int f = 0; f < NFN; f++) { nulls += c.null[f]; oks += c.ok[f]; }
  say("  %ld ok, %ld NULL/ENOMEM\n", oks, nulls);
  if (nulls == 0) fail("random failures: no allocation ever failed");
  for (int i = 0; i < NSLOTS; i++) free(slots[i].p);
  free(c.recs);
}

/* ---- memory comes back: everything works, from several threads at once --- */

static void recovery_single(const char *when) {
  /* small, medium, large, huge, aligned, calloc, heaps and arenas */
  static const size_t sizes[] = {16, 100, 1000, 9000, 50000, 100000, 1u << 20, 2u << 20, 5u << 20, 17u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *p = malloc(sizes[i]);
    char *q = calloc(1, sizes[i]);
    char *a = aligned_alloc(4096, sizes[i]);
    if (!p || !q || !a) { fail("%s: allocation of %zu bytes failed with the faults off", when, sizes[i]); continue; }
    if (!all_zero(q, sizes[i])) fail("%s: calloc(%zu) not zeroed", when, sizes[i]);
    memset(p, 1, sizes[i]);
    memset(a, 2, sizes[i]);
    char *r = realloc(p, sizes[i] * 2);
    if (!r) fail("%s: realloc to %zu failed", when, sizes[i] * 2);
    else p = r;
    free(p);
    free(q);
    free(a);
  }
  void *many[3000];
  for (int i = 0; i < 3000; i++) {
    many[i] = malloc(48 + (size_t)(i % 7) * 100);
    if (!many[i]) { fail("%s: small malloc %d failed with the faults off", when, i); break; }
    memset(many[i], 3, 48);
  }
  for (int i = 0; i < 3000; i++) free(many[i]);
  brisk_heap_t *h = brisk_heap_new();
  if (!h) fail("%s: brisk_heap_new failed", when);
  else {
    brisk_arena_t *ar = brisk_arena_new(h, 1000);
    if (!ar) fail("%s: brisk_arena_new failed", when);
    for (int i = 0; ar && i < 200; i++) {
      void *x = brisk_arena_alloc(ar, 5000, 64);
      if (!x) { fail("%s: brisk_arena_alloc failed", when); break; }
      memset(x, 4, 5000);
    }
    void *x = brisk_heap_malloc(h, 5u << 20);
    if (!x) fail("%s: brisk_heap_malloc(5 MiB) failed", when);
    brisk_heap_destroy(h);
  }
}

static atomic_int g_go;
static atomic_int g_ready;

/* Word-wise patterns for the recovery threads' blocks (up to 3 MiB). */
static inline uint64_t patw(size_t k, uint64_t seed) { return seed ^ ((uint64_t)k * 0x9E3779B97F4A7C15ull); }
static void fillw(void *p, size_t n, uint64_t seed) {
  uint64_t *w = p;
  for (size_t k = 0; k < n / 8; k++) w[k] = patw(k, seed);
  memset((char *)p + n / 8 * 8, (int)(seed & 0xff), n % 8);
}
static size_t checkw(const void *p, size_t n, uint64_t seed) {
  const uint64_t *w = p;
  for (size_t k = 0; k < n / 8; k++)
    if (w[k] != patw(k, seed)) return k * 8;
  for (size_t i = n / 8 * 8; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed & 0xff)) return i;
  return (size_t)-1;
}

static void *recovery_thread(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  atomic_fetch_add(&g_ready, 1);
  while (!atomic_load(&g_go)) sched_yield();
  uint64_t rs = id * 977u + 1;
  enum { N = 128 };
  void *b[N] = {0};
  size_t sz[N] = {0};
  uint64_t seed[N] = {0};
  for (int i = 0; i < 20000; i++) {
    uint64_t r = rng_next(&rs);
    int s = (int)(r % N);
    if (b[s]) {
      size_t off = checkw(b[s], sz[s], seed[s]);
      if (off != (size_t)-1)
        fail("recovery thread %u: block %p (%zu bytes) changed at offset %zu", id, b[s], sz[s], off);
      free(b[s]);
      b[s] = NULL;
    } else {
      size_t size = (r >> 10) % 64 == 0 ? (size_t)((r >> 20) % (3u << 20)) + 1 : (size_t)((r >> 20) % 5000) + 1;
      b[s] = malloc(size);
      if (!b[s]) { fail("recovery thread %u: malloc(%zu) failed with the faults off", id, size); continue; }
      sz[s] = size;
      seed[s] = ((uint64_t)id << 48) ^ ((uint64_t)i << 16) ^ (uint64_t)s; /* the block's identity */
      fillw(b[s], size, seed[s]);
    }
    if (i % 2000 == 0) {
      brisk_heap_t *h = brisk_heap_new();
      if (!h) fail("recovery thread %u: brisk_heap_new failed", id);
      else {
        void *x = brisk_heap_malloc(h, 100);
        if (!x) fail("recovery thread %u: brisk_heap_malloc failed", id);
        brisk_heap_destroy(h);
      }
    }
  }
  for (int s = 0; s < N; s++) free(b[s]);
  return NULL;
}

static void recovery_threads(const char *when) {
  enum { T = 4 };
  pthread_t t[T];
  atomic_store(&g_go, 0);
  atomic_store(&g_ready, 0);
  for (int i = 0; i < T; i++)
    if (pthread_create(&t[i], NULL, recovery_thread, (void *)(uintptr_t)i) != 0) {
      fail("%s: pthread_create failed", when);
      return;
    }
  while (atomic_load(&g_ready) < T) sched_yield();
  atomic_store(&g_go, 1); /* all at once */
  for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
}

static void phase_recovery(void) {
  phase("memory comes back: one thread, then several at once", 60);
  faults_off();
  recovery_single("after the faults");
  recovery_threads("after the faults");
  before_check("after the recovery");
}

/* ---- threads allocating while faults switch on and off ---------------- */

enum { MAILBOX = 64 };
static pthread_mutex_t g_mail_lock = PTHREAD_MUTEX_INITIALIZER;
static rec_t g_mail[MAILBOX];
static atomic_int g_stop;
static atomic_int g_done;
static atomic_int g_destroy_ok;

static void *fault_thread(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  ctx_t c; /* its table is allocated before the faults start */
  ctx_init(&c, 60000, NULL, NULL);
  c.seed = 100000u * (id + 1);
  atomic_fetch_add(&g_ready, 1);
  while (!atomic_load(&g_go)) sched_yield();
  /* the first allocation of this thread's heap may happen under faults */
  /* (retried: the faults come and go every few milliseconds) */
  brisk_heap_t *h = NULL;
  for (int i = 0; i < 20000 && !h && !atomic_load(&g_stop); i++) {
    errno = 0;
    h = brisk_heap_new();
    if (!h && errno != ENOMEM) fail("thread %u: brisk_heap_new NULL with errno %d", id, errno);
    if (!h) usleep(50);
  }
  brisk_arena_t *ar = NULL;
  for (int i = 0; i < 20000 && h && !ar && !atomic_load(&g_stop); i++) {
    errno = 0;
    ar = brisk_arena_new(h, 2000);
    if (!ar && errno != ENOMEM) fail("thread %u: brisk_arena_new NULL with errno %d", id, errno);
    if (!ar) usleep(50);
  }
  if (!h || !ar) say("  thread %u: got no heap or arena while the faults were on\n", id);
  c.heap = h;
  c.arena = ar;
  enum { NSL = 200 };
  static __thread rec_t slots[NSL];
  uint64_t rs = 1234567u + id;
  long ops = 0;
  while (!atomic_load(&g_stop) && h && ar) {
    uint64_t r = rng_next(&rs);
    if (r % 16 == 0) {
      /* exchange blocks with other threads: give one, take one */
      int s = (int)((r >> 8) % NSL);
      pthread_mutex_lock(&g_mail_lock);
      int m = (int)((r >> 16) % MAILBOX);
      rec_t got = g_mail[m];
      g_mail[m] = slots[s];
      slots[s] = got;
      pthread_mutex_unlock(&g_mail_lock);
    } else {
      random_ops(&c, &rs, 1, slots, NSL);
    }
    if (c.n > c.cap - 64) {
      /* arena results and heap realloc leftovers: wait for the faults to stop */
      break;
    }
    if (++ops % 4096 == 0) brisk_arena_reset(ar), c.n = 0; /* the arena blocks are gone */
  }
  while (!atomic_load(&g_stop)) sched_yield();
  /* faults are off now */
  for (int i = 0; i < c.n; i++)
    if (c.recs[i].in_arena) continue;
    else {
      if (check(c.recs[i].p, c.recs[i].size, c.recs[i].seed) != (size_t)-1) fail("thread %u: kept block changed", id);
      free(c.recs[i].p);
    }
  c.n = 0;
  for (int s = 0; s < NSL; s++)
    if (slots[s].p) {
      size_t off = check(slots[s].p, slots[s].size, slots[s].seed);
      if (off != (size_t)-1) fail("thread %u: block %p (%zu bytes) changed at offset %zu", id, slots[s].p, slots[s].size, off);
      free(slots[s].p);
      slots[s].p = NULL;
    }
  /* Blocks of this thread's heap may sit in other threads' slots or the
   * mailbox until everyone is done: destroy the heap only then. */
  atomic_fetch_add(&g_done, 1);
  while (!atomic_load(&g_destroy_ok)) sched_yield();
  if (ar) brisk_arena_destroy(ar);
  if (h) brisk_heap_destroy(h);
  free(c.recs);
  say("  thread %u: %ld ops\n", id, ops);
  return NULL;
}

/* Blocks of a first-class heap of every kind, freed by another thread,
 * then taken in by the heap's owner (its inbox). Run in a child so that a
 * crash names the case. Not a fault as such, but the thread phase below
 * frees heap blocks across threads at random and depends on it. */
static void *free_all_body(void *arg) {
  void **v = arg;
  for (int i = 0; v[i]; i++) brisk_free(v[i]);
  return NULL;
}
static void remote_heap_frees(void) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    static const size_t sizes[] = {32, 5000, 30000, 200000, 1u << 20, 3u << 20};
    static const size_t aligns[] = {16, 64, 4096, 65536, 1u << 20, 4u << 20, 8u << 20};
    brisk_heap_t *h = brisk_heap_new();
    if (!h) _exit(2);
    void *v[64];
    int n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      v[n++] = brisk_heap_malloc(h, sizes[i]);
      for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) v[n++] = brisk_heap_aligned_alloc(h, aligns[a], sizes[i]);
    }
    v[n] = NULL;
    for (int i = 0; i < n; i++) if (!v[i]) _exit(3);
    pthread_t t;
    pthread_create(&t, NULL, free_all_body, v);
    pthread_join(t, NULL);
    for (int i = 0; i < 2000; i++) brisk_free(brisk_heap_malloc(h, (size_t)(i % 40) * 3000 + 16)); /* takes the inbox in */
    brisk_heap_destroy(h);
    _exit(0);
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) { fail("fork/waitpid failed"); return; }
  if (WIFSIGNALED(st))
    fail("blocks of a first-class heap freed by another thread (sizes 32 B .. 3 MiB, alignments 16 B .. 8 MiB): "
         "the owner crashed taking them in (signal %d, %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WEXITSTATUS(st) != 0)
    fail("remote frees of first-class heap blocks: child exited with status %d", WEXITSTATUS(st));
}

static int g_threads_no_faults; /* debugging: "threads nofaults" */
static void phase_threads(void) {
  phase("threads allocate while faults switch on and off", 60);
  remote_heap_frees();
  enum { T = 4 };
  pthread_t t[T];
  atomic_store(&g_go, 0);
  atomic_store(&g_ready, 0);
  atomic_store(&g_stop, 0);
  atomic_store(&g_done, 0);
  atomic_store(&g_destroy_ok, 0);
  for (int i = 0; i < T; i++)
    if (pthread_create(&t[i], NULL, fault_thread, (void *)(uintptr_t)i) != 0) { fail("pthread_create failed"); return; }
  while (atomic_load(&g_ready) < T) sched_yield();
  if (!g_threads_no_faults) brisk_fault_injection(-1, 300000);
  atomic_store(&g_go, 1);
  double end = now_s() + 1.5;
  int k = 0;
  while (now_s() < end) {
    if (g_threads_no_faults) { faults_off(); usleep(3000); continue; }
    switch (k++ % 5) {
      case 0: brisk_fault_injection(-1, 300000); break;
      case 1: brisk_fault_injection(3, 0); break;
      case 2: faults_off(); break;
      case 3: brisk_fault_injection(-1, 1000000); break;
      default: brisk_fault_injection(0, 0); break;
    }
    usleep(3000);
  }
  faults_off();
  atomic_store(&g_stop, 1);
  while (atomic_load(&g_done) < T) sched_yield();
  for (int m = 0; m < MAILBOX; m++)
    if (g_mail[m].p) {
      if (check(g_mail[m].p, g_mail[m].size, g_mail[m].seed) != (size_t)-1) fail("a block in the mailbox changed");
      free(g_mail[m].p);
      g_mail[m].p = NULL;
    }
  atomic_store(&g_destroy_ok, 1);
  for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
  before_check("after the threads");
  recovery_threads("after the threads");
  recovery_single("after the threads");
}

/* ---- fork while other threads allocate ----------------------------------- */

static void *fork_bg_thread(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t rs = 99 + id;
  enum { N = 64 };
  void *b[N] = {0};
  while (!atomic_load(&g_stop)) {
    uint64_t r = rng_next(&rs);
    int s = (int)(r % N);
    if (b[s]) {
      free(b[s]);
      b[s] = NULL;
    } else {
      size_t size = (r >> 12) % 32 == 0 ? (size_t)((r >> 20) % (3u << 20)) + 1 : (size_t)((r >> 20) % 3000) + 1;
      errno = 0;
      b[s] = malloc(size);
      if (!b[s] && errno != ENOMEM) fail("fork phase: malloc NULL with errno %d", errno);
      if (b[s]) memset(b[s], 7, size < 256 ? size : 256);
    }
  }
  for (int s = 0; s < N; s++) free(b[s]);
  return NULL;
}

static void *child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    void *p = malloc((size_t)(i % 300) * 16 + 1);
    if (!p) return (void *)1;
    free(p);
  }
  return NULL;
}

/* In the child: everything the parent had is intact; allocation works
 * (NULL with ENOMEM allowed while the inherited faults are on); exit 0. */
static void child_body(int faults_on) {
  alarm(20);
  g_phase = "fork child";
  before_check("in a fork child");
  ctx_t c;
  ctx_init(&c, 4000, NULL, NULL);
  for (int f = 0; f < F_HEAP_MALLOC; f++)
    for (int s = 0; s < NSIZES; s++) attempt(&c, (fn_t)f, k_sizes[s], (unsigned)s);
  faults_off();
  ctx_release(&c, "fork child");
  for (int i = 0; i < 500; i++) {
    size_t size = (i % 50 == 0) ? 3u << 20 : (size_t)(i % 100) * 40 + 8;
    void *p = malloc(size);
    if (!p) { fail("fork child (faults %s): malloc(%zu) failed with the faults off", faults_on ? "on" : "off", size); break; }
    memset(p, 9, size);
    free(p);
  }
  brisk_heap_t *h = brisk_heap_new();
  if (!h || !brisk_heap_malloc(h, 1000)) fail("fork child: heap failed");
  if (h) brisk_heap_destroy(h);
  pthread_t t;
  void *tr = NULL;
  if (pthread_create(&t, NULL, child_thread, NULL) != 0) fail("fork child: pthread_create failed");
  else {
    pthread_join(t, &tr);
    if (tr) fail("fork child: its thread could not allocate");
  }
  if (brisk_errors_reported() != 0) fail("fork child: brisk reported %ld bad inputs", brisk_errors_reported());
  exit(g_failures ? 1 : 0);
}

static void phase_fork(void) {
  phase("fork while other threads allocate (faults on and off)", 90);
  enum { T = 3, FORKS = 8 };
  pthread_t t[T];
  atomic_store(&g_stop, 0);
  for (int i = 0; i < T; i++)
    if (pthread_create(&t[i], NULL, fork_bg_thread, (void *)(uintptr_t)i) != 0) { fail("pthread_create failed"); return; }
  int bad = 0;
  for (int k = 0; k < FORKS; k++) {
    int on = k % 2;
    if (on) brisk_fault_injection(-1, 200000);
    else faults_off();
    usleep(2000);
    pid_t pid = fork();
    if (pid == 0) child_body(on);
    if (pid < 0) {
      if (on && errno == ENOMEM) continue;
      fail("fork failed: %s", strerror(errno));
      continue;
    }
    faults_off();
    int st;
    if (waitpid(pid, &st, 0) != pid) { fail("waitpid failed"); continue; }
    if (WIFSIGNALED(st)) { fail("fork child %d (faults %s) died by signal %d (%s)", k, on ? "on" : "off", WTERMSIG(st), strsignal(WTERMSIG(st))); bad++; }
    else if (WEXITSTATUS(st) != 0) { fail("fork child %d (faults %s) exited with status %d", k, on ? "on" : "off", WEXITSTATUS(st)); bad++; }
  }
  faults_off();
  atomic_store(&g_stop, 1);
  for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
  before_check("after the forks");
  say("  %d children, %d failed\n", FORKS, bad);
}

/* ---- RLIMIT_AS in a child ------------------------------------------------- */

static size_t vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
  fclose(f);
  return kb * 1024;
}

typedef struct node_s {
  struct node_s *next;
  size_t size;
  unsigned seed;
} node_t;

static void rlimit_child(void) {
  alarm(40);
  g_phase = "RLIMIT_AS child";
  size_t vm = vm_size();
  if (vm == 0) { fail("no VmSize"); exit(1); }
  /* earlier blocks, before the limit */
  enum { E = 200 };
  static blk_t early[E];
  for (int i = 0; i < E; i++) {
    size_t s = (size_t)(i % 20) * 300 + 16 + (i % 50 == 0 ? 300000 : 0);
    early[i] = (blk_t){malloc(s), s, 7000u + (unsigned)i};
    if (!early[i].p) { fail("early malloc failed"); exit(1); }
    fill(early[i].p, s, early[i].seed);
  }
  struct rlimit rl = {vm + 64 * MiB, vm + 64 * MiB};
  if (setrlimit(RLIMIT_AS, &rl) != 0) { fail("setrlimit: %s", strerror(errno)); exit(1); }
  static const size_t sizes[] = {48, 1000, 30000, 200000, 3u << 20, 100, 8000};
  size_t bytes_first = 0;
  for (int round = 0; round < 2; round++) {
    node_t *list = NULL;
    size_t bytes = 0, count = 0;
    int nulls = 0;
    unsigned seed = 0;
    /* allocate until NULL, then go on with smaller sizes until even small
     * ones fail; each block is filled (its first bytes hold the list) */
    for (long i = 0; i < 4000000 && nulls < 40; i++) {
      size_t s = sizes[(size_t)i % 7];
      if (nulls > 0) s = sizes[(size_t)i % 2 ? 0 : 5] + (size_t)(nulls > 20 ? 0 : 0);
      errno = 0;
      node_t *n = malloc(s);
      if (!n) {
        if (errno != ENOMEM) fail("RLIMIT_AS: malloc(%zu) NULL with errno %d (%s)", s, errno, strerror(errno));
        nulls++;
        continue;
      }
      n->next = list;
      n->size = s;
      n->seed = seed++;
      fill((char *)n + sizeof *n, s - sizeof *n, n->seed);
      list = n;
      bytes += s;
      count++;
    }
    if (nulls == 0) fail("RLIMIT_AS: malloc never returned NULL (%zu bytes allocated)", bytes);
    /* other allocation functions at the limit */
    errno = 0;
    void *x = calloc(1, 8u << 20);
    if (!x && errno != ENOMEM) fail("RLIMIT_AS: calloc NULL with errno %d", errno);
    free(x);
    void *y = NULL;
    int r = posix_memalign(&y, 4u << 20, 4u << 20);
    if (r != 0 && r != ENOMEM) fail("RLIMIT_AS: posix_memalign returned %d", r);
    if (r == 0) free(y);
    for (int i = 0; i < E; i++) {
      size_t off = check(early[i].p, early[i].size, early[i].seed);
      if (off != (size_t)-1) fail("RLIMIT_AS: early block %d changed at offset %zu", i, off);
    }
    size_t checked = 0;
    for (node_t *n = list; n; n = n->next, checked++) {
      size_t off = check((char *)n + sizeof *n, n->size - sizeof *n, n->seed);
      if (off != (size_t)-1) { fail("RLIMIT_AS: block %u (%zu bytes) changed at offset %zu", n->seed, n->size, off); break; }
    }
    while (list) {
      node_t *n = list->next;
      free(list);
      list = n;
    }
    say("  RLIMIT_AS round %d: %zu blocks, %zu MiB allocated until %d allocations had failed\n", round, count,
        bytes >> 20, nulls);
    if (round == 0) bytes_first = bytes;
    else if (bytes < bytes_first / 2)
      fail("RLIMIT_AS: after freeing everything only %zu of %zu bytes could be allocated again", bytes, bytes_first);
    brisk_collect(true);
  }
  if (brisk_errors_reported() != 0) fail("RLIMIT_AS child: brisk reported %ld bad inputs", brisk_errors_reported());
  exit(g_failures ? 1 : 0);
}

static void phase_rlimit(void) {
  phase("RLIMIT_AS in a child", 60);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) rlimit_child();
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) { fail("fork/waitpid failed"); return; }
  if (WIFSIGNALED(st)) fail("RLIMIT_AS child died by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WEXITSTATUS(st) != 0) fail("RLIMIT_AS child exited with status %d", WEXITSTATUS(st));
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *only = argc > 1 ? argv[1] : NULL;
  static const char *const phases[] = {"after", "random", "recovery", "threads", "fork", "rlimit"};
  int known = !only;
  for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) known |= only && !strcmp(only, phases[i]);
  if (!known) {
    say("test_faults: unknown phase '%s' (after, random, recovery, threads, fork, rlimit)\n", only);
    return 2;
  }
  g_threads_no_faults = argc > 2 && !strcmp(argv[2], "nofaults");
  double t0 = now_s();
  phase("blocks before the faults", 30);
  before_alloc();
  before_check("before the faults");
  if (!only || !strcmp(only, "after")) phase_after();
  if (!only || !strcmp(only, "random")) phase_random();
  if (!only || !strcmp(only, "recovery")) phase_recovery();
  if (!only || !strcmp(only, "threads")) phase_threads();
  if (!only || !strcmp(only, "fork")) phase_fork();
  if (!only || !strcmp(only, "rlimit")) phase_rlimit();
  phase("final checks", 30);
  faults_off();
  before_check("at the end");
  recovery_single("at the end");
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs; under faults too every call here is a correct one", errors);
  alarm(0);
  say("[faults] %s in %.1f s\n", g_failures ? "FAILED" : "all phases passed", now_s() - t0);
  return g_failures ? 1 : 0;
}
