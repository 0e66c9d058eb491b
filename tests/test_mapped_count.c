/* brisk's count of what it maps (mapped_bytes) follows the process's
 * address space when the OS refuses every munmap (fault injection): a
 * mapping brisk made to find an aligned place, and could not give back, is
 * still counted. 40 huge blocks of 3 MiB are allocated and kept with every
 * munmap refused; the growth of VmSize (/proc/self/status) and of
 * mapped_bytes must agree within 16 MiB (a thread's stack or two). */
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk_errors.h"

static long vm_size_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) kib = strtol(line + 7, NULL, 10);
  fclose(f);
  return kib;
}

int main(void) {
  enum { N = 40 };
  static void *b[N];
  free(brisk_malloc(100)); /* brisk started, its first segment mapped */
  long vm0 = vm_size_kib();
  double m0 = brisk_stat("mapped_bytes"), refused0 = brisk_stat("unmap_failures");
  brisk_fault_injection_calls(BRISK_FAULT_MUNMAP);
  brisk_fault_injection(0, 0);
  for (int i = 0; i < N; i++) {
    b[i] = brisk_malloc((size_t)3 << 20);
    if (b[i]) memset(b[i], i, 4096);
  }
  brisk_fault_injection(-1, 0);
  brisk_fault_injection_calls(BRISK_FAULT_MMAP);
  long vm1 = vm_size_kib();
  double m1 = brisk_stat("mapped_bytes"), refused1 = brisk_stat("unmap_failures");
  double vm_mib = (double)(vm1 - vm0) / 1024, mapped_mib = (m1 - m0) / (1 << 20);
  printf("test_mapped_count: with every munmap refused (%g refused): address space +%.1f MiB, mapped_bytes +%.1f MiB\n",
         refused1 - refused0, vm_mib, mapped_mib);
  int fail = 0;
  if (vm0 < 0 || vm1 < 0) {
    printf("test_mapped_count: FAIL: no VmSize in /proc/self/status\n");
    fail = 1;
  }
  if (refused1 <= refused0) {
    printf("test_mapped_count: FAIL: test premise: no munmap was refused\n");
    fail = 1;
  }
  if (vm_mib - mapped_mib > 16 || mapped_mib - vm_mib > 16) {
    printf("test_mapped_count: FAIL: the two differ by more than 16 MiB\n");
    fail = 1;
  }
  for (int i = 0; i < N; i++) brisk_free(b[i]);
  if (brisk_errors_reported() != 0) {
    printf("test_mapped_count: FAIL: brisk reported errors\n");
    fail = 1;
  }
  printf("test_mapped_count: %s\n", fail ? "FAILED" : "passed");
  return fail;
}
