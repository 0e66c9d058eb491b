#include "heaps/thread.h"

#include <errno.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "heaps/large_keep.h"
#include "heaps/sample.h"
#include "heaps/usage.h"
#include "os/checker.h"
#include "os/platform.h"
#include "profiler/profiler.h"
#include "runtime/background.h"
#include "runtime/options.h"
#include "runtime/report.h"
#include "runtime/stats.h"
#include "segments/huge.h"
#include "segments/pool.h"

__thread heap_t *brisk_tls_heap = &brisk_heap_empty;

enum { INIT_NONE = 0, INIT_RUNNING = 1, INIT_READY = 2 };
static _Atomic(int) init_state;
static _Atomic(uintptr_t) init_thread;

static void thread_exit(void *value) {
  heap_t *h = brisk_tls_heap;
  if (h == &brisk_heap_empty || h == &brisk_heap_dead) return;
  /* While this thread still has its heap: starting the background thread
   * allocates, and it is what returns this heap's memory once abandoned. */
  background_poll();
  /* TLS destructors that run after this one still free: they go through
   * the dead heap, whose frees are pushed one by one. */
  brisk_tls_heap = &brisk_heap_dead;
  checker_quiet_begin();
  heap_abandon(h);
  checker_quiet_end();
}

/* brisk's own long-lived allocations: the C library allocates for a new
 * thread (its TLS vector) from the heap of the thread that starts it, and
 * the background thread is started by whichever thread frees memory first,
 * often one about to exit. Its blocks would pin that heap's segment after
 * the thread had gone. So they come from a heap of their own, which any
 * thread borrows under a lock for the call and which is never abandoned. */
static heap_t *service_heap;
static brisk_lock_t service_lock = BRISK_LOCK_INIT;

static int service_thread_start(void *(*fn)(void *), void *arg) {
  uintptr_t tid = os_thread_id();
  lock_acquire(&service_lock);
  if (service_heap == NULL) {
    service_heap = heap_create(HEAP_KIND_THREAD, 0);
    if (service_heap == NULL) {
      lock_release(&service_lock);
      return ENOMEM;
    }
    /* Its few blocks must not end the report of a destroyed heap's late
     * frees by taking that heap's segments. */
    service_heap->segments.fresh_only = true;
  }
  heap_t *mine = brisk_tls_heap;
  service_heap->tid = tid;
  segment_set_set_owner(&service_heap->segments, tid);
  atomic_store_release(&service_heap->state, HEAP_OWNED);
  brisk_tls_heap = service_heap;
  int err = os_thread_start(fn, arg);
  brisk_tls_heap = mine;
  heap_flush_outbox(service_heap);
  service_heap->tid = 0;
  segment_set_set_owner(&service_heap->segments, 0);
  lock_release(&service_lock);
  return err;
}

/* The profiler's settings from the environment (again when the options
 * are read late, by the constructor), then the heaps told which samplers
 * are on (BRISK_PROFILE, BRISK_GUARD_RATE). */
static void samplers_init(void) {
  prof_init();
  sampler_settings_changed();
}

static void fork_prepare(void) {
  background_fork_prepare();
  lock_acquire(&service_lock);
  heap_list_lock();
  heap_sets_lock_all();
  pool_lock();
  huge_lock();
  prof_fork_prepare();
}

static void fork_parent(void) {
  prof_fork_parent();
  huge_unlock();
  pool_unlock();
  heap_sets_unlock_all();
  heap_list_unlock();
  lock_release(&service_lock);
  background_fork_parent();
}

static void fork_child(void) {
  huge_reset_lock();
  pool_reset_lock();
  heap_sets_reset_locks();
  heap_list_reset_lock();
  lock_reset(&service_lock);
  heap_orphan_others(os_thread_id());
  background_fork_child();
  prof_fork_child();
}

void process_init(void) {
  int s = atomic_load_acquire(&init_state);
  if (BRISK_LIKELY(s == INIT_READY)) return;
  int expected = INIT_NONE;
  if (atomic_cas_strong_acq_rel(&init_state, &expected, INIT_RUNNING)) {
    atomic_store_relaxed(&init_thread, os_thread_id());
    options_init();
    block_keys_init();
    background_init(heaps_background_round, service_thread_start);
    samplers_init();
    int key_err = os_thread_exit_init(thread_exit);
    atomic_store_release(&init_state, INIT_READY);
    /* Without a key no exit is seen: an exiting thread's heap stays its
     * own (its free memory is still purged, frees into it still parked),
     * never adopted by a new thread. */
    if (key_err != 0)
      report_warning("no pthread key left (%s): the heaps of threads that exit are not passed on to new threads",
                     os_error_name(key_err));
    /* May allocate (it is ready now): registered before any thread exists
     * when brisk is preloaded or linked, so a fork in any thread is safe. */
    os_atfork(fork_prepare, fork_parent, fork_child);
    return;
  }
  if (atomic_load_relaxed(&init_thread) == os_thread_id()) return; /* re-entered */
  while (atomic_load_acquire(&init_state) != INIT_READY) os_yield();
}

heap_t *thread_heap_init(void) {
  heap_t *h = brisk_tls_heap;
  if (h != &brisk_heap_empty && h != &brisk_heap_dead) return h;
  process_init();
  uintptr_t tid = os_thread_id();
  h = heap_adopt_abandoned(tid);
  if (h == NULL) h = heap_create(HEAP_KIND_THREAD, tid);
  if (h == NULL) return NULL;
  brisk_tls_heap = h;
  os_thread_exit_arm(h);
  return h;
}

heap_t *thread_heap_for_free(void) {
  heap_t *h = brisk_tls_heap;
  if (h == &brisk_heap_dead) return NULL;
  if (h == &brisk_heap_empty) return thread_heap_init();
  return h;
}

__attribute__((constructor)) static void brisk_constructor(void) {
  process_init();
  options_init_if_pending();
  samplers_init();
  large_keep_init(); /* after the options: its fault injection */
}

__attribute__((destructor)) static void brisk_destructor(void) {
  prof_at_exit();
  if (option_load(show_stats)) {
    heap_t *h = thread_heap();
    if (h->kind != HEAP_KIND_STATIC) heap_stats_publish(h);
    stats_usage_t usage;
    usage_collect(&usage);
    stats_print_stderr(&usage);
  }
}
