/* The sampling heap profiler: taking a sample and forgetting it, and when
 * and where to dump the record (profile_count.c keeps the countdowns that
 * choose the samples; profile_record.c the record of sampled blocks by
 * stack; profile_out.c writes the heap profile, the collapsed stacks and
 * the leak report from a snapshot of it). See profile.h for how samples
 * are taken and docs/DESIGN.md for why the fast paths pay nothing for it.
 *
 * Locks: a heap's drops_lock, then the record's (profile_record.h);
 * dump_lock lets one dump run at a time (taken before the others). None is
 * held across a call that allocates. */
#include "profile.h"
#include "profile_count.h"
#include "profile_out.h"
#include "profile_record.h"

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

prof_heap_t *prof_heap_state(heap_t *h) {
  prof_heap_t *ph = h->prof;
  if (BRISK_UNLIKELY(ph == NULL)) {
    ph = record_heap_new();
    if (ph == NULL) return NULL;
    ph->rng = os_random_seed() ^ ((uintptr_t)h * 0x9e3779b97f4a7c15ull);
    sampler_draw_all(ph);
    prof_attach(h);
    h->prof = ph;
  } else if (ph->epoch != sampler_epoch()) {
    sampler_draw_all(ph); /* a sampler was switched on or off, or its rate changed */
  }
  if (h->kind == HEAP_KIND_THREAD) h->cache_path_max = DIRECT_MAX;
  h->refill_mask = 0; /* every refill counted (prof_refill in heap.c) */
  return ph;
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
  size_t n = unwind_backtrace(pcs, PROF_FRAMES, &ph->walk_memo);
  double weight = prof_sample_weight(ph, c, sampled);
  double bytes = (double)requested * weight;
  /* The same frames as the last sample: its stack record (records are
   * never removed) without the hash and the lookup. */
  uint64_t hash = 0;
  prof_stack_t *s = ph->walk_memo.same ? ph->last_stack : NULL;
  if (s == NULL) {
    hash = record_stack_hash(pcs, n);
    s = record_stack_seen(pcs, n, hash);
  }
  /* A huge block may be freed by any thread (free_checked): it enters the
   * record at once. The others wait in the heap's batch. */
  bool batch = !(pg->flags & PAGE_HUGE);
  bool dump = false;
  lock_acquire(&ph->drops_lock);
  if (s == NULL || !batch || ph->pending_count == PROF_PENDING_BATCH) {
    record_lock();
    record_drops_flush(ph);
    dump = record_pending_flush(ph, true);
    if (s == NULL) s = record_stack_find(pcs, n, hash);
    if (s != NULL && !batch) pg->prof_slot = record_sample_enter(ph, s, pg, weight, bytes, &dump);
    record_unlock();
  }
  ph->last_stack = s;
  if (s != NULL && batch) {
    uint32_t k = ph->pending_count++;
    prof_pending_t *e = &ph->pending[k];
    e->stack = s;
    e->pg = pg;
    e->weight = weight;
    e->bytes = bytes;
    pg->prof_slot = PROF_SLOT_PENDING | k;
  }
  lock_release(&ph->drops_lock);
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
  record_lock();
  record_sample_forget(i);
  record_unlock();
  if (ph != NULL) set_busy(ph, 0);
}

/* A sample of pg still in ph's pending batch leaves it, counted as
 * allocated only: the batch must not keep pointing at a freed descriptor. */
static bool pending_forget(prof_heap_t *ph, page_t *pg) {
  uint32_t i = pg->prof_slot;
  if (!(i & PROF_SLOT_PENDING)) return false;
  pg->prof_slot = 0;
  __atomic_store_n(&ph->pending[i & ~PROF_SLOT_PENDING].pg, NULL, __ATOMIC_RELAXED);
  return true;
}

void prof_forget_owned(page_t *pg, heap_t *owner) {
  prof_heap_t *ph = owner->prof;
  if (ph == NULL) { /* no batches: its slot is the record's */
    prof_forget(pg, NULL);
    return;
  }
  if (ph->busy) { /* as in prof_forget, but not in the pending batch */
    pending_forget(ph, pg);
    return;
  }
  set_busy(ph, 1);
  lock_acquire(&ph->drops_lock);
  uint32_t i = pg->prof_slot;
  if (!pending_forget(ph, pg) && i != 0) {
    pg->prof_slot = 0;
    if (ph->drop_count == PROF_DROP_BATCH) {
      record_lock();
      record_drops_flush(ph);
      record_unlock();
    }
    ph->drops[ph->drop_count++] = i;
  }
  lock_release(&ph->drops_lock);
  set_busy(ph, 0);
}

void prof_forget_heap(heap_t *h) {
  prof_heap_t *ph = h->prof;
  if (ph == NULL) return;
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
  atomic_store_relaxed(&prof_recording_on, 1);
  sampler_settings_changed();
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
  else if (option_load(guard_rate) > 0) sampler_settings_changed(); /* guarded samples only */
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
  atomic_store_relaxed(&prof_recording_on, 0);
  sampler_settings_changed(); /* the heaps go on counting while guarded samples are on */
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
