/* Memory returned to the OS after a burst (bench/rss_return.py charts it).
 *
 * Allocates MIB MiB of 64-byte blocks, writes every byte of each, checks
 * one byte of each and frees them all. Then the program keeps running for
 * SECONDS: every ~1 ms it does a few hundred malloc/free pairs of 16..256 B
 * (a live program, not an idle one, so allocators that purge from their
 * own calls get the chance) and every 10 ms it samples its RSS from
 * /proc/self/statm. It never calls anything to ask for the memory back.
 *
 *   bench_rss_return [MIB] [SECONDS]       defaults: 1024 MiB, 3 s
 *
 * The array of block pointers (8 bytes per block, 128 MiB for 1 GiB) comes
 * from mmap, not from the allocator under test; every page of it is written
 * before the baseline is taken, its pages are subtracted from the peak and
 * from the first sample, and it is unmapped right after that sample, so it
 * counts nowhere.
 *
 * Output:
 *   SAMPLE t_ms=<ms since the last free returned> rss_kib=<RSS>   every 10 ms
 *   METRIC id=rss_return peak_kib=.. base_kib=.. after_free_pct=..
 *          at_100ms_pct=.. at_1s_pct=.. at_end_pct=..
 *   RESULT workload=rss_return ... check=ok
 * base_kib is the RSS before the burst (after a warm-up malloc), peak_kib
 * the RSS just before the first free (pointer array excluded). Every
 * percentage is of the burst: 100 * (rss - base_kib) / (peak_kib -
 * base_kib), i.e. the baseline is subtracted from both numerator and
 * denominator. after_free is the sample taken right after the last free
 * (t_ms near 0), at_100ms and at_1s the last sample taken at or before 100 ms
 * and 1000 ms, at_end the last sample. RESULT's ops and secs are the
 * burst's mallocs plus frees and the time they took.
 */
#include "bench_common.h"

#include <fcntl.h>
#include <sys/mman.h>

enum { BLOCK = 64, WORK_PAIRS = 200, WORK_LO = 16, WORK_HI = 256 };
#define TICK_NS 1000000L  /* light work every 1 ms */
#define SAMPLE_MS 10.0    /* an RSS sample every 10 ms */

static int statm_fd = -1;
static long page_kib = 4;

/* RSS in KiB, read with plain syscalls so that sampling does not allocate. */
static long rss_kib(void) {
  char buf[128];
  if (lseek(statm_fd, 0, SEEK_SET) < 0) bench_die("lseek /proc/self/statm");
  ssize_t n = read(statm_fd, buf, sizeof buf - 1);
  if (n <= 0) bench_die("read /proc/self/statm");
  buf[n] = 0;
  long size = 0, resident = 0;
  if (sscanf(buf, "%ld %ld", &size, &resident) != 2) bench_die("parse /proc/self/statm");
  return resident * page_kib;
}

static void *map(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) bench_die("mmap");
  return p;
}

static void sleep_until(struct timespec *t) {
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) == EINTR) {
  }
}

typedef struct {
  double t_ms;
  long rss;
} sample;

static double pct(long rss, long base, long peak) {
  return peak > base ? 100.0 * (double)(rss - base) / (double)(peak - base) : 0.0;
}

/* The last sample taken at or before t_ms (the first one if none is). */
static long rss_at(const sample *s, size_t n, double t_ms) {
  long r = s[0].rss;
  for (size_t i = 0; i < n && s[i].t_ms <= t_ms; i++) r = s[i].rss;
  return r;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    printf("usage: %s [MIB] [SECONDS]   (default 1024 MiB of 64-byte blocks, 3 s)\n", argv[0]);
    return 0;
  }
  long long mib = argc > 1 ? bench_parse_count(argv[1], "MIB") : 1024;
  double seconds = 3.0;
  if (argc > 2) {
    char *end = NULL;
    seconds = strtod(argv[2], &end);
    if (end == argv[2] || *end || seconds < 0) {
      fprintf(stderr, "bench: bad SECONDS '%s'\n", argv[2]);
      return 2;
    }
  }
  if (mib < 1) mib = 1;
  page_kib = sysconf(_SC_PAGESIZE) / 1024;
  statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (statm_fd < 0) bench_die("open /proc/self/statm");

  /* Sample storage and stdout's buffer are set up before the burst, so
   * nothing after it allocates except the light work. */
  size_t max_samples = (size_t)(seconds * 1000.0 / SAMPLE_MS) + 16;
  sample *samples = (sample *)map(max_samples * sizeof(sample));
  printf("# bench_rss_return: %lld MiB of %d-byte blocks, then %.1f s of light work\n", mib,
         BLOCK, seconds);
  fflush(stdout);
  free(bench_xmalloc(16)); /* warm up the allocator */

  const size_t n = (size_t)mib * ((size_t)1 << 20) / BLOCK;
  const size_t slots_bytes = n * sizeof(void *);
  long base = rss_kib();
  void **slots = (void **)map(slots_bytes);
  memset(slots, 0, slots_bytes); /* resident now: left out of the peak below */
  size_t page = (size_t)page_kib * 1024;
  long slots_kib = (long)((slots_bytes + page - 1) / page) * page_kib;

  double t0 = bench_now();
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = (unsigned char *)malloc(BLOCK);
    if (!p) bench_die("malloc returned NULL");
    memset(p, (int)(i * 131u + 7u) & 0xff, BLOCK);
    slots[i] = p;
  }
  long peak = rss_kib() - slots_kib;
  for (size_t i = 0; i < n; i++) {
    unsigned char *p = (unsigned char *)slots[i];
    BENCH_CHECK(p[(i % BLOCK)] == (unsigned char)((i * 131u + 7u) & 0xff),
                "rss_return: block %zu changed before its free", i);
    free(p);
  }
  double t_free = bench_now();
  double burst_secs = t_free - t0;
  /* The first sample right away (the pointer array left out: unmapping
   * 128 MiB takes a few ms), then the array goes. */
  size_t ns = 0;
  samples[ns++] = (sample){(bench_now() - t_free) * 1e3, rss_kib() - slots_kib};
  munmap(slots, slots_bytes);

  /* Keep running: light work every 1 ms, a sample every 10 ms. */
  bench_rng rng = {42};
  unsigned char *live[WORK_PAIRS];
  size_t live_size[WORK_PAIRS];
  double next_sample = SAMPLE_MS * (double)((long)(samples[0].t_ms / SAMPLE_MS) + 1);
  struct timespec tick;
  clock_gettime(CLOCK_MONOTONIC, &tick);
  for (;;) {
    tick.tv_nsec += TICK_NS;
    if (tick.tv_nsec >= 1000000000L) tick.tv_nsec -= 1000000000L, tick.tv_sec++;
    sleep_until(&tick);
    for (int k = 0; k < WORK_PAIRS; k++) {
      size_t sz = bench_range(&rng, WORK_LO, WORK_HI);
      unsigned char *p = (unsigned char *)bench_xmalloc(sz);
      p[0] = (unsigned char)k;
      p[sz - 1] = (unsigned char)sz;
      live[k] = p;
      live_size[k] = sz;
    }
    for (int k = 0; k < WORK_PAIRS; k++) {
      BENCH_CHECK(live[k][0] == (unsigned char)k &&
                      live[k][live_size[k] - 1] == (unsigned char)live_size[k],
                  "rss_return: a small block of %zu B changed", live_size[k]);
      free(live[k]);
    }
    double t_ms = (bench_now() - t_free) * 1e3;
    if (t_ms >= next_sample && ns < max_samples) {
      samples[ns++] = (sample){t_ms, rss_kib()};
      while (next_sample <= t_ms) next_sample += SAMPLE_MS;
    }
    if (t_ms >= seconds * 1e3) break;
  }

  for (size_t i = 0; i < ns; i++)
    printf("SAMPLE t_ms=%.1f rss_kib=%ld\n", samples[i].t_ms, samples[i].rss);
  printf("METRIC id=rss_return peak_kib=%ld base_kib=%ld after_free_pct=%.2f at_100ms_pct=%.2f "
         "at_1s_pct=%.2f at_end_pct=%.2f\n",
         peak, base, pct(samples[0].rss, base, peak), pct(rss_at(samples, ns, 100.0), base, peak),
         pct(rss_at(samples, ns, 1000.0), base, peak), pct(samples[ns - 1].rss, base, peak));
  char extra[160];
  snprintf(extra, sizeof extra, "mib=%lld peak_kib=%ld base_kib=%ld at_1s_pct=%.2f", mib, peak,
           base, pct(rss_at(samples, ns, 1000.0), base, peak));
  bench_result("rss_return", 1, 2 * (long long)n, burst_secs, extra);
  munmap(samples, max_samples * sizeof(sample));
  close(statm_fd);
  return 0;
}
