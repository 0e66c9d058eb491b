/* The program of tests/test_guarded.sh: run under LD_PRELOAD of brisk
 * with BRISK_GUARD_RATE set, it commits the heap bug named on its command
 * line on a block of 40 bytes (or checks that guarded blocks behave as
 * any other: `ok`, `rate`). It links only libc: brisk's own calls are
 * found with dlsym. Each bug mode prints "survived" if the process goes on
 * after the bad access. */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile char sink;

static long guarded_allocs(void) {
  size_t (*stats_json)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "brisk_stats_json");
  static char buf[1 << 16];
  if (stats_json == NULL || stats_json(buf, sizeof buf) >= sizeof buf) return -1;
  const char *k = strstr(buf, "\"guarded_allocs\":");
  return k ? atol(k + strlen("\"guarded_allocs\":")) : -1;
}

static int set_rate(long rate) {
  int (*option_set)(const char *, long) = (int (*)(const char *, long))dlsym(RTLD_DEFAULT, "brisk_option_set");
  return option_set ? option_set("GUARD_RATE", rate) : -1;
}

static void on_segv(int sig) {
  (void)sig;
  static const char msg[] = "program handler ran\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(4);
  _exit(3);
}

static void *free_it(void *p) {
  free(p);
  return NULL;
}

static int check_ok(void) {
  /* sizes, contents, usable sizes, realloc in and out of guarded blocks */
  for (size_t n = 1; n <= 20000; n = n * 3 + 1) {
    unsigned char *p = malloc(n);
    if (p == NULL || malloc_usable_size(p) < n) return 10;
    memset(p, 0xab, n);
    unsigned char *q = realloc(p, n * 2);
    if (q == NULL) return 11;
    for (size_t i = 0; i < n; i++)
      if (q[i] != 0xab) return 12;
    q = realloc(q, n / 2 + 1);
    for (size_t i = 0; i < n / 2 + 1; i++)
      if (q[i] != 0xab) return 13;
    free(q);
    unsigned char *z = calloc(1, n);
    for (size_t i = 0; i < n; i++)
      if (z[i] != 0) return 14;
    memset(z, 1, n);
    free(z);
  }
  void *a = NULL;
  if (posix_memalign(&a, 64, 100) != 0 || ((uintptr_t)a & 63) != 0) return 15;
  free(a);
  if (posix_memalign(&a, 4096, 100) != 0 || ((uintptr_t)a & 4095) != 0) return 16;
  free(a);
  /* freed by another thread */
  for (int i = 0; i < 100; i++) {
    pthread_t t;
    void *p = malloc(48);
    if (p == NULL || pthread_create(&t, NULL, free_it, p) != 0 || pthread_join(t, NULL) != 0) return 17;
  }
  /* the slots are reused (more allocations than slots) */
  for (int i = 0; i < 5000; i++) {
    char *p = malloc(64);
    p[0] = p[63] = 1;
    free(p);
  }
  long g = guarded_allocs();
  printf("ok: %ld guarded\n", g);
  return g > 5000 ? 0 : 18;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "ok") == 0) return check_ok();
  if (strcmp(mode, "rate") == 0) {
    long before = guarded_allocs();
    for (int i = 0; i < 200000; i++) {
      char *p = malloc(64);
      p[0] = 1;
      free(p);
    }
    printf("rate: %ld guarded of 200000\n", guarded_allocs() - before);
    return 0;
  }
  if (strcmp(mode, "own-handler") == 0 || strcmp(mode, "runtime") == 0) {
    /* guarded samples switched on while running (after the program's own
     * handler, in own-handler: brisk's reports, then passes the fault on) */
    if (strcmp(mode, "own-handler") == 0) signal(SIGSEGV, on_segv);
    if (set_rate(1) != 0) return 20;
    mode = "use-after-free";
  }
  volatile char *p = malloc(40);
  if (p == NULL) return 2;
  if (strcmp(mode, "use-after-free") == 0) {
    free((void *)p);
    p[3] = 1;
  } else if (strcmp(mode, "use-after-free-read") == 0) {
    free((void *)p);
    sink = p[3];
  } else if (strcmp(mode, "overflow") == 0) {
    p[48] = 1; /* the block ends 8 bytes short of the guard page (16-byte alignment) */
  } else if (strcmp(mode, "overflow-then-free") == 0) {
    p[48] = 1; /* with BRISK_GUARD_CONTINUE: reported once, then freed as usual */
    free((void *)p);
  } else if (strcmp(mode, "overflow-slack") == 0) {
    p[40] = 1; /* into those 8 bytes: seen when the block is freed */
    free((void *)p);
  } else if (strcmp(mode, "underflow") == 0) {
    sink = p[-1];
  } else if (strcmp(mode, "double-free") == 0) {
    free((void *)p);
    free((void *)p);
  } else {
    fprintf(stderr, "usage: guarded_probe ok|rate|use-after-free|use-after-free-read|overflow|overflow-then-free|overflow-slack|underflow|double-free|own-handler|runtime\n");
    return 2;
  }
  printf("survived\n");
  return 0;
}
