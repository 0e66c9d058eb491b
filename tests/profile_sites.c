/* A program with three allocation sites of known sizes, run by
 * test_profile.py under LD_PRELOAD=libbrisk.so with the heap profiler on.
 * It links only libc and is built without frame pointers (the stack walk
 * must read the unwind tables) and with -rdynamic (so that the loader's
 * symbol tables, which the leak report and the collapsed file use, name
 * its functions).
 *
 *   profile_sites sites PATH   make_record: 200000 x 48 B (from load_table),
 *                              make_buffer: 10000 x 2000 B (6000 from
 *                              fill_queue, 4000 from prefetch), make_leaked:
 *                              300 x 40000 B (from remember_errors);
 *                              brisk_profile_dump(PATH) while all are live,
 *                              then the first two are freed and the third
 *                              is left to the exit (the leak)
 *   profile_sites faults N     N rounds of allocations of every kind and a
 *                              dump, where any allocation may fail (run
 *                              with BRISK_FAULT_RATE): nothing may crash
 *   profile_sites idle MS      allocate a little, then sleep MS ms (a dump
 *                              on a signal must still be written)
 *   profile_sites few DIR      make_few: 8 x 100000 B, dumped to DIR/few1.heap
 *                              while live, 3 freed, dumped to DIR/few2.heap
 *                              (fewer samples than a heap's batch holds: the
 *                              dumps must count samples not yet in the
 *                              record, and forget the freed ones)
 *   profile_sites churn PATH   make_reused takes the block just freed,
 *                              make_kept keeps its blocks; dumped to PATH
 *   profile_sites tables N     N x 3000 B from make_reused, then prints how
 *                              many pages of the C library's unwind tables
 *                              are resident (/proc/self/pagemap): the
 *                              stack walk must not add any (it reads them
 *                              from the file)
 *   profile_sites replaced DIR loads DIR/plugin.so, renames DIR/plugin_b.so
 *                              (another build) over it, then keeps 2000 x
 *                              3000 B from the plugin's plugin_make called
 *                              by run_replaced: their stacks must be right
 *   profile_sites small PATH   400 rounds of 1000 x 64 B from make_small,
 *                              each round freed before the next (the page's
 *                              local list refills it), dumped to PATH with
 *                              the last round live: every refill must be
 *                              counted
 *   profile_sites large PATH   9600 x 80 KiB from make_mid and 400 x 1 MiB
 *                              from make_big, each freed at once, dumped to
 *                              PATH (at the default rate the two sizes are
 *                              sampled with very different probabilities,
 *                              1 in 7 and 6 in 7: each must be weighted
 *                              by its own)
 *   profile_sites bursts N     N bursts of 10,000 x 256 B, written, all
 *                              freed after each; prints the largest RSS
 *                              seen at a burst's end ("peak_rss_kib K"):
 *                              what the samples' own memory adds
 *
 * With PROFILE_SITES_EARLY set, a constructor keeps 4000 x 2000 B from
 * make_early before main runs. With PROFILE_SITES_THREAD set, the mode
 * runs in a thread of its own (whose stacks end in the C library's thread
 * start instead of the program's start-up).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { N_RECORDS = 200000, RECORD = 48, N_BUFFERS = 10000, BUFFER = 2000, N_LEAKED = 300, LEAKED = 40000 };

static void *records[N_RECORDS], *buffers[N_BUFFERS];

/* Each writes its block, so that the call is no tail call and the site's
 * own frame is on the stack when malloc runs. */
__attribute__((noinline)) void *make_record(void) {
  char *p = malloc(RECORD);
  if (p) memset(p, 1, RECORD);
  return p;
}

__attribute__((noinline)) void *make_buffer(void) {
  char *p = malloc(BUFFER);
  if (p) memset(p, 2, BUFFER);
  return p;
}

__attribute__((noinline)) void *make_leaked(void) {
  char *p = malloc(LEAKED);
  if (p) memset(p, 3, LEAKED);
  return p;
}

/* Their callers, so that the stacks branch. */
__attribute__((noinline)) void load_table(void) {
  for (int i = 0; i < N_RECORDS; i++) records[i] = make_record();
}

__attribute__((noinline)) void fill_queue(int from, int to) {
  for (int i = from; i < to; i++) buffers[i] = make_buffer();
}

__attribute__((noinline)) void prefetch(int from, int to) {
  for (int i = from; i < to; i++) buffers[i] = make_buffer();
}

__attribute__((noinline)) void remember_errors(void **kept, int n) {
  for (int i = 0; i < n; i++) kept[i] = make_leaked();
}

enum { N_EARLY = 4000, EARLY = 2000 };
static void *early[N_EARLY];

__attribute__((noinline)) void *make_early(void) {
  char *p = malloc(EARLY);
  if (p) memset(p, 4, EARLY);
  return p;
}

__attribute__((constructor)) static void before_main(void) {
  if (getenv("PROFILE_SITES_EARLY") == NULL) return;
  for (int i = 0; i < N_EARLY; i++) early[i] = make_early();
}

enum { N_FEW = 8, FEW = 100000, FEW_FREED = 3 };

__attribute__((noinline)) void *make_few(void) {
  char *p = malloc(FEW);
  if (p) memset(p, 6, FEW);
  return p;
}

enum { CHURN_SLOTS = 2000, CHURN_ROUNDS = 20, CHURN_SIZE = 3000 };
static void *churn[CHURN_SLOTS], *kept[CHURN_SLOTS * CHURN_ROUNDS / 4];

__attribute__((noinline)) void *make_reused(void) {
  char *p = malloc(CHURN_SIZE);
  if (p) memset(p, 7, CHURN_SIZE);
  return p;
}

__attribute__((noinline)) void *make_kept(void) {
  char *p = malloc(CHURN_SIZE);
  if (p) memset(p, 8, CHURN_SIZE);
  return p;
}

typedef int (*dump_fn)(const char *);

static dump_fn find_dump(void) {
  dump_fn dump = (dump_fn)dlsym(RTLD_DEFAULT, "brisk_profile_dump");
  if (dump == NULL) {
    fprintf(stderr, "profile_sites: brisk_profile_dump not found: run under LD_PRELOAD=libbrisk.so\n");
    exit(2);
  }
  return dump;
}

static int run_sites(const char *path) {
  dump_fn dump = find_dump();
  load_table();
  fill_queue(0, N_BUFFERS * 3 / 5);
  prefetch(N_BUFFERS * 3 / 5, N_BUFFERS);
  static void *leaked[N_LEAKED];
  remember_errors(leaked, N_LEAKED);
  for (int i = 0; i < N_RECORDS; i++)
    if (!records[i]) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
  int err = dump(path);
  if (err != 0) return fprintf(stderr, "profile_sites: brisk_profile_dump(%s) = %d\n", path, err), 1;
  for (int i = 0; i < N_RECORDS; i++) free(records[i]);
  for (int i = 0; i < N_BUFFERS; i++) free(buffers[i]);
  /* leaked[] is dropped here: its blocks are the leak */
  memset(leaked, 0, sizeof leaked);
  return 0;
}

static int run_few(const char *dir) {
  dump_fn dump = find_dump();
  void *few[N_FEW];
  for (int i = 0; i < N_FEW; i++)
    if ((few[i] = make_few()) == NULL) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/few1.heap", dir);
  if (dump(path) != 0) return fprintf(stderr, "profile_sites: dump %s failed\n", path), 1;
  for (int i = 0; i < FEW_FREED; i++) free(few[i]);
  snprintf(path, sizeof path, "%s/few2.heap", dir);
  if (dump(path) != 0) return fprintf(stderr, "profile_sites: dump %s failed\n", path), 1;
  for (int i = FEW_FREED; i < N_FEW; i++) free(few[i]);
  return 0;
}

static int run_churn(const char *path) {
  dump_fn dump = find_dump();
  size_t k = 0;
  for (int r = 0; r < CHURN_ROUNDS; r++)
    for (int i = 0; i < CHURN_SLOTS; i++) {
      free(churn[i]);
      if ((churn[i] = make_reused()) == NULL) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
      if (i % 4 == 0 && (kept[k++] = make_kept()) == NULL)
        return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
    }
  if (dump(path) != 0) return fprintf(stderr, "profile_sites: dump %s failed\n", path), 1;
  for (int i = 0; i < CHURN_SLOTS; i++) free(churn[i]);
  for (size_t i = 0; i < k; i++) free(kept[i]);
  return 0;
}

/* The C library's unwind tables: from its .eh_frame_hdr to the end of the
 * PT_LOAD holding it (.eh_frame follows the header there). */
typedef struct {
  uintptr_t lo, hi;
} range_t;

static int find_libc_tables(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/libc.so") == NULL) return 0;
  range_t *r = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_GNU_EH_FRAME) continue;
    uintptr_t hdr = info->dlpi_phdr[i].p_vaddr;
    for (int j = 0; j < info->dlpi_phnum; j++) {
      const ElfW(Phdr) *ph = &info->dlpi_phdr[j];
      if (ph->p_type == PT_LOAD && hdr >= ph->p_vaddr && hdr < ph->p_vaddr + ph->p_filesz) {
        r->lo = info->dlpi_addr + hdr;
        r->hi = info->dlpi_addr + ph->p_vaddr + ph->p_filesz;
        return 1;
      }
    }
  }
  return 0;
}

static int run_tables(int n) {
  for (int i = 0; i < n; i++) free(make_reused());
  range_t r = {0, 0};
  if (dl_iterate_phdr(find_libc_tables, &r) == 0) return fprintf(stderr, "profile_sites: no libc tables\n"), 1;
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return fprintf(stderr, "profile_sites: cannot open /proc/self/pagemap\n"), 1;
  long page = sysconf(_SC_PAGESIZE), resident = 0, pages = 0;
  for (uintptr_t a = r.lo & ~(uintptr_t)(page - 1); a < r.hi; a += (uintptr_t)page, pages++) {
    uint64_t entry;
    if (pread(fd, &entry, 8, (off_t)(a / (uintptr_t)page * 8)) != 8) return fprintf(stderr, "profile_sites: pagemap\n"), 1;
    resident += (entry >> 63) & 1;
  }
  close(fd);
  printf("tables: %ld of %ld pages resident\n", resident, pages);
  return 0;
}

enum { N_SMALL = 1000, SMALL_ROUNDS = 400, SMALL = 64 };
static void *small[N_SMALL];

__attribute__((noinline)) void *make_small(void) {
  char *p = malloc(SMALL);
  if (p) memset(p, 10, SMALL);
  return p;
}

static int run_small(const char *path) {
  dump_fn dump = find_dump();
  for (int r = 0; r < SMALL_ROUNDS; r++) {
    for (int i = 0; i < N_SMALL; i++)
      if ((small[i] = make_small()) == NULL) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
    if (r + 1 < SMALL_ROUNDS)
      for (int i = 0; i < N_SMALL; i++) free(small[i]);
  }
  if (dump(path) != 0) return fprintf(stderr, "profile_sites: dump %s failed\n", path), 1;
  for (int i = 0; i < N_SMALL; i++) free(small[i]);
  return 0;
}

enum { N_MID = 9600, MID = 80 * 1024, N_BIG = 400, BIG = 1024 * 1024 }; /* a big block every 24th */

__attribute__((noinline)) void *make_mid(void) {
  char *p = malloc(MID);
  if (p) p[MID - 1] = 1;
  return p;
}

__attribute__((noinline)) void *make_big(void) {
  char *p = malloc(BIG);
  if (p) p[BIG - 1] = 1;
  return p;
}

static int run_large(const char *path) {
  dump_fn dump = find_dump();
  for (int i = 0; i < N_MID; i++) {
    void *p = make_mid(), *q = i % (N_MID / N_BIG) == 0 ? make_big() : NULL;
    if (p == NULL || (q == NULL && i % (N_MID / N_BIG) == 0)) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
    free(q);
    free(p);
  }
  if (dump(path) != 0) return fprintf(stderr, "profile_sites: dump %s failed\n", path), 1;
  return 0;
}

enum { N_BURST = 10000, BURST = 256 };
static void *burst[N_BURST];

/* Resident KiB from a walk of the page tables (smaps_rollup), exact: the
 * kernel's running count (statm) is kept per CPU and folded in batches of
 * 32 pages, up to 256 KiB off on 2 CPUs, more than the difference the
 * bursts measure. statm where there is no smaps_rollup. */
static long rss_kib(void) {
  long kib = -1;
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f != NULL) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "Rss: %ld kB", &kib) == 1) break;
    fclose(f);
    if (kib >= 0) return kib;
  }
  long pages = 0, resident = 0;
  f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int run_bursts(int rounds) {
  long peak = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < N_BURST; i++)
      if ((burst[i] = malloc(BURST)) == NULL) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
      else memset(burst[i], r, BURST);
    long now = rss_kib();
    if (now < 0) return fprintf(stderr, "profile_sites: no /proc/self/statm\n"), 1;
    if (now > peak) peak = now;
    for (int i = 0; i < N_BURST; i++) free(burst[i]);
  }
  printf("peak_rss_kib %ld\n", peak);
  return 0;
}

enum { N_PLUGIN = 2000, PLUGIN = 3000 };
static void *plugin_blocks[N_PLUGIN];

__attribute__((noinline)) int run_replaced(const char *dir) {
  char loaded[4096], other[4096];
  snprintf(loaded, sizeof loaded, "%s/plugin.so", dir);
  snprintf(other, sizeof other, "%s/plugin_b.so", dir);
  void *h = dlopen(loaded, RTLD_NOW);
  if (h == NULL) return fprintf(stderr, "profile_sites: dlopen %s: %s\n", loaded, dlerror()), 1;
  void *(*make)(size_t) = (void *(*)(size_t))dlsym(h, "plugin_make");
  if (make == NULL) return fprintf(stderr, "profile_sites: no plugin_make\n"), 1;
  if (rename(other, loaded) != 0) return perror("profile_sites: rename"), 1;
  for (int i = 0; i < N_PLUGIN; i++)
    if ((plugin_blocks[i] = make(PLUGIN)) == NULL) return fprintf(stderr, "profile_sites: malloc failed\n"), 1;
  return 0;
}

static int run_faults(int rounds) {
  dump_fn dump = find_dump();
  static const size_t sizes[] = {16, 48, 200, 1000, 3000, 20000, 100000, 1 << 20, 5 << 20};
  enum { NS = sizeof sizes / sizeof sizes[0], KEEP = 64 };
  void *keep[KEEP] = {0};
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < 2000; i++) {
      size_t n = sizes[(unsigned)(i * 7 + r) % NS];
      void *p = (i & 3) == 0 ? calloc(1, n) : (i & 3) == 1 ? aligned_alloc(64, n) : malloc(n);
      if (p) memset(p, 5, n < 64 ? n : 64);
      int k = (i * 13 + r) % KEEP;
      free(keep[k]);
      keep[k] = p;
      void *q = realloc(NULL, n / 2 + 1);
      void *q2 = q ? realloc(q, n + 100) : NULL;
      free(q2 ? q2 : q);
    }
    dump(NULL); /* may fail for want of memory: reported, never fatal */
  }
  for (int k = 0; k < KEEP; k++) free(keep[k]);
  return 0;
}

static int run_idle(int ms) {
  for (int i = 0; i < 1000; i++) buffers[i % N_BUFFERS] = make_buffer();
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}

static int dispatch(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "sites") == 0) return run_sites(argv[2]);
  if (argc == 3 && strcmp(argv[1], "faults") == 0) return run_faults(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "idle") == 0) return run_idle(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "few") == 0) return run_few(argv[2]);
  if (argc == 3 && strcmp(argv[1], "churn") == 0) return run_churn(argv[2]);
  if (argc == 3 && strcmp(argv[1], "tables") == 0) return run_tables(atoi(argv[2]));
  if (argc == 3 && strcmp(argv[1], "replaced") == 0) return run_replaced(argv[2]);
  if (argc == 3 && strcmp(argv[1], "small") == 0) return run_small(argv[2]);
  if (argc == 3 && strcmp(argv[1], "large") == 0) return run_large(argv[2]);
  if (argc == 3 && strcmp(argv[1], "bursts") == 0) return run_bursts(atoi(argv[2]));
  fprintf(stderr, "usage: profile_sites sites PATH | faults ROUNDS | idle MS | few DIR | churn PATH | tables N | "
          "replaced DIR | small PATH | large PATH | bursts N\n");
  return 2;
}

typedef struct {
  int argc;
  char **argv;
  int rc;
} run_args_t;

static void *run_thread(void *p) {
  run_args_t *a = p;
  a->rc = dispatch(a->argc, a->argv);
  return NULL;
}

int main(int argc, char **argv) {
  if (getenv("PROFILE_SITES_THREAD") == NULL) return dispatch(argc, argv);
  run_args_t a = {argc, argv, 1};
  pthread_t t;
  if (pthread_create(&t, NULL, run_thread, &a) != 0) return fprintf(stderr, "profile_sites: no thread\n"), 1;
  pthread_join(t, NULL);
  return a.rc;
}
