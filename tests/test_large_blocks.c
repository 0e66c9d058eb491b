/* Large blocks (64 KiB .. 2 MiB): their usable size is the request rounded
 * up to the OS page, not their whole span of 64 KiB slices; they grow in
 * place into the rest of their span and into free slices after it; and a
 * block placed on memory an earlier block had written leaves no resident
 * tail past its end once the purge delay has passed (checked page by page
 * with mincore); a freed large block's span is handed to the next block
 * of its size first (the span cache), a second free of it is reported, and
 * the cached spans go back to the OS after the delay without another call,
 * and to their slices for a larger block before it takes fresh slices;
 * a segment taken back from the pool of empty segments before its purge
 * still has its resident free slices purged after the delay. A block over
 * 2 MiB is mapped with MADV_NOHUGEPAGE like segments, and with
 * MADV_HUGEPAGE (it may be backed by transparent huge pages) once
 * BRISK_HUGE_PAGES is 1; segments never are. Blocks of the classes above
 * 1 KiB carved from fresh memory are not written by malloc: their pages
 * stay out of RSS until the program writes them.
 * ctest-labels: sanitize */
#include <brisk.h>

#include "brisk_errors.h"
#include "large_checks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void usable_sizes(void) {
  static const size_t sizes[] = {65537, 65600, 69632, 100000, 140000, 500000, 1000000, 2097152};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *p = malloc(sizes[i]);
    CHECK(p != NULL, "malloc(%zu) failed", sizes[i]);
    if (!p) continue;
    size_t u = brisk_usable_size(p);
    CHECK(u == page_round(sizes[i]), "usable size of malloc(%zu) is %zu, expected %zu", sizes[i], u,
          page_round(sizes[i]));
    memset(p, 0x3c, u); /* every usable byte is the block's */
    CHECK(brisk_owns(p + u - 1) && !brisk_owns(p + u), "brisk_owns at the end of a %zu-byte block", u);
    free(p);
  }
}

/* Blocks of the classes above 1 KiB (1100 B .. 64 KiB) carved from fresh
 * memory are handed out without a write: none of their pages is resident
 * until the program touches it (linking them into a free list would fault
 * them in inside malloc). Runs first, on a new heap, while no segment has
 * come back to the pool resident. Then they hold what is written. */
static void medium_fresh_untouched(void) {
  static const size_t sizes[] = {1100, 3000, 8192, 20000, 40000, 65536};
  enum { S = sizeof sizes / sizeof sizes[0], N = 6 };
  static char *p[S][N];
  brisk_heap_t *h = brisk_heap_new();
  CHECK(h != NULL, "brisk_heap_new failed");
  if (!h) return;
  for (size_t s = 0; s < S; s++)
    for (int i = 0; i < N; i++) {
      p[s][i] = brisk_heap_malloc(h, sizes[s]);
      CHECK(p[s][i] != NULL, "brisk_heap_malloc(%zu) failed", sizes[s]);
    }
  for (size_t s = 0; s < S; s++)
    for (int i = 0; i < N; i++) {
      if (!p[s][i]) continue;
      size_t r = resident_pages(p[s][i], sizes[s]);
      CHECK(r == 0, "block %d of %zu bytes from fresh memory has %zu resident pages before it was written", i,
            sizes[s], r);
    }
  for (size_t s = 0; s < S; s++)
    for (int i = 0; i < N; i++)
      if (p[s][i]) {
        for (size_t k = 0; k < sizes[s]; k += 512)
          CHECK(p[s][i][k] == 0, "fresh block of %zu bytes not zero at %zu", sizes[s], k);
        memset(p[s][i], (int)(s * N + (size_t)i + 1), sizes[s]);
      }
  for (size_t s = 0; s < S; s++) /* every other block freed and allocated again */
    for (int i = 0; i < N; i += 2) {
      brisk_free(p[s][i]);
      p[s][i] = brisk_heap_malloc(h, sizes[s]);
      CHECK(p[s][i] != NULL, "brisk_heap_malloc(%zu) failed", sizes[s]);
      if (p[s][i]) memset(p[s][i], (int)(s * N + (size_t)i + 1), sizes[s]);
    }
  for (size_t s = 0; s < S; s++)
    for (int i = 0; i < N; i++) {
      if (!p[s][i]) continue;
      size_t bad = 0;
      for (size_t k = 0; k < sizes[s]; k++) bad += (unsigned char)p[s][i][k] != (unsigned char)(s * N + (size_t)i + 1);
      CHECK(bad == 0, "block %d of %zu bytes: %zu bytes changed", i, sizes[s], bad);
    }
  brisk_heap_destroy(h);
}

static void grow_in_place(void) {
  char *p = malloc(70000); /* a span of two slices: 128 KiB */
  memset(p, 0x11, 70000);
  char *q = realloc(p, 120000);
  CHECK(q == p, "realloc to 120000 moved the block within its span (%p -> %p)", (void *)p, (void *)q);
  CHECK(brisk_usable_size(q) == page_round(120000), "usable size %zu after growing to 120000",
        brisk_usable_size(q));
  int intact = 1;
  for (size_t i = 0; i < 70000; i += 97) intact &= q[i] == 0x11;
  CHECK(intact, "growing in place changed the block's contents");
  memset(q, 0x22, 120000);
  free(q);
}

static void tail_purged_after_delay(void) {
  /* An earlier block writes 1.9 MiB; a block of 200000 B placed on the same
   * memory (resident slices are taken first) has a span of 256 KiB, whose
   * last 60 KiB hold nothing of it but were resident. */
  char *a = malloc(1900000);
  memset(a, 0x5a, 1900000);
  free(a);
  char *b = malloc(200000);
  CHECK(b == a, "the 200000-byte block did not take the 1.9 MiB block's memory (%p, %p)", (void *)b,
        (void *)a);
  if (b != a) {
    free(b);
    return;
  }
  memset(b, 0x6b, 200000);
  char *tail = b + page_round(200000);
  size_t tail_len = 256 * 1024 - page_round(200000);
  size_t before = resident_pages(tail, tail_len);
  CHECK(before == tail_len / 4096, "%zu of the tail's %zu pages resident right away", before,
        tail_len / 4096);
  /* The purge delay is 50 ms; a loaded machine gets 5 s. */
  size_t after = before;
  for (int i = 0; i < 100 && after != 0; i++) {
    sleep_ms(50);
    after = resident_pages(tail, tail_len);
  }
  CHECK(after == 0, "%zu of the tail's %zu pages still resident 5 s later", after, tail_len / 4096);
  CHECK(resident_pages(b, 200000) == page_round(200000) / 4096, "the block itself lost pages");
  int intact = 1;
  for (size_t i = 0; i < 200000; i += 61) intact &= b[i] == 0x6b;
  CHECK(intact, "the block's contents changed when its tail was purged");
  free(b);
}

static void span_cache(void) {
  /* Eight blocks of two slices (128 KiB spans), all kept by the span
   * cache. */
  enum { N = 8, SIZE = 100000 };
  char *p[N];
  brisk_collect(false); /* the cache starts empty (it keeps what the tests above freed) */
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    CHECK(p[i] != NULL, "malloc(%d) failed", SIZE);
    if (!p[i]) return;
    memset(p[i], 0x40 + i, SIZE);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  /* The newest span first: the one most likely still in the CPU's cache
   * (placing by address would give the lowest of them). */
  char *q = malloc(SIZE);
  CHECK(q == p[N - 1], "malloc(%d) after freeing 8 such blocks gave %p, not the last freed %p", SIZE,
        (void *)q, (void *)p[N - 1]);
  long errors = brisk_errors_reported();
  free(p[1]); /* a second free of a cached span */
  CHECK(brisk_errors_reported() == errors + 1, "a second free of a block whose span is cached was not reported");
  char *r = malloc(SIZE);
  CHECK(r != q, "the block handed out twice");
  memset(r, 0x66, SIZE);
  int intact = 1;
  for (size_t i = 0; i < SIZE; i += 61) intact &= q[i] != 0x66;
  CHECK(intact, "writing one block changed another");
  free(q);
  free(r);
  /* Nothing calls brisk from here: the purger empties the cache and then
   * purges the slices (between one and three delays: 50..150 ms). */
  size_t resident = resident_after_wait((void *const *)p, N, SIZE);
  CHECK(resident == 0, "%zu pages of 8 freed 100000-byte blocks still resident 5 s later", resident);
}

/* On a thread of its own, so that its heap has one segment: the spans the
 * cache keeps for one size go back to their slices for a larger block
 * before it takes slices no block wrote (a program that moves on to
 * larger blocks reuses the memory of the smaller ones), up to a block of
 * more slices than the cache keeps spans of. */
static void *cache_yield_round(void *arg) {
  (void)arg;
  /* A long purge delay while it runs: a cache emptied and purged by its
   * deadline (a thread descheduled for the delay) would send the block to
   * any pooled segment, which is no failure of the yield. */
  long delay = 50;
  brisk_option_get("PURGE_DELAY", &delay);
  CHECK(brisk_option_set("PURGE_DELAY", 60000) == 0, "brisk_option_set(PURGE_DELAY) failed");
  enum { N = 24, SIZE = 100000 };
  static const size_t larger[] = {200000, 1500000}; /* 3 and 23 slices */
  char *p[N];
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    CHECK(p[i] != NULL, "malloc(%d) failed", SIZE);
    if (!p[i]) return NULL;
    memset(p[i], 0x50, SIZE);
    if ((uintptr_t)p[i] < lo) lo = (uintptr_t)p[i];
    if ((uintptr_t)p[i] + 2 * 65536 > hi) hi = (uintptr_t)p[i] + 2 * 65536;
  }
  for (int i = 0; i < N; i++) free(p[i]); /* all kept by the span cache */
  char *q[2];
  for (int k = 0; k < 2; k++) {
    q[k] = malloc(larger[k]);
    CHECK(q[k] != NULL, "malloc(%zu) failed", larger[k]);
    if (!q[k]) return NULL;
    CHECK((uintptr_t)q[k] >= lo && (uintptr_t)q[k] + larger[k] <= hi,
          "malloc(%zu) after freeing %d blocks of %d bytes took %p, outside their %p..%p", larger[k], N, SIZE,
          (void *)q[k], (void *)lo, (void *)hi);
    memset(q[k], 0x60 + k, larger[k]);
  }
  CHECK(q[0][0] == 0x60 && q[0][larger[0] - 1] == 0x60, "the first larger block changed");
  free(q[0]);
  free(q[1]);
  brisk_option_set("PURGE_DELAY", delay);
  brisk_collect(false); /* nothing kept for the long delay */
  return NULL;
}

static void cache_yield(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, cache_yield_round, NULL) == 0, "pthread_create failed");
  pthread_join(t, NULL);
}

/* On a thread of its own, so that its heap's only segment empties: blocks
 * too large for the span cache (10 slices), all freed, send the segment to
 * the pool; the next allocation takes it back at once. */
static void *pool_round_trip(void *arg) {
  (void)arg;
  enum { N = 5, SIZE = 600000 };
  char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = malloc(SIZE);
    if (!p[i]) return "malloc failed";
    memset(p[i], 0x30 + i, SIZE);
  }
  for (int i = 0; i < N; i++) free(p[i]);
  char *small = malloc(64); /* the first free slice: p[0]'s first */
  memset(small, 1, 64);
  size_t resident = resident_after_wait((void *const *)(p + 1), N - 1, SIZE);
  free(small);
  return resident == 0 ? NULL : "the freed blocks' pages stay resident";
}

static void pool_reuse_purged(void) {
  pthread_t t;
  void *ret = "pthread_create failed";
  if (pthread_create(&t, NULL, pool_round_trip, NULL) == 0) pthread_join(t, &ret);
  CHECK(ret == NULL, "segment taken back from the pool: %s 5 s later", (const char *)ret);
}

/* The advice on the mapping that holds p, from its VmFlags in
 * /proc/self/smaps: 'h' MADV_HUGEPAGE, 'n' MADV_NOHUGEPAGE, 0 neither, -1
 * not found. */
static int mapping_advice(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  char line[1024];
  int in = 0, advice = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char dash;
    if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
      continue;
    }
    if (in && strncmp(line, "VmFlags:", 8) == 0) {
      advice = strstr(line, " hg") ? 'h' : strstr(line, " nh") ? 'n' : 0;
      break;
    }
  }
  fclose(f);
  return advice;
}

static void huge_pages(void) {
  char *small = malloc(1000), *large = malloc(1 << 20), *huge = malloc(8 << 20);
  CHECK(small && large && huge, "malloc failed");
  if (!small || !large || !huge) return;
  memset(huge, 1, 4096);
  CHECK(mapping_advice(small) == 'n', "a segment's mapping has advice %d, not MADV_NOHUGEPAGE", mapping_advice(small));
  CHECK(mapping_advice(large) == 'n', "a large block's segment has advice %d, not MADV_NOHUGEPAGE",
        mapping_advice(large));
  CHECK(mapping_advice(huge) == 'n', "by default an 8 MiB block's mapping has advice %d, not MADV_NOHUGEPAGE",
        mapping_advice(huge));
  long was = -1;
  CHECK(brisk_option_get("HUGE_PAGES", &was) == 0 && was == 0, "BRISK_HUGE_PAGES reads %ld, default 0", was);
  CHECK(brisk_option_set("HUGE_PAGES", 1) == 0, "BRISK_HUGE_PAGES cannot be set to 1");
  char *paged = malloc(12 << 20); /* larger than any mapping freed so far: a new one */
  CHECK(paged != NULL && mapping_advice(paged) == 'h', "with BRISK_HUGE_PAGES=1 a 12 MiB block's mapping has advice %d",
        paged ? mapping_advice(paged) : -1);
  char *small2 = malloc(2000);
  CHECK(small2 != NULL && mapping_advice(small2) == 'n', "with BRISK_HUGE_PAGES=1 a segment's mapping has advice %d",
        small2 ? mapping_advice(small2) : -1);
  brisk_option_set("HUGE_PAGES", 0);
  free(small2);
  free(paged);
  free(huge);
  free(large);
  free(small);
}

/* One thread's heap over 200 segments (three blocks of 1 MiB + 64 KiB in
 * each), past the segment directory kept in the heap (8 entries) and past
 * its first mapping (128): every block is its own (no two overlap) and
 * keeps its pattern through frees in scattered order and a second round
 * of allocations that refill the gaps. (The debug build also checks the
 * directory against every segment at each search.) */
enum { MANY = 600 };
static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
  return x < y ? -1 : x > y;
}
static void many_check(unsigned char **p, size_t n, size_t size, const char *when) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] == NULL) continue;
    CHECK(p[i][0] == (unsigned char)i && p[i][size - 1] == (unsigned char)~i, "many segments, %s: block %zu lost its pattern", when, i);
  }
  unsigned char **sorted = malloc(n * sizeof *sorted);
  memcpy(sorted, p, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_ptr);
  for (size_t i = 1; i < n; i++)
    if (sorted[i - 1] != NULL) CHECK(sorted[i - 1] + size <= sorted[i], "many segments, %s: two blocks overlap", when);
  free(sorted);
}
static void many_segments(void) {
  const size_t size = (1u << 20) + 65536;
  unsigned char **p = calloc(MANY, sizeof *p);
  for (size_t i = 0; i < MANY; i++) {
    p[i] = malloc(size);
    CHECK(p[i] != NULL, "many segments: malloc %zu failed", i);
    if (p[i] == NULL) return;
    p[i][0] = (unsigned char)i;
    p[i][size - 1] = (unsigned char)~i;
  }
  char stats[4096];
  brisk_thread_stats_json(stats, sizeof stats);
  const char *at = strstr(stats, "\"segments\":");
  long segments = at ? strtol(at + 11, NULL, 10) : -1;
  CHECK(segments >= MANY / 3, "many segments: %ld segments for %d blocks of 1 MiB + 64 KiB (%s)", segments, MANY, stats);
  many_check(p, MANY, size, "all allocated");
  for (size_t i = 0; i < MANY; i += 2) free(p[i]), p[i] = NULL;       /* scattered gaps */
  for (size_t i = MANY - 1; i >= MANY / 2; i -= 4) free(p[i]), p[i] = NULL; /* whole segments empty */
  many_check(p, MANY, size, "after the frees");
  for (size_t i = 0; i < MANY; i++) {
    if (p[i] != NULL) continue;
    p[i] = malloc(size);
    CHECK(p[i] != NULL, "many segments: malloc %zu again failed", i);
    if (p[i] == NULL) return;
    p[i][0] = (unsigned char)i;
    p[i][size - 1] = (unsigned char)~i;
  }
  many_check(p, MANY, size, "refilled");
  for (size_t i = 0; i < MANY; i++) free(p[i]);
  free(p);
}

int main(void) {
  char stats[4096];
  brisk_stats_json(stats, sizeof stats);
  if (strstr(stats, "\"hardened\":1")) { /* the hardened build guards the span's end */
    printf("test_large_blocks: the hardened build keeps whole spans usable and carves fresh blocks with a "
           "write; nothing to check\n");
    return 77;
  }
  medium_fresh_untouched();
  usable_sizes();
  grow_in_place();
  tail_purged_after_delay();
  span_cache();
  cache_yield();
  pool_reuse_purged();
  huge_pages();
  many_segments();
  CHECK(brisk_errors_reported() == 1, "brisk reported %d bad inputs, not the 1 made", (int)brisk_errors_reported());
  if (failures) {
    printf("test_large_blocks: %d failures\n", failures);
    return 1;
  }
  printf("test_large_blocks: fresh medium blocks untouched, usable sizes, growth in place, tail purge, span cache, "
         "cached spans given back for larger blocks, pool reuse, huge-page advice and a heap of 200 segments as documented\n");
  return 0;
}
