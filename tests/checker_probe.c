/* A program with one heap bug of a kind named on its command line, for the
 * builds of brisk for memory checkers (tests/test_checkers.sh): the
 * checker must report it, with this file's function in the stack of the
 * access. `clean` has no bug: every call brisk has, threads freeing each
 * other's blocks, heaps destroyed with blocks live; the checker must
 * report nothing.
 *
 * The blocks come from brisk's own API (brisk_malloc, heaps), which a
 * checker's interception of malloc never reaches; `malloc-*` use malloc,
 * for a brisk preloaded in place of the C library's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk.h"

static volatile uint8_t sink;
static void *volatile kept;

__attribute__((noinline)) static void probe_use_after_free(uint8_t *p) { sink = p[3]; }
__attribute__((noinline)) static void probe_overflow(uint8_t *p, size_t n) { p[n] = 7; }
__attribute__((noinline)) static void probe_underflow(uint8_t *p) { sink = p[-1]; }

#define N_BLOCKS 2000
static void *handed[N_BLOCKS];

static void *consumer(void *arg) {
  for (int i = 0; i < N_BLOCKS; i++) {
    uint8_t *p = handed[i];
    size_t n = brisk_usable_size(p);
    for (size_t k = 0; k < n; k++)
      if (p[k] != (uint8_t)i) {
        fprintf(stderr, "block %d changed at byte %zu\n", i, k);
        abort();
      }
    brisk_free(p);
  }
  return arg;
}

static int clean(void) {
  /* every size kind: classes, large, huge */
  size_t sizes[] = {0, 1, 15, 16, 40, 100, 1000, 5000, 40000, 300000, 3 << 20};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    uint8_t *p = brisk_malloc(sizes[s]);
    size_t n = brisk_usable_size(p);
    memset(p, 1, n); /* all of the usable size is the program's */
    p = brisk_realloc(p, sizes[s] * 2 + 8);
    for (size_t k = 0; k < n; k++)
      if (p[k] != 1) return 1;
    brisk_free(p);
    uint8_t *z = brisk_calloc(1, sizes[s]);
    for (size_t k = 0; k < sizes[s]; k++)
      if (z[k] != 0) return 2;
    brisk_free(z);
    uint8_t *a = brisk_aligned_alloc(4096, sizes[s] + 1);
    a[sizes[s]] = 3;
    brisk_free(a);
  }
  uint8_t *r = brisk_rezalloc(brisk_zalloc(10), 100);
  for (int k = 0; k < 100; k++)
    if (r[k] != 0) return 3;
  if (brisk_expand(r, 50) != r) return 4;
  brisk_free(r);
  /* a heap destroyed with blocks live, an arena */
  brisk_heap_t *h = brisk_heap_new();
  for (int i = 0; i < 1000; i++) memset(brisk_heap_malloc(h, 24 + i % 200), 2, 24);
  void *q = brisk_heap_calloc(h, 10, 10);
  q = brisk_heap_realloc(h, q, 1000);
  brisk_heap_destroy(h);
  brisk_arena_t *ar = brisk_arena_new(NULL, 0);
  for (int i = 0; i < 5000; i++) memset(brisk_arena_alloc(ar, 100, 16), 4, 100);
  brisk_arena_destroy(ar);
  /* blocks freed by another thread */
  for (int i = 0; i < N_BLOCKS; i++) {
    size_t n = i % 7 == 0 ? 70000 : 16 + (size_t)(i % 300);
    handed[i] = brisk_malloc(n);
    memset(handed[i], (uint8_t)i, brisk_usable_size(handed[i]));
  }
  pthread_t t;
  if (pthread_create(&t, NULL, consumer, NULL) != 0) return 5;
  pthread_join(t, NULL);
  brisk_collect(true);
  printf("clean: done\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "clean") == 0) return clean();
  if (strcmp(mode, "use-after-free") == 0) {
    uint8_t *p = brisk_malloc(40);
    brisk_free(p);
    probe_use_after_free(p);
  } else if (strcmp(mode, "late-use-after-free") == 0) {
    /* after the program allocated blocks of the same size again */
    uint8_t *p = brisk_malloc(40);
    brisk_free(p);
    for (int i = 0; i < 1000; i++) kept = brisk_malloc(40);
    probe_use_after_free(p);
  } else if (strcmp(mode, "overflow") == 0) {
    uint8_t *p = brisk_malloc(40);
    probe_overflow(p, 40);
    brisk_free(p);
  } else if (strcmp(mode, "underflow") == 0) {
    uint8_t *p = brisk_malloc(40);
    probe_underflow(p);
    brisk_free(p);
  } else if (strcmp(mode, "heap-use-after-free") == 0) {
    brisk_heap_t *h = brisk_heap_new();
    uint8_t *p = brisk_heap_malloc(h, 40);
    uint8_t *other = brisk_heap_malloc(h, 40); /* keeps the page in use */
    brisk_free(p);
    probe_use_after_free(p);
    (void)other;
    brisk_heap_destroy(h);
  } else if (strcmp(mode, "leak") == 0) {
    kept = brisk_malloc(100);
    kept = NULL;
  } else if (strcmp(mode, "malloc-use-after-free") == 0) {
    uint8_t *p = malloc(40);
    free(p);
    probe_use_after_free(p);
  } else if (strcmp(mode, "malloc-overflow") == 0) {
    uint8_t *p = malloc(40);
    probe_overflow(p, 40);
    free(p);
  } else if (strcmp(mode, "malloc-leak") == 0) {
    kept = malloc(100);
    kept = NULL;
  } else {
    fprintf(stderr, "usage: checker_probe clean|use-after-free|late-use-after-free|overflow|underflow|heap-use-after-free|leak|malloc-*\n");
    return 2;
  }
  printf("%s: done\n", mode);
  return 0;
}
