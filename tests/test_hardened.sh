#!/usr/bin/env bash
# libbrisk-hardened.so: the ordinary tests pass under it, and what only the
# hardened build detects is reported with the exact message:
# malloc/new/new[] mismatches, a wrong size in sized delete, a write after
# free that leaves the link intact, and an overflow into a guard page.
set -u
build="${BRISKTEST_BUILD_DIR:?}"
bin="${BRISKTEST_BIN_DIR:?}"
lib="$build/libbrisk-hardened.so"
[ -e "$lib" ] || { echo "test_hardened: $lib not built (-DBRISK_HARDENED=ON)"; exit 1; }
unset BRISKTEST_LIB BRISKTEST_BUILD_DIR BRISKTEST_SOURCE_DIR BRISKTEST_BIN_DIR
pass=0 fail=0
ok() { echo "test_hardened: ok: $1"; pass=$((pass + 1)); }
bad() { echo "test_hardened: FAIL: $1"; fail=$((fail + 1)); }

export BRISKTEST_SCALE=0.2
for t in "test_api" "test_stress 2 3 20000" "test_prodcons" "test_heaps" "test_new_delete" "test_bad_input"; do
  set -- $t
  if LD_PRELOAD="$lib" timeout 120 "$bin/$@" > "/tmp/hardened-$$-$1.log" 2>&1; then ok "$t under the hardened library"
  else bad "$t under the hardened library (exit $?):"; tail -5 "/tmp/hardened-$$-$1.log"; fi
  rm -f "/tmp/hardened-$$-$1.log"
done

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/probe.cpp" <<'CPP'
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
// Each mode makes one mistake, prints the pointer it concerns, then checks
// that a block allocated before is intact.
int main(int argc, char **argv) {
  int mode = std::atoi(argv[1]);
  char *keep = static_cast<char *>(std::malloc(200));
  std::memset(keep, 0x5a, 200);
  void *p = nullptr;
  switch (mode) {
    case 1: { int *a = new int[10]; p = a; std::printf("%p\n", p); std::fflush(stdout); delete a; break; }
    case 2: { p = std::malloc(40); std::printf("%p\n", p); std::fflush(stdout); delete static_cast<int *>(p); break; }
    case 3: { int *a = new int; p = a; std::printf("%p\n", p); std::fflush(stdout); std::free(a); break; }
    case 4: { int *a = new int; p = a; std::printf("%p\n", p); std::fflush(stdout); ::operator delete(a, 1000); break; }
    case 5: { char *b = static_cast<char *>(std::malloc(100)); p = b; std::printf("%p\n", p); std::fflush(stdout);
              std::free(b); b[20] = 1; for (int i = 0; i < 200; i++) if (std::malloc(100) == b) break; break; }
    case 6: { volatile char *b = static_cast<char *>(std::malloc(300000));
              /* runs into the guard page after the block, within its span */
              for (size_t n = 300000; n < 300000 + 2 * 65536; n++) b[n] = 1;
              std::puts("no guard"); return 3; }
  }
  for (int i = 0; i < 200; i++) if (keep[i] != 0x5a) { std::puts("CORRUPT"); return 2; }
  std::puts("intact");
  return 0;
}
CPP
g++ -O1 -fno-builtin "$tmp/probe.cpp" -o "$tmp/probe" || { bad "probe does not compile"; exit 1; }
expect() { # mode, expected stderr line with P for the pointer
  local out err ptr want
  out=$(env -i LD_PRELOAD="$lib" "$tmp/probe" "$1" 2>"$tmp/err")
  ptr=$(echo "$out" | head -1)
  want="${2//P/$ptr}"
  if [ "$(cat "$tmp/err")" = "$want" ] && echo "$out" | grep -qx intact; then ok "mode $1: $want"
  else bad "mode $1: expected '$want', got '$(cat "$tmp/err")', stdout '$out'"; fi
}
expect 1 "brisk: error: operator delete(P): mismatched release: the block was allocated by operator new[]"
expect 2 "brisk: error: operator delete(P): mismatched release: the block was allocated by malloc"
expect 3 "brisk: error: free(P): mismatched release: the block was allocated by operator new"
expect 4 "brisk: error: operator delete(P): size 1000 given to a sized release does not match the block (size class 16)"
expect 5 "brisk: error: malloc(): block P (size class 112) was written 20 bytes in after it was freed: a write after free"
env -i LD_PRELOAD="$lib" "$tmp/probe" 6 > /dev/null 2>&1
rc=$?
if [ $rc -eq 139 ]; then ok "mode 6: an overflow of a large block stops at its guard page (SIGSEGV)"
else bad "mode 6: expected SIGSEGV from the guard page, got exit $rc"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
