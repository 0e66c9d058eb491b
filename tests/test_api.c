/* API conformance of brisk: every brisk_* function and every standard
 * symbol brisk replaces (the test is linked to libbrisk.so, so malloc & co.
 * are brisk's too), with glibc's semantics.
 *
 * ctest-labels: sanitize
 *
 * Each section prints "[api] <section>: ok" or the failures it found; the
 * test exits 1 if any check failed. Run by hand: build/tests/test_api
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/mman.h>
#include <unistd.h>

/* glibc's own allocator, reachable under its internal names. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
/* C23; exported by libbrisk.so (older glibc headers do not declare them). */
extern void free_sized(void *p, size_t size);
extern void free_aligned_sized(void *p, size_t alignment, size_t size);

#define TEST_TAG "[api]"
#define TEST_FILE "test_api.c"
#define TEST_WIDTH 34
#define TEST_SHOWN_PER_SECTION 25L /* keep the log readable */
#include "sections.h"

/* Hide a value from the optimiser (no folding of malloc(SIZE_MAX) etc.). */
static size_t opaque_size(size_t n) {
  __asm__ volatile("" : "+r"(n));
  return n;
}
static void *opaque_ptr(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

static int is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* ------------------------------------------------------------------ */
/* patterns                                                             */

static inline unsigned char pat(size_t i, unsigned seed) {
  return (unsigned char)(i * 131u + (i >> 9) * 7u + seed * 29u + 1u);
}
static void fill_pat(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}
/* Returns the first offset that differs, or (size_t)-1 when all match. */
static size_t check_pat(const void *p, size_t n, unsigned seed) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return i;
  return (size_t)-1;
}
/* Fast byte-value fill/check for the big sweeps. */
static size_t check_byte(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  uint64_t w = 0x0101010101010101ull * v;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, b + i, 8);
    if (x != w) break;
  }
  for (; i < n; i++)
    if (b[i] != v) return i;
  return (size_t)-1;
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ */
/* malloc(0), realloc(NULL, n), realloc(p, 0), calloc(0, n)             */

static void test_zero_sizes(void) {
  section("zero sizes / realloc(NULL|0)");
  enum { N = 200 };
  static void *ptrs[3 * N];
  size_t k = 0;
  for (int i = 0; i < N; i++) {
    void *p = malloc(opaque_size(0));
    CHECK(p != NULL, "malloc(0) returned NULL (glibc returns a unique pointer)");
    if (p) {
      CHECK(is_aligned(p, 16), "malloc(0) = %p is not 16-byte aligned", p);
      CHECK(brisk_owns(p), "brisk_owns(malloc(0) = %p) is false", p);
      ptrs[k++] = p;
    }
    void *q = brisk_malloc(opaque_size(0));
    CHECK(q != NULL, "brisk_malloc(0) returned NULL");
    if (q) { CHECK(is_aligned(q, 16), "brisk_malloc(0) = %p not 16-aligned", q); ptrs[k++] = q; }
    void *c = calloc(opaque_size(0), opaque_size(i));
    CHECK(c != NULL, "calloc(0, %d) returned NULL (glibc returns a unique pointer)", i);
    if (c) ptrs[k++] = c;
  }
  qsort(ptrs, k, sizeof ptrs[0], cmp_ptr);
  for (size_t i = 1; i < k; i++)
    CHECK(ptrs[i] != ptrs[i - 1], "zero-size allocations are not unique: %p returned twice", ptrs[i]);
  for (size_t i = 0; i < k; i++) free(ptrs[i]);

  /* realloc(NULL, n) acts as malloc(n) */
  size_t sizes[] = {0, 1, 16, 100, 1000, 5000, 70000, 1u << 20, 5u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    void *p = realloc(NULL, opaque_size(n));
    CHECK(p != NULL, "realloc(NULL, %zu) returned NULL", n);
    if (!p) continue;
    CHECK(is_aligned(p, 16), "realloc(NULL, %zu) = %p not 16-aligned", n, p);
    CHECK(malloc_usable_size(p) >= n, "usable_size(realloc(NULL, %zu)) = %zu", n, malloc_usable_size(p));
    CHECK(brisk_owns(p), "brisk_owns(realloc(NULL, %zu)) false", n);
    memset(p, 0x5c, malloc_usable_size(p));
    void *q = brisk_realloc(NULL, opaque_size(n));
    CHECK(q != NULL, "brisk_realloc(NULL, %zu) returned NULL", n);
    if (q) {
      CHECK(brisk_usable_size(q) >= n, "brisk_usable_size(brisk_realloc(NULL, %zu)) = %zu", n,
            brisk_usable_size(q));
      memset(q, 0x5d, brisk_usable_size(q));
      CHECK(check_byte(p, malloc_usable_size(p), 0x5c) == (size_t)-1,
            "realloc(NULL,%zu) block overlaps another block", n);
    }
    /* realloc(p, 0) frees p and returns NULL, as glibc does */
    errno = 0;
    void *r = realloc(p, opaque_size(0));
    CHECK(r == NULL, "realloc(p, 0) returned %p, expected NULL (glibc frees and returns NULL)", r);
    if (r) free(r);
    /* brisk_realloc is "as the standard one": (q, 0) frees and returns NULL */
    if (q) {
      void *r2 = brisk_realloc(q, opaque_size(0));
      CHECK(r2 == NULL, "brisk_realloc(q, 0) returned %p, expected NULL (it frees, as realloc does)", r2);
      if (r2) brisk_free(r2);
    }
  }
  /* reallocarray(NULL, n, m) acts as malloc(n*m) */
  void *ra = reallocarray(NULL, opaque_size(10), opaque_size(10));
  CHECK(ra != NULL && malloc_usable_size(ra) >= 100, "reallocarray(NULL, 10, 10) failed");
  if (ra) {
    fill_pat(ra, 100, 3);
    void *rb = reallocarray(ra, opaque_size(100), opaque_size(100));
    CHECK(rb != NULL, "reallocarray(p, 100, 100) returned NULL");
    if (rb) {
      CHECK(check_pat(rb, 100, 3) == (size_t)-1, "reallocarray lost data");
      CHECK(malloc_usable_size(rb) >= 10000, "reallocarray usable %zu < 10000", malloc_usable_size(rb));
      free(rb);
    } else {
      free(ra);
    }
  }
  free(NULL);
  brisk_free(NULL);
  brisk_free_sized(NULL, 0);
  CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
  CHECK(brisk_usable_size(NULL) == 0, "brisk_usable_size(NULL) = %zu", brisk_usable_size(NULL));
  section_end();
}

/* ------------------------------------------------------------------ */
/* failures: overflow and impossible sizes -> NULL + ENOMEM              */

static void expect_enomem(void *p, const char *what, size_t a, size_t b) {
  int e = errno;
  CHECK(p == NULL, "%s(%#zx, %#zx) returned %p, expected NULL", what, a, b, p);
  CHECK(e == ENOMEM, "%s(%#zx, %#zx): errno = %d (%s), expected ENOMEM", what, a, b, e, strerror(e));
  if (p) free(p);
}

static void test_failures(void) {
  section("overflow / huge sizes -> ENOMEM");
  const size_t huge[] = {
      SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4096, SIZE_MAX - (1u << 20),
      SIZE_MAX / 2, SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1,
      (size_t)1 << 62, (size_t)1 << 56, (size_t)1 << 50, (size_t)1 << 48,
  };
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    size_t n = opaque_size(huge[i]);
    void *p;
    errno = 0; p = malloc(n);                 expect_enomem(p, "malloc", n, 0);
    errno = 0; p = brisk_malloc(n);           expect_enomem(p, "brisk_malloc", n, 0);
    errno = 0; p = calloc(1, n);              expect_enomem(p, "calloc", 1, n);
    errno = 0; p = calloc(n, 1);              expect_enomem(p, "calloc", n, 1);
    errno = 0; p = brisk_calloc(n, 1);        expect_enomem(p, "brisk_calloc", n, 1);
    errno = 0; p = aligned_alloc(64, n);      expect_enomem(p, "aligned_alloc", 64, n);
    errno = 0; p = aligned_alloc(1u << 20, n); expect_enomem(p, "aligned_alloc", 1u << 20, n);
    errno = 0; p = brisk_aligned_alloc(4096, n); expect_enomem(p, "brisk_aligned_alloc", 4096, n);
    errno = 0; p = memalign(256, n);          expect_enomem(p, "memalign", 256, n);
    errno = 0; p = valloc(n);                 expect_enomem(p, "valloc", n, 0);
    errno = 0; p = pvalloc(n);                expect_enomem(p, "pvalloc", n, 0);
    errno = 0; p = realloc(NULL, n);          expect_enomem(p, "realloc(NULL)", 0, n);
    p = (void *)0x1;
    int rc = posix_memalign(&p, 64, n);
    CHECK(rc == ENOMEM, "posix_memalign(64, %#zx) returned %d, expected ENOMEM", n, rc);
    if (rc == 0 && p) free(p);

    /* a failing realloc leaves the old block intact */
    void *old = malloc(300);
    if (old) {
      fill_pat(old, 300, 9);
      errno = 0;
      void *r = realloc(opaque_ptr(old), n);
      expect_enomem(r, "realloc(p)", 300, n);
      CHECK(check_pat(old, 300, 9) == (size_t)-1, "failed realloc(p, %#zx) damaged the old block", n);
      errno = 0;
      r = brisk_realloc(opaque_ptr(old), n);
      expect_enomem(r, "brisk_realloc(p)", 300, n);
      CHECK(check_pat(old, 300, 9) == (size_t)-1, "failed brisk_realloc(p, %#zx) damaged the old block", n);
      free(old);
    }
  }
  /* multiplication overflow in calloc / reallocarray */
  const size_t ovf[][2] = {
      {SIZE_MAX, SIZE_MAX}, {SIZE_MAX, 2}, {2, SIZE_MAX}, {SIZE_MAX / 2 + 1, 2},
      {(size_t)1 << 32, (size_t)1 << 32}, {(size_t)1 << 33, (size_t)1 << 31},
      {((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1}, {SIZE_MAX / 16 + 1, 16},
  };
  for (size_t i = 0; i < sizeof ovf / sizeof ovf[0]; i++) {
    size_t a = opaque_size(ovf[i][0]), b = opaque_size(ovf[i][1]);
    void *p;
    errno = 0; p = calloc(a, b);       expect_enomem(p, "calloc", a, b);
    errno = 0; p = brisk_calloc(a, b); expect_enomem(p, "brisk_calloc", a, b);
    errno = 0; p = reallocarray(NULL, a, b); expect_enomem(p, "reallocarray(NULL)", a, b);
    void *old = malloc(64);
    if (old) {
      fill_pat(old, 64, 4);
      errno = 0;
      p = reallocarray(opaque_ptr(old), a, b);
      expect_enomem(p, "reallocarray(p)", a, b);
      CHECK(check_pat(old, 64, 4) == (size_t)-1, "failed reallocarray damaged the old block");
      free(old);
    }
  }
  /* after all these failures the allocator still works */
  void *p = malloc(100);
  CHECK(p != NULL, "malloc(100) failed after the ENOMEM checks");
  if (p) { memset(p, 1, 100); free(p); }
  section_end();
}

/* ------------------------------------------------------------------ */
/* posix_memalign / aligned_alloc / memalign / valloc / pvalloc          */

static void test_alignment_api(void) {
  section("alignment arguments");
  /* posix_memalign: alignment must be a power of two and a multiple of
   * sizeof(void*): everything else is EINVAL. */
  const size_t bad[] = {0, 1, 2, 3, 4, 5, 12, 24, 48, 96, 100, 4095, 4097, 3u << 12,
                        ((size_t)1 << 20) + 8, SIZE_MAX, SIZE_MAX - 7};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    void *p = (void *)0x1234;
    int rc = posix_memalign(&p, opaque_size(bad[i]), 64);
    CHECK(rc == EINVAL, "posix_memalign(alignment=%zu) returned %d, expected EINVAL", bad[i], rc);
    if (rc == 0) free(p);
    p = (void *)0x1234;
    rc = posix_memalign(&p, opaque_size(bad[i]), 0);
    CHECK(rc == EINVAL, "posix_memalign(alignment=%zu, size 0) returned %d, expected EINVAL", bad[i], rc);
    if (rc == 0) free(p);
  }
  /* valid small alignments */
  for (size_t a = sizeof(void *); a <= 64; a *= 2) {
    void *p = NULL;
    int rc = posix_memalign(&p, a, 10);
    CHECK(rc == 0 && p != NULL, "posix_memalign(%zu, 10) failed: %d", a, rc);
    if (rc == 0) {
      CHECK(is_aligned(p, 16), "posix_memalign(%zu) result %p not 16-aligned (minimum)", a, p);
      free(p);
    }
  }
  /* posix_memalign with size 0: success, like glibc */
  {
    void *p = NULL;
    int rc = posix_memalign(&p, 64, opaque_size(0));
    CHECK(rc == 0, "posix_memalign(64, 0) returned %d", rc);
    if (rc == 0 && p) { CHECK(is_aligned(p, 64), "posix_memalign(64,0) misaligned %p", p); free(p); }
  }
  /* aligned_alloc with a size that is not a multiple of the alignment works */
  const size_t odd[][2] = {{64, 100}, {4096, 1}, {256, 1000}, {32, 33}, {128, 7}, {1u << 16, 3},
                           {1u << 20, 12345}, {16, 17}, {64, 0}};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    size_t a = odd[i][0], n = odd[i][1];
    errno = 0;
    void *p = aligned_alloc(opaque_size(a), opaque_size(n));
    CHECK(p != NULL, "aligned_alloc(%zu, %zu) returned NULL (errno %d); size need not be a multiple",
          a, n, errno);
    if (!p) continue;
    CHECK(is_aligned(p, a), "aligned_alloc(%zu, %zu) = %p misaligned", a, n, p);
    CHECK(malloc_usable_size(p) >= n, "aligned_alloc(%zu, %zu): usable %zu", a, n, malloc_usable_size(p));
    memset(p, 0x77, malloc_usable_size(p));
    free(p);
    p = brisk_aligned_alloc(opaque_size(a), opaque_size(n));
    CHECK(p != NULL, "brisk_aligned_alloc(%zu, %zu) returned NULL", a, n);
    if (p) {
      CHECK(is_aligned(p, a), "brisk_aligned_alloc(%zu, %zu) = %p misaligned", a, n, p);
      brisk_free(p);
    }
  }
  /* memalign / aligned_alloc with an odd alignment: glibc 2.36 rounds it up.
   * We only require: no crash, and a non-NULL result is 16-aligned. */
  const size_t weird[] = {0, 3, 24, 100};
  for (size_t i = 0; i < sizeof weird / sizeof weird[0]; i++) {
    void *p = memalign(opaque_size(weird[i]), 40);
    if (p) { CHECK(is_aligned(p, 16), "memalign(%zu) = %p not 16-aligned", weird[i], p); free(p); }
    p = aligned_alloc(opaque_size(weird[i]), 40);
    if (p) { CHECK(is_aligned(p, 16), "aligned_alloc(%zu) = %p not 16-aligned", weird[i], p); free(p); }
  }
  /* alignments beyond 1 MiB: "any power-of-two alignment" (README); up to
   * 64 MiB they must succeed, beyond that (address space) the result is
   * NULL with ENOMEM or honours the alignment, never silently misaligned */
  for (int b = 21; b <= 40; b++) {
    size_t a = (size_t)1 << b;
    const size_t ns[] = {16, 100000};
    for (int k = 0; k < 2; k++) {
      errno = 0;
      void *p = aligned_alloc(opaque_size(a), ns[k]);
      CHECK(p != NULL || (b > 26 && errno == ENOMEM), "aligned_alloc(1<<%d, %zu) returned NULL (errno %d)", b,
            ns[k], errno);
      if (p) {
        CHECK(is_aligned(p, a), "aligned_alloc(1<<%d, %zu) = %p is not aligned", b, ns[k], p);
        memset(p, 0x21, ns[k]);
        free(p);
      }
      errno = 0;
      p = brisk_aligned_alloc(opaque_size(a), ns[k]);
      CHECK(p != NULL || (b > 26 && errno == ENOMEM), "brisk_aligned_alloc(1<<%d, %zu) returned NULL (errno %d)",
            b, ns[k], errno);
      if (p) {
        CHECK(is_aligned(p, a), "brisk_aligned_alloc(1<<%d, %zu) = %p is not aligned", b, ns[k], p);
        memset(p, 0x22, ns[k]);
        brisk_free(p);
      }
      if (b <= 30) {
        void *q = NULL;
        int rc = posix_memalign(&q, a, ns[k]);
        if (rc == 0) {
          CHECK(is_aligned(q, a), "posix_memalign(1<<%d, %zu) = %p is not aligned", b, ns[k], q);
          free(q);
        } else {
          CHECK(rc == ENOMEM && b > 26, "posix_memalign(1<<%d) returned %d", b, rc);
        }
      }
    }
  }
  {
    void *p = aligned_alloc(opaque_size((size_t)1 << 62), 16);
    CHECK(p == NULL, "aligned_alloc(1<<62, 16) returned %p", p);
    if (p) free(p);
  }
  /* valloc / pvalloc */
  long page = sysconf(_SC_PAGESIZE);
  const size_t vs[] = {0, 1, 100, 4095, 4096, 4097, 10000, 100000, 3u << 20};
  for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
    size_t n = vs[i];
    void *p = valloc(opaque_size(n));
    CHECK(p != NULL, "valloc(%zu) returned NULL", n);
    if (p) {
      CHECK(is_aligned(p, (size_t)page), "valloc(%zu) = %p not page-aligned", n, p);
      CHECK(malloc_usable_size(p) >= n, "valloc(%zu): usable %zu", n, malloc_usable_size(p));
      memset(p, 0x31, malloc_usable_size(p));
      free(p);
    }
    p = pvalloc(opaque_size(n));
    CHECK(p != NULL, "pvalloc(%zu) returned NULL", n);
    if (p) {
      size_t want = (n + (size_t)page - 1) / (size_t)page * (size_t)page; /* pvalloc(0): glibc gives a minimal block */
      CHECK(is_aligned(p, (size_t)page), "pvalloc(%zu) = %p not page-aligned", n, p);
      CHECK(malloc_usable_size(p) >= want, "pvalloc(%zu): usable %zu < %zu (rounded to pages)", n,
            malloc_usable_size(p), want);
      memset(p, 0x32, malloc_usable_size(p));
      free(p);
    }
  }
  section_end();
}

/* Every power-of-two alignment 1..1 MiB, several sizes each, every entry
 * point; the block honours the alignment and its whole usable size is
 * writable; live blocks do not overlap. */
static void test_alignment_sweep(void) {
  section("alignments 1..1MiB");
  enum { LIVE = 6 };
  for (size_t a = 1; a <= ((size_t)1 << 20); a *= 2) {
    size_t sizes[] = {1, 8, 16, a > 1 ? a - 1 : 1, a, a + 1, 3 * a, 100, 1000, 4096, 70000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      size_t n = sizes[si];
      void *blk[LIVE] = {0};
      size_t use[LIVE] = {0};
      const char *who[LIVE] = {"aligned_alloc", "brisk_aligned_alloc", "memalign", "posix_memalign",
                               "aligned_alloc#2", "memalign#2"};
      blk[0] = aligned_alloc(a, opaque_size(n));
      blk[1] = brisk_aligned_alloc(a, opaque_size(n));
      blk[2] = memalign(a, opaque_size(n));
      if (a >= sizeof(void *)) {
        int rc = posix_memalign(&blk[3], a, opaque_size(n));
        CHECK(rc == 0, "posix_memalign(%zu, %zu) returned %d", a, n, rc);
        if (rc != 0) blk[3] = NULL;
      } else {
        blk[3] = aligned_alloc(a, opaque_size(n + 5));
      }
      blk[4] = aligned_alloc(a, opaque_size(n));
      blk[5] = memalign(a, opaque_size(n));
      for (int k = 0; k < LIVE; k++) {
        if (!blk[k]) { FAIL("%s(%zu, %zu) returned NULL", who[k], a, n); continue; }
        CHECK(is_aligned(blk[k], a), "%s(%zu, %zu) = %p is not aligned", who[k], a, n, blk[k]);
        CHECK(is_aligned(blk[k], 16), "%s(%zu, %zu) = %p is not 16-aligned", who[k], a, n, blk[k]);
        use[k] = brisk_usable_size(blk[k]);
        CHECK(use[k] >= n, "%s(%zu, %zu): usable size %zu < requested", who[k], a, n, use[k]);
        CHECK(malloc_usable_size(blk[k]) == use[k], "%s: malloc_usable_size %zu != brisk_usable_size %zu",
              who[k], malloc_usable_size(blk[k]), use[k]);
        CHECK(brisk_owns(blk[k]), "brisk_owns(%s(%zu, %zu)) is false", who[k], a, n);
        memset(blk[k], 0x40 + k, use[k]);
      }
      for (int k = 0; k < LIVE; k++) {
        if (!blk[k]) continue;
        size_t off = check_byte(blk[k], use[k], (unsigned char)(0x40 + k));
        CHECK(off == (size_t)-1, "%s(%zu, %zu) block %p overwritten at offset %zu (overlap?)", who[k], a, n,
              blk[k], off);
        if (k == 1) brisk_free(blk[k]);
        else free(blk[k]);
      }
    }
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* sizes 0..64 MiB                                                      */

static void check_block(void *p, size_t n, const char *who) {
  CHECK(p != NULL, "%s(%zu) returned NULL", who, n);
  if (!p) return;
  CHECK(is_aligned(p, 16), "%s(%zu) = %p is not 16-byte aligned", who, n, p);
  size_t u = brisk_usable_size(p);
  CHECK(u >= n, "%s(%zu): usable size %zu < requested", who, n, u);
  CHECK(malloc_usable_size(p) == u, "%s(%zu): malloc_usable_size %zu != brisk_usable_size %zu", who, n,
        malloc_usable_size(p), u);
  CHECK(brisk_owns(p), "brisk_owns(%s(%zu) = %p) is false", who, n, p);
  if (u > 0) {
    CHECK(brisk_owns((char *)p + u - 1), "brisk_owns(last byte of %s(%zu), p=%p u=%zu) is false", who, n, p, u);
    CHECK(brisk_owns((char *)p + u / 2), "brisk_owns(middle of %s(%zu)) is false", who, n);
  }
}

/* How much a block may exceed its request: classes are at most 12.5%
 * apart (16 bytes apart up to 128 B), and from 1 KiB to 8 KiB a request at
 * most 64 bytes above a power of two has a class of its own (a 4 KiB
 * buffer and its header take 4160 bytes, not 4608). */
static void test_class_fit(void) {
  section("usable size of every request up to 64 KiB");
  long bad = 0;
  for (size_t n = 1; n <= 65536; n++) {
    void *p = malloc(opaque_size(n));
    if (!p) { FAIL("malloc(%zu) returned NULL", n); break; }
    size_t u = malloc_usable_size(p);
    size_t limit = n + n / 8 + 16;
    for (size_t m = 1024; m <= 8192; m <<= 1)
      if (n > m && n <= m + 64) limit = m + 64;
    if ((u < n || u > limit) && bad++ < 5)
      FAIL("malloc(%zu): usable size %zu, expected %zu..%zu", n, u, n, limit);
    free(p);
  }
  CHECK(bad == 0, "%ld requests got a block of an unexpected size", bad);
  section_end();
}

static void test_size_sweep(void) {
  section("sizes 0..8KiB (all live)");
  enum { SMALL_MAX = 8192 };
  static void *blk[SMALL_MAX + 1];
  static size_t use[SMALL_MAX + 1];
  for (size_t n = 0; n <= SMALL_MAX; n++) {
    blk[n] = (n & 1) ? brisk_malloc(opaque_size(n)) : malloc(opaque_size(n));
    check_block(blk[n], n, (n & 1) ? "brisk_malloc" : "malloc");
    if (!blk[n]) continue;
    use[n] = malloc_usable_size(blk[n]);
    memset(blk[n], (int)(n * 13 + 5) & 0xff, use[n]);
  }
  for (size_t n = 0; n <= SMALL_MAX; n++) {
    if (!blk[n]) continue;
    size_t off = check_byte(blk[n], use[n], (unsigned char)((n * 13 + 5) & 0xff));
    CHECK(off == (size_t)-1, "block of size %zu at %p (usable %zu) was overwritten at offset %zu: blocks overlap",
          n, blk[n], use[n], off);
    CHECK(malloc_usable_size(blk[n]) == use[n], "usable size of block %zu changed", n);
  }
  for (size_t n = 0; n <= SMALL_MAX; n++) {
    if (n % 3 == 0) free(blk[n]);
    else if (n % 3 == 1) brisk_free(blk[n]);
    else brisk_free_sized(blk[n], n);
  }
  section_end();

  section("sizes 8KiB..64MiB (geometric)");
  size_t sizes[400];
  size_t ns = 0;
  for (double d = SMALL_MAX + 1; d <= (double)(64u << 20) && ns < 300; d *= 1.09) sizes[ns++] = (size_t)d;
  for (int b = 14; b <= 26; b++) {
    sizes[ns++] = ((size_t)1 << b) - 1;
    sizes[ns++] = ((size_t)1 << b);
    sizes[ns++] = ((size_t)1 << b) + 1;
  }
  sizes[ns++] = 64u << 20;
  enum { RING = 6 };
  void *ring[RING] = {0};
  size_t ring_use[RING] = {0};
  unsigned char ring_val[RING] = {0};
  for (size_t i = 0; i < ns + RING; i++) {
    size_t slot = i % RING;
    if (ring[slot]) {
      size_t off = check_byte(ring[slot], ring_use[slot], ring_val[slot]);
      CHECK(off == (size_t)-1, "block %p (usable %zu) overwritten at offset %zu while live", ring[slot],
            ring_use[slot], off);
      if (i & 1) free(ring[slot]);
      else brisk_free(ring[slot]);
      ring[slot] = NULL;
    }
    if (i >= ns) continue;
    size_t n = sizes[i];
    void *p = (i % 3 == 0) ? brisk_malloc(opaque_size(n)) : malloc(opaque_size(n));
    check_block(p, n, (i % 3 == 0) ? "brisk_malloc" : "malloc");
    if (!p) continue;
    ring[slot] = p;
    ring_use[slot] = malloc_usable_size(p);
    ring_val[slot] = (unsigned char)(0x11 * (slot + 1) + i);
    memset(p, ring_val[slot], ring_use[slot]);
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* realloc preserves data across every size-class boundary               */

static size_t build_ladder(size_t *out, size_t cap) {
  size_t n = 0;
  for (size_t s = 1; s <= 1100 && n < cap; s++) out[n++] = s; /* every small size */
  for (double d = 1100; d <= 300000 && n < cap; d = d * 1.03 + 1) out[n++] = (size_t)d;
  for (int b = 0; b <= 22 && n + 3 < cap; b++) {
    size_t v = (size_t)1 << b;
    if (v > 1) out[n++] = v - 1;
    out[n++] = v;
    out[n++] = v + 1;
  }
  out[n++] = 300000;
  qsort(out, n, sizeof out[0], cmp_ptr); /* size_t and uintptr_t: same layout */
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (k == 0 || out[k - 1] != out[i]) out[k++] = out[i];
  return k;
}

typedef void *(*realloc_fn)(void *, size_t);

static int realloc_walk(realloc_fn rf, const char *who, const size_t *lad, size_t nl, int dir) {
  /* dir = +1: grow through the ladder, -1: shrink through it */
  size_t start = dir > 0 ? 0 : nl - 1;
  size_t cur = lad[start];
  void *p = rf(NULL, cur);
  CHECK(p != NULL, "%s(NULL, %zu) failed", who, cur);
  if (!p) return 1;
  unsigned seed = 1;
  fill_pat(p, cur, seed);
  for (size_t step = 1; step < nl; step++) {
    size_t idx = dir > 0 ? step : nl - 1 - step;
    size_t nsz = lad[idx];
    void *q = rf(p, nsz);
    CHECK(q != NULL, "%s(%p, %zu -> %zu) returned NULL", who, p, cur, nsz);
    if (!q) { free(p); return 1; }
    CHECK(is_aligned(q, 16), "%s(.., %zu) = %p not 16-aligned", who, nsz, q);
    CHECK(brisk_usable_size(q) >= nsz, "%s(.., %zu): usable %zu", who, nsz, brisk_usable_size(q));
    size_t keep = cur < nsz ? cur : nsz;
    size_t off = check_pat(q, keep, seed);
    if (off != (size_t)-1) {
      FAIL("%s %zu -> %zu bytes (%p -> %p): byte %zu of the kept prefix changed", who, cur, nsz, p, q, off);
      free(q);
      return 1;
    }
    seed++;
    fill_pat(q, nsz, seed);
    p = q;
    cur = nsz;
  }
  free(p);
  return 0;
}

static void test_realloc(void) {
  section("realloc across class boundaries");
  static size_t lad[2000];
  size_t nl = build_ladder(lad, 1900);
  realloc_walk(realloc, "realloc", lad, nl, +1);
  /* A block above 4 KiB that outgrows itself gets at least a quarter more
   * (config.h, REALLOC_GROW_STEP): appended to byte by byte, it moves
   * about three times per doubling. */
  {
    char *g = malloc(5000);
    size_t u = brisk_usable_size(g);
    while (g != NULL && u < 65536) {
      char *t = realloc(g, u + 1);
      CHECK(t != NULL, "realloc(%zu + 1) failed", u);
      if (t == NULL) break;
      size_t nu = brisk_usable_size(t);
      CHECK(nu >= u + u / 4, "realloc(%zu + 1): usable %zu, less than a quarter more", u, nu);
      g = t;
      u = nu;
    }
    free(g);
  }
  realloc_walk(realloc, "realloc", lad, nl, -1);
  realloc_walk(brisk_realloc, "brisk_realloc", lad, nl, +1);
  realloc_walk(brisk_realloc, "brisk_realloc", lad, nl, -1);

  /* random jumps between ladder sizes, with a neighbour block live so a
   * realloc that writes past its block is seen */
  unsigned rng = 12345;
  size_t cur = 64;
  void *p = malloc(cur);
  void *guard = malloc(cur);
  unsigned seed = 100;
  if (p && guard) {
    fill_pat(p, cur, seed);
    memset(guard, 0xEE, malloc_usable_size(guard));
    size_t gsz = malloc_usable_size(guard);
    for (int i = 0; i < 1500; i++) {
      rng = rng * 1103515245u + 12345u;
      size_t nsz = lad[(rng >> 8) % nl];
      void *q = (i & 1) ? realloc(p, nsz) : brisk_realloc(p, nsz);
      CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", cur, nsz);
      if (!q) break;
      size_t keep = cur < nsz ? cur : nsz;
      size_t off = check_pat(q, keep, seed);
      if (off != (size_t)-1) {
        FAIL("random realloc %zu -> %zu: byte %zu of the kept prefix changed", cur, nsz, off);
        free(q);
        q = NULL;
        break;
      }
      seed++;
      fill_pat(q, nsz, seed);
      p = q;
      cur = nsz;
      if (i % 100 == 99) {
        size_t goff = check_byte(guard, gsz, 0xEE);
        CHECK(goff == (size_t)-1, "a live neighbour block was overwritten at offset %zu during realloc", goff);
      }
    }
    if (p) free(p);
    free(guard);
  }

  /* realloc to the same size and to the usable size keeps data */
  for (size_t n = 1; n < 5000; n = n * 3 + 1) {
    char *a = malloc(n);
    if (!a) { FAIL("malloc(%zu) failed", n); continue; }
    fill_pat(a, n, 7);
    char *b = realloc(a, n);
    CHECK(b && check_pat(b, n, 7) == (size_t)-1, "realloc to the same size %zu lost data", n);
    if (!b) { free(a); continue; }
    size_t u = malloc_usable_size(b);
    memset(b + n, 0x33, u - n);
    char *c = realloc(b, u);
    CHECK(c && check_pat(c, n, 7) == (size_t)-1 && check_byte(c + n, u - n, 0x33) == (size_t)-1,
          "realloc to the usable size %zu lost data", u);
    free(c ? c : b);
  }

  /* large and huge transitions */
  const size_t big[] = {1, 1u << 20, 64u << 20, 100, 5u << 20, 300000, 32u << 20, 17};
  cur = 0;
  p = NULL;
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    size_t nsz = big[i];
    void *q = realloc(p, nsz);
    CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", cur, nsz);
    if (!q) break;
    size_t keep = cur < nsz ? cur : nsz;
    CHECK(check_byte(q, keep, (unsigned char)(0xA0 + i)) == (size_t)-1,
          "realloc %zu -> %zu did not keep the prefix", cur, nsz);
    memset(q, 0xA1 + (int)i, nsz);
    p = q;
    cur = nsz;
  }
  free(p);
  section_end();
}

/* ------------------------------------------------------------------ */
/* calloc zeroes, even over recycled memory                              */

static void test_calloc(void) {
  section("calloc zeroes recycled memory");
  const size_t sizes[] = {1, 8, 16, 24, 32, 48, 100, 256, 1000, 1024, 4096, 10000, 65536, 100000,
                          300000, 1u << 20, 5u << 20};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    int reps = n >= (1u << 20) ? 8 : 40;
    for (int r = 0; r < reps; r++) {
      void *p = malloc(n);
      if (!p) { FAIL("malloc(%zu) failed", n); break; }
      memset(p, 0xAB, malloc_usable_size(p));
      free(p);
      unsigned char *c = (r & 1) ? brisk_calloc(1, n) : calloc(n, 1);
      if (!c) { FAIL("calloc(%zu) failed", n); break; }
      size_t off = check_byte(c, n, 0);
      CHECK(off == (size_t)-1, "calloc(%zu) (round %d, after a 0xAB block was freed) not zero at offset %zu: %#x",
            n, r, off, off == (size_t)-1 ? 0 : c[off]);
      memset(c, 0xAB, malloc_usable_size(c));
      free(c);
    }
    /* batch: many dirty blocks freed, then calloc'ed back */
    if (n <= 100000) {
      enum { B = 64 };
      void *ps[B];
      for (int i = 0; i < B; i++) {
        ps[i] = malloc(n);
        if (ps[i]) memset(ps[i], 0xAB, malloc_usable_size(ps[i]));
      }
      for (int i = 0; i < B; i++) free(ps[i]);
      for (int i = 0; i < B; i++) {
        ps[i] = calloc(1, n);
        if (!ps[i]) { FAIL("calloc(%zu) failed", n); continue; }
        size_t off = check_byte(ps[i], n, 0);
        CHECK(off == (size_t)-1, "batch calloc(%zu) #%d not zero at offset %zu", n, i, off);
      }
      for (int i = 0; i < B; i++) free(ps[i]);
    }
  }
  /* Huge blocks reuse freed mappings, trimmed or grown in place: every
   * size in turn, each over the dirty mapping of the one before. */
  {
    const size_t mib = (size_t)1 << 20;
    const size_t seq[] = {12 * mib, 6 * mib, 20 * mib, 9 * mib + 123, 9 * mib, 30 * mib, 5 * mib};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
      size_t n = seq[i];
      void *d = malloc(n);
      if (!d) { FAIL("malloc(%zu) failed", n); continue; }
      memset(d, 0xCD, n);
      free(d);
      unsigned char *c = calloc(1, n + (i & 1) * mib);
      size_t cn = n + (i & 1) * mib;
      if (!c) { FAIL("calloc(%zu) failed", cn); continue; }
      size_t off = check_byte(c, cn, 0);
      CHECK(off == (size_t)-1, "huge calloc(%zu) over a freed %zu B block not zero at offset %zu", cn, n, off);
      size_t u = malloc_usable_size(c);
      CHECK(u >= cn && u < cn + 4096, "huge calloc(%zu): usable size %zu (a reused mapping is trimmed)", cn, u);
      memset(c, 0x5A, u);
      free(c);
    }
  }
  /* calloc with count*size products */
  {
    unsigned char *c = calloc(1000, 1000);
    CHECK(c != NULL, "calloc(1000, 1000) failed");
    if (c) { CHECK(check_byte(c, 1000000, 0) == (size_t)-1, "calloc(1000,1000) not zero"); free(c); }
  }
  /* 100 MiB: zero the first time and after a dirty 100 MiB block was freed */
  const size_t big = 100u << 20;
  for (int r = 0; r < 3; r++) {
    unsigned char *c = (r == 1) ? brisk_calloc(big / 4, 4) : calloc(1, big);
    CHECK(c != NULL, "calloc(100 MiB) round %d failed", r);
    if (!c) continue;
    size_t off = check_byte(c, big, 0);
    CHECK(off == (size_t)-1, "calloc(100 MiB) round %d not zero at offset %zu", r, off);
    memset(c, 0xAB, big);
    free(c);
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* brisk_owns                                                           */

static char g_global_array[4096];
static const char g_const_array[64] = "constant";

static void test_owns(void) {
  section("brisk_owns");
  const size_t sizes[] = {0, 1, 16, 17, 64, 100, 512, 1000, 4000, 8192, 20000, 65536, 100000,
                          262144, 1u << 20, 3u << 20, 20u << 20};
  void *live[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = (i & 1) ? malloc(sizes[i]) : brisk_malloc(sizes[i]);
    live[i] = p;
    if (!p) { FAIL("malloc(%zu) failed", sizes[i]); continue; }
    size_t u = brisk_usable_size(p);
    CHECK(brisk_owns(p), "brisk_owns(start of a live %zu-byte block %p) is false", sizes[i], p);
    if (u > 1) {
      CHECK(brisk_owns((char *)p + 1), "brisk_owns(p+1) of a %zu-byte block is false", sizes[i]);
      CHECK(brisk_owns((char *)p + u / 2), "brisk_owns(interior p+%zu) of a %zu-byte block is false", u / 2,
            sizes[i]);
      CHECK(brisk_owns((char *)p + u - 1), "brisk_owns(last byte p+%zu) of a %zu-byte block is false", u - 1,
            sizes[i]);
    }
  }
  void *c = calloc(10, 10), *a = aligned_alloc(4096, 5000), *r = realloc(NULL, 50);
  CHECK(c && brisk_owns(c), "brisk_owns(calloc block) is false");
  CHECK(a && brisk_owns(a), "brisk_owns(aligned_alloc block) is false");
  CHECK(r && brisk_owns(r), "brisk_owns(realloc(NULL) block) is false");
  free(c); free(a); free(r);

  char stack_array[256];
  memset(stack_array, 1, sizeof stack_array);
  int stack_int = 0;
  CHECK(!brisk_owns(opaque_ptr(stack_array)), "brisk_owns(stack array %p) is true", (void *)stack_array);
  CHECK(!brisk_owns(opaque_ptr(&stack_int)), "brisk_owns(stack variable) is true");
  CHECK(!brisk_owns(opaque_ptr(g_global_array)), "brisk_owns(global array) is true");
  CHECK(!brisk_owns(opaque_ptr((void *)g_const_array)), "brisk_owns(const global) is true");
  CHECK(!brisk_owns(opaque_ptr((void *)"string literal")), "brisk_owns(string literal) is true");
  CHECK(!brisk_owns(opaque_ptr((void *)(uintptr_t)&test_owns)), "brisk_owns(a function's code) is true");
  CHECK(!brisk_owns(opaque_ptr((void *)stdout)), "brisk_owns(stdout FILE in libc) is true");
  CHECK(!brisk_owns(NULL), "brisk_owns(NULL) is true");
  const uintptr_t garbage[] = {1, 2, 8, 16, 4095, 4096, 0x10000, 0x12345678, 0xdeadbeef, 0xdeadbeefdeadbeefull,
                               0x00007fffffffffffull, 0x0000800000000000ull, 0xffff800000000000ull,
                               0xfffffffffffff000ull, UINTPTR_MAX, UINTPTR_MAX - 15, 0x5555deadbeefull,
                               0x7f0000000000ull, 0x100000000000ull};
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++)
    CHECK(!brisk_owns(opaque_ptr((void *)garbage[i])), "brisk_owns(garbage %#lx) is true",
          (unsigned long)garbage[i]);
  /* glibc's own allocator */
  const size_t lsz[] = {16, 100, 5000, 200000, 2u << 20};
  for (size_t i = 0; i < sizeof lsz / sizeof lsz[0]; i++) {
    void *g = __libc_malloc(lsz[i]);
    CHECK(g != NULL, "__libc_malloc(%zu) failed", lsz[i]);
    if (!g) continue;
    CHECK(!brisk_owns(g), "brisk_owns(__libc_malloc(%zu) = %p) is true", lsz[i], g);
    CHECK(!brisk_owns((char *)g + lsz[i] / 2), "brisk_owns(interior of a __libc_malloc block) is true");
    __libc_free(g);
  }
  /* an mmap'd region nobody allocated from */
  void *m = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m != MAP_FAILED) {
    CHECK(!brisk_owns(m), "brisk_owns(foreign mmap region) is true");
    CHECK(!brisk_owns((char *)m + 12345), "brisk_owns(inside foreign mmap region) is true");
    munmap(m, 1u << 20);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (!live[i]) continue;
    CHECK(brisk_owns(live[i]), "brisk_owns(live block of %zu) became false", sizes[i]);
    free(live[i]);
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* errno, interchangeability                                             */

static void test_errno_and_mixing(void) {
  section("free preserves errno; mixing");
  const size_t sizes[] = {0, 8, 100, 2000, 40000, 300000, 2u << 20, 40u << 20};
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      void *p = malloc(sizes[i]);
      void *q = brisk_malloc(sizes[i]);
      void *a = aligned_alloc(1024, sizes[i] + 1);
      errno = EDOM;
      free(p);
      CHECK(errno == EDOM, "free(malloc(%zu)) changed errno to %d", sizes[i], errno);
      errno = ERANGE;
      brisk_free(q);
      CHECK(errno == ERANGE, "brisk_free(brisk_malloc(%zu)) changed errno to %d", sizes[i], errno);
      errno = EILSEQ;
      free(a);
      CHECK(errno == EILSEQ, "free(aligned_alloc(1024, %zu)) changed errno to %d", sizes[i] + 1, errno);
      errno = EDOM;
      free(NULL);
      CHECK(errno == EDOM, "free(NULL) changed errno");
    }
    /* many frees, so that page release / purge paths run */
    enum { M = 4000 };
    static void *many[M];
    for (int i = 0; i < M; i++) many[i] = malloc((size_t)(i % 50) * 40 + 1);
    errno = EDOM;
    for (int i = 0; i < M; i++) free(many[i]);
    CHECK(errno == EDOM, "a burst of %d frees changed errno to %d", M, errno);
    errno = EDOM;
    brisk_collect(true);
    void *big = malloc(8u << 20);
    free(big);
    CHECK(errno == EDOM, "free after brisk_collect changed errno to %d", errno);
  }
  /* blocks from the standard names and the prefixed names are the same */
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = malloc(sizes[i]);
    void *q = brisk_malloc(sizes[i]);
    if (!p || !q) { FAIL("allocation of %zu failed", sizes[i]); continue; }
    CHECK(brisk_usable_size(p) == malloc_usable_size(p), "usable sizes differ between APIs");
    fill_pat(p, sizes[i], 1);
    p = brisk_realloc(p, sizes[i] + 10);
    CHECK(p && check_pat(p, sizes[i], 1) == (size_t)-1, "brisk_realloc of a malloc block lost data");
    fill_pat(q, sizes[i], 2);
    q = realloc(q, sizes[i] + 10);
    CHECK(q && check_pat(q, sizes[i], 2) == (size_t)-1, "realloc of a brisk_malloc block lost data");
    brisk_free(p);
    free(q);
  }
  /* brisk_free_sized, free_sized and free_aligned_sized (C23) with the
   * requested size, on every kind of block: they release it (a huge block
   * is no longer brisk's; many rounds do not grow the mapped memory) */
  for (int form = 0; form < 3; form++) {
    static const char *const names[] = {"brisk_free_sized", "free_sized", "free_aligned_sized"};
    double before = brisk_stat("mapped_bytes");
    for (int round = 0; round < 10; round++)
      for (size_t n = 1; n < (4u << 20); n = n * 5 + 3) {
        void *ps[4] = {brisk_malloc(n), brisk_calloc(n, 1), brisk_aligned_alloc(256, n), malloc(n)};
        for (int k = 0; k < 4; k++) {
          if (!ps[k]) { FAIL("allocation %d of %zu bytes failed", k, n); continue; }
          memset(ps[k], 1, n < 4096 ? n : 4096);
          if (form == 0) brisk_free_sized(ps[k], n);
          else if (form == 1) free_sized(ps[k], n);
          else free_aligned_sized(ps[k], k == 2 ? 256 : 0, n);
          if (n > (2u << 20))
            CHECK(!brisk_owns(ps[k]), "%s(%p, %zu): the huge block is still brisk's", names[form], ps[k], n);
        }
      }
    double after = brisk_stat("mapped_bytes");
    CHECK(after <= before + 32.0 * 1048576, "%s: 10 rounds of allocations released with it grew brisk's mapped memory "
          "from %.1f to %.1f MiB (does it release?)", names[form], before / 1048576.0, after / 1048576.0);
  }
  void *p = malloc(77);
  CHECK(p != NULL, "malloc after brisk_free_sized failed");
  free(p);
  section_end();
}

/* ------------------------------------------------------------------ */
/* version, stats                                                       */

/* Minimal JSON validator (RFC 8259). Records whether the key "version"
 * appears anywhere. */
typedef struct { const char *s; size_t i, n; int saw_version; int depth; } json_t;
static void js_ws(json_t *j) {
  while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\t' || j->s[j->i] == '\r'))
    j->i++;
}
static int js_value(json_t *j);
static int js_string(json_t *j, int *is_version) {
  if (j->i >= j->n || j->s[j->i] != '"') return 0;
  size_t start = ++j->i;
  while (j->i < j->n && j->s[j->i] != '"') {
    unsigned char ch = (unsigned char)j->s[j->i];
    if (ch < 0x20) return 0;
    if (ch == '\\') {
      j->i++;
      if (j->i >= j->n) return 0;
      char e = j->s[j->i];
      if (e == 'u') {
        for (int k = 1; k <= 4; k++) {
          if (j->i + k >= j->n) return 0;
          char h = j->s[j->i + k];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
        }
        j->i += 4;
      } else if (!strchr("\"\\/bfnrt", e)) {
        return 0;
      }
    }
    j->i++;
  }
  if (j->i >= j->n) return 0;
  if (is_version) *is_version = (j->i - start == 7 && memcmp(j->s + start, "version", 7) == 0);
  j->i++;
  return 1;
}
static int js_number(json_t *j) {
  size_t st = j->i;
  if (j->i < j->n && j->s[j->i] == '-') j->i++;
  if (j->i >= j->n) return 0;
  if (j->s[j->i] == '0') j->i++;
  else if (j->s[j->i] >= '1' && j->s[j->i] <= '9') while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
  else return 0;
  if (j->i < j->n && j->s[j->i] == '.') {
    j->i++;
    size_t d = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
    if (j->i == d) return 0;
  }
  if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
    j->i++;
    if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-')) j->i++;
    size_t d = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') j->i++;
    if (j->i == d) return 0;
  }
  return j->i > st;
}
static int js_lit(json_t *j, const char *w) {
  size_t l = strlen(w);
  if (j->i + l > j->n || memcmp(j->s + j->i, w, l) != 0) return 0;
  j->i += l;
  return 1;
}
static int js_value(json_t *j) {
  if (++j->depth > 64) return 0;
  js_ws(j);
  if (j->i >= j->n) return 0;
  char ch = j->s[j->i];
  int ok;
  if (ch == '{') {
    j->i++;
    js_ws(j);
    if (j->i < j->n && j->s[j->i] == '}') { j->i++; j->depth--; return 1; }
    for (;;) {
      js_ws(j);
      int isv = 0;
      if (!js_string(j, &isv)) return 0;
      if (isv) j->saw_version = 1;
      js_ws(j);
      if (j->i >= j->n || j->s[j->i] != ':') return 0;
      j->i++;
      if (!js_value(j)) return 0;
      js_ws(j);
      if (j->i < j->n && j->s[j->i] == ',') { j->i++; continue; }
      if (j->i < j->n && j->s[j->i] == '}') { j->i++; break; }
      return 0;
    }
    ok = 1;
  } else if (ch == '[') {
    j->i++;
    js_ws(j);
    if (j->i < j->n && j->s[j->i] == ']') { j->i++; j->depth--; return 1; }
    for (;;) {
      if (!js_value(j)) return 0;
      js_ws(j);
      if (j->i < j->n && j->s[j->i] == ',') { j->i++; continue; }
      if (j->i < j->n && j->s[j->i] == ']') { j->i++; break; }
      return 0;
    }
    ok = 1;
  } else if (ch == '"') {
    ok = js_string(j, NULL);
  } else if (ch == 't') {
    ok = js_lit(j, "true");
  } else if (ch == 'f') {
    ok = js_lit(j, "false");
  } else if (ch == 'n') {
    ok = js_lit(j, "null");
  } else {
    ok = js_number(j);
  }
  j->depth--;
  return ok;
}

static char g_json_copy[1 << 20];

static void test_version_stats(void) {
  section("version / stats / collect");
  const char *v = brisk_version();
  CHECK(v != NULL && strcmp(v, "0.1.0") == 0, "brisk_version() = \"%s\", expected \"0.1.0\"", v ? v : "(null)");
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", BRISK_VERSION_MAJOR, BRISK_VERSION_MINOR, BRISK_VERSION_PATCH);
  CHECK(v != NULL && strcmp(v, want) == 0, "brisk_version() \"%s\" disagrees with BRISK_VERSION_* (%s)",
        v ? v : "(null)", want);

  /* some activity so the statistics are not all zero */
  void *keep[100];
  for (int i = 0; i < 100; i++) keep[i] = malloc((size_t)i * 100 + 1);

  enum { CAP = 1 << 20 };
  char *buf = malloc(CAP);
  CHECK(buf != NULL, "malloc(1 MiB) failed");
  if (!buf) { section_end(); return; }
  size_t need0 = brisk_stats_json(NULL, 0);
  CHECK(need0 > 2 && need0 < CAP - 64, "brisk_stats_json(NULL, 0) = %zu, expected the needed length", need0);
  memset(buf, 0x5A, CAP);
  size_t len = brisk_stats_json(buf, CAP);
  CHECK(len > 2 && len < CAP, "brisk_stats_json(buf, %d) = %zu", CAP, len);
  if (len > 2 && len < CAP) {
    CHECK(buf[len] == '\0', "brisk_stats_json: no NUL at the returned length %zu", len);
    CHECK(strlen(buf) == len, "brisk_stats_json returned %zu but strlen is %zu", len, strlen(buf));
    CHECK((unsigned char)buf[len + 1] == 0x5A, "brisk_stats_json wrote past its NUL");
    memcpy(g_json_copy, buf, len + 1);
    json_t j = {g_json_copy, 0, len, 0, 0};
    int ok = js_value(&j);
    js_ws(&j);
    CHECK(ok && j.i == len, "brisk_stats_json output is not valid JSON (error near offset %zu): %.300s", j.i,
          g_json_copy);
    json_t top = {g_json_copy, 0, len, 0, 0};
    js_ws(&top);
    CHECK(top.i < len && g_json_copy[top.i] == '{', "brisk_stats_json output is not one JSON object");
    CHECK(j.saw_version, "brisk_stats_json output has no key \"version\": %.300s", g_json_copy);
    CHECK(strstr(g_json_copy, "0.1.0") != NULL, "brisk_stats_json does not mention version 0.1.0");

    /* too small buffers: returns the needed length, writes at most len
     * bytes, and the truncated text is NUL-terminated */
    const size_t smalls[] = {1, 2, 5, 16, len / 2, len - 1, len};
    for (size_t k = 0; k < sizeof smalls / sizeof smalls[0]; k++) {
      size_t L = smalls[k];
      if (L == 0) continue;
      memset(buf, 0x5A, L + 64);
      size_t r = brisk_stats_json(buf, L);
      CHECK(r >= L, "brisk_stats_json(buf, %zu) returned %zu: with a too small buffer it must return the "
            "needed length (about %zu)", L, r, len);
      CHECK(r + 64 > len && r < len + 64, "brisk_stats_json(buf, %zu) returned %zu, full length was %zu", L, r, len);
      CHECK(buf[L - 1] == '\0', "brisk_stats_json(buf, %zu): truncated text is not NUL-terminated at [%zu]", L, L - 1);
      CHECK(memchr(buf, '\0', L) != NULL && strlen(buf) == L - 1,
            "brisk_stats_json(buf, %zu): truncated strlen %zu, expected %zu", L, strnlen(buf, L), L - 1);
      int past = 0;
      for (size_t q = L; q < L + 64; q++) past |= ((unsigned char)buf[q] != 0x5A);
      CHECK(!past, "brisk_stats_json(buf, %zu) wrote past the buffer", L);
      CHECK(L < 2 || buf[0] == g_json_copy[0], "truncated JSON does not start like the full one");
    }
    /* len 0 with a real buffer writes nothing */
    buf[0] = 'X';
    size_t r0 = brisk_stats_json(buf, 0);
    CHECK(buf[0] == 'X', "brisk_stats_json(buf, 0) wrote into the buffer");
    CHECK(r0 + 64 > len && r0 < len + 64, "brisk_stats_json(buf, 0) = %zu, expected about %zu", r0, len);
  }
  free(buf);

  /* stats_print writes something */
  FILE *f = tmpfile();
  CHECK(f != NULL, "tmpfile() failed");
  if (f) {
    brisk_stats_print(f);
    fflush(f);
    long sz = ftell(f);
    CHECK(sz > 0, "brisk_stats_print wrote nothing (%ld bytes)", sz);
    fclose(f);
  }

  /* collect: live blocks survive, later allocations work */
  for (int i = 0; i < 100; i++)
    if (keep[i]) memset(keep[i], i, (size_t)i * 100 + 1);
  for (int i = 0; i < 100; i += 2) { free(keep[i]); keep[i] = NULL; }
  void *big = malloc(30u << 20);
  free(big);
  brisk_collect(true);
  brisk_collect(true);
  for (int i = 1; i < 100; i += 2)
    CHECK(check_byte(keep[i], (size_t)i * 100 + 1, (unsigned char)i) == (size_t)-1,
          "a live block of %d bytes changed across brisk_collect", i * 100 + 1);
  for (int i = 0; i < 100; i += 2) {
    keep[i] = malloc((size_t)i * 100 + 1);
    CHECK(keep[i] != NULL, "malloc after brisk_collect failed");
    if (keep[i]) memset(keep[i], 0xC0, (size_t)i * 100 + 1);
  }
  for (int i = 1; i < 100; i += 2)
    CHECK(check_byte(keep[i], (size_t)i * 100 + 1, (unsigned char)i) == (size_t)-1,
          "a live block changed after allocating post-collect (overlap)");
  big = calloc(1, 30u << 20);
  CHECK(big && check_byte(big, 30u << 20, 0) == (size_t)-1, "calloc(30 MiB) after collect not zero");
  free(big);
  for (int i = 0; i < 100; i++) free(keep[i]);
  brisk_collect(true);
  void *after = malloc(48);
  CHECK(after != NULL && brisk_owns(after), "malloc after the last brisk_collect failed");
  free(after);
  size_t again = brisk_stats_json(NULL, 0);
  CHECK(again > 2, "brisk_stats_json after collect returned %zu", again);
  section_end();
}


/* ------------------------------------------------------------------ */
/* brisk_good_size, brisk_malloc_usable                                  */

/* good_size(n) is what a block of n gets: every size up to 64 KiB, then a
 * sweep of large and huge sizes (slice and page boundaries, both sides). */
static void test_good_size(void) {
  section("brisk_good_size = usable size");
  long bad = 0;
  size_t prev = 0;
  for (size_t n = 0; n <= 65536; n++) {
    void *p = brisk_malloc(opaque_size(n));
    size_t g = brisk_good_size(n), u = p ? brisk_usable_size(p) : 0;
    if ((g != u || g < n || g < prev) && bad++ < 5)
      FAIL("brisk_good_size(%zu) = %zu, the block's usable size %zu (previous size: %zu)", n, g, u, prev);
    prev = g;
    brisk_free(p);
  }
  static size_t sizes[2000];
  size_t ns = 0;
  for (size_t n = 65536; n <= ((size_t)2 << 20) + 65536; n += 4096, ns++) sizes[ns] = n + (ns % 7) * 3;
  for (size_t k = 1; k <= 33; k++) {
    sizes[ns++] = k * 65536 - 1;
    sizes[ns++] = k * 65536 + 1;
  }
  for (double d = (double)((size_t)2 << 20); d <= (double)((size_t)64 << 20); d *= 1.07) {
    sizes[ns++] = (size_t)d;
    sizes[ns++] = ((size_t)d & ~(size_t)4095) + 1;
  }
  for (size_t i = 0; i < ns; i++) {
    size_t n = sizes[i], u1 = 0;
    void *p = (i & 1) ? malloc(opaque_size(n)) : brisk_malloc_usable(opaque_size(n), &u1);
    if (!p) { FAIL("allocation of %zu bytes failed", n); continue; }
    size_t g = brisk_good_size(n), u = brisk_usable_size(p);
    if ((g != u || g < n || (!(i & 1) && u1 != u)) && bad++ < 10)
      FAIL("brisk_good_size(%zu) = %zu, usable size %zu, brisk_malloc_usable said %zu", n, g, u, u1);
    free(p);
  }
  CHECK(bad == 0, "%ld sizes where brisk_good_size differs from the block", bad);
  CHECK(brisk_good_size(SIZE_MAX) == 0 && brisk_good_size(SIZE_MAX - 4096) == 0,
        "brisk_good_size of an impossible size: %zu, %zu (0 expected)", brisk_good_size(SIZE_MAX),
        brisk_good_size(SIZE_MAX - 4096));
  section_end();

  section("brisk_malloc_usable");
  size_t u = 0;
  char *p = brisk_malloc_usable(opaque_size(100), &u);
  CHECK(p != NULL && u == brisk_usable_size(p) && u == brisk_good_size(100), "brisk_malloc_usable(100): %p, %zu", p, u);
  if (p) memset(p, 0x7e, u); /* all of it may be used */
  brisk_free(p);
  p = brisk_malloc_usable(opaque_size(300000), NULL); /* no place for the size: fine */
  CHECK(p != NULL && brisk_owns(p), "brisk_malloc_usable(300000, NULL) = %p", p);
  brisk_free(p);
  u = 12345;
  errno = 0;
  p = brisk_malloc_usable(opaque_size(SIZE_MAX - 4096), &u);
  CHECK(p == NULL && u == 0 && errno == ENOMEM, "brisk_malloc_usable(SIZE_MAX - 4096): %p, usable %zu, errno %d", p,
        u, errno);
  section_end();
}

/* ------------------------------------------------------------------ */
/* brisk_zalloc, brisk_heap_zalloc, brisk_rezalloc                       */

/* Leave freed, dirty blocks of n bytes behind, for the next allocations of
 * that size to reuse. */
static void dirty_blocks(size_t n, int count) {
  void *b[16];
  for (int i = 0; i < count && i < 16; i++) {
    b[i] = malloc(opaque_size(n));
    if (b[i]) memset(b[i], 0xAB, malloc_usable_size(b[i]));
  }
  for (int i = 0; i < count && i < 16; i++) free(b[i]);
}

static void test_zalloc(void) {
  section("brisk_zalloc / brisk_heap_zalloc");
  const size_t sizes[] = {0, 1, 16, 100, 1000, 1024, 1100, 5000, 40000, 65536, 100000, 300000, 3u << 20};
  brisk_heap_t *h = brisk_heap_new();
  CHECK(h != NULL, "brisk_heap_new failed");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    dirty_blocks(n, 8);
    void *p = brisk_zalloc(opaque_size(n));
    CHECK(p != NULL, "brisk_zalloc(%zu) failed", n);
    if (p) {
      size_t u = brisk_usable_size(p), off = check_byte(p, u, 0);
      CHECK(off == (size_t)-1, "brisk_zalloc(%zu): byte %zu of %zu usable is not zero", n, off, u);
    }
    void *q[8];
    for (int k = 0; k < 8; k++) {
      q[k] = brisk_heap_malloc(h, opaque_size(n));
      if (q[k]) memset(q[k], 0xCD, brisk_usable_size(q[k]));
    }
    for (int k = 0; k < 8; k++) brisk_free(q[k]);
    void *z = brisk_heap_zalloc(h, opaque_size(n));
    CHECK(z != NULL, "brisk_heap_zalloc(%zu) failed", n);
    if (z) {
      size_t u = brisk_usable_size(z), off = check_byte(z, u, 0);
      CHECK(off == (size_t)-1, "brisk_heap_zalloc(%zu): byte %zu of %zu usable is not zero", n, off, u);
      void *c = brisk_heap_calloc(h, 1, opaque_size(n));
      CHECK(c != NULL && check_byte(c, n, 0) == (size_t)-1, "brisk_heap_calloc(1, %zu) is not zero", n);
      brisk_free(c);
    }
    brisk_free(z);
    brisk_free(p);
  }
  brisk_heap_destroy(h);
  section_end();
}


/* Two large blocks of `size` bytes of heap h, b right after a's span of
 * two slices (a zeroed when `zero`). The first two usually are; the
 * hardened build puts a large block where a guard page already ends a
 * run of free slices, so there up to 32 are taken and the rest freed. */
static bool large_neighbours(brisk_heap_t *h, size_t size, bool zero, char **a_out, char **b_out) {
  char *blk[32];
  int n = 0, ai = -1, bi = -1;
  while (n < 32 && ai < 0) {
    blk[n] = zero ? brisk_heap_zalloc(h, opaque_size(size)) : brisk_heap_malloc(h, opaque_size(size));
    if (blk[n] == NULL) break;
    for (int j = 0; j < n && ai < 0; j++) {
      if (blk[n] == blk[j] + 131072) ai = j, bi = n;
      else if (blk[j] == blk[n] + 131072) ai = n, bi = j;
    }
    n++;
  }
  for (int i = 0; i < n; i++)
    if (i != ai && i != bi) brisk_free(blk[i]);
  if (ai < 0) return false;
  *a_out = blk[ai];
  *b_out = blk[bi];
  return true;
}

static void test_rezalloc(void) {
  section("brisk_rezalloc");
  /* grows and moves: what it copied stays, the rest up to the usable size is zero */
  dirty_blocks(5000, 16);
  char *p = brisk_zalloc(opaque_size(100));
  fill_pat(p, 100, 1);
  char *q = brisk_rezalloc(p, opaque_size(5000));
  CHECK(q != NULL, "brisk_rezalloc(p, 5000) failed");
  if (q) {
    size_t u = brisk_usable_size(q);
    CHECK(check_pat(q, 100, 1) == (size_t)-1, "brisk_rezalloc lost the first 100 bytes");
    size_t off = check_byte(q + 100, u - 100, 0);
    CHECK(off == (size_t)-1, "brisk_rezalloc(100 -> 5000): byte %zu of %zu is not zero", off + 100, u);
    /* shrinks and moves (to a dirty block): beyond the bytes copied, zero */
    fill_pat(q, 5000, 2);
    dirty_blocks(100, 16);
    char *r = brisk_rezalloc(q, opaque_size(100));
    CHECK(r != NULL && check_pat(r, 100, 2) == (size_t)-1, "brisk_rezalloc(5000 -> 100) lost data");
    if (r) {
      size_t ur = brisk_usable_size(r);
      CHECK(check_byte(r + 100, ur - 100, 0) == (size_t)-1, "brisk_rezalloc(5000 -> 100): bytes 100..%zu not zero", ur);
      q = r;
    }
  }
  brisk_free(q);

  /* a large block grows in place over a freed, dirty neighbour */
  brisk_heap_t *h = brisk_heap_new();
  char *a, *b;
  bool adjacent = large_neighbours(h, 100000, true, &a, &b);
  CHECK(adjacent, "test premise: no two of 32 100000-byte blocks of a new heap are neighbours");
  if (adjacent) {
    memset(b, 0xEE, brisk_usable_size(b));
    brisk_free(b);
    fill_pat(a, 100000, 3);
    size_t old = brisk_usable_size(a);
    char *g = brisk_rezalloc(a, opaque_size(190000));
    CHECK(g == a, "brisk_rezalloc(100000 -> 190000) over a free neighbour moved the block (%p -> %p)", (void *)a,
          (void *)g);
    if (g) {
      size_t u = brisk_usable_size(g);
      CHECK(u >= 190000 && check_pat(g, 100000, 3) == (size_t)-1, "in-place growth: usable %zu, data lost", u);
      size_t off = check_byte(g + 100000, u - 100000, 0);
      CHECK(off == (size_t)-1, "in-place growth: byte %zu of %zu not zero (old usable %zu)", off + 100000, u, old);
      a = g;
    }
    brisk_free(a);
  }
  brisk_heap_destroy(h);

  /* huge */
  char *z = brisk_zalloc(opaque_size(3u << 20));
  if (z) {
    fill_pat(z, 1000, 4);
    char *y = brisk_rezalloc(z, opaque_size(5u << 20));
    CHECK(y != NULL && check_pat(y, 1000, 4) == (size_t)-1, "brisk_rezalloc(3 MiB -> 5 MiB) lost data");
    if (y) {
      size_t off = check_byte(y + 1000, brisk_usable_size(y) - 1000, 0);
      CHECK(off == (size_t)-1, "brisk_rezalloc(3 MiB -> 5 MiB): byte %zu not zero", off + 1000);
      z = y;
    }
  }
  brisk_free(z);

  /* NULL: brisk_zalloc; 0: frees */
  dirty_blocks(700, 16);
  char *n = brisk_rezalloc(NULL, opaque_size(700));
  CHECK(n != NULL && check_byte(n, brisk_usable_size(n), 0) == (size_t)-1, "brisk_rezalloc(NULL, 700) not zero");
  CHECK(brisk_rezalloc(n, 0) == NULL, "brisk_rezalloc(p, 0) did not free and return NULL");

  /* a block of glibc's: moved to brisk, its bytes kept, the rest zero */
  char *g = __libc_malloc(200);
  if (g) {
    fill_pat(g, 200, 5);
    char *m = brisk_rezalloc(g, opaque_size(3000));
    CHECK(m != NULL && brisk_owns(m) && check_pat(m, 200, 5) == (size_t)-1, "brisk_rezalloc of a glibc block: %p",
          (void *)m);
    brisk_free(m);
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* brisk_expand                                                          */

typedef struct {
  void *p;
  size_t size;
  void *result;
} expand_job_t;
static void *expand_thread(void *arg) {
  expand_job_t *j = arg;
  j->result = brisk_expand(j->p, j->size);
  return NULL;
}

static void test_expand(void) {
  section("brisk_expand");
  CHECK(brisk_expand(NULL, 10) == NULL, "brisk_expand(NULL, 10) is not NULL");
  char *p = brisk_malloc(opaque_size(100));
  fill_pat(p, 100, 6);
  size_t u = brisk_usable_size(p);
  CHECK(brisk_expand(p, u) == p && brisk_expand(p, 10) == p && brisk_expand(p, 0) == p,
        "brisk_expand of a 100-byte block within its %zu usable bytes did not return it", u);
  CHECK(brisk_expand(p, u + 1) == NULL, "brisk_expand grew a block of a size class beyond its class");
  CHECK(brisk_usable_size(p) == u && check_pat(p, 100, 6) == (size_t)-1, "a failed brisk_expand changed the block");
  brisk_free(p);

  /* large: in place over free slices only, on the owner's thread only */
  brisk_heap_t *h = brisk_heap_new();
  char *a, *b;
  if (large_neighbours(h, 100000, false, &a, &b)) {
    fill_pat(a, 100000, 7);
    CHECK(brisk_expand(a, 150000) == NULL, "brisk_expand grew a large block over its neighbour");
    brisk_free(b);
    expand_job_t j = {a, 150000, (void *)1};
    pthread_t t;
    pthread_create(&t, NULL, expand_thread, &j);
    pthread_join(t, NULL);
    CHECK(j.result == NULL && brisk_usable_size(a) == brisk_good_size(100000),
          "brisk_expand of a large block on another thread: %p, usable %zu", j.result, brisk_usable_size(a));
    CHECK(brisk_expand(a, 150000) == a, "brisk_expand(100000 -> 150000) over free slices failed");
    CHECK(brisk_usable_size(a) == brisk_good_size(150000) && check_pat(a, 100000, 7) == (size_t)-1,
          "after brisk_expand: usable %zu (good size %zu), data %s", brisk_usable_size(a), brisk_good_size(150000),
          check_pat(a, 100000, 7) == (size_t)-1 ? "kept" : "lost");
    CHECK(brisk_expand(a, 3u << 20) == NULL, "brisk_expand made a large block huge");
    CHECK(brisk_expand(a, 1000) == a && brisk_usable_size(a) == brisk_good_size(150000),
          "brisk_expand to a smaller size did not keep the block as it is");
  } else {
    FAIL("test premise: no two of 32 100000-byte blocks of a new heap are neighbours");
  }
  brisk_heap_destroy(h);

  /* huge: shrinks in its mapping, grows back into what it kept */
  char *z = brisk_malloc(opaque_size(8u << 20));
  if (z) {
    fill_pat(z, 4u << 20, 8);
    CHECK(brisk_expand(z, 4u << 20) == z, "brisk_expand(8 MiB -> 4 MiB) failed");
    size_t zu = brisk_usable_size(z);
    CHECK(zu >= (4u << 20) && zu < (8u << 20), "after shrinking to 4 MiB, usable %zu", zu);
    CHECK(check_pat(z, 4u << 20, 8) == (size_t)-1, "brisk_expand(8 MiB -> 4 MiB) lost data");
    char *g = brisk_expand(z, 8u << 20);
    if (brisk_stat("hardened") == 0)
      CHECK(g == z, "brisk_expand(4 MiB -> 8 MiB) into the tail it kept failed");
    if (g) CHECK(brisk_usable_size(z) >= (8u << 20), "grown back: usable %zu", brisk_usable_size(z));
    else CHECK(brisk_usable_size(z) == zu, "a failed growth changed the usable size");
    CHECK(check_pat(z, 4u << 20, 8) == (size_t)-1, "growing back lost data");
    brisk_free(z);
  }

  /* a block of glibc's cannot be resized by brisk: NULL, quietly */
  char *gl = __libc_malloc(100);
  if (gl) {
    CHECK(brisk_expand(gl, 50) == NULL, "brisk_expand of a glibc block did not fail");
    __libc_free(gl);
  }
  section_end();
}

/* ------------------------------------------------------------------ */
/* statistics: reset, the calling thread's view, the process's figures   */

static void test_stats_reset(void) {
  section("brisk_stats_reset");
  char *big = malloc(opaque_size(100u << 20));
  if (big) big[0] = 1;
  free(big);
  brisk_collect(true);
  double peak = brisk_stat("mapped_bytes_peak");
  CHECK(peak >= (100u << 20), "test premise: mapped_bytes_peak %g after a 100 MiB block", peak);
  free(malloc(opaque_size(300000)));
  brisk_stats_reset();
  double peak2 = brisk_stat("mapped_bytes_peak"), now = brisk_stat("mapped_bytes");
  CHECK(peak2 <= peak - (80u << 20) && peak2 >= now,
        "after brisk_stats_reset: mapped_bytes_peak %g (%g before), mapped_bytes %g", peak2, peak, now);
  CHECK(brisk_stat("large_allocs") == 0 && brisk_stat("huge_allocs") == 0 && brisk_stat("errors") == 0 &&
            brisk_stat("huge_bytes_peak") == brisk_stat("huge_bytes"),
        "after brisk_stats_reset: large_allocs %g, huge_allocs %g, huge_bytes_peak %g", brisk_stat("large_allocs"),
        brisk_stat("huge_allocs"), brisk_stat("huge_bytes_peak"));
  void *l = malloc(opaque_size(300000));
  CHECK(brisk_stat("large_allocs") == 1, "a large allocation after the reset: large_allocs %g",
        brisk_stat("large_allocs"));
  free(l);
  section_end();
}

static double json_key(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *s = strstr(json, pat);
  return s ? strtod(s + strlen(pat), NULL) : -1;
}

static double thread_stat(const char *key) {
  char buf[1024];
  size_t n = brisk_thread_stats_json(buf, sizeof buf);
  if (n == 0 || n >= sizeof buf) return -1;
  return json_key(buf, key);
}

static void *thread_view_body(void *arg) {
  int *fails = arg;
#define TCHECK(c, ...) do { if (!(c)) { (*fails)++; printf("[api] FAIL thread view: " __VA_ARGS__); printf("\n"); } } while (0)
  TCHECK(thread_stat("blocks_in_use") == 0 && thread_stat("segments") == 0,
         "a new thread's view: blocks_in_use %g, segments %g", thread_stat("blocks_in_use"), thread_stat("segments"));
  void *s[100], *l[3];
  for (int i = 0; i < 100; i++) s[i] = malloc(opaque_size(100));
  for (int i = 0; i < 3; i++) l[i] = malloc(opaque_size(300000));
  void *hg = malloc(opaque_size(5u << 20));
  TCHECK(thread_stat("blocks_in_use") == 103, "100 small and 3 large blocks: blocks_in_use %g",
         thread_stat("blocks_in_use"));
  TCHECK(thread_stat("large_blocks") == 3 && thread_stat("large_bytes") == 3.0 * (double)brisk_good_size(300000),
         "3 large blocks: large_blocks %g, large_bytes %g", thread_stat("large_blocks"), thread_stat("large_bytes"));
  TCHECK(thread_stat("huge_blocks") == 0 && thread_stat("segments") >= 1,
         "a thread's huge block belongs to no heap: huge_blocks %g; segments %g", thread_stat("huge_blocks"),
         thread_stat("segments"));
  for (int i = 0; i < 100; i++) free(s[i]);
  for (int i = 0; i < 3; i++) free(l[i]);
  free(hg);
  TCHECK(thread_stat("blocks_in_use") == 0 && thread_stat("large_blocks") == 0,
         "all freed: blocks_in_use %g, large_blocks %g", thread_stat("blocks_in_use"), thread_stat("large_blocks"));
#undef TCHECK
  return NULL;
}

static void test_thread_and_process_view(void) {
  section("thread view, process figures");
  int fails = 0;
  pthread_t t;
  pthread_create(&t, NULL, thread_view_body, &fails);
  pthread_join(t, NULL);
  if (fails) FAIL("%d checks of brisk_thread_stats_json failed", fails);
  CHECK(brisk_thread_stats_json(NULL, 0) > 10, "brisk_thread_stats_json(NULL, 0) returned no length");

  brisk_collect(true); /* nothing purged meanwhile lowers what follows */
  double rss0 = brisk_stat("process_rss_bytes"), faults0 = brisk_stat("process_minor_faults");
  size_t n = 64u << 20;
  /* in 4 KiB pages: a fault each (huge pages would make it 32) */
  long huge_pages = 1;
  brisk_option_get("HUGE_PAGES", &huge_pages);
  brisk_option_set("HUGE_PAGES", 0);
  char *m = malloc(opaque_size(n));
  brisk_option_set("HUGE_PAGES", huge_pages);
  if (m) memset(m, 1, n);
  double rss1 = brisk_stat("process_rss_bytes"), peak = brisk_stat("process_rss_peak_bytes");
  double faults1 = brisk_stat("process_minor_faults");
  CHECK(rss0 > 0 && rss1 >= rss0 + (56u << 20), "touching 64 MiB: process_rss_bytes %g -> %g", rss0, rss1);
  CHECK(peak >= rss1, "process_rss_peak_bytes %g below process_rss_bytes %g", peak, rss1);
  /* Within one snapshot too, while the process grows past its peak (the
   * kernel's high-water mark trails the resident figure then): in a child,
   * whose peak starts at what it has resident. */
  pid_t child = fork();
  if (child == 0) {
    enum { STEPS = 50, STEP = 256 << 10 };
    static char js[1 << 16];
    int below = 0;
    for (int i = 0; i < STEPS; i++) {
      char *g = malloc(opaque_size(STEP));
      if (g == NULL) _exit(100);
      memset(g, 1, STEP); /* kept: the process grows */
      brisk_stats_json(js, sizeof js);
      const char *r = strstr(js, "\"process_rss_bytes\":"), *k = strstr(js, "\"process_rss_peak_bytes\":");
      if (r == NULL || k == NULL) _exit(101);
      if (atof(k + strlen("\"process_rss_peak_bytes\":")) < atof(r + strlen("\"process_rss_bytes\":"))) below++;
    }
    _exit(below);
  }
  int status = 0;
  CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status),
        "the growing child did not exit normally");
  CHECK(WEXITSTATUS(status) == 0,
        "a growing process: %d of 50 snapshots had process_rss_peak_bytes below process_rss_bytes (100, 101: "
        "no memory, no such field)", WEXITSTATUS(status));
  CHECK(faults1 >= faults0 + 15000, "touching 64 MiB: process_minor_faults %g -> %g", faults0, faults1);
  CHECK(brisk_stat("process_major_faults") >= 0, "no process_major_faults");
  free(m);
  section_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_zero_sizes();
  test_failures();
  test_alignment_api();
  test_alignment_sweep();
  test_class_fit();
  test_size_sweep();
  test_realloc();
  test_calloc();
  test_owns();
  test_errno_and_mixing();
  test_version_stats();
  test_good_size();
  test_zalloc();
  test_rezalloc();
  test_expand();
  test_thread_and_process_view();
  test_stats_reset();
  long errors = brisk_errors_reported();
  if (errors != 0) {
    printf("[api] FAIL: brisk reported %ld bad inputs; this test makes none\n", errors);
    g_failures++;
  }
  if (g_failures) {
    printf("[api] FAILED: %ld checks failed\n", g_failures);
    return 1;
  }
  printf("[api] all checks passed\n");
  return 0;
}
