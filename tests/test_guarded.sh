#!/usr/bin/env bash
# Guarded samples (BRISK_GUARD_RATE, src/guarded/guarded.h), through
# tests/guarded_probe.c preloaded with libbrisk.so:
#   - each bug on a guarded block (every allocation is one at rate 1) is
#     reported as "brisk: error:" with its kind, the address, the block and
#     its size, and the stacks of its allocation (and free); the process
#     then dies of SIGSEGV as it would have (a double free, and a write into
#     the up to 15 bytes between a block and its guard page, which its free
#     finds, are reported and the program goes on, as brisk's other
#     reports);
#   - with the guards off (rate 0) the same bugs go unseen: the guard is
#     what catches them;
#   - BRISK_GUARD_CONTINUE: the report, and the program goes on;
#   - the rate switched on while running (brisk_option_set), and a handler
#     the program installed before: brisk reports, then passes the fault
#     on to it;
#   - guarded blocks behave as any other (sizes, realloc, calloc,
#     alignment, frees by another thread, slots reused);
#   - one allocation in N is guarded: 200,000 allocations at rate 100 give
#     2,000 expected, between 1,700 and 2,300 accepted (7 standard
#     deviations).
set -uo pipefail
lib=${BRISKTEST_LIB:?}
probe=${BRISKTEST_BIN_DIR:?}/guarded_probe
fails=0
fail() { echo "test_guarded: FAIL: $*"; fails=$((fails + 1)); }

run() { # env... -- mode: output in $out, status in $rc
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  out=$(env -i "${envs[@]}" LD_PRELOAD="$lib" "$probe" "$@" 2>&1)
  rc=$?
}

# mode, expected status, the report's first line (a grep -E pattern), more env
expect_report() {
  local mode=$1 status=$2 says=$3
  shift 3
  run BRISK_GUARD_RATE=1 "$@" -- "$mode"
  if [ "$rc" != "$status" ] || ! grep -Eq "^brisk: error: $says" <<<"$out" ||
     ! grep -q "allocated by thread" <<<"$out" || ! grep -q "guarded_probe+0x" <<<"$out"; then
    fail "$mode: status $rc (expected $status), or no report \"$says\" with the allocation's stack"
    echo "$out" | head -20
    return
  fi
  case $mode in use-after-free*|double-free|overflow-slack)
    grep -q "freed by thread" <<<"$out" || fail "$mode: no stack of the free" ;;
  esac
  echo "test_guarded: $mode: $(grep -m1 '^brisk: error:' <<<"$out")"
  # the same bug without the guards: unseen (a double free is seen by
  # brisk's own checks, without the stacks)
  run BRISK_GUARD_RATE=0 "$@" -- "$mode"
  if grep -q "guarded block" <<<"$out" || ! grep -q survived <<<"$out" ||
     { [ "$mode" != double-free ] && grep -q "brisk: error:" <<<"$out"; }; then
    fail "$mode: seen without the guards (status $rc): the test shows nothing of the guard"
  fi
}

block='the guarded block at 0x[0-9a-f]+ \(40 bytes\)'
expect_report use-after-free 139 "use after free: write to 0x[0-9a-f]+, 3 bytes into $block"
expect_report use-after-free-read 139 "use after free: read of 0x[0-9a-f]+, 3 bytes into $block"
expect_report overflow 139 "heap overflow: write to 0x[0-9a-f]+, 8 bytes past the end of $block"
expect_report overflow-slack 0 "heap overflow: 0x[0-9a-f]+, 0 bytes past the end of $block, was written \\(found when the block was freed, by free\\)"
expect_report underflow 139 "heap underflow: read of 0x[0-9a-f]+, 1 bytes before $block" BRISK_GUARD_UNDERFLOW=1
expect_report double-free 0 "free\(0x[0-9a-f]+\): double free of a guarded block \(40 bytes\)"

run BRISK_GUARD_RATE=1 BRISK_GUARD_CONTINUE=1 -- use-after-free
if [ "$rc" = 0 ] && grep -q "^brisk: error: use after free" <<<"$out" && grep -q survived <<<"$out"; then
  echo "test_guarded: BRISK_GUARD_CONTINUE: reported, and the program went on"
else fail "BRISK_GUARD_CONTINUE: status $rc"; echo "$out" | head; fi

run BRISK_GUARD_RATE=1 BRISK_GUARD_CONTINUE=1 -- overflow-then-free
if [ "$rc" = 0 ] && [ "$(grep -c '^brisk: error:' <<<"$out")" = 1 ] && grep -q "^brisk: error: heap overflow" <<<"$out" &&
   grep -q survived <<<"$out"; then
  echo "test_guarded: BRISK_GUARD_CONTINUE: an overflowed block is then freed without a second report"
else fail "BRISK_GUARD_CONTINUE, overflow then free: status $rc"; echo "$out" | grep "brisk: error"; fi

run BRISK_GUARD_RATE=0 -- runtime
if [ "$rc" = 139 ] && grep -q "^brisk: error: use after free" <<<"$out"; then
  echo "test_guarded: switched on while running: reported"
else fail "switched on while running: status $rc"; echo "$out" | head; fi

run BRISK_GUARD_RATE=0 -- own-handler
if [ "$rc" = 3 ] && grep -q "^brisk: error: use after free" <<<"$out" && grep -q "program handler ran" <<<"$out"; then
  echo "test_guarded: the program's own handler: reported, then passed on to it"
else fail "the program's own handler: status $rc"; echo "$out" | head; fi

run BRISK_GUARD_RATE=1 -- ok
if [ "$rc" = 0 ]; then echo "test_guarded: guarded blocks behave: $out"
else fail "guarded blocks misbehave: status $rc"; echo "$out" | head; fi

run BRISK_GUARD_RATE=100 -- rate
n=$(sed -n 's/^rate: \([0-9]*\) guarded.*/\1/p' <<<"$out")
if [ -n "$n" ] && [ "$n" -ge 1700 ] && [ "$n" -le 2300 ]; then
  echo "test_guarded: rate 100: $n of 200000 allocations guarded"
else fail "rate 100: '$n' of 200000 guarded (1700..2300 expected): $out"; fi

if [ "$fails" != 0 ]; then echo "test_guarded: $fails failures"; exit 1; fi
echo "test_guarded: passed"
