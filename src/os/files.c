/* Files and names of the platform layer (platform.h): the heap profiler's
 * dumps and the unwind tables it reads, the program's own path, the name
 * of an error. Each call keeps the caller's errno. */
#include "os/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int file_open(const char *path, int flags, int *fd_out) {
  int saved = errno;
  int fd;
  do {
    fd = open(path, flags | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  int err = fd < 0 ? errno : 0;
  errno = saved;
  if (err == 0) *fd_out = fd;
  return err;
}

int os_file_create(const char *path, int *fd_out) { return file_open(path, O_WRONLY | O_CREAT | O_TRUNC, fd_out); }

int os_file_open_read(const char *path, int *fd_out) { return file_open(path, O_RDONLY, fd_out); }

int os_file_write(int fd, const void *buf, size_t n) {
  int saved = errno, err = 0;
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    n -= (size_t)w;
  }
  errno = saved;
  return err;
}

int os_file_copy(const char *src, int fd) {
  int saved = errno;
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    int err = errno;
    errno = saved;
    return err;
  }
  char buf[4096];
  int err = 0;
  for (;;) {
    ssize_t r = read(in, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    err = os_file_write(fd, buf, (size_t)r);
    if (err) break;
  }
  close(in);
  errno = saved;
  return err;
}

int os_file_read_at(int fd, void *buf, size_t n, uint64_t off) {
  int saved = errno, err = 0;
  char *p = buf;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      err = r < 0 ? errno : EIO;
      break;
    }
    p += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  errno = saved;
  return err;
}

void os_file_close(int fd) {
  int saved = errno;
  close(fd);
  errno = saved;
}

int os_pid(void) { return (int)getpid(); }

const char *os_error_name(int err) {
  const char *name = strerrorname_np(err); /* a constant string: nothing is allocated */
  return name != NULL ? name : "an unknown error";
}

bool os_exe_path(char *buf, size_t len) {
  int saved = errno;
  ssize_t n = readlink("/proc/self/exe", buf, len);
  errno = saved;
  if (n <= 0 || (size_t)n >= len) return false;
  buf[n] = '\0';
  return true;
}
