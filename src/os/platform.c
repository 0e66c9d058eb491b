/* Linux implementation of the platform contract in platform.h. */
#include "os/platform.h"

#include "os/checker.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/counters.h"

extern char **environ;

/* Fault injection (BRISK_FAULT_AFTER, BRISK_FAULT_RATE, BRISK_FAULT_CALLS,
 * or brisk_fault_injection and brisk_fault_injection_calls): the calls of
 * the kinds chosen fail as if the OS had refused them, each with the errno
 * value the kernel gives for that kind of refusal. */
static _Atomic(int64_t) fault_after = -1;     /* calls left before failing; -1: off */
static _Atomic(uint32_t) fault_per_million;
static _Atomic(uint32_t) fault_kinds = OS_FAULT_MEMORY;
static _Atomic(uint64_t) fault_rng = 0x853c49e6748fea9bull;

void os_fault_injection(int64_t after, uint32_t per_million) {
  atomic_store_explicit(&fault_per_million, per_million, memory_order_relaxed);
  atomic_store_explicit(&fault_after, after, memory_order_relaxed);
}

void os_fault_kinds(uint32_t kinds) {
  atomic_store_explicit(&fault_kinds, kinds & OS_FAULT_ALL, memory_order_relaxed);
}

static bool fault_now(uint32_t kind) {
  if (!(atomic_load_explicit(&fault_kinds, memory_order_relaxed) & kind)) return false;
  int64_t left = atomic_load_explicit(&fault_after, memory_order_relaxed);
  if (left >= 0) {
    if (left == 0) return true;
    atomic_fetch_sub_explicit(&fault_after, 1, memory_order_relaxed);
  }
  uint32_t rate = atomic_load_explicit(&fault_per_million, memory_order_relaxed);
  if (rate == 0) return false;
  uint64_t x = atomic_fetch_add_explicit(&fault_rng, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return (x % 1000000u) < rate;
}

/* The memory calls below return the error and leave errno as they found
 * it: free, and every other call that succeeds, must not change errno
 * (a failure is the caller's to report, as ENOMEM where it is one). An
 * injected failure sets errno first, as the kernel's would. */
#define SYSCALL_FAILED(err) (errno = (err), -1)

/* After a call: its error (0 if it did not fail; `fallback` if it failed
 * without saying why), errno put back to `saved`. */
static int call_error(bool failed, int saved, int fallback) {
  int err = failed ? (errno ? errno : fallback) : 0;
  errno = saved;
  return err;
}

static int map_raw(size_t size, void **out) {
  int saved = errno;
  void *p = fault_now(OS_FAULT_MMAP) ? (errno = ENOMEM, MAP_FAILED)
                                      : mmap(NULL, size, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  int err = call_error(p == MAP_FAILED, saved, ENOMEM);
  STAT_COUNT(mmap_calls, 1);
  if (err) {
    STAT_COUNT(map_failures, 1);
    return err;
  }
  *out = p;
  return 0;
}

/* Any unmap, counted in munmap_calls (and unmap_failures). */
static int unmap_raw(void *p, size_t size) {
  int saved = errno;
  STAT_COUNT(munmap_calls, 1);
  /* ENOMEM: the unmap would split a mapping past vm.max_map_count */
  int err = call_error((fault_now(OS_FAULT_MUNMAP) ? SYSCALL_FAILED(ENOMEM) : munmap(p, size)) != 0, saved, ENOMEM);
  if (err) STAT_COUNT(unmap_failures, 1);
  return err;
}

static int map_aligned(size_t size, size_t align, int advice, void **out) {
  void *p;
  int err = map_raw(size, &p);
  if (err) return err;
  if (((uintptr_t)p & (align - 1)) == 0) goto done;
  /* Not aligned: map again with room to spare and trim both ends. What
   * the OS refuses to unmap stays mapped, never touched, and counted. */
  if (unmap_raw(p, size) != 0) STAT_LEVEL(mapped_bytes, (int64_t)size);
  if (size + align < size) return ENOMEM;
  err = map_raw(size + align, &p);
  if (err) return err;
  uintptr_t start = (uintptr_t)p;
  uintptr_t aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
  if (aligned > start && unmap_raw(p, aligned - start) != 0) STAT_LEVEL(mapped_bytes, (int64_t)(aligned - start));
  size_t tail = (start + size + align) - (aligned + size);
  if (tail && unmap_raw((void *)(aligned + size), tail) != 0) STAT_LEVEL(mapped_bytes, (int64_t)tail);
  p = (void *)aligned;
done:
  {
    int saved = errno;
    madvise(p, size, advice); /* advice only: a refusal changes nothing brisk relies on */
    errno = saved;
  }
  STAT_LEVEL(mapped_bytes, (int64_t)size);
  *out = p;
  return 0;
}

/* Transparent huge pages would turn a 64 KiB touch into 2 MiB of RSS:
 * never for segments and the profiler's memory. */
int os_map_aligned(size_t size, size_t align, void **out) { return map_aligned(size, align, MADV_NOHUGEPAGE, out); }

/* A huge block is written over most of its length: a fault per 2 MiB
 * rather than per 4 KiB (docs/DESIGN.md, "Returning memory"). */
int os_map_huge_pages(size_t size, size_t align, void **out) { return map_aligned(size, align, MADV_HUGEPAGE, out); }

#if BRISK_ASAN
bool checker_asan_ready;
__attribute__((constructor)) static void checker_asan_start(void) { checker_asan_ready = true; }
#endif

/* A range brisk no longer maps: AddressSanitizer forgets what brisk
 * poisoned there, for whoever maps that address next. */
static void range_left(void *p, size_t size) {
  if (BRISK_ASAN) checker_access(p, size);
}

int os_unmap(void *p, size_t size) {
  int err = unmap_raw(p, size);
  if (err == 0) {
    STAT_LEVEL(mapped_bytes, -(int64_t)size);
    range_left(p, size);
  }
  return err;
}

int os_purge(void *p, size_t size) {
  int saved = errno;
  STAT_COUNT(madvise_calls, 1);
  /* EINVAL: locked pages (mlock, mlockall) cannot be dropped */
  int err = call_error((fault_now(OS_FAULT_PURGE) ? SYSCALL_FAILED(EINVAL) : madvise(p, size, MADV_DONTNEED)) != 0,
                       saved, EINVAL);
  if (err) {
    STAT_COUNT(purge_failures, 1);
    return err;
  }
  STAT_COUNT(purged_bytes, (int64_t)size);
  return 0;
}

/* ThreadSanitizer does not intercept mremap: memory a mapping grows or
 * moves into keeps the access history of whatever lay there before, and
 * it reports races between unrelated lives of an address. Its build
 * therefore never grows or moves a mapping (the callers fall back to a
 * new one); shrinking needs no care. */
#if defined(__SANITIZE_THREAD__)
#define REMAP_GROWS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REMAP_GROWS 0
#endif
#endif
#ifndef REMAP_GROWS
#define REMAP_GROWS 1
#endif

int os_remap_in_place(void *p, size_t old_size, size_t new_size) {
  if (new_size > old_size && !REMAP_GROWS) return ENOTSUP;
  int saved = errno;
  void *q = fault_now(new_size > old_size ? OS_FAULT_MMAP | OS_FAULT_MREMAP : OS_FAULT_MREMAP)
                ? (errno = ENOMEM, MAP_FAILED)
                : mremap(p, old_size, new_size, 0);
  int err = call_error(q == MAP_FAILED, saved, ENOMEM);
  if (err) {
    STAT_COUNT(remap_failures, 1);
    return err;
  }
  if (new_size < old_size) range_left((uint8_t *)p + new_size, old_size - new_size);
  return 0;
}

/* What os_remap_move writes at the start of the place it made, so that
 * after a failed move it knows whether the place is still its own. */
static _Atomic(uint64_t) remap_key;

static uint64_t remap_mark(const void *target) {
  uint64_t k = atomic_load_explicit(&remap_key, memory_order_relaxed);
  if (k == 0) {
    os_random_bytes(&k, sizeof(k));
    k |= 1;
    atomic_store_explicit(&remap_key, k, memory_order_relaxed);
  }
  return ((uintptr_t)target * 0x9e3779b97f4a7c15ull) ^ k;
}

int os_remap_move(void *p, size_t old_size, size_t new_size, size_t align, void **out) {
  if (!REMAP_GROWS) return ENOTSUP;
  void *target;
  int err = os_map_aligned(new_size, align, &target); /* an aligned place, replaced below */
  if (err) return err;
  uint64_t mark = remap_mark(target);
  *(volatile uint64_t *)target = mark;
  int saved = errno;
  void *q = fault_now(OS_FAULT_MREMAP) ? (errno = ENOMEM, MAP_FAILED)
                                       : mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  err = call_error(q == MAP_FAILED, saved, ENOMEM);
  if (err) {
    STAT_COUNT(remap_failures, 1);
    /* Linux 6.1 (Debian 12's) unmaps the target range before checks
     * that can still fail, and another thread's mapping may have taken
     * the hole since: the place is unmapped only if its first word is
     * still the mark. Otherwise the kernel unmapped it: no longer
     * counted. A place that cannot go stays mapped and unused
     * (unmap_failures). */
    uint64_t first = 0;
    if (os_probe_read(target, &first, sizeof(first)) && first == mark) os_unmap(target, new_size);
    else STAT_LEVEL(mapped_bytes, -(int64_t)new_size);
    return err;
  }
  STAT_LEVEL(mapped_bytes, -(int64_t)old_size); /* counted again as new_size above */
  range_left(p, old_size);
  *out = q;
  return 0;
}

int os_protect(void *p, size_t size, bool accessible) {
  int saved = errno, prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  int err = call_error((fault_now(OS_FAULT_MPROTECT) ? SYSCALL_FAILED(ENOMEM) : mprotect(p, size, prot)) != 0, saved,
                       ENOMEM);
  if (err) STAT_COUNT(protect_failures, 1);
  return err;
}

int os_reserve_table(size_t size, void **out) {
  return map_raw(size, out);
}

uint64_t os_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t os_now_precise_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Set at start-up, or later by brisk_option_set(SHOW_STATS) while other
 * threads may report: an atomic. */
static _Atomic(int) stderr_fd = 2;

void os_keep_stderr(void) {
  int saved = errno;
  int expected = 2;
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
  if (fd >= 0 && !atomic_compare_exchange_strong_explicit(&stderr_fd, &expected, fd, memory_order_relaxed,
                                                          memory_order_relaxed))
    close(fd); /* kept already */
  errno = saved;
}

void os_write_stderr(const char *s, size_t n) {
  int saved = errno;
  int fd = atomic_load_explicit(&stderr_fd, memory_order_relaxed);
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      break;
    }
    s += w;
    n -= (size_t)w;
  }
  errno = saved;
}

void os_process_figures(os_process_figures_t *out) {
  int saved = errno;
  out->rss_bytes = out->rss_peak_bytes = out->minor_faults = out->major_faults = 0;
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    out->rss_peak_bytes = (uint64_t)ru.ru_maxrss * 1024; /* KiB on Linux */
    out->minor_faults = (uint64_t)ru.ru_minflt;
    out->major_faults = (uint64_t)ru.ru_majflt;
  }
  /* /proc/self/statm: "size resident shared ..." in pages. */
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n > 0) {
      buf[n] = '\0';
      const char *p = buf;
      while (*p && *p != ' ') p++; /* size */
      while (*p == ' ') p++;
      uint64_t pages = 0;
      for (; *p >= '0' && *p <= '9'; p++) pages = pages * 10 + (uint64_t)(*p - '0');
      out->rss_bytes = pages * (uint64_t)sysconf(_SC_PAGESIZE);
    }
  }
  /* The kernel's high-water mark trails a growing resident set (each CPU
   * folds its count of new pages into it in batches): read while the
   * process grows, ru_maxrss was below statm's figure in every snapshot.
   * A peak below the current figure is no peak. */
  if (out->rss_peak_bytes < out->rss_bytes) out->rss_peak_bytes = out->rss_bytes;
  errno = saved;
}

void os_abort(void) { abort(); }

void os_yield(void) { sched_yield(); }

static bool fence_call(int cmd) {
  int saved = errno;
  long r = fault_now(OS_FAULT_FENCE) ? SYSCALL_FAILED(EPERM) : syscall(SYS_membarrier, cmd, 0, 0);
  errno = saved;
  if (r != 0) STAT_COUNT(fence_failures, 1);
  return r == 0;
}

bool os_fence_register(void) { return fence_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED); }
bool os_fence_all(void) { return fence_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED); }

#define LOCK_SPINS 64
#define LOCK_YIELDS 8

void lock_acquire_contended(brisk_lock_t *l) {
  for (unsigned round = 0; round < LOCK_SPINS + LOCK_YIELDS; round++) {
    if (round < LOCK_SPINS) os_cpu_relax();
    else os_yield();
    if (lock_try_acquire(l)) return;
  }
  /* Asleep until the holder lets go (or LOCK_SLEEP_MS, for a wake-up the
   * release missed): announced first, so that the release sees it. */
  atomic_fetch_add_explicit(&l->sleepers, 1, memory_order_seq_cst);
  while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
    os_wait(&l->held, 1, os_now_precise_ms() + LOCK_SLEEP_MS);
  atomic_fetch_sub_explicit(&l->sleepers, 1, memory_order_relaxed);
}

void lock_wake(brisk_lock_t *l) { os_wake(&l->held); }

char **os_environ(void) { return environ; }

void os_random_bytes(void *buf, size_t n) {
  int saved = errno;
  size_t got = 0;
  while (got < n) {
    /* The system call itself, not the C library's wrapper: a sanitizer
     * runtime intercepts the wrapper, and its interceptor is not ready
     * while the runtime starts, when its first allocation comes here. */
    long r = syscall(SYS_getrandom, (char *)buf + got, n - got, GRND_NONBLOCK);
    if (r > 0) {
      got += (size_t)r;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break; /* no entropy yet (early boot), or no getrandom: below */
    }
  }
  errno = saved;
  if (got == n) return;
  /* The kernel's start-up bytes and the clock, mixed: weaker, but never
   * the same two runs over (the caller's keys stay unknown to a program
   * that has not read a freed block). */
  uint64_t x = os_random_seed();
  for (size_t i = got; i < n; i++) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    ((unsigned char *)buf)[i] = (unsigned char)(z ^ (z >> 31));
  }
}

uint64_t os_random_seed(void) {
  uint64_t v = 0;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  if (r != NULL) memcpy(&v, r + 8, sizeof(v)); /* the first 8 bytes seed the stack guard */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  v ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&v;
  return v;
}

void os_wait(_Atomic(uint32_t) *word, uint32_t expected, uint64_t deadline_ms) {
  int saved = errno;
  struct timespec ts, *tsp = NULL;
  if (deadline_ms != 0) {
    /* An absolute deadline on CLOCK_MONOTONIC: the coarse clock of
     * os_now_ms lags it slightly, so a wait never ends early by it. */
    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
    tsp = &ts;
  }
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, tsp,
          NULL, FUTEX_BITSET_MATCH_ANY);
  errno = saved;
}

void os_wake(_Atomic(uint32_t) *word) {
  int saved = errno;
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
  errno = saved;
}

int os_thread_start(void *(*fn)(void *), void *arg) {
  int saved = errno;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits it */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t t;
  int err = fault_now(OS_FAULT_THREAD) ? EAGAIN : pthread_create(&t, &attr, fn, arg);
  if (err) STAT_COUNT(thread_failures, 1);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  return err;
}

static pthread_key_t thread_exit_key;
static bool thread_exit_ready; /* the key exists: without it, nothing is armed */

int os_thread_exit_init(void (*fn)(void *)) {
  int err = pthread_key_create(&thread_exit_key, fn);
  thread_exit_ready = err == 0;
  return err;
}

void os_thread_exit_arm(void *value) {
  /* A key that was never created must not be set: its number is some
   * other library's key. */
  if (thread_exit_ready) pthread_setspecific(thread_exit_key, value);
}

#ifdef __GLIBC__
/* What glibc's pthread_atfork does, called directly: its stub comes from
 * libc_nonshared.a, linked in last, alone at the far end of the text, and
 * calling it at start-up faulted in a 64 KiB window of it there. */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso_handle);
extern void *__dso_handle __attribute__((weak, visibility("hidden")));
#endif

int os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
#ifdef __GLIBC__
  return __register_atfork(prepare, parent, child, &__dso_handle == NULL ? NULL : __dso_handle);
#else
  return pthread_atfork(prepare, parent, child);
#endif
}

static bool (*fault_fn)(void *addr, int access);
static struct sigaction fault_before[2]; /* SIGSEGV, SIGBUS */

static void on_fault(int signo, siginfo_t *info, void *context) {
  int saved = errno;
  int access = OS_FAULT_ACCESS;
#if defined(__x86_64__) && defined(REG_ERR)
  /* The page-fault error code: bit 1 set for a write. */
  access = (((ucontext_t *)context)->uc_mcontext.gregs[REG_ERR] & 2) ? OS_FAULT_WRITE : OS_FAULT_READ;
#endif
  bool again = fault_fn != NULL && fault_fn(info->si_addr, access);
  errno = saved;
  if (again) return;
  struct sigaction *before = &fault_before[signo == SIGBUS];
  if (before->sa_flags & SA_SIGINFO) {
    if (before->sa_sigaction != NULL) before->sa_sigaction(signo, info, context);
    return;
  }
  if (before->sa_handler == SIG_DFL || before->sa_handler == SIG_IGN) {
    /* The default action: the access faults again on return, with nothing
     * in the way (a fault is never ignored). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, NULL);
    return;
  }
  before->sa_handler(signo);
}

int os_fault_handler(bool (*fn)(void *addr, int access)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  int saved = errno;
  fault_fn = fn;
  int err = 0;
  if (sigaction(SIGSEGV, &sa, &fault_before[0]) != 0 || sigaction(SIGBUS, &sa, &fault_before[1]) != 0)
    err = errno;
  errno = saved;
  return err;
}

int os_signal_handler(int signo, void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  int saved = errno;
  int err = sigaction(signo, &sa, NULL) == 0 ? 0 : errno;
  errno = saved;
  return err;
}
