/* A program whose memory goes up and comes down, for the tests of memory
 * return and of the options that govern it (test_options.sh,
 * test_memory_return.py). It is run under LD_PRELOAD of the library under
 * test; it uses only malloc and free, and brisk's statistics when the
 * library has them (looked up with dlsym).
 *
 *   memory_probe SCENARIO BLOCK MIB AT_MS[,AT_MS...]
 *
 * Allocates MIB MiB of BLOCK-byte blocks (every byte written), then frees
 * them (in allocation order) and does SCENARIO's work until the last AT_MS
 * milliseconds after the last free, printing at each of them:
 *   SAMPLE t_ms=.. rss_kib=.. pct=.. purged_bytes=.. munmap_calls=..
 *          segments=.. mapped_bytes=.. wakeups=.. rounds=.. bg_threads=.. tasks=..
 *          wall=..
 * (wakeups, rounds and bg_threads: brisk's background thread; tasks: threads of
 * the process; wall: CLOCK_REALTIME seconds, to line up with strace -ttt)
 * where pct is 100 * (rss - base) / (peak - base): base is the RSS before
 * the burst, peak the RSS with the burst live. RSS is read from
 * /proc/self/statm; the array of block pointers comes from mmap and is
 * unmapped before the first sample, so it counts nowhere.
 *
 * Scenarios (what the program does after the burst):
 *   sleep       nothing: a server between requests
 *   churn       malloc(100)/free in a loop (another size class, fast paths)
 *   classcache  malloc/free of 1 KiB..64 KiB blocks in turn
 *   spans       malloc/free of 100 KB blocks in turn: a large block's span
 *               freed and taken again at once, over and over
 *   thread      the burst (and its frees) ran on a thread that has exited;
 *               the main thread sleeps
 *   keep        1 block in 4096 stays live, the program sleeps; the line
 *               KEPT kept_kib=.. pct=.. gives the pages (64 KiB, or 128 KiB
 *               for blocks above 8 KiB) that hold a live block, in KiB and
 *               as a share of the burst
 *   fork        a 64 MiB burst is freed first (so a background thread may
 *               be running), then the process forks: the child does
 *               "sleep" and prints the samples, the parent waits for it
 * Output ends with "DONE"; exit status 2 on bad arguments, 3 when a block's
 * contents were changed before it was freed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int statm_fd = -1;

static long rss_kib(void) {
  char buf[128];
  if (lseek(statm_fd, 0, SEEK_SET) < 0) return -1;
  ssize_t n = read(statm_fd, buf, sizeof buf - 1);
  if (n <= 0) return -1;
  buf[n] = 0;
  long size = 0, resident = 0;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One brisk statistic from brisk_stats_json, or -1 without brisk. */
static long long stat_of(const char *json, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":", name);
  const char *p = json ? strstr(json, key) : NULL;
  return p ? atoll(p + strlen(key)) : -1;
}

static size_t (*stats_json)(char *, size_t);

static int task_count(void) {
  int n = 0;
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

typedef struct {
  size_t block, count;
  void **ptrs;
  int keep;       /* keep 1 in 4096 live */
  long peak_kib;  /* RSS with the burst live */
  long ptr_kib;   /* the pointer array, not counted */
} burst_t;

static unsigned char stamp(size_t i) { return (unsigned char)(i * 31 + 7); }

static void *burst_run(void *arg) {
  burst_t *b = arg;
  for (size_t i = 0; i < b->count; i++) {
    unsigned char *p = malloc(b->block);
    if (p == NULL) { fprintf(stderr, "memory_probe: malloc(%zu) failed\n", b->block); exit(1); }
    memset(p, stamp(i), b->block);
    b->ptrs[i] = p;
  }
  return NULL;
}

static void *burst_free(void *arg) {
  burst_t *b = arg;
  for (size_t i = 0; i < b->count; i++) {
    unsigned char *p = b->ptrs[i];
    if (p[0] != stamp(i) || p[b->block - 1] != stamp(i)) {
      fprintf(stderr, "memory_probe: CHECK FAILED: block %zu changed\n", i);
      exit(3);
    }
    if (b->keep && i % 4096 == 0) continue;
    free(p);
  }
  return NULL;
}

/* The whole burst: allocate, note the peak, free. */
static void *burst_both(void *arg) {
  burst_t *b = arg;
  burst_run(b);
  b->peak_kib = rss_kib() - b->ptr_kib;
  burst_free(b);
  return NULL;
}

static int cmp_uptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* KiB of pages that hold a kept block. */
static size_t kept_page_kib(const burst_t *b) {
  size_t page = b->block > 8192 ? 128 * 1024 : 64 * 1024;
  size_t n = 0;
  uintptr_t *pages = malloc((b->count / 4096 + 1) * sizeof *pages);
  for (size_t i = 0; i < b->count; i += 4096) pages[n++] = (uintptr_t)b->ptrs[i] / page;
  qsort(pages, n, sizeof *pages, cmp_uptr);
  size_t distinct = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || pages[i] != pages[i - 1]) distinct++;
  free(pages);
  /* a block may straddle two pages */
  return distinct * page / 1024 + (b->block > page ? n * (b->block / 1024) : 0);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: memory_probe sleep|churn|classcache|spans|thread|keep|fork BLOCK MIB "
                    "AT_MS[,AT_MS...]\n");
    return 2;
  }
  const char *scenario = argv[1];
  setvbuf(stdout, NULL, _IOLBF, 0);
  burst_t b = {.block = (size_t)atoll(argv[2])};
  size_t mib = (size_t)atoll(argv[3]);
  double at[32];
  int nat = 0;
  for (char *s = argv[4]; *s && nat < 32;) {
    at[nat++] = strtod(s, &s);
    if (*s == ',') s++;
  }
  if (!strcmp(scenario, "fork")) {
    void *warm[1024];
    for (int k = 0; k < 16; k++) { /* 16 x 4 MiB, every page written */
      for (int i = 0; i < 1024; i++) memset(warm[i] = malloc(4096), 1, 4096);
      for (int i = 0; i < 1024; i++) free(warm[i]);
    }
    usleep(100000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid > 0) {
      int st = 0;
      waitpid(pid, &st, 0);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    }
    scenario = "sleep";
  }
  int sleep_only = !strcmp(scenario, "sleep") || !strcmp(scenario, "thread") || !strcmp(scenario, "keep");
  if (b.block < 16 || mib == 0 || nat == 0 ||
      !(sleep_only || !strcmp(scenario, "churn") || !strcmp(scenario, "classcache") ||
        !strcmp(scenario, "spans") ||
        !strcmp(scenario, "fork"))) {
    fprintf(stderr, "memory_probe: bad arguments\n");
    return 2;
  }
  b.keep = !strcmp(scenario, "keep");
  b.count = (mib << 20) / b.block;
  if (b.count == 0) b.count = 1;
  statm_fd = open("/proc/self/statm", O_RDONLY);
  stats_json = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "brisk_stats_json");

  size_t ptr_bytes = (b.count * sizeof(void *) + 4095) & ~(size_t)4095;
  b.ptrs = mmap(NULL, ptr_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b.ptrs == MAP_FAILED) { perror("mmap"); return 1; }
  memset(b.ptrs, 0, ptr_bytes);
  free(malloc(64)); /* the allocator's start-up is part of the base */
  b.ptr_kib = (long)(ptr_bytes / 1024);
  long base = rss_kib() - b.ptr_kib;
  if (!strcmp(scenario, "thread")) {
    pthread_t t;
    pthread_create(&t, NULL, burst_both, &b);
    pthread_join(t, NULL);
  } else {
    burst_both(&b);
  }
  long peak = b.peak_kib;
  double t0 = now_ms();
  size_t kept_kib = b.keep ? kept_page_kib(&b) : 0;
  munmap(b.ptrs, ptr_bytes);
  long burst = peak - base > 1 ? peak - base : 1;
  printf("BURST base_kib=%ld peak_kib=%ld burst_kib=%ld blocks=%zu\n", base, peak, burst, b.count);
  if (b.keep) printf("KEPT kept_kib=%zu pct=%.1f\n", kept_kib, 100.0 * (double)kept_kib / (double)burst);
  fflush(stdout);

  size_t work = 0;
  for (int i = 0; i < nat; i++) {
    while (now_ms() - t0 < at[i]) {
      if (sleep_only) {
        double left = at[i] - (now_ms() - t0);
        if (left > 0) usleep(left > 5 ? 5000 : (useconds_t)(left * 1000));
      } else if (!strcmp(scenario, "churn")) {
        for (int k = 0; k < 1000; k++) {
          void *volatile p = malloc(100);
          free(p);
        }
      } else if (!strcmp(scenario, "spans")) {
        for (int k = 0; k < 100; k++) {
          char *volatile p = malloc(100000);
          p[0] = 1;
          free(p);
        }
      } else { /* classcache: 1 KiB .. 64 KiB in turn */
        for (int k = 0; k < 100; k++, work++) {
          size_t size = (size_t)1024 << (work % 7);
          void *volatile p = malloc(size);
          free(p);
        }
      }
    }
    char json[4096];
    const char *js = NULL;
    if (stats_json) {
      stats_json(json, sizeof json);
      js = json;
    }
    long rss = rss_kib();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    printf("SAMPLE t_ms=%.0f rss_kib=%ld pct=%.1f purged_bytes=%lld munmap_calls=%lld segments=%lld "
           "mapped_bytes=%lld wakeups=%lld rounds=%lld bg_threads=%lld tasks=%d wall=%ld.%06ld\n",
           now_ms() - t0, rss, 100.0 * (double)(rss - base) / (double)burst,
           stat_of(js, "purged_bytes"), stat_of(js, "munmap_calls"), stat_of(js, "segments"),
           stat_of(js, "mapped_bytes"), stat_of(js, "background_wakeups"),
           stat_of(js, "background_rounds"),
           stat_of(js, "background_threads"), task_count(), (long)wall.tv_sec, wall.tv_nsec / 1000);
    fflush(stdout);
  }
  puts("DONE");
  return 0;
}
