/* The sampling heap profiler: the record of sampled blocks by stack, and
 * when to dump it (profile_count.c keeps the countdowns that choose the
 * samples; profile_out.c writes the heap profile, the collapsed stacks and
 * the leak report from a snapshot of the record). See
 * profile.h for how samples are taken and docs/DESIGN.md for why the fast
 * paths pay nothing for it.
 *
 * Memory: everything here comes from the platform layer (os_map_aligned),
 * never from brisk's heaps, so the profiler never samples itself and takes
 * nothing from the program's heaps. Locks: prof_lock guards the stack and
 * sample tables (held for table updates only, never across a stack walk, a
 * file or a loader call); dump_lock lets one dump run at a time (taken
 * before prof_lock when both are). Neither is held across a call that
 * allocates. */
#include "profile.h"
#include "profile_count.h"
#include "profile_out.h"

#include <errno.h>
#include <string.h>

#include "atomics.h"
#include "background.h"
#include "counters.h"
#include "options.h"
#include "platform.h"
#include "report.h"
#include "stackwalk.h"

#define PROF_FRAMES 64
#define PROF_RETRY_MS 20 /* a dump asked for while another runs: tried again after this */
#define PROF_PATH_MAX 4096
#define PROF_PREFIX_MAX (PROF_PATH_MAX - 64)
#define PROF_CHUNK ((size_t)1 << 20)


typedef struct prof_stack_s {
  struct prof_stack_s *hash_next;
  struct prof_stack_s *all_next;
  uint64_t hash;
  double live_n, live_b, alloc_n, alloc_b; /* scaled back from the samples */
  uint32_t depth;
  uint32_t live_samples;
  uintptr_t pc[];
} prof_stack_t;

typedef struct prof_sample_s {
  uintptr_t addr; /* the block; 0: a free entry */
  prof_stack_t *stack;
  prof_heap_t *heap;
  double weight; /* 1 / (probability that a block of its size is sampled) */
  double bytes;  /* requested bytes * weight */
  uint32_t next_free;
  uint32_t pad_;
} prof_sample_t;

static brisk_lock_t prof_lock = BRISK_LOCK_INIT;
static brisk_lock_t dump_lock = BRISK_LOCK_INIT;

/* BRISK_PROFILE_SIGNAL: read at start-up (prof_init), before other threads. */
static int signo;
static bool env_read;

/* Under dump_lock. */
static char prefix[PROF_PREFIX_MAX];
static bool have_prefix;
static uint64_t dump_seq;
static char *out_buf;

static _Atomic(int) signal_installed;

/* Under prof_lock. */
static uint8_t *arena_next;
static size_t arena_left;
static prof_stack_t **buckets;
static size_t bucket_count;
static size_t stack_count;
static prof_stack_t *stacks_all;
static prof_sample_t *samples;
static uint32_t sample_cap;   /* entries mapped */
static uint32_t sample_top;   /* entries ever used (0 is never used) */
static uint32_t sample_free;  /* free list head; 0: none */
static uint64_t live_samples;
static double live_bytes;      /* scaled: the in-use estimate */
static double interval_base;   /* the in-use estimate at the last interval dump, or the
                                  least since: growth is counted from there */

/* ---------------------------------------------------------------------------
 * Memory from the platform layer.
 * ------------------------------------------------------------------------- */
static void *prof_map(size_t size) {
  void *p;
  size = (size + OS_PAGE_BYTES - 1) & ~(OS_PAGE_BYTES - 1);
  if (os_map_aligned(size, OS_PAGE_BYTES, &p) != 0) return NULL;
  return p;
}

static void prof_unmap(void *p, size_t size) {
  size = (size + OS_PAGE_BYTES - 1) & ~(OS_PAGE_BYTES - 1);
  os_unmap(p, size);
  STAT_LEVEL(mapped_bytes, -(int64_t)size);
}

/* Bump allocation for records that live as long as the process (stacks,
 * heap states); under prof_lock. */
static void *arena_take(size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (arena_left < size) {
    size_t chunk = size > PROF_CHUNK ? size : PROF_CHUNK;
    uint8_t *p = prof_map(chunk);
    if (p == NULL) return NULL;
    arena_next = p;
    arena_left = chunk;
  }
  void *r = arena_next;
  arena_next += size;
  arena_left -= size;
  return r;
}

prof_heap_t *prof_heap_state(heap_t *h) {
  prof_heap_t *ph = h->prof;
  if (BRISK_UNLIKELY(ph == NULL)) {
    lock_acquire(&prof_lock);
    /* Lines of its own: the owner writes its countdowns without the lock,
     * and the arena's next record (another heap's, a stack's) is written by
     * other threads. */
    uintptr_t raw = (uintptr_t)arena_take(sizeof(prof_heap_t) + 2 * CACHE_LINE_BYTES);
    lock_release(&prof_lock);
    if (raw == 0) return NULL;
    ph = (prof_heap_t *)((raw + CACHE_LINE_BYTES - 1) & ~(uintptr_t)(CACHE_LINE_BYTES - 1));
    ph->rng = os_random_seed() ^ ((uintptr_t)h * 0x9e3779b97f4a7c15ull);
    for (unsigned c = 0; c < CLASS_COUNT; c++) ph->left[c] = prof_draw(ph);
    prof_attach(h);
    h->prof = ph;
  }
  if (h->kind == HEAP_KIND_THREAD) h->cache_path_max = DIRECT_MAX;
  return ph;
}

/* ---------------------------------------------------------------------------
 * The record: stacks and sampled blocks, under prof_lock.
 * ------------------------------------------------------------------------- */
static uint64_t stack_hash(const uintptr_t *pcs, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  for (size_t i = 0; i < n; i++) {
    h ^= pcs[i];
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

static bool buckets_grow(void) {
  size_t count = bucket_count ? bucket_count * 2 : 512;
  prof_stack_t **nb = prof_map(count * sizeof(*nb));
  if (nb == NULL) return false;
  for (prof_stack_t *s = stacks_all; s; s = s->all_next) {
    size_t i = s->hash & (count - 1);
    s->hash_next = nb[i];
    nb[i] = s;
  }
  if (buckets) prof_unmap(buckets, bucket_count * sizeof(*buckets));
  buckets = nb;
  bucket_count = count;
  return true;
}

static prof_stack_t *stack_find(const uintptr_t *pcs, size_t n) {
  uint64_t h = stack_hash(pcs, n);
  if (bucket_count > 0) {
    for (prof_stack_t *s = buckets[h & (bucket_count - 1)]; s; s = s->hash_next)
      if (s->hash == h && s->depth == n && memcmp(s->pc, pcs, n * sizeof(*pcs)) == 0) return s;
  }
  if (stack_count >= bucket_count && !buckets_grow() && bucket_count == 0) return NULL;
  prof_stack_t *s = arena_take(sizeof(*s) + n * sizeof(uintptr_t));
  if (s == NULL) return NULL;
  memset(s, 0, sizeof(*s));
  s->hash = h;
  s->depth = (uint32_t)n;
  memcpy(s->pc, pcs, n * sizeof(*pcs));
  size_t i = h & (bucket_count - 1);
  s->hash_next = buckets[i];
  buckets[i] = s;
  s->all_next = stacks_all;
  stacks_all = s;
  stack_count++;
  return s;
}

static uint32_t sample_take(void) {
  if (sample_free != 0) {
    uint32_t i = sample_free;
    sample_free = samples[i].next_free;
    return i;
  }
  if (sample_top + 1 >= sample_cap) {
    if (sample_cap >= (1u << 30)) return 0;
    uint32_t cap = sample_cap ? sample_cap * 2 : 4096;
    prof_sample_t *ns = prof_map((size_t)cap * sizeof(*ns));
    if (ns == NULL) return 0;
    if (samples) {
      memcpy(ns, samples, (size_t)sample_top * sizeof(*ns));
      prof_unmap(samples, (size_t)sample_cap * sizeof(*samples));
    }
    samples = ns;
    sample_cap = cap;
    if (sample_top == 0) sample_top = 1; /* 0 means "no record" */
  }
  return sample_top++;
}

static void sample_drop(uint32_t i) {
  prof_sample_t *e = &samples[i];
  prof_stack_t *s = e->stack;
  s->live_n -= e->weight;
  s->live_b -= e->bytes;
  s->live_samples--;
  if (s->live_samples == 0) s->live_n = s->live_b = 0; /* no rounding residue */
  live_bytes -= e->bytes;
  live_samples--;
  if (live_samples == 0) live_bytes = 0;
  if (live_bytes < interval_base) interval_base = live_bytes;
  e->heap->live--;
  e->addr = 0;
  e->next_free = sample_free;
  sample_free = i;
}

/* The owner's flag, ordered with the code around it as a signal handler
 * on the same thread sees it. */
static inline void set_busy(prof_heap_t *ph, uint32_t v) {
  atomic_signal_fence(memory_order_seq_cst);
  ph->busy = v;
  atomic_signal_fence(memory_order_seq_cst);
}

void prof_sampled(heap_t *h, page_t *pg, size_t requested, unsigned c, size_t sampled) {
  prof_heap_t *ph = h->prof;
  uintptr_t pcs[PROF_FRAMES];
  set_busy(ph, 1); /* to the end: an allocation in a signal handler here takes no sample */
  size_t n = unwind_backtrace(pcs, PROF_FRAMES);
  double weight = prof_sample_weight(ph, c, sampled);
  double bytes = (double)requested * weight;
  bool dump = false;
  lock_acquire(&prof_lock);
  prof_stack_t *s = stack_find(pcs, n);
  uint32_t i = s ? sample_take() : 0;
  if (i != 0) {
    prof_sample_t *e = &samples[i];
    e->addr = (uintptr_t)pg->start;
    e->stack = s;
    e->heap = ph;
    e->weight = weight;
    e->bytes = bytes;
    s->alloc_n += weight;
    s->alloc_b += bytes;
    s->live_n += weight;
    s->live_b += bytes;
    s->live_samples++;
    ph->live++;
    live_samples++;
    live_bytes += bytes;
    int64_t interval = option_load(profile_interval);
    if (interval > 0 && live_bytes >= interval_base + (double)interval) {
      interval_base = live_bytes;
      dump = true;
    }
    pg->prof_slot = i;
  }
  lock_release(&prof_lock);
  set_busy(ph, 0);
  if (dump) {
    atomic_store_relaxed(&brisk_read_mostly.prof_dump_requested, 1);
    background_kick(os_now_ms());
  }
}

void prof_forget(page_t *pg, heap_t *caller) {
  prof_heap_t *ph = caller != NULL ? caller->prof : NULL;
  /* The calling thread was interrupted inside the profiler (a free in a
   * signal handler): the record stays, rather than wait for a lock this
   * thread holds. */
  if (ph != NULL && ph->busy) return;
  uint32_t i = pg->prof_slot;
  pg->prof_slot = 0;
  if (ph != NULL) set_busy(ph, 1);
  lock_acquire(&prof_lock);
  /* Descriptors are cleared when their span or mapping is handed out
   * again, so a slot names its own record (unless the record went with
   * its destroyed heap: then no block is freed through it). */
  if (i < sample_top && samples[i].addr != 0) sample_drop(i);
  lock_release(&prof_lock);
  if (ph != NULL) set_busy(ph, 0);
}

void prof_forget_heap(heap_t *h) {
  prof_heap_t *ph = h->prof;
  if (ph == NULL) return;
  lock_acquire(&prof_lock);
  for (uint32_t i = 1; ph->live > 0 && i < sample_top; i++)
    if (samples[i].addr != 0 && samples[i].heap == ph) sample_drop(i);
  lock_release(&prof_lock);
}

/* ---------------------------------------------------------------------------
 * Output: a buffered writer on a file or stderr (no stdio: it allocates).
 * ------------------------------------------------------------------------- */
/* ---------------------------------------------------------------------------
 * Dumps, under dump_lock.
 * ------------------------------------------------------------------------- */
static prof_snap_t *snap;
static size_t snap_cap;

static uint64_t rounded(double v) { return v <= 0.5 ? 0 : (uint64_t)(v + 0.5); }

/* The counts of every stack at one instant; false when out of memory. */
static bool snapshot(size_t *count) {
  lock_acquire(&prof_lock);
  size_t n = stack_count;
  if (n > snap_cap) {
    lock_release(&prof_lock);
    size_t cap = snap_cap ? snap_cap : 1024;
    while (cap < n + 64) cap *= 2;
    prof_snap_t *ns = prof_map(cap * sizeof(*ns));
    if (ns == NULL) return false;
    if (snap) prof_unmap(snap, snap_cap * sizeof(*snap));
    snap = ns;
    snap_cap = cap;
    lock_acquire(&prof_lock);
  }
  size_t k = 0;
  for (prof_stack_t *s = stacks_all; s && k < snap_cap; s = s->all_next) {
    prof_snap_t *e = &snap[k];
    e->pc = s->pc;
    e->depth = s->depth;
    e->live_n = rounded(s->live_n);
    e->live_b = rounded(s->live_b);
    e->alloc_n = rounded(s->alloc_n);
    e->alloc_b = rounded(s->alloc_b);
    e->samples = s->live_samples;
    if (e->alloc_n == 0 && e->alloc_b == 0) continue;
    if (e->live_b == 0) e->live_n = 0;
    if (e->live_n == 0) e->live_b = 0;
    k++;
  }
  lock_release(&prof_lock);
  prof_snap_sort(snap, k);
  *count = k;
  return true;
}

static bool out_ready(void) {
  if (out_buf == NULL) out_buf = prof_map(PROF_OUT_BYTES);
  return out_buf != NULL;
}

static int write_heap(int fd, size_t n) { return prof_write_heap(fd, snap, n, out_buf); }
static int write_collapsed(int fd, size_t n) { return prof_write_collapsed(fd, snap, n, out_buf); }

static int write_file(const char *path, int (*write)(int, size_t), size_t n) {
  int fd, err = os_file_create(path, &fd);
  if (err == 0) {
    err = write(fd, n);
    os_file_close(fd);
  }
  if (err != 0) report_warning("heap profile: cannot write %s: %s", path, os_error_name(err));
  return err;
}

/* The heap profile at `path` and its collapsed stacks beside it (path
 * ending in .heap: .collapsed instead; otherwise path.collapsed). */
static int dump_to(const char *path) {
  size_t n;
  if (!out_ready() || !snapshot(&n)) {
    report_warning("heap profile: no memory for the dump of %s", path);
    return ENOMEM;
  }
  char other[PROF_PATH_MAX + 16];
  size_t len = strlen(path);
  if (len >= PROF_PATH_MAX) return ENAMETOOLONG;
  memcpy(other, path, len + 1);
  if (len > 5 && strcmp(path + len - 5, ".heap") == 0) len -= 5;
  memcpy(other + len, ".collapsed", sizeof(".collapsed"));
  int err = write_file(path, write_heap, n);
  return err != 0 ? err : write_file(other, write_collapsed, n);
}

/* <prefix>.<pid>.<seq>.heap */
static int dump_next(void) {
  if (!have_prefix) return EINVAL;
  char path[PROF_PATH_MAX];
  format_string(path, sizeof(path), "%s.%d.%zu.heap", prefix, os_pid(), (size_t)dump_seq++);
  return dump_to(path);
}

/* A dump asked for by a signal or the interval, if no other is running. */
static void dump_if_asked(void) {
  if (!lock_try_acquire(&dump_lock)) return;
  if (atomic_exchange_explicit(&brisk_read_mostly.prof_dump_requested, 0, memory_order_relaxed)) dump_next();
  lock_release(&dump_lock);
}

uint64_t prof_background(uint64_t now) {
  if (BRISK_LIKELY(!atomic_load_relaxed(&brisk_read_mostly.prof_dump_requested))) return 0;
  dump_if_asked();
  /* Another dump was running: this one follows it. */
  return atomic_load_relaxed(&brisk_read_mostly.prof_dump_requested) ? now + PROF_RETRY_MS : 0;
}

void prof_poll_slow(void) {
  if (!background_running()) dump_if_asked();
}

/* The leak report: sampled blocks still live at exit, by stack. */
static void leak_report(void) {
  size_t n;
  if (!out_ready() || !snapshot(&n)) return;
  prof_write_leaks(snap, n, out_buf, option_load(profile_rate));
}

/* ---------------------------------------------------------------------------
 * Start, stop, the API and the process's life.
 * ------------------------------------------------------------------------- */
/* The whole handler: async-signal-safe (atomics and a futex wake). The
 * background thread writes the dump, or, when it does not run, the next
 * allocation that the profiler counts. */
static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  atomic_store_explicit(&brisk_read_mostly.prof_dump_requested, 1, memory_order_relaxed);
  background_kick(0);
  errno = saved;
}

static void sampling_on(void) {
  if (signo != 0) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&signal_installed, &expected, 1)) {
      int err = os_signal_handler(signo, on_signal);
      if (err != 0) report_warning("heap profile: cannot handle signal %d (errno %d)", signo, err);
    }
  }
  atomic_store_relaxed(&brisk_read_mostly.prof_active, 1);
  /* A signal's dump is written by the background thread: it is wanted
   * from the next safe point on, so that a process that has gone quiet
   * still answers the signal. */
  if (signo != 0) background_kick(os_now_ms());
}

/* The value of BRISK_PROFILE, read without allocating. */
static const char *env_prefix(char **env) {
  for (; *env; env++)
    if (strncmp(*env, "BRISK_PROFILE=", 14) == 0) return *env + 14;
  return NULL;
}

void prof_init(void) {
  if (env_read) return;
  char **env = os_environ();
  if (env == NULL) return; /* too early: brisk's constructor calls again */
  env_read = true;
  signo = (int)option_load(profile_signal);
  const char *p = env_prefix(env);
  if (p != NULL && p[0] != '\0') {
    size_t len = strlen(p);
    if (len >= PROF_PREFIX_MAX) {
      report_warning("bad value for option BRISK_PROFILE: a prefix of %zu bytes (at most %d)", len,
                     PROF_PREFIX_MAX - 1);
    } else {
      memcpy(prefix, p, len + 1);
      have_prefix = true;
    }
  }
  bool leaks = option_load(profile_leaks) != 0;
  if (leaks) os_keep_stderr();
  if (have_prefix || leaks) sampling_on();
  else if (signo != 0 || option_load(profile_interval) != 0)
    report_warning("BRISK_PROFILE_%s has no effect without BRISK_PROFILE=<prefix> (or "
                   "brisk_profile_start)", signo != 0 ? "SIGNAL" : "INTERVAL");
}

int prof_start(const char *path_prefix) {
  if (path_prefix == NULL || path_prefix[0] == '\0') {
    report_error("brisk_profile_start(%s): the dumps need a path prefix",
                 path_prefix == NULL ? "NULL" : "\"\"");
    return EINVAL;
  }
  size_t len = strlen(path_prefix);
  if (len >= PROF_PREFIX_MAX) {
    report_error("brisk_profile_start(): a prefix of %zu bytes is too long (at most %d)", len,
                 PROF_PREFIX_MAX - 1);
    return ENAMETOOLONG;
  }
  lock_acquire(&dump_lock);
  memcpy(prefix, path_prefix, len + 1);
  have_prefix = true;
  lock_release(&dump_lock);
  sampling_on();
  return 0;
}

void prof_stop(void) { atomic_store_relaxed(&brisk_read_mostly.prof_active, 0); }

int prof_dump(const char *path) {
  if (path != NULL && path[0] == '\0') {
    report_error("brisk_profile_dump(\"\"): an empty path");
    return EINVAL;
  }
  if (path != NULL && strlen(path) >= PROF_PATH_MAX - 16) {
    report_error("brisk_profile_dump(): a path of %zu bytes is too long (at most %d)", strlen(path),
                 PROF_PATH_MAX - 17);
    return ENAMETOOLONG;
  }
  lock_acquire(&dump_lock);
  int err;
  if (path != NULL) {
    err = dump_to(path);
  } else if (have_prefix) {
    err = dump_next();
  } else {
    report_error("brisk_profile_dump(NULL): no path, and no prefix from BRISK_PROFILE or "
                 "brisk_profile_start");
    err = EINVAL;
  }
  lock_release(&dump_lock);
  return err;
}

void prof_leaks_changed(bool on) {
  if (on) os_keep_stderr(); /* before: the exit may need it */
  if (on && !prof_active()) sampling_on();
}

void prof_at_exit(void) {
  bool leaks = option_load(profile_leaks) != 0;
  if (!prof_active() && !leaks) return;
  lock_acquire(&dump_lock);
  if (prof_active() && have_prefix) dump_next();
  if (leaks) leak_report();
  lock_release(&dump_lock);
}

/* The record's lock is held only for table updates, with no call out of
 * this file but the platform's mmap: the fork waits for it. A dump may
 * run for long (files, the loader's symbol lookups): the fork does not
 * wait for it, and the child, which has no dumping thread, starts with
 * the lock free. */
void prof_fork_prepare(void) { lock_acquire(&prof_lock); }

void prof_fork_parent(void) { lock_release(&prof_lock); }

void prof_fork_child(void) {
  lock_reset(&prof_lock);
  lock_reset(&dump_lock);
  /* The child's dumps are its own: its pid names them, numbered from 0.
   * The blocks the parent had sampled are in the child's memory too. */
  dump_seq = 0;
  atomic_store_relaxed(&brisk_read_mostly.prof_dump_requested, 0);
  if (signo != 0 && prof_active()) background_kick(os_now_ms()); /* the child's own thread */
}
