/* os_probe_read (platform.h): reading memory that may not be readable,
 * for the headers of pointers brisk does not own, without a fault. */
#include "os/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The probe's second way, for a process where process_vm_readv is
 * refused (EPERM or ENOSYS: a seccomp sandbox, a kernel without it): the
 * bytes are written into a pipe of brisk's own, which the kernel copies
 * only if they can be read (EFAULT otherwise), and read back. One probe at
 * a time: the lock word holds the prober's process id, so that a child
 * forked while its parent probed takes the lock over; each process makes
 * its own pipe (a child must not read its parent's bytes). Before each use
 * the two descriptors must still be that pipe (a program may close every
 * descriptor it did not open, and a number closed may name its own file
 * next: nothing is ever written to it). */
static _Atomic(int) probe_holder;
static int probe_fd[2] = {-1, -1};
static int probe_pid;
static struct stat probe_stat[2];

/* Descriptor i is still the end of the pipe brisk made (same device and
 * inode): not closed, and not a number reused for another file. */
static bool probe_fd_ours(int i) {
  struct stat st;
  return probe_fd[i] >= 0 && fstat(probe_fd[i], &st) == 0 && st.st_ino == probe_stat[i].st_ino &&
         st.st_dev == probe_stat[i].st_dev;
}

static bool probe_pipe_ready(int pid) {
  if (probe_pid == pid && probe_fd_ours(0) && probe_fd_ours(1)) return true;
  /* A pipe of this process that is no longer whole is closed (so are a
   * child's copies of its parent's); numbers that are no longer the pipe
   * are left alone. */
  for (int i = 0; i < 2; i++) {
    if (probe_fd_ours(i)) close(probe_fd[i]);
    probe_fd[i] = -1;
  }
  if (pipe2(probe_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
    probe_fd[0] = probe_fd[1] = -1;
    return false;
  }
  if (fstat(probe_fd[0], &probe_stat[0]) != 0 || fstat(probe_fd[1], &probe_stat[1]) != 0) {
    close(probe_fd[0]);
    close(probe_fd[1]);
    probe_fd[0] = probe_fd[1] = -1;
    return false;
  }
  probe_pid = pid;
  return true;
}

static bool probe_by_pipe(const void *addr, void *out, size_t n) {
  int pid = (int)getpid();
  for (;;) {
    int held = 0;
    if (atomic_compare_exchange_weak(&probe_holder, &held, pid)) break;
    /* held by a thread of the parent this process was forked from */
    if (held != 0 && held != pid && atomic_compare_exchange_weak(&probe_holder, &held, pid)) break;
    sched_yield();
  }
  bool ok = false;
  if (probe_pipe_ready(pid)) {
    ssize_t w;
    /* the system call itself: a memory checker's write() would check the
     * bytes it is asked to copy, which may be anything */
    do w = (ssize_t)syscall(SYS_write, probe_fd[1], addr, n);
    while (w < 0 && errno == EINTR);
    if (w > 0) {
      size_t got = 0;
      while (got < (size_t)w) {
        ssize_t r = read(probe_fd[0], (char *)out + got, (size_t)w - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
      }
      ok = w == (ssize_t)n && got == n;
      /* (a short write leaves nothing behind: what was written is read) */
    }
  }
  atomic_store(&probe_holder, 0);
  return ok;
}

bool os_probe_read(const void *addr, void *out, size_t n) {
  struct iovec local = {out, n};
  struct iovec remote = {(void *)addr, n};
  int saved = errno;
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  bool ok = got == (ssize_t)n;
  if (!ok && got < 0 && (errno == EPERM || errno == ENOSYS)) ok = probe_by_pipe(addr, out, n);
  errno = saved;
  return ok;
}
