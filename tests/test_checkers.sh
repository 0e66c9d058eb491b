#!/usr/bin/env bash
# brisk's builds for memory checkers (BRISK_VALGRIND, BRISK_ASAN): a program
# that links brisk statically and has a heap bug in blocks of brisk's own
# API (tests/checker_probe.c) gets the checker's report, with the stack of
# the bad access in the probe's source; a program without a bug gets none.
#
#   valgrind's memcheck: use after free (of brisk_malloc's block and of a
#     heap's; right after the free, and after 1,000 more blocks of its size,
#     which the quarantine of freed blocks keeps from reusing it), overflow
#     and underflow by one byte, a leak ("definitely lost", with the
#     allocation's stack);
#   AddressSanitizer: use after free (the three), overflow, underflow.
#
# Each bug is also run against the default static library, where the
# checker must see nothing: that is the report the option adds, and the
# default build is shown to work (to run at all) under the checker too.
# AddressSanitizer's leak check knows only the blocks of its own allocator
# (no interface lets another allocator's blocks in), so it finds no leak in
# brisk's; memcheck does.
set -uo pipefail
SKIP_NAME=test_checkers
. "$(dirname "$0")/skip.sh"
bin=${BRISKTEST_BIN_DIR:?}
fails=0

fail() { echo "test_checkers: FAIL: $*"; fails=$((fails + 1)); }

run_valgrind() { # probe mode: output in $out, status in $rc
  out=$(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
          "$bin/checker_probe_valgrind_$1" "$2" 2>&1)
  rc=$?
}

run_asan() {
  out=$(ASAN_OPTIONS=detect_leaks=1 "$bin/checker_probe_asan_$1" "$2" 2>&1)
  rc=$?
}

# expect_report tool mode "what the report says"
expect_report() {
  local tool=$1 mode=$2 says=$3
  "run_$tool" for_$tool "$mode"
  if [ "$rc" = 0 ] || ! grep -q -- "$says" <<<"$out" || ! grep -q "checker_probe.c:[0-9]" <<<"$out"; then
    fail "$tool: $mode: no report \"$says\" with the probe's line (status $rc)"
    echo "$out" | head -30
  else
    echo "test_checkers: $tool: $mode: reported ($(grep -m1 -o -- "$says" <<<"$out"))"
  fi
  "run_$tool" default "$mode"
  if [ "$rc" != 0 ] || grep -q -- "$says" <<<"$out"; then
    fail "$tool: $mode: the default build reports it, or fails (status $rc): the contrast is gone"
    echo "$out" | head -20
  fi
}

expect_clean() {
  local tool=$1
  "run_$tool" for_$tool clean
  if [ "$rc" != 0 ] || ! grep -q "clean: done" <<<"$out"; then
    fail "$tool: a program without a bug got a report (status $rc)"
    echo "$out" | head -40
  else
    echo "test_checkers: $tool: clean: no report"
  fi
}

# The bugs both checkers report (the leak only memcheck): mode, then what
# each says.
uaf_modes="use-after-free late-use-after-free heap-use-after-free"
ran=0
if [ -x "$bin/checker_probe_valgrind_for_valgrind" ]; then
  if command -v valgrind >/dev/null; then
    expect_clean valgrind
    for m in $uaf_modes; do expect_report valgrind "$m" "Invalid read of size 1"; done
    expect_report valgrind overflow "Invalid write of size 1"
    expect_report valgrind underflow "1 bytes before a block of size 40"
    expect_report valgrind leak "definitely lost in loss record"
    ran=$((ran + 1))
  fi
fi
if [ -x "$bin/checker_probe_asan_for_asan" ]; then
  expect_clean asan
  for m in $uaf_modes overflow underflow; do expect_report asan "$m" "AddressSanitizer: use-after-poison"; done
  ran=$((ran + 1))
fi

if [ "$fails" != 0 ]; then echo "test_checkers: $fails failures"; exit 1; fi
if [ "$ran" != 2 ]; then
  skip "valgrind (and its headers) or a compiler with -fsanitize=address is missing: $ran of the 2 checkers tested"
fi
echo "test_checkers: passed"
