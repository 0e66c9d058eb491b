/* One heap attack per mode, for the detection table of docs/SECURITY.md
 * (scripts/detection_table.py runs every mode under each allocator, with
 * LD_PRELOAD; tests/test_detection.sh checks brisk's rows). Not a test:
 * it links only libc and pthread, and it does what a buggy or hostile
 * program does, so that what the allocator makes of it can be seen.
 *
 *   attack_probe MODE
 *
 * Each mode makes its attack, then keeps using the heap a little: more
 * blocks of the attacked size (at least as many as the mode freed, so that
 * the blocks it freed are handed out again) and 16 of each of a few other
 * sizes, all live at once, checked for duplicates, overlaps and wild
 * pointers before they are written, then freed. It prints the consequence
 * it saw and "completed" (tests/attack_probe.h). An allocator that detects
 * the attack prints its message on stderr and may end the process; one
 * that does not lets the probe finish and exit 0.
 *
 * Modes:
 *   double-free-local    a b a: free(a), free(b), free(a) on the thread
 *                        that allocated them (64 bytes), then two mallocs
 *   double-free-remote   a and b allocated on the main thread; another
 *                        thread frees a, b, a; then the main thread mallocs
 *   double-free-transit  1000 blocks (64 bytes) allocated on the main
 *                        thread, each freed by it and by a second thread at
 *                        once (a barrier before each pair of frees); then
 *                        both threads allocate and the blocks are compared
 *   uaf-write            16 bytes (0x41) written at the start of a freed
 *                        64-byte block, then malloc(64) twice
 *   uaf-read             a freed 64-byte block read (bytes 16..63): does it
 *                        still hold its data?
 *   overflow-next        two neighbouring 32-byte blocks (the closest pair
 *                        by address among 4096); 16 bytes written past the
 *                        end of the first while the second is live; both freed
 *   overflow-metadata    4096 bytes (0x41) written past the end of a 32-byte
 *                        block, the lowest-addressed of 4096 (half of the
 *                        others freed, half live), over the blocks after it
 *                        and whatever else follows (headers, links); it is
 *                        freed
 *   overflow-large       4 KiB written past the end of a 1 MiB block (a
 *                        1 MiB block allocated before it stays live); it is freed
 *   free-interior        free(p + 16) of a live 64-byte block
 *   free-stack           free() of a pointer into a zeroed buffer on the stack
 *   free-wild            free((void *)0x12345678)
 *   free-foreign         free() of a page from mmap (the second page of a
 *                        two-page anonymous mapping, so that the bytes just
 *                        before the pointer are mapped zeros, not a fault)
 * The C++ mismatches (new/free, new[]/delete) are in attack_probe_cxx.cpp.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attack_probe.h"

/* Blocks of a few sizes made before every attack, which must stay intact. */
static void keep_some(void) {
  static const size_t sizes[] = {24, 64, 200, 3000, 70000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) ap_keep(sizes[i]);
}

static void double_free_local(void) {
  char *a = malloc(64), *b = malloc(64);
  free(a);
  free(b);
  free(ap_opaque(a));
  ap_say("attack done");
  ap_adopt(malloc(64), 64);
  ap_adopt(malloc(64), 64);
  ap_after(64, 2048);
}

static char *g_a, *g_b;
static void *remote_frees(void *arg) {
  (void)arg;
  free(g_a);
  free(g_b);
  free(ap_opaque(g_a));
  return NULL;
}
static void double_free_remote(void) {
  g_a = malloc(64);
  g_b = malloc(64);
  pthread_t t;
  pthread_create(&t, NULL, remote_frees, NULL);
  pthread_join(t, NULL);
  ap_say("attack done");
  ap_adopt(malloc(64), 64);
  ap_adopt(malloc(64), 64);
  ap_after(64, 2048);
}

enum { RACES = 1000, AFTER_B = 1024 };
static char *g_race[RACES];
static pthread_barrier_t g_bar;
static void *g_after_b[AFTER_B];
static void *racer(void *arg) {
  (void)arg;
  for (int i = 0; i < RACES; i++) {
    pthread_barrier_wait(&g_bar);
    free(g_race[i]);
    pthread_barrier_wait(&g_bar);
  }
  for (int i = 0; i < AFTER_B; i++) g_after_b[i] = malloc(64);
  return NULL;
}
static void double_free_transit(void) {
  for (int i = 0; i < RACES; i++) g_race[i] = malloc(64);
  pthread_barrier_init(&g_bar, NULL, 2);
  pthread_t t;
  pthread_create(&t, NULL, racer, NULL);
  for (int i = 0; i < RACES; i++) {
    pthread_barrier_wait(&g_bar);
    free(g_race[i]);
    pthread_barrier_wait(&g_bar);
  }
  pthread_join(t, NULL);
  ap_say("attack done");
  /* the other thread's blocks (it has exited; they stay live), then ours */
  for (int i = 0; i < AFTER_B; i++) ap_adopt(g_after_b[i], 64);
  ap_after(64, 2048);
}

static void uaf_write(void) {
  char *p = malloc(64);
  memset(p, 0x5a, 64);
  free(p);
  memset(ap_opaque(p), 0x41, 16);
  ap_say("attack done");
  ap_adopt(malloc(64), 64);
  ap_adopt(malloc(64), 64);
  ap_after(64, 2048);
}

static void uaf_read(void) {
  volatile char *p = malloc(64);
  for (int i = 0; i < 64; i++) p[i] = 0x5a;
  free(ap_opaque((void *)p));
  int same = 0;
  for (int i = 16; i < 64; i++) same += p[i] == 0x5a;
  ap_say("attack done");
  ap_note(same == 48 ? AP_READ_STALE : AP_READ_CLEARED);
  ap_after(64, 2048);
}

static void overflow_next(void) {
  enum { N = 4096 };
  static char *blk[N];
  for (int i = 0; i < N; i++) blk[i] = malloc(32);
  /* the closest pair by address, at least 32 bytes apart */
  int ia = -1, ib = -1;
  uintptr_t best = UINTPTR_MAX;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      uintptr_t d = (uintptr_t)blk[j] - (uintptr_t)blk[i];
      if (blk[j] > blk[i] && d >= 32 && d < best) {
        best = d;
        ia = i;
        ib = j;
      }
    }
  char *a = blk[ia], *b = blk[ib];
  for (int i = 0; i < N; i++)
    if (i != ia && i != ib) free(blk[i]);
  ap_adopt(b, 32);
  ap_fill(ap_find(b));
  ap_say("neighbours %zu bytes apart", (size_t)best);
  memset(a + 32, 0x58, 16);
  ap_attack_wrote(a + 32, 16);
  ap_say("attack done");
  ap_check_data();
  ap_forget(b);
  free(a);
  free(b);
  ap_after(32, 4096);
}

static void overflow_metadata(void) {
  enum { N = 4096 };
  static char *blk[N];
  int ip = 0;
  for (int i = 0; i < N; i++) {
    blk[i] = malloc(32);
    if (blk[i] < blk[ip]) ip = i;
  }
  char *p = blk[ip];
  for (int i = 0; i < N; i++) {
    if (i == ip) continue;
    if (i % 2) free(blk[i]);
    else {
      ap_adopt(blk[i], 32);
      ap_fill(ap_find(blk[i]));
    }
  }
  memset(p + 32, 0x41, 4096);
  ap_attack_wrote(p + 32, 4096);
  ap_say("attack done");
  free(p);
  ap_after(32, 4096);
}

static void overflow_large(void) {
  const size_t mib = (size_t)1 << 20;
  ap_keep(mib);
  char *p = malloc(mib);
  memset(p, 0x5a, mib);
  memset(p + mib, 0x41, 4096);
  ap_attack_wrote(p + mib, 4096);
  ap_say("attack done");
  free(p);
  ap_after(mib, 4);
}

static void free_interior(void) {
  char *p = ap_keep(64);
  free(p + 16);
  ap_say("attack done");
  ap_after(64, 2048);
}

static void __attribute__((noinline)) free_stack(void) {
  char buf[256] __attribute__((aligned(16)));
  memset(buf, 0, sizeof buf);
  ap_foreign(buf, sizeof buf);
  free(ap_opaque(buf + 128));
  ap_say("attack done");
  ap_after(64, 2048);
  ap_opaque(buf);
}

static void free_wild(void) {
  ap_foreign((void *)0x12340000, 0x10000);
  free((void *)0x12345678);
  ap_say("attack done");
  ap_after(64, 2048);
}

static void free_foreign(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) { ap_say("mmap failed"); exit(2); }
  ap_foreign(m, 2 * page);
  free(m + page);
  ap_say("attack done");
  ap_after(64, 2048);
}

static const struct {
  const char *name;
  void (*run)(void);
} k_modes[] = {
    {"double-free-local", double_free_local},
    {"double-free-remote", double_free_remote},
    {"double-free-transit", double_free_transit},
    {"uaf-write", uaf_write},
    {"uaf-read", uaf_read},
    {"overflow-next", overflow_next},
    {"overflow-metadata", overflow_metadata},
    {"overflow-large", overflow_large},
    {"free-interior", free_interior},
    {"free-stack", free_stack},
    {"free-wild", free_wild},
    {"free-foreign", free_foreign},
};

int main(int argc, char **argv) {
  size_t n = sizeof k_modes / sizeof k_modes[0];
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < n; i++) printf("%s\n", k_modes[i].name);
    return 0;
  }
  for (size_t i = 0; argc == 2 && i < n; i++)
    if (strcmp(argv[1], k_modes[i].name) == 0) {
      ap_mode = k_modes[i].name;
      keep_some();
      k_modes[i].run();
      return 0;
    }
  fprintf(stderr, "usage: attack_probe MODE (attack_probe --list prints the modes)\n");
  return 2;
}
