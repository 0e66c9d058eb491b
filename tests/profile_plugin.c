/* A plugin that profile_sites loads with dlopen (test_profile.py): two
 * builds of it, A and B, differ in code before plugin_make, so that B's
 * unwind tables misdescribe A's frames. The test loads A and then
 * replaces its file with B on disk, as a package upgrade does: the
 * profiler's stack walk must notice that the file is no longer the one
 * mapped and read the mapping's tables instead. */
#include <stdlib.h>
#include <string.h>

#ifdef PLUGIN_B
/* Moves plugin_make and changes its frame. */
__attribute__((noinline)) int plugin_b_only(int n) {
  volatile char pad[4096];
  for (int i = 0; i < n && i < 4096; i++) pad[i] = (char)i;
  return pad[n & 4095];
}
#endif

__attribute__((noinline)) void *plugin_make(size_t n) {
  char *p = malloc(n);
  if (p) memset(p, 9, n);
  return p;
}
