/* Multithreaded stress test in the spirit of mimalloc's test-stress.
 *
 * ctest-labels: sanitize tsan
 *
 * N threads (4 by default) run for several rounds; threads are created at the
 * start of every round and exit at its end (some exit early). Each thread
 * keeps objects in a private array and swaps objects with a shared array of
 * transfer slots (atomic exchange), so most objects are freed, reallocated or
 * checked by a thread other than the one that allocated them. Objects in the
 * transfer slots survive their allocating thread and are picked up by the
 * threads of the next round.
 *
 * Sizes: mostly small (0..1 KiB), some medium (1..64 KiB), rare large
 * (64 KiB..4 MiB). Every block is filled at allocation with a pattern derived
 * from its address, its size and a per-run cookie, and its whole content is
 * checked before it is freed or reallocated (and the preserved prefix after
 * a realloc). calloc'ed blocks are checked to be zero; alignment, usable size
 * and ownership (brisk_owns) are checked for every block; every free must
 * leave errno as it was.
 *
 * Pass 1 uses the prefixed API (brisk_malloc/calloc/realloc/aligned_alloc/
 * free/free_sized). Pass 2 uses the standard names (malloc, calloc, realloc,
 * reallocarray, aligned_alloc, posix_memalign, memalign, free, free_sized),
 * which brisk overrides; it is skipped in the ThreadSanitizer build, where TSan
 * intercepts the standard names itself.
 *
 * Usage: test_stress [threads [rounds [iterations-per-thread]]] [--brisk-only|--malloc-only]
 * Environment: BRISKTEST_SCALE=<float> scales the iteration count (default 1,
 * 0.05 under TSan, 0.3 when UBSAN_OPTIONS is set); BRISKTEST_SEED=<n> fixes
 * the random seed (printed at start).
 */
#define _GNU_SOURCE
#include "brisk.h"
#include "brisk_errors.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "under_tsan.h"

#define LOCAL_SLOTS 512
#define TRANSFER_SLOTS 1024
#define GOLD 0x9E3779B97F4A7C15ull
#define MAX_SIZE (4u << 20)

static const char *pass_name = "";
static uint64_t cookie;

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "test_stress: FAIL [%s pass]: %s\n", pass_name, buf);
  fflush(stderr);
  abort();
}

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double test_scale(void) {
  const char *e = getenv("BRISKTEST_SCALE");
  double s = 1.0;
  if (e && *e) s = atof(e);
  else if (UNDER_TSAN) s = 0.05;
  else if (getenv("UBSAN_OPTIONS")) s = 0.3;
  if (s <= 0) s = 0.01;
  return s;
}

/* ---- random numbers ------------------------------------------------------ */
static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
static inline uint64_t rnd(uint64_t *s) { *s += GOLD; return mix64(*s); }

/* ---- the API under test --------------------------------------------------- */
typedef struct {
  const char *name;
  int standard; /* uses the standard names */
  void *(*malloc_)(size_t);
  void *(*calloc_)(size_t, size_t);
  void *(*realloc_)(void *, size_t);
  void *(*aligned_)(size_t, size_t, uint64_t r);
  void (*free_)(void *);
  void (*free_sized_)(void *, size_t);
  size_t (*usable_)(void *);
} api_t;

static void *b_aligned(size_t al, size_t sz, uint64_t r) { (void)r; return brisk_aligned_alloc(al, sz); }
static size_t b_usable(void *p) { return brisk_usable_size(p); }

static void *s_malloc(size_t n) { return malloc(n); }
static void *s_calloc(size_t a, size_t b) { return calloc(a, b); }
static void *s_realloc(void *p, size_t n) {
  static _Atomic unsigned k;
  if ((atomic_fetch_add_explicit(&k, 1, memory_order_relaxed) & 3) == 0) return reallocarray(p, 1, n);
  return realloc(p, n);
}
static void *s_aligned(size_t al, size_t sz, uint64_t r) {
  switch (r % 3) {
  case 0: return aligned_alloc(al, sz);
  case 1: {
    void *p = NULL;
    size_t a = al < sizeof(void *) ? sizeof(void *) : al;
    int rc = posix_memalign(&p, a, sz);
    if (rc != 0) {
      errno = rc; /* posix_memalign returns its error; the callers read errno */
      return NULL;
    }
    return p;
  }
  default: return memalign(al, sz);
  }
}
static void s_free(void *p) { free(p); }
/* C23; exported by libbrisk.so (older glibc headers do not declare it). */
extern void free_sized(void *p, size_t size);
static void s_free_sized(void *p, size_t n) { free_sized(p, n); }
static size_t s_usable(void *p) { return malloc_usable_size(p); }

static const api_t api_brisk = {"brisk_*", 0, brisk_malloc, brisk_calloc, brisk_realloc, b_aligned,
                                brisk_free, brisk_free_sized, b_usable};
static const api_t api_std = {"malloc/free", 1, s_malloc, s_calloc, s_realloc, s_aligned,
                              s_free, s_free_sized, s_usable};
static const api_t *api;

/* ---- objects and their content -------------------------------------------
 * An object handle is the block address with a tag in the low 4 bits (blocks
 * are at least 16-byte aligned). Tag 0: size >= 8, the first word of the
 * block holds the size. Tag t in 1..8: a tiny block of size t-1 (no header).
 * Word k of a block is  (header && k == 0) ? size : seed + k * GOLD  where
 * seed depends on the address, the size and the run's cookie; a partial last
 * word holds the low bytes of its expected value.
 */
typedef uintptr_t obj_t;

static inline uint64_t pat_seed(uintptr_t addr, size_t size) {
  return mix64(addr ^ (size * 0xff51afd7ed558ccdull) ^ cookie);
}
static inline uint64_t pat_word(uint64_t seed, size_t size, int hdr, size_t k) {
  return (hdr && k == 0) ? (uint64_t)size : seed + (uint64_t)k * GOLD;
}

static void fill_block(void *p, size_t size) {
  int hdr = size >= 8;
  uint64_t seed = pat_seed((uintptr_t)p, size);
  uint64_t *w = (uint64_t *)p;
  size_t nw = size / 8;
  for (size_t k = 0; k < nw; k++) w[k] = pat_word(seed, size, hdr, k);
  size_t rem = size % 8;
  if (rem) {
    uint64_t v = pat_word(seed, size, hdr, nw);
    memcpy((char *)p + nw * 8, &v, rem);
  }
}

/* Check the first n bytes of block p against the pattern of a block that was
 * at address pat_addr with size pat_size. */
static void check_block(const void *p, uintptr_t pat_addr, size_t pat_size, size_t n, const char *what) {
  int hdr = pat_size >= 8;
  uint64_t seed = pat_seed(pat_addr, pat_size);
  const uint64_t *w = (const uint64_t *)p;
  size_t nw = n / 8;
  for (size_t k = 0; k < nw; k++) {
    uint64_t e = pat_word(seed, pat_size, hdr, k);
    if (w[k] != e)
      fail("%s: block %p (size %zu, allocated at %p) corrupted at offset %zu: expected 0x%016" PRIx64
           " found 0x%016" PRIx64,
           what, p, pat_size, (void *)pat_addr, k * 8, e, w[k]);
  }
  size_t rem = n % 8;
  if (rem) {
    uint64_t e = pat_word(seed, pat_size, hdr, nw), v = 0;
    memcpy(&v, (const char *)p + nw * 8, rem);
    uint64_t mask = (rem == 8) ? ~0ull : ((1ull << (rem * 8)) - 1);
    if ((v & mask) != (e & mask))
      fail("%s: block %p (size %zu, allocated at %p) corrupted in its last %zu bytes (offset %zu): "
           "expected 0x%016" PRIx64 " found 0x%016" PRIx64 " (low %zu bytes)",
           what, p, pat_size, (void *)pat_addr, rem, nw * 8, e & mask, v & mask, rem);
  }
}

static inline void *obj_ptr(obj_t o) { return (void *)(o & ~(uintptr_t)15); }

static size_t obj_size(obj_t o, const char *what) {
  unsigned tag = o & 15;
  void *p = obj_ptr(o);
  if (tag) return tag - 1;
  size_t size = *(const uint64_t *)p;
  size_t us = api->usable_(p);
  if (size < 8 || size > MAX_SIZE || size > us)
    fail("%s: block %p: size header corrupted (0x%zx; usable size %zu)", what, p, size, us);
  return size;
}

static void check_obj(obj_t o, const char *what) {
  void *p = obj_ptr(o);
  size_t size = obj_size(o, what);
  check_block(p, (uintptr_t)p, size, size, what);
}

/* BRISKTEST_ENOMEM_OK=1 (the runs under fault injection): an allocation
 * may fail, with errno ENOMEM and, for realloc, the old block intact. */
static int enomem_ok;
static _Atomic long enomem_seen;

static bool failed_as_allowed(void *p) {
  if (p != NULL || !enomem_ok) return false;
  if (errno != ENOMEM) fail("an allocation returned NULL with errno %d, not ENOMEM", errno);
  atomic_fetch_add_explicit(&enomem_seen, 1, memory_order_relaxed);
  return true;
}

static void check_new(void *p, size_t size, size_t align, const char *fn) {
  if (p == NULL) fail("%s(size %zu, alignment %zu) returned NULL (errno %d)", fn, size, align, errno);
  if ((uintptr_t)p % 16 != 0) fail("%s(size %zu) returned %p, not 16-byte aligned", fn, size, p);
  if (align > 16 && (uintptr_t)p % align != 0)
    fail("%s(alignment %zu, size %zu) returned %p, not aligned", fn, align, size, p);
  size_t us = api->usable_(p);
  if (us < size) fail("%s(size %zu) = %p: usable size %zu < requested", fn, size, p, us);
  if (!brisk_owns(p)) fail("%s(size %zu) = %p: brisk_owns() says brisk does not own it", fn, size, p);
}

static size_t random_size(uint64_t *rs) {
  uint64_t r = rnd(rs);
  unsigned pick = r % 10000;
  r >>= 16;
  if (pick < 8500) { /* 85%: small */
    unsigned q = r % 100;
    r >>= 8;
    if (q < 5) return r % 8;        /* 0..7: tiny */
    if (q < 65) return r % 129;     /* <= 128 */
    return r % 1025;                /* <= 1 KiB */
  }
  if (pick < 9990) { /* ~15%: medium, log-uniform in 1 KiB .. 64 KiB */
    unsigned bits = 10 + (r % 6);   /* 2^10 .. 2^15 */
    r >>= 8;
    size_t base = (size_t)1 << bits;
    return base + r % (base + 1);
  }
  /* 0.1%: large, log-uniform in 64 KiB .. 4 MiB */
  unsigned bits = 16 + (r % 6); /* 2^16 .. 2^21 */
  r >>= 8;
  size_t base = (size_t)1 << bits;
  return base + r % (base + 1);
}

static obj_t make_obj(void *p, size_t size) {
  return size < 8 ? ((uintptr_t)p | (size + 1)) : (uintptr_t)p;
}

static obj_t alloc_obj(uint64_t *rs) {
  size_t size = random_size(rs);
  uint64_t r = rnd(rs);
  unsigned how = r % 100;
  void *p;
  if (how < 75) {
    p = api->malloc_(size);
    if (failed_as_allowed(p)) return 0;
    check_new(p, size, 0, api->standard ? "malloc" : "brisk_malloc");
  } else if (how < 85) {
    size_t n = size, m = 1;
    if (size % 8 == 0 && size > 0 && (r >> 8) % 2) { n = size / 8; m = 8; }
    p = api->calloc_(n, m);
    if (failed_as_allowed(p)) return 0;
    check_new(p, size, 0, api->standard ? "calloc" : "brisk_calloc");
    const unsigned char *c = p;
    for (size_t i = 0; i < size; i++)
      if (c[i] != 0) fail("calloc(%zu, %zu) = %p: byte %zu is 0x%02x, not zero", n, m, p, i, c[i]);
  } else if (how < 97) {
    unsigned ab = (r >> 8) % 1000;
    size_t align;
    if (ab < 990) align = (size_t)1 << ((r >> 20) % 13);      /* 1 .. 4 KiB */
    else align = (size_t)1 << (16 + (r >> 20) % 5);            /* 64 KiB .. 1 MiB */
    if (align > 4096 && size > (256u << 10)) size = 256u << 10; /* keep big aligned blocks moderate */
    p = api->aligned_(align, size, r >> 32);
    if (failed_as_allowed(p)) return 0;
    check_new(p, size, align, api->standard ? "aligned_alloc/posix_memalign/memalign" : "brisk_aligned_alloc");
  } else {
    p = api->realloc_(NULL, size);
    if (failed_as_allowed(p)) return 0;
    check_new(p, size, 0, api->standard ? "realloc(NULL, n)" : "brisk_realloc(NULL, n)");
  }
  fill_block(p, size);
  return make_obj(p, size);
}

static void free_obj(obj_t o, uint64_t *rs) {
  if (!o) return;
  check_obj(o, "before free");
  void *p = obj_ptr(o);
  /* free keeps errno, whatever the system calls under it did (the runs
   * under fault injection refuse them) */
  errno = 4321;
  if (rnd(rs) % 4 == 0) {
    size_t size = (o & 15) ? (o & 15) - 1 : *(const uint64_t *)p;
    api->free_sized_(p, size);
  } else {
    api->free_(p);
  }
  if (errno != 4321) fail("%s changed errno to %d (%s)", api->standard ? "free" : "brisk_free", errno, strerror(errno));
}

static obj_t realloc_obj(obj_t o, uint64_t *rs) {
  if (!o) return alloc_obj(rs);
  check_obj(o, "before realloc");
  void *p = obj_ptr(o);
  size_t old = obj_size(o, "before realloc");
  size_t nsize;
  uint64_t r = rnd(rs);
  switch (r % 4) {
  case 0: nsize = old + 1 + (r >> 8) % 64; break;                 /* grow a little */
  case 1: nsize = old > 2 ? old - 1 - (r >> 8) % (old / 2) : 1; break; /* shrink */
  case 2: nsize = old * 2 + 1; break;                              /* double */
  default: nsize = random_size(rs); break;
  }
  if (nsize == 0) nsize = 1;
  if (nsize > MAX_SIZE) nsize = MAX_SIZE;
  void *q = api->realloc_(p, nsize);
  if (failed_as_allowed(q)) { /* the block stays as it was */
    check_obj(o, "after a failed realloc");
    return o;
  }
  check_new(q, nsize, 0, api->standard ? "realloc" : "brisk_realloc");
  size_t keep = old < nsize ? old : nsize;
  check_block(q, (uintptr_t)p, old, keep, "after realloc (preserved prefix)");
  fill_block(q, nsize);
  return make_obj(q, nsize);
}

/* ---- threads -------------------------------------------------------------- */
static _Atomic(obj_t) transfer[TRANSFER_SLOTS];
static long iterations;
static _Atomic long total_ops;
static _Atomic long cross_thread;

typedef struct { uint64_t seed; } targ_t;

static void *worker(void *arg) {
  targ_t *ta = arg;
  uint64_t rs = ta->seed;
  obj_t local[LOCAL_SLOTS];
  memset(local, 0, sizeof local);
  /* some threads exit early */
  long iters = iterations;
  if (rnd(&rs) % 4 == 0) iters = iters / 4 + (long)(rnd(&rs) % (uint64_t)(iters / 2 + 1));
  long xt = 0;
  for (long i = 0; i < iters; i++) {
    uint64_t r = rnd(&rs);
    unsigned op = r % 100;
    unsigned j = (r >> 8) % LOCAL_SLOTS;
    unsigned t = (r >> 24) % TRANSFER_SLOTS;
    if (op < 40) {
      free_obj(local[j], &rs);
      local[j] = alloc_obj(&rs);
    } else if (op < 52) {
      local[j] = realloc_obj(local[j], &rs);
    } else if (op < 72) {
      /* hand our object over and take whatever was there */
      obj_t got = atomic_exchange(&transfer[t], local[j]);
      if (got) { check_obj(got, "received from transfer slot"); xt++; }
      local[j] = got;
    } else if (op < 82) {
      obj_t got = atomic_exchange(&transfer[t], (obj_t)0);
      if (got) xt++;
      free_obj(got, &rs);
    } else if (op < 88) {
      obj_t o = alloc_obj(&rs);
      obj_t got = atomic_exchange(&transfer[t], o);
      if (got) xt++;
      free_obj(got, &rs);
    } else if (op < 92) {
      obj_t got = atomic_exchange(&transfer[t], (obj_t)0);
      if (got) { xt++; got = realloc_obj(got, &rs); }
      obj_t back = atomic_exchange(&transfer[t], got);
      free_obj(back, &rs);
    } else {
      free_obj(local[j], &rs);
      local[j] = 0;
    }
  }
  /* leave about a quarter of our objects to the threads of later rounds */
  for (unsigned j = 0; j < LOCAL_SLOTS; j++) {
    if (!local[j]) continue;
    if (rnd(&rs) % 4 == 0) {
      obj_t got = atomic_exchange(&transfer[rnd(&rs) % TRANSFER_SLOTS], local[j]);
      free_obj(got, &rs);
    } else {
      free_obj(local[j], &rs);
    }
    local[j] = 0;
  }
  atomic_fetch_add(&total_ops, iters);
  atomic_fetch_add(&cross_thread, xt);
  return NULL;
}

static void run_pass(const api_t *a, int nthreads, int rounds, uint64_t seed) {
  api = a;
  pass_name = a->name;
  atomic_store(&total_ops, 0);
  atomic_store(&cross_thread, 0);
  double t0 = now_sec();
  uint64_t rs = seed;
  pthread_t *th = calloc((size_t)nthreads, sizeof *th);
  targ_t *ta = calloc((size_t)nthreads, sizeof *ta);
  if (!th || !ta) fail("calloc for thread arrays failed");
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < nthreads; i++) {
      ta[i].seed = rnd(&rs);
      int rc = pthread_create(&th[i], NULL, worker, &ta[i]);
      if (rc) fail("pthread_create: %s", strerror(rc));
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    /* the main thread checks some of the surviving objects between rounds */
    for (int k = 0; k < 64; k++) {
      unsigned t = rnd(&rs) % TRANSFER_SLOTS;
      obj_t o = atomic_load(&transfer[t]);
      if (o) check_obj(o, "between rounds (main thread)");
    }
  }
  /* the main thread frees what is left */
  size_t left = 0;
  for (unsigned t = 0; t < TRANSFER_SLOTS; t++) {
    obj_t o = atomic_exchange(&transfer[t], (obj_t)0);
    if (o) left++;
    free_obj(o, &rs);
  }
  free(th);
  free(ta);
  double dt = now_sec() - t0;
  printf("test_stress: %s pass: %d threads x %d rounds, %ld operations, %ld objects received from "
         "another thread, %zu freed by main at the end, %.2f s\n",
         a->name, nthreads, rounds, (long)atomic_load(&total_ops), (long)atomic_load(&cross_thread), left, dt);
  fflush(stdout);
}

/* Under fault injection: huge blocks grown and shrunk by realloc (mremap
 * in place, or moved), their content checked after each step; a failed
 * realloc must leave the block as it was. */
static void huge_realloc_phase(void) {
  size_t size = 3u << 20;
  unsigned char *p = malloc(size);
  if (p == NULL) return;
  memset(p, 0x5a, size);
  for (int i = 0; i < 64; i++) {
    size_t nsize = (i % 4 == 3) ? (3u << 20) + (size_t)i * 4096 : size + (1u << 20) + (size_t)i * 4096;
    unsigned char *q = realloc(p, nsize);
    if (q == NULL) {
      if (!enomem_ok || errno != ENOMEM) fail("realloc(%p, %zu) returned NULL (errno %d)", (void *)p, nsize, errno);
      continue; /* p stays as it was: checked below */
    }
    size_t keep = size < nsize ? size : nsize;
    for (size_t k = 0; k < keep; k += 512)
      if (q[k] != 0x5a) fail("realloc(%zu -> %zu): byte %zu is 0x%02x, not the content kept", size, nsize, k, q[k]);
    memset(q, 0x5a, nsize);
    p = q;
    size = nsize;
  }
  for (size_t k = 0; k < size; k += 512)
    if (p[k] != 0x5a) fail("a huge block changed at byte %zu after its reallocs", k);
  free(p);
}

int main(int argc, char **argv) {
  int nthreads = 4, rounds = 10;
  long iters = -1;
  int do_brisk = 1, do_std = 1;
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--brisk-only")) do_std = 0;
    else if (!strcmp(argv[i], "--malloc-only")) do_brisk = 0;
    else if (pos == 0) { nthreads = atoi(argv[i]); pos++; }
    else if (pos == 1) { rounds = atoi(argv[i]); pos++; }
    else if (pos == 2) { iters = atol(argv[i]); pos++; }
  }
  if (nthreads < 1) nthreads = 1;
  if (rounds < 1) rounds = 1;
  double scale = test_scale();
  if (iters < 0) iters = (long)(150000 * scale);
  if (iters < 100) iters = 100;
  iterations = iters;
  enomem_ok = getenv("BRISKTEST_ENOMEM_OK") != NULL && atoi(getenv("BRISKTEST_ENOMEM_OK")) != 0;

  const char *se = getenv("BRISKTEST_SEED");
  uint64_t seed = se && *se ? strtoull(se, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  cookie = mix64(seed ^ 0x5bd1e995ull);
  printf("test_stress: seed %" PRIu64 " (BRISKTEST_SEED to repeat), %d threads, %d rounds, %ld iterations "
         "per thread, scale %.2f%s\n",
         seed, nthreads, rounds, iters, scale, UNDER_TSAN ? " (ThreadSanitizer build)" : "");
  fflush(stdout);

  if (enomem_ok) huge_realloc_phase();
  if (do_brisk) run_pass(&api_brisk, nthreads, rounds, seed);
  if (do_std) {
    if (UNDER_TSAN) {
      printf("test_stress: malloc/free pass skipped: ThreadSanitizer intercepts the standard names\n");
    } else {
      /* the override must be in effect for this pass to test brisk */
      void *p = malloc(24);
      while (p == NULL && enomem_ok) p = malloc(24);
      if (!brisk_owns(p)) fail("malloc() is not brisk's: brisk_owns(malloc(24)) == 0");
      free(p);
      run_pass(&api_std, nthreads, rounds, seed ^ 0xabcdef);
    }
  }
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs; this test makes none", errors);
  if (enomem_ok) {
    printf("test_stress: %ld allocations failed with ENOMEM (allowed here)\n", (long)atomic_load(&enomem_seen));
    /* What the OS refused (fault injection), for the script that runs this */
    static char js[1 << 16];
    static const char *const refused[] = {"map_failures", "unmap_failures", "purge_failures",
                                          "remap_failures", "protect_failures", "thread_failures",
                                          "fence_failures"};
    if (brisk_stats_json(js, sizeof(js)) > 0) {
      for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char key[64];
        snprintf(key, sizeof(key), "\"%s\":", refused[i]);
        const char *at = strstr(js, key);
        printf("test_stress: refused %s %lld\n", refused[i], at ? atoll(at + strlen(key)) : -1LL);
      }
    }
  }
  printf("test_stress: PASS\n");
  return 0;
}
