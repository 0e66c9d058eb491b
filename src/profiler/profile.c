/* The sampling heap profiler (profiler.h): taking a sample and forgetting
 * it, and when and where to dump the record (the heaps' samplers choose
 * the samples, sample.c; profile_record.c keeps the record of sampled
 * blocks by stack; profile_out.c writes the heap profile, the collapsed
 * stacks and the leak report from a snapshot of it). docs/PROFILER.md
 * says why the fast paths pay nothing for it.
 *
 * Locks: a heap's drops_lock, then the record's (profile_record.h);
 * dump_lock lets one dump run at a time (taken before the others). None is
 * held across a call that allocates. */
#include "profiler/profile_out.h"
#include "profiler/profile_record.h"
#include "profiler/profiler.h"

#include <errno.h>
#include <string.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "os/platform.h"
#include "profiler/stackwalk.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "runtime/report.h"

#define PROF_FRAMES 64
#define PROF_RETRY_MS 20 /* a dump asked for while another runs: tried again after this */
#define PROF_PATH_MAX 4096
#define PROF_PREFIX_MAX (PROF_PATH_MAX - 64)

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

_Atomic(int) prof_recording_on;

/* ---------------------------------------------------------------------------
 * What a sample stands for. libbrisk.so links only the C library, so no
 * libm.
 * ------------------------------------------------------------------------- */
#define LN2 0.6931471805599453

/* 1 - (x/from)(1 - (x/(from+1))(1 - ... (1 - x/SERIES_TERMS))): the tail of
 * the Taylor series of exp(-x) from the term x^from / from!, over x^(from-1)
 * / (from-1)!, in Horner's form with the reciprocals as constants (a
 * multiply and an add per term, no division). For |x| <= ln 2 the terms
 * past the 18th are below 1e-17 of the sum. */
#define SERIES_TERMS 18
static const double recip[SERIES_TERMS + 1] = {
    0,          1,          1.0 / 2,    1.0 / 3,    1.0 / 4,    1.0 / 5,    1.0 / 6,
    1.0 / 7,    1.0 / 8,    1.0 / 9,    1.0 / 10,   1.0 / 11,   1.0 / 12,   1.0 / 13,
    1.0 / 14,   1.0 / 15,   1.0 / 16,   1.0 / 17,   1.0 / 18};

static inline double exp_series_tail(double x, int from) {
  double p = 1;
  for (int n = SERIES_TERMS; n >= from; n--) p = 1 - x * recip[n] * p;
  return p;
}

/* exp(-x) for x >= 0: exp(-r) 2^-k with x = k ln 2 + r, 0 <= r < ln 2. */
static double exp_neg(double x) {
  if (x > 700) return 0;
  int k = (int)(x / LN2);
  double r = x - k * LN2;
  uint64_t bits = (uint64_t)(1023 - k) << 52; /* 2^-k, k < 1010 */
  double scale;
  memcpy(&scale, &bits, sizeof(scale));
  return exp_series_tail(r, 1) * scale;
}

/* The probability that a block of `bytes` holds at least one sampled
 * byte at `rate`: 1 - exp(-bytes / rate), without cancellation for small
 * blocks: x (1 - x/2 (1 - x/3 (...))). Its sample stands for 1 / this
 * many blocks. */
static double sample_probability(double bytes, double rate) {
  double x = bytes / rate;
  if (x >= 0.5) return 1 - exp_neg(x);
  return x * exp_series_tail(x, 2);
}

/* What a sample of `bytes` (class c, or 0 for a large or huge block)
 * stands for at the rate in force (BRISK_PROFILE_RATE, which may change
 * while running): 1 / its probability, computed once per class and rate,
 * and per page count of large blocks (`bytes` is a whole number of pages
 * when c is 0). */
static double sample_weight(prof_heap_t *ph, unsigned c, size_t bytes) {
  double rate = (double)option_load(profile_rate);
  if (ph->weight_rate != rate) {
    memset(ph->weight, 0, sizeof(ph->weight));
    memset(ph->weight_large, 0, sizeof(ph->weight_large));
    ph->weight_rate = rate;
  }
  /* A class's blocks count for its size, a large block for its pages */
  double *w = c != 0 ? &ph->weight[c] : bytes <= LARGE_MAX ? &ph->weight_large[bytes / OS_PAGE_BYTES] : NULL;
  if (w == NULL) return 1.0 / sample_probability((double)bytes, rate);
  if (*w == 0) *w = 1.0 / sample_probability((double)bytes, rate);
  return *w;
}

/* ---------------------------------------------------------------------------
 * Samples taken and forgotten.
 * ------------------------------------------------------------------------- */
void prof_sample(prof_heap_t **state, uint32_t *slot, uintptr_t addr, bool batch, size_t requested,
                 unsigned c, size_t counted) {
  prof_heap_t *ph = *state;
  if (ph == NULL && (ph = *state = record_heap_new()) == NULL) return; /* no memory: no sample */
  uintptr_t pcs[PROF_FRAMES];
  size_t n = unwind_backtrace(pcs, PROF_FRAMES, &ph->walk_memo);
  double weight = sample_weight(ph, c, counted);
  double bytes = (double)requested * weight;
  /* The same frames as the last sample: its stack record (records are
   * never removed) without the hash and the lookup. */
  uint64_t hash = 0;
  prof_stack_t *s = ph->walk_memo.same ? ph->last_stack : NULL;
  if (s == NULL) {
    hash = record_stack_hash(pcs, n);
    s = record_stack_seen(pcs, n, hash);
  }
  bool dump = false;
  lock_acquire(&ph->drops_lock);
  if (s == NULL || !batch || ph->pending_count == PROF_PENDING_BATCH) {
    record_lock();
    record_drops_flush(ph);
    dump = record_pending_flush(ph, true);
    if (s == NULL) s = record_stack_find(pcs, n, hash);
    if (s != NULL && !batch) *slot = record_sample_enter(ph, s, addr, weight, bytes, &dump);
    record_unlock();
  }
  ph->last_stack = s;
  if (s != NULL && batch) {
    uint32_t k = ph->pending_count++;
    prof_pending_t *e = &ph->pending[k];
    e->stack = s;
    e->slot = slot;
    e->addr = addr;
    e->weight = weight;
    e->bytes = bytes;
    *slot = PROF_SLOT_PENDING | k;
  }
  lock_release(&ph->drops_lock);
  if (dump) {
    atomic_store_relaxed(&brisk_read_mostly.prof_dump_requested, 1);
    background_kick(os_now_ms());
  }
}

void prof_forget(uint32_t *slot) {
  uint32_t i = *slot;
  *slot = 0;
  record_lock();
  record_sample_forget(i);
  record_unlock();
}

/* A sample of *slot still in ph's pending batch leaves it, counted as
 * allocated only: the batch must not keep pointing at a freed descriptor. */
static bool pending_forget(prof_heap_t *ph, uint32_t *slot) {
  uint32_t i = *slot;
  if (!(i & PROF_SLOT_PENDING)) return false;
  *slot = 0;
  __atomic_store_n(&ph->pending[i & ~PROF_SLOT_PENDING].slot, NULL, __ATOMIC_RELAXED);
  return true;
}

void prof_forget_owned(uint32_t *slot, prof_heap_t *ph, bool interrupted) {
  if (interrupted) { /* as in sample_freed, but not in the pending batch */
    pending_forget(ph, slot);
    return;
  }
  lock_acquire(&ph->drops_lock);
  uint32_t i = *slot;
  if (!pending_forget(ph, slot) && i != 0) {
    *slot = 0;
    if (ph->drop_count == PROF_DROP_BATCH) {
      record_lock();
      record_drops_flush(ph);
      record_unlock();
    }
    ph->drops[ph->drop_count++] = i;
  }
  lock_release(&ph->drops_lock);
}

void prof_forget_heap(prof_heap_t *ph) {
  lock_acquire(&ph->drops_lock);
  record_lock();
  record_drops_flush(ph);
  record_pending_flush(ph, false);
  record_heap_forget(ph);
  record_unlock();
  lock_release(&ph->drops_lock);
}

/* ---------------------------------------------------------------------------
 * Dumps, under dump_lock (profile_out.c writes them).
 * ------------------------------------------------------------------------- */
static bool out_ready(void) {
  if (out_buf == NULL) out_buf = record_map(PROF_OUT_BYTES);
  return out_buf != NULL;
}

static const prof_snap_t *snap; /* the dump's snapshot (dump_lock) */

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
  if (!out_ready() || !record_snapshot(&snap, &n)) {
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
  if (!out_ready() || !record_snapshot(&snap, &n)) return;
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
  atomic_store_relaxed(&prof_recording_on, 1); /* the caller tells the heaps */
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

void prof_stop(void) {
  atomic_store_relaxed(&prof_recording_on, 0); /* the caller tells the heaps */
}

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
  if (on && !prof_recording()) sampling_on();
}

void prof_at_exit(void) {
  bool leaks = option_load(profile_leaks) != 0;
  if (!prof_recording() && !leaks) return;
  lock_acquire(&dump_lock);
  if (prof_recording() && have_prefix) dump_next();
  if (leaks) leak_report();
  lock_release(&dump_lock);
}

/* The fork waits for the record's lock (profile_record.c). A dump may run
 * for long (files, the loader's symbol lookups): the fork does not wait
 * for it, and the child, which has no dumping thread, starts with the lock
 * free. */
void prof_fork_prepare(void) { record_fork_prepare(); }

void prof_fork_parent(void) { record_fork_parent(); }

void prof_fork_child(void) {
  record_fork_child();
  lock_reset(&dump_lock);
  /* The child's dumps are its own: its pid names them, numbered from 0.
   * The blocks the parent had sampled are in the child's memory too. */
  dump_seq = 0;
  atomic_store_relaxed(&brisk_read_mostly.prof_dump_requested, 0);
  if (signo != 0 && prof_recording()) background_kick(os_now_ms()); /* the child's own thread */
}
