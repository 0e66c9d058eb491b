/* Foreign pointers: memory from glibc's own allocator (__libc_malloc,
 * __libc_calloc, __libc_memalign, ...) handed to brisk's free, realloc and
 * malloc_usable_size. brisk is the process's malloc here (the test links
 * libbrisk.so), so these must be forwarded to glibc silently: no crash, no
 * "brisk: error" line, content preserved by realloc, and the memory really
 * goes back to glibc: glibc's own accounting (glibc's mallinfo2, found in
 * libc.so.6 itself: the process's mallinfo2 is brisk's) falls back and
 * brisk counts each block it forwarded ("foreign_frees" in its statistics).
 *
 * ctest-labels: sanitize
 *
 * The checks run in a forked child whose stderr goes to a pipe; the parent
 * asserts that the child exited 0 and wrote nothing to stderr. Then again
 * in a child whose seccomp filter refuses process_vm_readv (EPERM), where
 * brisk reads a block's header through a pipe of its own: also after the
 * program closed every descriptor it did not open and reused their
 * numbers (nothing may be written into its files), and in a child forked
 * from there.
 * Run the checks directly (stderr not captured): test_foreign --child, or
 * test_foreign --child-sandboxed
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"
#include "vm_readv_refused.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void __libc_free(void *);

static int g_fail;
#define FAIL(...) do { g_fail++; printf("[foreign] FAIL (test_foreign.c:%d): ", __LINE__); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)
#define CHECK(c, ...) do { if (!(c)) FAIL(__VA_ARGS__); } while (0)

static unsigned char pat(size_t i, unsigned seed) { return (unsigned char)(i * 113u + seed * 17u + 5u); }
static void fill(void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = pat(i, seed);
}
static size_t check(const void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != pat(i, seed)) return i;
  return (size_t)-1;
}

static const size_t k_sizes[] = {1, 8, 16, 24, 100, 1000, 4096, 10000, 100000,
                                 200000 /* above glibc's mmap threshold */, 3u << 20, 20u << 20};
enum { NS = sizeof k_sizes / sizeof k_sizes[0] };

static void test_free_and_usable(void) {
  for (size_t i = 0; i < NS; i++) {
    size_t n = k_sizes[i];
    void *p = __libc_malloc(n);
    if (!p) { FAIL("__libc_malloc(%zu) failed", n); continue; }
    CHECK(!brisk_owns(p), "brisk_owns(__libc_malloc(%zu)) is true", n);
    size_t u = malloc_usable_size(p);
    CHECK(u >= n, "malloc_usable_size(__libc_malloc(%zu)) = %zu", n, u);
    fill(p, n, 1);
    int e = errno = EDOM;
    free(p);
    CHECK(errno == e, "free(__libc_malloc(%zu)) changed errno", n);
  }
  for (size_t i = 0; i < NS; i++) {
    size_t n = k_sizes[i];
    unsigned char *p = __libc_calloc(n, 1);
    if (!p) { FAIL("__libc_calloc(%zu) failed", n); continue; }
    size_t z = 0;
    while (z < n && p[z] == 0) z++;
    CHECK(z == n, "__libc_calloc(%zu) not zero (glibc itself?)", n);
    CHECK(malloc_usable_size(p) >= n, "malloc_usable_size(__libc_calloc(%zu)) = %zu", n, malloc_usable_size(p));
    free(p);
  }
  const size_t aligns[] = {16, 32, 64, 256, 4096, 65536};
  for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
    for (size_t i = 0; i < NS; i += 2) {
      size_t n = k_sizes[i];
      void *p = __libc_memalign(aligns[a], n);
      if (!p) { FAIL("__libc_memalign(%zu, %zu) failed", aligns[a], n); continue; }
      CHECK(((uintptr_t)p & (aligns[a] - 1)) == 0, "__libc_memalign misaligned");
      CHECK(malloc_usable_size(p) >= n, "malloc_usable_size(__libc_memalign(%zu, %zu)) = %zu", aligns[a], n,
            malloc_usable_size(p));
      fill(p, n, 2);
      if (i % 4 == 0) {
        free(p);
      } else {
        void *q = realloc(p, n * 2 + 1);
        CHECK(q != NULL, "realloc(__libc_memalign block of %zu) failed", n);
        if (q) { CHECK(check(q, n, 2) == (size_t)-1, "realloc of a __libc_memalign block lost data"); free(q); }
      }
    }
  void *v = __libc_valloc(5000);
  CHECK(v != NULL, "__libc_valloc failed");
  if (v) { CHECK(malloc_usable_size(v) >= 5000, "usable(__libc_valloc(5000)) too small"); free(v); }
}

/* glibc's bytes in use: in its arenas and in mappings of their own. */
static size_t glibc_in_use(void) {
  static struct mallinfo2 (*glibc_mallinfo2)(void);
  if (glibc_mallinfo2 == NULL) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc) glibc_mallinfo2 = (struct mallinfo2 (*)(void))dlsym(libc, "mallinfo2");
    if (glibc_mallinfo2 == NULL || glibc_mallinfo2 == mallinfo2) {
      FAIL("glibc's own mallinfo2 not found in libc.so.6 (%p)", (void *)glibc_mallinfo2);
      exit(1);
    }
  }
  struct mallinfo2 m = glibc_mallinfo2();
  return m.uordblks + m.hblkhd;
}

/* The blocks are really handed back to glibc, not dropped: glibc's bytes in
 * use fall back to where they were, and brisk counts one forwarded free per
 * block. Sizes above glibc's tcache (1 KiB), whose chunks mallinfo2 counts
 * as in use, and 1 MiB ones (mapped, or in the arena once glibc's dynamic
 * mmap threshold has grown). */
static void test_handed_back(void) {
  enum { K = 400, BIG = 6 };
  static void *b[K], *big[BIG];
  size_t u0 = glibc_in_use();
  long f0 = (long)brisk_stat("foreign_frees");
  CHECK(f0 >= 0, "brisk_stats_json has no \"foreign_frees\"");
  for (int round = 0; round < 3; round++) {
    /* round 0: free; round 1: realloc to a brisk block; round 2: realloc(p, 0) */
    for (int i = 0; i < K; i++) {
      size_t n = 2000 + (size_t)(i % 7) * 64;
      b[i] = __libc_malloc(n);
      if (!b[i]) { FAIL("__libc_malloc(%zu) failed", n); return; }
      fill(b[i], n, (unsigned)i);
    }
    for (int i = 0; i < BIG; i++) {
      big[i] = __libc_malloc((size_t)1 << 20);
      if (!big[i]) { FAIL("__libc_malloc(1 MiB) failed"); return; }
      memset(big[i], i, (size_t)1 << 20);
    }
    size_t u1 = glibc_in_use();
    CHECK(u1 >= u0 + K * 2000 + BIG * ((size_t)1 << 20),
          "test premise: glibc counts %zu bytes in use with the blocks, %zu without", u1, u0);
    for (int i = 0; i < K; i++) {
      if (round == 0) {
        free(b[i]);
      } else if (round == 1) {
        void *q = realloc(b[i], 100);
        CHECK(q && brisk_owns(q) && check(q, 100, (unsigned)i) == (size_t)-1,
              "realloc(__libc_malloc block, 100) = %p: not a brisk block with the content", q);
        b[i] = q;
      } else {
        void *z = realloc(b[i], 0);
        CHECK(z == NULL, "realloc(__libc_malloc block, 0) = %p", z);
      }
    }
    for (int i = 0; i < BIG; i++) {
      if (round == 1) {
        void *q = realloc(big[i], 5000);
        CHECK(q && brisk_owns(q), "realloc(__libc_malloc(1 MiB), 5000) = %p: not a brisk block", q);
        free(q);
      } else {
        free(big[i]);
      }
    }
    if (round == 1)
      for (int i = 0; i < K; i++) free(b[i]); /* brisk's blocks now: not forwarded */
    size_t u2 = glibc_in_use();
    CHECK(u2 <= u0 + 4096,
          "round %d: after brisk released %d glibc blocks glibc still counts %zu bytes in use (%zu before they "
          "were allocated): the blocks were not handed back", round, K + BIG, u2, u0);
    long f = (long)brisk_stat("foreign_frees");
    CHECK(f == f0 + (long)(round + 1) * (K + BIG), "round %d: brisk forwarded %ld frees to glibc, expected %ld",
          round, f - f0, (long)(round + 1) * (K + BIG));
  }
}

static void test_realloc(void) {
  /* grow, shrink, and jump between small / mmapped sizes */
  for (size_t i = 0; i < NS; i++)
    for (size_t j = 0; j < NS; j++) {
      size_t a = k_sizes[i], b = k_sizes[j];
      void *p = __libc_malloc(a);
      if (!p) { FAIL("__libc_malloc(%zu) failed", a); continue; }
      fill(p, a, (unsigned)(i * 31 + j));
      void *q = realloc(p, b);
      CHECK(q != NULL, "realloc(__libc_malloc(%zu), %zu) returned NULL", a, b);
      if (!q) { free(p); continue; }
      size_t keep = a < b ? a : b;
      size_t off = check(q, keep, (unsigned)(i * 31 + j));
      CHECK(off == (size_t)-1, "realloc(__libc_malloc(%zu), %zu) lost data at offset %zu", a, b, off);
      CHECK(malloc_usable_size(q) >= b, "usable size after realloc(%zu -> %zu) = %zu", a, b, malloc_usable_size(q));
      fill(q, b, 3);
      /* and again: the result may be brisk's or glibc's, both must work */
      void *r = realloc(q, b + 100);
      CHECK(r && check(r, b, 3) == (size_t)-1, "second realloc (%zu -> %zu) lost data", b, b + 100);
      free(r ? r : q);
    }
  /* glibc's own realloc of its own block, then brisk's free */
  void *p = __libc_malloc(50);
  p = __libc_realloc(p, 5000);
  CHECK(p != NULL, "__libc_realloc failed");
  free(p);
  /* realloc(foreign, 0) frees it and returns NULL */
  p = __libc_malloc(100);
  void *z = realloc(p, 0);
  CHECK(z == NULL, "realloc(__libc_malloc(100), 0) returned %p, expected NULL", z);
  if (z) free(z);
  /* reallocarray of a foreign block */
  p = __libc_malloc(64);
  if (p) {
    fill(p, 64, 4);
    void *q = reallocarray(p, 100, 10);
    CHECK(q && check(q, 64, 4) == (size_t)-1, "reallocarray(__libc_malloc(64), 100, 10) lost data");
    free(q ? q : p);
  }
}

/* glibc blocks allocated on one thread, freed/realloc'ed through brisk on
 * another, interleaved with brisk's own blocks */
enum { XN = 2000 };
static void *g_xfer[XN];
static void *xfree_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < XN; i++) {
    void *p = g_xfer[i];
    if (!p) continue;
    size_t n = (size_t)(i % 200) * 16 + 1;
    if (check(p, n, (unsigned)i) != (size_t)-1) { FAIL("foreign block %d changed before the cross-thread free", i); }
    if (i % 3 == 0) {
      void *q = realloc(p, n + 300);
      if (!q || check(q, n, (unsigned)i) != (size_t)-1) FAIL("cross-thread realloc of a foreign block lost data");
      free(q ? q : p);
    } else {
      free(p);
    }
    void *mine = malloc(n);
    free(mine);
  }
  return NULL;
}
static void test_threads(void) {
  for (int i = 0; i < XN; i++) {
    size_t n = (size_t)(i % 200) * 16 + 1;
    g_xfer[i] = __libc_malloc(n);
    if (g_xfer[i]) fill(g_xfer[i], n, (unsigned)i);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, xfree_thread, NULL) != 0) { FAIL("pthread_create failed"); return; }
  pthread_join(t, NULL);
}

/* A sandbox that refuses process_vm_readv (EPERM, as seccomp profiles
 * may): brisk reads a foreign block's header another way (a pipe of its
 * own), and must still forward every glibc block silently. */
static int sandbox_vm_readv(void) {
  if (refuse_vm_readv() != 0) {
    FAIL("cannot refuse process_vm_readv with a seccomp filter: %s", strerror(errno));
    return -1;
  }
  return 0;
}

/* The descriptors of brisk's pipe closed by the program (as a daemon
 * closes every descriptor it did not open), and their numbers reused for a
 * file of the program's: the next foreign free must not write into that
 * file, and must still be forwarded. */
static void test_descriptors_closed(void) {
  void *p = __libc_malloc(200);
  fill(p, 200, 9);
  free(p); /* makes the pipe */
  for (int fd = 3; fd < 256; fd++) close(fd);
  char path[] = "/tmp/brisk-foreign-XXXXXX";
  int f1 = mkstemp(path), f2 = open(path, O_RDWR);
  CHECK(f1 >= 0 && f2 >= 0, "mkstemp/open failed");
  unlink(path);
  long before = (long)brisk_stat("foreign_frees");
  void *q = __libc_malloc(300);
  fill(q, 300, 10);
  free(q);
  struct stat st;
  CHECK(fstat(f1, &st) == 0 && st.st_size == 0, "a file that took the numbers of brisk's closed pipe holds %lld bytes",
        (long long)st.st_size);
  CHECK((long)brisk_stat("foreign_frees") == before + 1, "the free after the descriptors were closed was not forwarded");
  close(f1);
  close(f2);
}

static int child_main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_free_and_usable();
  test_realloc();
  test_threads();
  test_handed_back();
  /* brisk still works afterwards */
  void *p = malloc(100);
  CHECK(p && brisk_owns(p), "malloc after the foreign frees failed");
  free(p);
  long errors = brisk_errors_reported();
  CHECK(errors == 0, "brisk counted %ld bad inputs; glibc's blocks must be forwarded silently", errors);
  return g_fail ? 1 : 0;
}

static int sandboxed_child_main(void) {
  if (sandbox_vm_readv() != 0) return 1;
  int r = child_main();
  test_descriptors_closed();
  /* and in a child forked from here: a pipe of its own */
  pid_t pid = fork();
  if (pid == 0) _exit(child_main());
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the sandboxed child's own child failed (status %d)", status);
  return r != 0 || g_fail ? 1 : 0;
}

static int run_child(int (*fn)(void), const char *what);

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main();
  if (argc > 1 && strcmp(argv[1], "--child-sandboxed") == 0) return sandboxed_child_main();
  int a = run_child(child_main, "");
  int b = run_child(sandboxed_child_main, " with process_vm_readv refused");
  return a || b;
}

/* fn in a forked child whose stderr must stay empty: 0 if it passed. */
static int run_child(int (*fn)(void), const char *what) {
  int out[2], err[2];
  if (pipe(out) || pipe(err)) { perror("pipe"); return 2; }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 2; }
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]); close(out[1]); close(err[0]); close(err[1]);
    alarm(30);
    _exit(fn());
  }
  close(out[1]);
  close(err[1]);
  /* outputs are small; read stdout then stderr (each fits a pipe buffer
   * unless something floods, in which case we fail anyway) */
  static char ob[1 << 16], eb[1 << 16];
  size_t on = 0, en = 0;
  ssize_t r;
  while (on < sizeof ob - 1 && (r = read(out[0], ob + on, sizeof ob - 1 - on)) > 0) on += (size_t)r;
  while (en < sizeof eb - 1 && (r = read(err[0], eb + en, sizeof eb - 1 - en)) > 0) en += (size_t)r;
  ob[on] = eb[en] = '\0';
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  int ok = 1;
  fputs(ob, stdout);
  if (WIFSIGNALED(status)) {
    printf("[foreign] FAIL: the child was killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
    ok = 0;
  } else if (WEXITSTATUS(status) != 0) {
    printf("[foreign] FAIL: the child exited with status %d\n", WEXITSTATUS(status));
    ok = 0;
  }
  if (en != 0) {
    printf("[foreign] FAIL: stderr must be empty for glibc-owned pointers, got:\n%s\n", eb);
    ok = 0;
  }
  if (ok) {
    printf("[foreign] free/realloc/malloc_usable_size of __libc_malloc/calloc/memalign/valloc blocks%s: ok (silent)\n",
           what);
    return 0;
  }
  printf("[foreign] FAILED%s (reproduce: build/tests/test_foreign --child%s)\n", what, *what ? "-sandboxed" : "");
  return 1;
}
