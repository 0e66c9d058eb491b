#!/usr/bin/env bash
# The crate's `valgrind` feature: a Rust program with brisk as its global
# allocator (brisk/examples/checker_probe.rs) and a heap bug gets memcheck's
# report, with the line of the bad access (or of the allocation, for a
# leak); without the feature memcheck sees none of brisk's blocks and
# reports nothing. The `asan` feature is built, not run: a Rust program is
# instrumented for AddressSanitizer only by a nightly compiler.
set -euo pipefail
cd "$(dirname "$0")"
command -v valgrind >/dev/null || { echo "checker_test: FAILED: valgrind is not installed" >&2; exit 1; }
fails=0
probe() { # features mode: output in $out, status in $rc
  local dir=target/checker-$1
  cargo build -q --example checker_probe -p brisk --target-dir "$dir" ${1:+--features brisk/$1}
  set +e
  out=$(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
          "$dir/debug/examples/checker_probe" "$2" 2>&1)
  rc=$?
  set -e
}
for c in "use-after-free:Invalid read of size 1" "overflow:Invalid write of size 1" \
         "leak:definitely lost in loss record"; do
  mode=${c%%:*} says=${c#*:}
  probe valgrind "$mode"
  if [ "$rc" = 0 ] || ! grep -q "$says" <<<"$out" || ! grep -q "checker_probe.rs:[0-9]" <<<"$out"; then
    echo "checker_test: FAIL: $mode: no report \"$says\" at checker_probe.rs (status $rc)"; echo "$out" | head -30
    fails=$((fails + 1))
  else
    echo "checker_test: valgrind feature: $mode: reported"
  fi
  probe "" "$mode"
  if [ "$rc" != 0 ] || grep -q "$says" <<<"$out"; then
    echo "checker_test: FAIL: $mode: reported without the feature (status $rc): the contrast is gone"
    fails=$((fails + 1))
  fi
done
probe valgrind clean
if [ "$rc" != 0 ]; then
  echo "checker_test: FAIL: a program without a bug got a report"; echo "$out" | head -30
  fails=$((fails + 1))
fi
cargo build -q --example checker_probe -p brisk --target-dir target/checker-asan --features brisk/asan
[ "$fails" = 0 ] || exit 1
echo "checker_test: passed"
