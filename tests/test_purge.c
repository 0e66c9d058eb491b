/* Memory goes back to the OS after a burst: 256 MiB of 64-byte blocks are
 * allocated (and written) and freed; RSS must then fall well below the
 * peak while the program keeps running, without any call to brisk_collect.
 * ctest-labels: sanitize */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) {
    fprintf(stderr, "test_purge: cannot read /proc/self/statm\n");
    exit(1);
  }
  fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void) {
  const size_t n = ((size_t)256 << 20) / 64;
  /* The pointer array itself comes from the system, not from the heap
   * under test, so that it does not count in what must fall. */
  void **v = calloc(1, 16); /* warm up the thread heap */
  free(v);
  void **slots = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) { perror("mmap"); return 1; }
  double base = rss_mib();
  for (size_t i = 0; i < n; i++) {
    slots[i] = malloc(64);
    if (slots[i] == NULL) { fprintf(stderr, "test_purge: malloc failed\n"); return 1; }
    memset(slots[i], (int)(i & 0xff), 64);
  }
  double peak = rss_mib();
  for (size_t i = 0; i < n; i++) {
    if (((unsigned char *)slots[i])[63] != (unsigned char)(i & 0xff)) {
      fprintf(stderr, "test_purge: block %zu changed\n", i);
      return 1;
    }
    free(slots[i]);
  }
  munmap(slots, n * sizeof(void *));
  double after_free = rss_mib();
  /* Keep running: small allocations for up to 2 s, until RSS has fallen. */
  double start = now_s(), now = after_free;
  unsigned long sink = 0;
  while (now_s() - start < 2.0) {
    for (int k = 0; k < 1000; k++) {
      char *p = malloc(32 + (size_t)(k % 200));
      p[0] = (char)k;
      sink += (unsigned char)p[0];
      free(p);
    }
    usleep(10000);
    now = rss_mib();
    if (now - base < 0.10 * (peak - base)) break;
  }
  double waited = now_s() - start;
  printf("test_purge: RSS before %.1f MiB, after 256 MiB of 64 B blocks %.1f MiB, right after "
         "free %.1f MiB, after %.2f s %.1f MiB (%.1f%% of the burst) [%lu]\n",
         base, peak, after_free, waited, now, 100.0 * (now - base) / (peak - base), sink & 1);
  if (peak - base < 200) {
    fprintf(stderr, "test_purge: FAIL: the burst did not raise RSS as expected\n");
    return 1;
  }
  if (now - base > 0.10 * (peak - base)) {
    fprintf(stderr, "test_purge: FAIL: RSS still holds %.1f%% of the burst after 2 s\n",
            100.0 * (now - base) / (peak - base));
    return 1;
  }
  printf("1 passed, 0 failed\n");
  return 0;
}
