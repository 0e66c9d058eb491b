/* Bad input: invalid frees are reported with one exact line on stderr and
 * ignored (or abort with BRISK_ON_ERROR=abort), and nothing else in the
 * heap is damaged.
 *
 * ctest-labels: sanitize
 *
 * Each scenario runs in a re-executed child (scenario_runner.h), which
 * checks:
 *   - stderr is exactly the expected error line(s): the child computes each
 *     expected line with printf("%p") and sends it as "EXPECT <line>" on
 *     stdout before making the bad call;
 *   - the child exited 0 after printing "DONE" (it verified that blocks
 *     allocated before the bad call are intact and that malloc/free still
 *     hand out correct, distinct blocks), or, for the abort scenarios, died
 *     by SIGABRT right after printing the line.
 * Run one scenario by hand: build/tests/test_bad_input interior_small
 */
#define _GNU_SOURCE
#include <brisk.h>

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
/* C++ operator delete, delete[] and sized delete (libbrisk.so defines
 * them), called by their mangled names from C. */
extern void *_Znwm(size_t);
extern void *_Znam(size_t);
extern void _ZdlPv(void *);
extern void _ZdaPv(void *);
extern void _ZdlPvm(void *, size_t);

static void *opaque_ptr(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

/* ================================================================== */
/* child side                                                          */

#include "child_expect.h"
#include "scenario_runner.h"
#include "vm_readv_refused.h"

/* Blocks allocated before the bad call; they must be intact afterwards. */
static const size_t k_guard_sizes[] = {8,   16,   24,   32,   32,    48,    64,     64,     64,     64, 100,
                                       128, 256,  512,  1000, 1000,  4096,  10000,  70000,  300000, 2u << 20};
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

/* After the bad call: allocation still works, blocks are distinct and do
 * not overlap each other, the guard blocks, or [keep, keep+keep_len). */
static void workload_after(size_t cls, const void *keep, size_t keep_len) {
  enum { N = 600 };
  static void *b[N];
  static size_t sz[N];
  for (int i = 0; i < N; i++) {
    sz[i] = (i % 3 == 0) ? cls : (size_t)(i % 37) * 24 + 8 + (size_t)(i % 5) * 1000;
    b[i] = malloc(sz[i]);
    if (!b[i]) { child_fail("malloc(%zu) after the bad call returned NULL", sz[i]); continue; }
    if (brisk_usable_size(b[i]) < sz[i]) child_fail("usable size %zu < %zu after the bad call", brisk_usable_size(b[i]), sz[i]);
    if (keep && (const char *)b[i] < (const char *)keep + keep_len && (const char *)b[i] + sz[i] > (const char *)keep)
      child_fail("malloc(%zu) = %p overlaps the still-live block [%p, +%zu) after the bad call", sz[i], b[i], keep,
                 keep_len);
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
  free(p);
}

static void finish(void) {
  guards_check("after the bad call");
  guards_free();
  if (g_child_fail) exit(1);
  printf("DONE\n");
  fflush(stdout);
  exit(0);
}

static char g_global_array[256] __attribute__((aligned(64)));

/* ---- foreign pointers ---------------------------------------------- */

static void foreign_common(void *bad, const char *fn, void *region, size_t region_len, unsigned seed) {
  guards_alloc();
  if (region) fill(region, region_len, seed);
  expect_line("brisk: error: %s(%p): pointer was not allocated by brisk", fn, bad);
  if (strcmp(fn, "free") == 0) {
    free(opaque_ptr(bad));
  } else if (strcmp(fn, "brisk_free") == 0) {
    brisk_free(opaque_ptr(bad));
  } else if (strcmp(fn, "realloc") == 0) {
    /* docs/SECURITY.md: the bad call is ignored, realloc returns NULL */
    void *r = realloc(opaque_ptr(bad), 100);
    if (r) {
      child_fail("realloc(foreign %p) returned %p, expected NULL", bad, r);
      if (brisk_owns(r)) free(r);
    }
  } else if (strcmp(fn, "malloc_usable_size") == 0) {
    size_t u = malloc_usable_size(opaque_ptr(bad));
    if (u != 0) child_fail("malloc_usable_size(foreign %p) returned %zu, expected 0", bad, u);
  } else if (strcmp(fn, "brisk_usable_size") == 0) {
    size_t u = brisk_usable_size(opaque_ptr(bad));
    if (u != 0) child_fail("brisk_usable_size(foreign %p) returned %zu, expected 0", bad, u);
  }
  printf("AFTER\n");
  fflush(stdout);
  if (region) {
    size_t off = check(region, region_len, seed);
    if (off != (size_t)-1) child_fail("the foreign memory at %p was written by brisk (offset %zu)", region, off);
  }
  workload_after(64, NULL, 0);
  finish();
}

static void sc_foreign_stack(void) {
  char buf[256] __attribute__((aligned(16)));
  foreign_common(buf, "free", buf, sizeof buf, 1);
}
static void sc_foreign_stack_mid(void) {
  char buf[256] __attribute__((aligned(16)));
  foreign_common(buf + 40, "free", buf, sizeof buf, 1);
}
static void sc_foreign_global(void) { foreign_common(g_global_array, "free", g_global_array, sizeof g_global_array, 2); }
static void sc_foreign_garbage(void) { foreign_common((void *)0x12345678, "free", NULL, 0, 0); }
static void sc_foreign_odd(void) { foreign_common((void *)0xdeadbeef, "free", NULL, 0, 0); }
static void sc_foreign_noncanonical(void) { foreign_common((void *)0xdeadbeefdeadbee0ull, "free", NULL, 0, 0); }
static void sc_foreign_code(void) { foreign_common((void *)(uintptr_t)&sc_foreign_code, "free", NULL, 0, 0); }
static void sc_foreign_mmap(void) {
  size_t len = 1u << 20;
  char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) { child_fail("mmap failed"); finish(); }
  foreign_common(m + 4096 + 64, "free", m, len, 3);
}
/* The same where process_vm_readv is refused (a seccomp sandbox): the
 * header is read through brisk's pipe, and what cannot be read (an
 * address nobody maps, a page nobody may read) is still reported, with no
 * fault. */
static void sandboxed(void) {
  if (refuse_vm_readv() != 0) {
    child_fail("cannot refuse process_vm_readv with a seccomp filter: %s", strerror(errno));
    finish();
  }
}
static void sc_foreign_garbage_sandboxed(void) {
  sandboxed();
  /* 16-aligned, so that the header below it is read (nothing maps it) */
  foreign_common((void *)0x12345670, "free", NULL, 0, 0);
}
static void sc_foreign_stack_sandboxed(void) {
  char buf[256] __attribute__((aligned(16)));
  sandboxed();
  foreign_common(buf + 64, "free", buf, sizeof buf, 8);
}
static void sc_foreign_noaccess_sandboxed(void) {
  char *m = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) { child_fail("mmap failed"); finish(); }
  sandboxed();
  foreign_common(m + 4096 + 16, "free", NULL, 0, 0);
}
static void sc_brisk_free_foreign(void) {
  char buf[128] __attribute__((aligned(16)));
  foreign_common(buf, "brisk_free", buf, sizeof buf, 4);
}
static void sc_realloc_foreign(void) {
  char buf[128] __attribute__((aligned(16)));
  foreign_common(buf, "realloc", buf, sizeof buf, 5);
}
static void sc_usable_foreign(void) {
  char buf[128] __attribute__((aligned(16)));
  foreign_common(buf, "malloc_usable_size", buf, sizeof buf, 6);
}
static void sc_brisk_usable_foreign(void) {
  char buf[128] __attribute__((aligned(16)));
  foreign_common(buf, "brisk_usable_size", buf, sizeof buf, 7);
}

/* ---- interior pointers --------------------------------------------- */

static void interior_common(size_t size, size_t offset, const char *fn) {
  guards_alloc();
  char *p = (fn[0] == 'b') ? brisk_malloc(size) : malloc(size);
  if (!p) { child_fail("malloc(%zu) failed", size); finish(); }
  size_t cls = brisk_usable_size(p);
  fill(p, cls, 77);
  expect_line("brisk: error: %s(%p): interior pointer, %zu bytes into the block at %p (size class %zu)", fn,
              (void *)(p + offset), offset, (void *)p, cls);
  if (strcmp(fn, "free") == 0) {
    free(opaque_ptr(p + offset));
  } else if (strcmp(fn, "brisk_free") == 0) {
    brisk_free(opaque_ptr(p + offset));
  } else if (strcmp(fn, "realloc") == 0) {
    void *r = realloc(opaque_ptr(p + offset), size * 2);
    if (r) {
      child_fail("realloc(interior %p) returned %p, expected NULL", (void *)(p + offset), r);
      if (r != p && brisk_owns(r)) free(r);
    }
  }
  printf("AFTER\n");
  fflush(stdout);
  /* the block is still live and untouched */
  size_t off = check(p, cls, 77);
  if (off != (size_t)-1) child_fail("the block %p was changed at offset %zu by the rejected %s(p+%zu)", (void *)p, off, fn, offset);
  if (brisk_usable_size(p) != cls) child_fail("usable size of %p changed after the rejected free", (void *)p);
  if (!brisk_owns(p)) child_fail("brisk_owns(%p) false after the rejected interior free", (void *)p);
  workload_after(size, p, cls);
  off = check(p, cls, 77);
  if (off != (size_t)-1)
    child_fail("the still-live block %p was handed out again: changed at offset %zu by later allocations", (void *)p, off);
  free(p); /* a correct free after the bad one: no message expected */
  finish();
}
static void sc_interior_small(void) { interior_common(64, 16, "free"); }
static void sc_interior_odd(void) { interior_common(64, 1, "free"); }
static void sc_interior_medium(void) { interior_common(1000, 500, "free"); }
static void sc_interior_large(void) { interior_common(200000, 8192 + 48, "free"); }
static void sc_brisk_free_interior(void) { interior_common(64, 16, "brisk_free"); }
static void sc_realloc_interior(void) { interior_common(64, 16, "realloc"); }

/* ---- double free ---------------------------------------------------- */

static void double_common(size_t size, const char *fn, int via_realloc0) {
  guards_alloc();
  char *p = (fn[0] == 'b') ? brisk_malloc(size) : malloc(size);
  if (!p) { child_fail("malloc(%zu) failed", size); finish(); }
  size_t cls = brisk_usable_size(p);
  fill(p, size, 9);
  if (via_realloc0) {
    void *r = realloc(p, 0);
    if (r != NULL) child_fail("realloc(p, 0) returned %p, expected NULL", r);
  } else if (fn[0] == 'b') {
    brisk_free(p);
  } else {
    free(p);
  }
  expect_line("brisk: error: %s(%p): double free (size class %zu)", fn, (void *)p, cls);
  if (fn[0] == 'b') brisk_free(opaque_ptr(p));
  else free(opaque_ptr(p));
  printf("AFTER\n");
  fflush(stdout);
  workload_after(size, NULL, 0);
  finish();
}
static void sc_double_free(void) { double_common(32, "free", 0); }

/* Double free of a large or huge block, with the reasons of
 * docs/SECURITY.md: a large block's span went back to its segment ("not in
 * use"), a huge block's mapping back to the OS (or to the huge cache, which
 * the registry marks the same way). One line, the process survives and the
 * heap is intact. */
static void double_big(size_t size, const char *reason) {
  guards_alloc();
  char *p = malloc(size);
  if (!p) { child_fail("malloc(%zu) failed", size); finish(); }
  fill(p, 4096, 9);
  free(p);
  expect_line("brisk: error: free(%p): %s", (void *)p, reason);
  free(opaque_ptr(p));
  printf("AFTER\n");
  fflush(stdout);
  workload_after(64, NULL, 0);
  void *q = malloc(size);
  if (!q) child_fail("malloc(%zu) after the double free failed", size);
  else { memset(q, 0x44, size); free(q); }
  finish();
}
static void sc_double_free_large(void) { double_big(200000, "pointer into memory that is not in use (freed twice?)"); }
static void sc_double_free_huge(void) {
  double_big(70u << 20, "pointer into memory that brisk returned to the OS (freed twice?)");
}
static void sc_double_free_64(void) { double_common(64, "free", 0); }
static void sc_double_free_brisk(void) { double_common(48, "brisk_free", 0); }
static void sc_realloc0_then_free(void) { double_common(40, "free", 1); }

/* ---- C++ delete ------------------------------------------------------- */

/* A bad pointer given to operator delete is reported under the operator's
 * name, as in the hardened build's messages of docs/SECURITY.md. */
static void sc_delete_foreign(void) {
  char buf[128] __attribute__((aligned(16)));
  guards_alloc();
  fill(buf, sizeof buf, 8);
  expect_line("brisk: error: operator delete(%p): pointer was not allocated by brisk", (void *)(buf + 16));
  _ZdlPv(opaque_ptr(buf + 16));
  printf("AFTER\n");
  fflush(stdout);
  if (check(buf, sizeof buf, 8) != (size_t)-1) child_fail("operator delete wrote into the foreign memory");
  workload_after(64, NULL, 0);
  finish();
}
/* The block comes from the matching operator new and is deleted once
 * correctly, then again: a double free in both builds (test_hardened.sh
 * runs this test under the hardened one, whose check of the allocation
 * kind leaves a freed block to the double-free check). */
static void delete_double(int how) {
  guards_alloc();
  char *p = how == 1 ? _Znam(64) : _Znwm(64);
  size_t cls = brisk_usable_size(p);
  const char *op = how == 1 ? "operator delete[]" : "operator delete";
  if (how == 0) _ZdlPv(p);
  else if (how == 1) _ZdaPv(p);
  else _ZdlPvm(p, 64);
  expect_line("brisk: error: %s(%p): double free (size class %zu)", op, (void *)p, cls);
  if (how == 0) _ZdlPv(opaque_ptr(p));
  else if (how == 1) _ZdaPv(opaque_ptr(p));
  else _ZdlPvm(opaque_ptr(p), 64);
  printf("AFTER\n");
  fflush(stdout);
  workload_after(64, NULL, 0);
  finish();
}
static void sc_delete_double(void) { delete_double(0); }
static void sc_delete_array_double(void) { delete_double(1); }
static void sc_delete_sized_double(void) { delete_double(2); }

/* ---- things that are NOT errors ------------------------------------- */

static void sc_clean(void) {
  /* correct use prints nothing at all */
  guards_alloc();
  free(NULL);
  brisk_free(NULL);
  void *p = malloc(10);
  p = realloc(p, 1000);
  free(p);
  /* glibc's blocks are forwarded to glibc, silently */
  char *g = __libc_malloc(100);
  if (!g) { child_fail("__libc_malloc failed"); finish(); }
  fill(g, 100, 11);
  if (malloc_usable_size(g) < 100) child_fail("malloc_usable_size(__libc_malloc(100)) = %zu", malloc_usable_size(g));
  char *r = realloc(g, 5000);
  if (!r) child_fail("realloc(__libc_malloc block, 5000) returned NULL");
  else {
    size_t off = check(r, 100, 11);
    if (off != (size_t)-1) child_fail("realloc of a __libc_malloc block lost its content at offset %zu", off);
    free(r);
  }
  free(__libc_malloc(100));
  free(__libc_malloc(300000));
  printf("AFTER\n");
  workload_after(64, NULL, 0);
  finish();
}

static const scenario_t k_scenarios[] = {
    {"clean", NULL, 0, 0, sc_clean},
    {"foreign_stack", NULL, 0, 0, sc_foreign_stack},
    {"foreign_stack_mid", NULL, 0, 0, sc_foreign_stack_mid},
    {"foreign_global", NULL, 0, 0, sc_foreign_global},
    {"foreign_garbage", NULL, 0, 0, sc_foreign_garbage},
    {"foreign_odd", NULL, 0, 0, sc_foreign_odd},
    {"foreign_noncanonical", NULL, 0, 0, sc_foreign_noncanonical},
    {"foreign_code", NULL, 0, 0, sc_foreign_code},
    {"foreign_mmap", NULL, 0, 0, sc_foreign_mmap},
    {"foreign_garbage_sandboxed", NULL, 0, 0, sc_foreign_garbage_sandboxed},
    {"foreign_stack_sandboxed", NULL, 0, 0, sc_foreign_stack_sandboxed},
    {"foreign_noaccess_sandboxed", NULL, 0, 0, sc_foreign_noaccess_sandboxed},
    {"brisk_free_foreign", NULL, 0, 0, sc_brisk_free_foreign},
    {"realloc_foreign", NULL, 0, 0, sc_realloc_foreign},
    {"malloc_usable_size_foreign", NULL, 0, 0, sc_usable_foreign},
    {"brisk_usable_size_foreign", NULL, 0, 0, sc_brisk_usable_foreign},
    {"interior_small", NULL, 0, 0, sc_interior_small},
    {"interior_odd", NULL, 0, 0, sc_interior_odd},
    {"interior_medium", NULL, 0, 0, sc_interior_medium},
    {"interior_large", NULL, 0, 0, sc_interior_large},
    {"brisk_free_interior", NULL, 0, 0, sc_brisk_free_interior},
    {"realloc_interior", NULL, 0, 0, sc_realloc_interior},
    {"double_free", NULL, 0, 0, sc_double_free},
    {"double_free_64", NULL, 0, 0, sc_double_free_64},
    {"double_free_large", NULL, 0, 0, sc_double_free_large},
    {"double_free_huge", NULL, 0, 0, sc_double_free_huge},
    {"brisk_free_double", NULL, 0, 0, sc_double_free_brisk},
    {"realloc0_then_free", NULL, 0, 0, sc_realloc0_then_free},
    {"delete_foreign", NULL, 0, 0, sc_delete_foreign},
    {"delete_double", NULL, 0, 0, sc_delete_double},
    {"delete_array_double", NULL, 0, 0, sc_delete_array_double},
    {"delete_sized_double", NULL, 0, 0, sc_delete_sized_double},
    {"abort_foreign_stack", NULL, 1, 0, sc_foreign_stack},
    {"abort_interior", NULL, 1, 0, sc_interior_small},
    {"abort_double_free", NULL, 1, 0, sc_double_free},
};
enum { NSCEN = sizeof k_scenarios / sizeof k_scenarios[0] };

static const suite_t k_suite = {.name = "bad_input", .scenarios = k_scenarios, .count = NSCEN};

int main(int argc, char **argv) { return scenario_main(&k_suite, argc, argv); }
