/* A huge block's move to an aligned place (mremap with MREMAP_FIXED) that
 * fails after the kernel has already unmapped the target range, as Linux
 * 6.1 can (it unmaps the target before checks that may still fail), while
 * another thread's mapping takes the hole: brisk must not unmap that
 * mapping. And where the kernel left the target mapped, brisk unmaps it.
 *
 * The program defines mremap itself (libbrisk.so's calls come here): in a
 * chosen mode it refuses growth in place, so that a cached huge mapping
 * too small for a new block must move, and fails that move either as 6.1
 * may (the target unmapped, a stranger's page mapped at its start, ENOMEM)
 * or with the target left as it was (EFAULT). Every other call goes to the
 * kernel. Checks: the move was tried, the allocation still succeeds with a
 * usable block, the stranger's page is still mapped with its content, and
 * in the second mode the target is no longer mapped. */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { PASS_THROUGH, OLD_KERNEL, TARGET_KEPT };
static volatile int mode = PASS_THROUGH; /* volatile: set around malloc, which the compiler may assume reads no global */
static int moves_failed;
static void *stranger, *target_seen;
static size_t target_len;
static const uint64_t STRANGER_WORD = 0x5354524e47455221ull;

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
  void *new_address = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void *);
    va_end(ap);
  }
  if (mode != PASS_THROUGH && new_size > old_size) {
    if (!(flags & MREMAP_FIXED)) {
      errno = ENOMEM; /* no growth in place */
      return MAP_FAILED;
    }
    moves_failed++;
    target_seen = new_address;
    target_len = new_size;
    if (mode == OLD_KERNEL) {
      syscall(SYS_munmap, new_address, new_size);
      /* another thread's mapping, in the hole */
      void *s = (void *)syscall(SYS_mmap, new_address, 4096, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (s == new_address) {
        stranger = s;
        *(volatile uint64_t *)s = STRANGER_WORD;
      }
      errno = ENOMEM;
    } else {
      errno = EFAULT;
    }
    return MAP_FAILED;
  }
  return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, new_address);
}

static int failures;
#define CHECK(c, ...) do { if (!(c)) { failures++; printf("test_remap_target: FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static int mapped(void *p) {
  unsigned char v;
  return mincore(p, 4096, &v) == 0;
}

/* A huge block of `small` MiB freed into the cache, then one of `large`
 * MiB, larger than any mapping the cache holds. */
static void run(int m, const char *name, size_t small, size_t large) {
  moves_failed = 0;
  stranger = target_seen = NULL;
  char *a = malloc(small << 20);
  CHECK(a != NULL, "%s: malloc(%zu MiB) failed", name, small);
  if (a) memset(a, 1, small << 20);
  free(a);
  mode = m;
  char *b = malloc(large << 20);
  mode = PASS_THROUGH;
  CHECK(b != NULL, "%s: malloc(%zu MiB) failed", name, large);
  if (b) {
    memset(b, 2, large << 20);
    CHECK(b[0] == 2 && b[(large << 20) - 1] == 2, "%s: the block does not hold what was written", name);
  }
  CHECK(moves_failed > 0, "%s: test premise: no move of a cached mapping was tried", name);
  if (m == OLD_KERNEL) {
    CHECK(stranger != NULL, "%s: test premise: no mapping could be placed in the hole", name);
    if (stranger) {
      CHECK(mapped(stranger), "%s: the mapping another thread placed in the hole was unmapped", name);
      if (mapped(stranger))
        CHECK(*(volatile uint64_t *)stranger == STRANGER_WORD, "%s: the mapping in the hole was changed", name);
      syscall(SYS_munmap, stranger, 4096);
    }
  } else if (target_seen) {
    CHECK(!mapped(target_seen), "%s: the place made for the move (%p) is still mapped", name, target_seen);
  }
  free(b);
  printf("test_remap_target: %s: %d move(s) failed, %s\n", name, moves_failed,
         m == OLD_KERNEL ? "the stranger's mapping kept" : "the target unmapped");
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  run(OLD_KERNEL, "target unmapped by the kernel", 9, 13);
  run(TARGET_KEPT, "target left mapped", 17, 21);
  long errors = brisk_errors_reported();
  CHECK(errors == 0, "brisk reported %ld errors", errors);
  printf("test_remap_target: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
