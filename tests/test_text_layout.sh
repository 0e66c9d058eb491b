#!/usr/bin/env bash
# The text of libbrisk.so a small process has resident: the functions
# ordinary processes run come first in the text (cmake/text_layout.cmake,
# cmake/hot-text.list), so the kernel's fault-around, which maps a file's
# pages in 64 KiB windows around each fault, makes one window resident
# instead of the whole text (156 KiB of 156 when the order was the
# sources'). Checked on cat and on a program that allocates blocks of
# every size category, frees half of them on another thread and grows
# the rest with realloc: the library's text mapping holds at most 60% of
# its size resident; the same for libbrisk-hardened.so with its list
# (cmake/hot-text-hardened.list). Skipped (77) when the build has no such layout
# (its linker's default script was not of the expected shape).
set -u
build="${BRISKTEST_BUILD_DIR:?}"
lib="${BRISKTEST_LIB:?}"
SKIP_NAME="test_text_layout"
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
[ -f "$build/brisk-text.ld" ] || skip "this build has no hot-text layout ($build/brisk-text.ld missing)"
[ -r /proc/self/smaps ] || skip "no /proc/self/smaps"
fail=0
# check NAME COMMAND...: the command prints its own smaps (it is run under
# LD_PRELOAD=libbrisk.so, so the library is mapped and has run its start-up,
# allocations and, for the workloads, their frees).
check() {
  local what=$1
  shift
  local out real=$LIBRARY
  out="$(LD_PRELOAD="$real" "$@" 2>&1)" || { echo "test_text_layout: FAIL: $what did not run"; fail=1; return; }
  echo "$out" | awk -v lib="$real" -v what="$what" '
    /^[0-9a-f]+-[0-9a-f]+ / { inlib = ($2 ~ /x/ && $NF == lib); next }
    inlib && /^Size:/ { size = $2 }
    inlib && /^Rss:/ { rss = $2 }
    END {
      if (size == 0) { printf "test_text_layout: FAIL: %s: no executable mapping of %s\n", what, lib; exit 1 }
      ok = rss * 100 <= size * 60
      printf "test_text_layout: %s: %s: text %d KiB resident of %d KiB (at most 60%%)\n", ok ? "ok" : "FAIL", what, rss, size
      exit ok ? 0 : 1
    }' || fail=1
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/work.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Blocks of every size category, some freed by another thread, realloc
 * growth, then the process's own smaps. */
enum { N = 4000 };
static void *blocks[N];
static void *frees(void *arg) {
  for (int i = 1; i < N; i += 2) free(blocks[i]);
  return arg;
}
int main(void) {
  static const size_t sizes[] = {16, 48, 200, 1000, 3000, 20000, 70000, 300000, 3 << 20};
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < N; i++) {
      size_t n = sizes[(i * 7 + r) % 9];
      if (n > 100000 && i % 16) n = 64;
      blocks[i] = malloc(n);
      if (!blocks[i]) return 2;
      memset(blocks[i], i, n < 4096 ? n : 4096);
    }
    pthread_t t;
    if (pthread_create(&t, NULL, frees, NULL) != 0) return 2;
    pthread_join(t, NULL);
    for (int i = 0; i < N; i += 2) blocks[i] = realloc(blocks[i], 5000);
    for (int i = 0; i < N; i += 2) free(blocks[i]);
  }
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return 2;
  int c;
  while ((c = getc(f)) != EOF) putchar(c);
  fclose(f);
  return 0;
}
C
cc -O2 -pthread -fno-builtin "$tmp/work.c" -o "$tmp/work" 2>"$tmp/cc.log" ||
  { echo "test_text_layout: FAIL: the workload does not compile: $(head -3 "$tmp/cc.log")"; exit 1; }
# Each library with its own list: libbrisk.so, and libbrisk-hardened.so
# where it is built (its checks and guard pages are other functions).
for LIBRARY in "$(readlink -f "$lib")" "$build/libbrisk-hardened.so"; do
  [ -e "$LIBRARY" ] || continue
  LIBRARY="$(readlink -f "$LIBRARY")"
  echo "test_text_layout: $(basename "$LIBRARY")"
  check "cat" sh -c 'exec cat /proc/self/smaps'
  check "a workload on two threads" "$tmp/work"
done
exit $fail
