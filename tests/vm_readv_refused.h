/* A seccomp filter that makes process_vm_readv fail with EPERM, as some
 * sandboxes' profiles do, for the rest of the calling process (and its
 * children). brisk then reads the headers of foreign blocks another way.
 * Returns 0, or -1 with errno when the filter cannot be installed. */
#ifndef BRISK_TEST_VM_READV_REFUSED_H
#define BRISK_TEST_VM_READV_REFUSED_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static inline int refuse_vm_readv(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return -1;
  /* the premise: the call is refused now */
  char a = 0, b = 1;
  struct iovec to = {&a, 1}, from = {&b, 1};
  if (process_vm_readv(getpid(), &to, 1, &from, 1, 0) >= 0 || errno != EPERM) {
    errno = ENOTSUP;
    return -1;
  }
  return 0;
}

#endif
