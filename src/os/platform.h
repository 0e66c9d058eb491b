/* The platform layer: every call into the OS that brisk makes is here.
 * Functions return 0 on success or an errno value; none allocates memory
 * through malloc, so all are safe while brisk itself is initialising. */
#ifndef BRISK_PLATFORM_H
#define BRISK_PLATFORM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/* Map `size` bytes of fresh zeroed read-write memory whose start is a
 * multiple of `align` (a power of two, >= the OS page size), never backed
 * by transparent huge pages. */
BRISK_INTERNAL int os_map_aligned(size_t size, size_t align, void **out);
/* The same, for memory that may be backed by transparent huge pages
 * (MADV_HUGEPAGE: where the kernel's setting is "madvise" or "always"). */
BRISK_INTERNAL int os_map_huge_pages(size_t size, size_t align, void **out);
/* Unmap a range obtained from os_map_aligned (or a page-aligned part),
 * taking it off mapped_bytes. It can fail (ENOMEM when the unmap splits a
 * mapping and the process is at vm.max_map_count): the range then stays
 * mapped and counted, and the caller keeps it, or leaves it mapped and
 * unused; counted in unmap_failures. */
BRISK_INTERNAL int os_unmap(void *p, size_t size);
/* Give the physical pages of a range back to the OS now: the range stays
 * mapped, its resident size drops at once (MADV_DONTNEED, not MADV_FREE,
 * so RSS as the kernel reports it falls), and it reads as zero later.
 * Only on success (0): it fails on locked memory (EINVAL under mlock or
 * mlockall), and then the range keeps its contents and stays resident;
 * the caller must count it so and never take it for zero. */
BRISK_INTERNAL int os_purge(void *p, size_t size);
/* Grow or shrink a mapping without moving it; ENOMEM when the address
 * space after it is taken. */
BRISK_INTERNAL int os_remap_in_place(void *p, size_t old_size, size_t new_size);
/* Grow a mapping to new_size at a new address that is a multiple of align:
 * its pages move with it (nothing is copied; what was resident stays so),
 * the old range is no longer mapped. *out gets the new address. On failure
 * the mapping stays where it was. */
BRISK_INTERNAL int os_remap_move(void *p, size_t old_size, size_t new_size, size_t align, void **out);
/* Fault injection, for tests: calls of the kinds in os_fault_kinds fail,
 * all of them after `after` more (-1: no limit), and each with
 * probability per_million / 10^6. The kinds are brisk.h's
 * BRISK_FAULT_* bits; by default requests for memory (OS_FAULT_MEMORY). */
enum {
  OS_FAULT_MMAP = 1,     /* mmap, and mremap that grows: ENOMEM */
  OS_FAULT_MUNMAP = 2,   /* munmap: ENOMEM */
  OS_FAULT_PURGE = 4,    /* madvise(MADV_DONTNEED): EINVAL */
  OS_FAULT_MREMAP = 8,   /* any mremap: ENOMEM */
  OS_FAULT_MPROTECT = 16, /* mprotect: ENOMEM */
  OS_FAULT_THREAD = 32,  /* the background thread's start: EAGAIN */
  OS_FAULT_FENCE = 64,   /* membarrier: EPERM */
  OS_FAULT_ALL = 127,
  OS_FAULT_MEMORY = OS_FAULT_MMAP,
};
BRISK_INTERNAL void os_fault_injection(int64_t after, uint32_t per_million);
BRISK_INTERNAL void os_fault_kinds(uint32_t kinds);
/* Make a page-aligned range inaccessible (a guard) or accessible again.
 * On failure (ENOMEM) the range keeps its protection. */
BRISK_INTERNAL int os_protect(void *p, size_t size, bool accessible);
/* Reserve a range of zero-filled address space once; for the registry. */
BRISK_INTERNAL int os_reserve_table(size_t size, void **out);

/* Copy n bytes from addr into out if the whole range is readable; never
 * faults. For pointers brisk does not own (a cold path). */
BRISK_INTERNAL bool os_probe_read(const void *addr, void *out, size_t n);

/* Milliseconds of a monotonic clock that is cheap to read (vDSO; the
 * coarse clock, so it lags the precise one by up to a tick of the kernel,
 * 4 or 10 ms). */
BRISK_INTERNAL uint64_t os_now_ms(void);
/* The same clock read precisely, for the one thread that sleeps to it. */
BRISK_INTERNAL uint64_t os_now_precise_ms(void);
BRISK_INTERNAL void os_write_stderr(const char *s, size_t n);
/* Keep a private copy of stderr, for programs that close fd 2 before
 * exit (coreutils do) while brisk still has statistics to print. */
BRISK_INTERNAL void os_keep_stderr(void);
/* The process as the OS sees it (getrusage, /proc/self/statm), read
 * without allocating; a figure the OS does not give is 0. */
typedef struct os_process_figures_s {
  uint64_t rss_bytes;      /* resident now */
  uint64_t rss_peak_bytes; /* the most ever resident */
  uint64_t minor_faults;   /* page faults served without I/O */
  uint64_t major_faults;   /* page faults that read from disk */
} os_process_figures_t;
BRISK_INTERNAL void os_process_figures(os_process_figures_t *out);
BRISK_INTERNAL void os_abort(void) __attribute__((noreturn));
BRISK_INTERNAL void os_yield(void);
/* The asymmetric fence (membarrier): os_fence_register once per process
 * (false: the kernel has none, or refused), then each os_fence_all makes
 * every running thread of the process pass a full memory barrier before it
 * returns, so that a thread whose side of a store-then-load pair has only
 * a compiler barrier is ordered against the caller's (false: refused,
 * nothing is ordered). */
BRISK_INTERNAL bool os_fence_register(void);
BRISK_INTERNAL bool os_fence_all(void);
BRISK_INTERNAL char **os_environ(void);
/* 64 random bits from the kernel's start-up gift (AT_RANDOM) and the
 * clock: no system call; for seeds, never for keys. */
BRISK_INTERNAL uint64_t os_random_seed(void);
/* n random bytes from the kernel (getrandom, never blocking); if it has
 * none to give (early boot, an old kernel), bytes mixed from
 * os_random_seed's. For keys. Keeps errno. */
BRISK_INTERNAL void os_random_bytes(void *buf, size_t n);

/* Wait while *word == expected: until os_wake(word), until the monotonic
 * clock (os_now_ms) reaches deadline_ms (0: no deadline), or spuriously.
 * Never allocates. */
BRISK_INTERNAL void os_wait(_Atomic(uint32_t) *word, uint32_t expected, uint64_t deadline_ms);
BRISK_INTERNAL void os_wake(_Atomic(uint32_t) *word);
/* Start a detached thread running fn(arg) with every signal blocked, so it
 * never runs a handler of the program's; 0 or an errno value. It may
 * allocate (the C library's thread set-up does): call it where malloc may
 * be entered again, with no lock of brisk's held. */
BRISK_INTERNAL int os_thread_start(void *(*fn)(void *), void *arg);

/* Thread exit: `fn(value)` runs when a thread that armed it exits. If
 * init fails (no pthread key left), arming does nothing: no thread's
 * exit is seen. */
BRISK_INTERNAL int os_thread_exit_init(void (*fn)(void *));
BRISK_INTERNAL void os_thread_exit_arm(void *value);
BRISK_INTERNAL int os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* Files, for the heap profiler's dumps (profile.c): each returns 0 or an
 * errno value and keeps the caller's errno. os_file_create truncates an
 * existing file (mode 0644, close-on-exec); os_file_copy appends the whole
 * content of the file at `src` (e.g. /proc/self/maps) to fd. */
BRISK_INTERNAL int os_file_create(const char *path, int *fd_out);
BRISK_INTERNAL int os_file_write(int fd, const void *buf, size_t n);
BRISK_INTERNAL int os_file_copy(const char *src, int fd);
BRISK_INTERNAL void os_file_close(int fd);
/* For the stack walk, which reads unwind tables from objects' files:
 * open read-only (close-on-exec), and read exactly n bytes at offset off
 * (EIO if the file is shorter). Each keeps the caller's errno. */
BRISK_INTERNAL int os_file_open_read(const char *path, int *fd_out);
BRISK_INTERNAL int os_file_read_at(int fd, void *buf, size_t n, uint64_t off);
BRISK_INTERNAL int os_pid(void);
/* The name of an errno value ("ENOENT"), or "an unknown error". */
BRISK_INTERNAL const char *os_error_name(int err);
/* The path of the running program's file (/proc/self/exe), NUL-ended in
 * buf; false if it cannot be read or does not fit. */
BRISK_INTERNAL bool os_exe_path(char *buf, size_t len);
/* Run handler(signo) on the signal (SA_RESTART; replaces the program's
 * handler, if any). */
BRISK_INTERNAL int os_signal_handler(int signo, void (*handler)(int));
/* Memory faults (SIGSEGV, SIGBUS) go first to fn, with the faulting
 * address and whether the access was a write (OS_FAULT_WRITE,
 * OS_FAULT_READ, or OS_FAULT_ACCESS when the machine does not say): it
 * returns true when the access may be made again (it opened the memory),
 * false to pass the fault on to the handler the program had before, or to
 * the default action (the process ends as it would have without brisk).
 * Installed once; a handler the program installs later replaces it. */
enum { OS_FAULT_ACCESS = 0, OS_FAULT_READ = 1, OS_FAULT_WRITE = 2 };
BRISK_INTERNAL int os_fault_handler(bool (*fn)(void *addr, int access));

/* The identity of the calling thread: the thread pointer, unique among
 * live threads and readable in one instruction. Never zero. */
static inline uintptr_t os_thread_id(void) {
  return (uintptr_t)__builtin_thread_pointer();
}

#if defined(__x86_64__) || defined(__i386__)
#define os_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define os_cpu_relax() __asm__ volatile("yield")
#else
#define os_cpu_relax() ((void)0)
#endif

/* The lock of the few cold paths that need mutual exclusion (a heap's
 * set of segments, the pool, huge blocks, the heap list). Free, it costs
 * one exchange to take and a store and a load to give back. Contended, a
 * waiter spins on loads a while (a holder of these locks usually lets go
 * within a few hundred instructions), yields a few times, then sleeps on
 * a futex until the holder lets go: a holder descheduled, or in a system
 * call, costs its waiters no processor time. The holder's release wakes
 * one sleeper; the release does not order its store before its load of
 * `sleepers` (that would cost a fence on every release), so a wake-up can
 * be missed, and each sleep lasts at most LOCK_SLEEP_MS before the waiter
 * looks again. No fast path takes one. Which locks may be held across
 * which system calls: docs/DESIGN.md, "Locks and system calls". */
typedef struct brisk_lock_s {
  _Atomic(uint32_t) held;     /* 1 while taken */
  _Atomic(uint32_t) sleepers; /* waiters asleep on `held`, or about to be */
} brisk_lock_t;
#define BRISK_LOCK_INIT {0, 0}
#define LOCK_SLEEP_MS 2
BRISK_INTERNAL void lock_acquire_contended(brisk_lock_t *l) BRISK_NOINLINE;
BRISK_INTERNAL void lock_wake(brisk_lock_t *l) BRISK_NOINLINE;
static inline void lock_acquire(brisk_lock_t *l) {
  /* Free, most often: one exchange, and the caller keeps its registers
   * (the spin loop inlined cost each caller five register saves) */
  if (BRISK_LIKELY(!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))) return;
  lock_acquire_contended(l);
}
static inline bool lock_try_acquire(brisk_lock_t *l) {
  return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}
static inline void lock_release(brisk_lock_t *l) {
  atomic_store_explicit(&l->held, 0, memory_order_release);
  if (BRISK_UNLIKELY(atomic_load_explicit(&l->sleepers, memory_order_relaxed) != 0)) lock_wake(l);
}
/* After fork the child is single-threaded: a lock held by a thread that
 * no longer exists is simply reset. */
static inline void lock_reset(brisk_lock_t *l) {
  atomic_store_explicit(&l->held, 0, memory_order_relaxed);
  atomic_store_explicit(&l->sleepers, 0, memory_order_relaxed);
}

#endif
