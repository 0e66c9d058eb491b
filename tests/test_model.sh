#!/usr/bin/env bash
# The model of the remote-free protocol (tests/model/remote_free.pml,
# docs/DESIGN.md "The model of the remote-free protocol"), checked with spin:
# the model as the code has it must pass (no assertion violated, no invalid
# end state); the model without the retirement of a heap object on its
# last tag (-DNO_RETIRE) must fail, a batch of a destroyed life being linked
# into a later life once the tag wraps; the model without the push guard
# (-DNO_PUSH_GUARD) must fail, a push writing into a destroyed life; and the
# model without the clear of the inbox's watch flag when a heap changes
# hands (-DNO_HANDOVER_CLEAR) must fail, an owned heap's inbox holding
# blocks with no look of the background thread to come; and the model
# whose background rounds pass a busy watched heap by instead of retrying
# it (-DNO_BUSY_RETRY) must fail, an abandoned heap's inbox holding blocks
# with no look to come.
# Prints the states and the depth of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
. "$src/tests/skip.sh"
command -v spin >/dev/null || skip "spin not installed (scripts/setup.sh installs it)"
CC_MODEL="${CC:-}"
if [ -z "$CC_MODEL" ] || ! command -v "$CC_MODEL" >/dev/null; then
  CC_MODEL=$(command -v gcc || command -v cc || true)
fi
[ -n "$CC_MODEL" ] || skip "no C compiler for spin's verifier"

model="$src/tests/model/remote_free.pml"
work=$(mktemp -d "${TMPDIR:-/tmp}/brisk-model.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Searches are depth-first with the bounds below: depth (-m) and memory
# (-DMEMLIM, MB). The model's own bounds (blocks, threads, tags) are in
# remote_free.pml.
DEPTH=10000
MEMLIM=2048

# run NAME SPIN_FLAGS...: builds and runs the verifier of one variant in
# $work/NAME (optimised unless PAN_OPT says otherwise); leaves pan's report
# in $work/NAME/pan.out. Fails if the search could not be made (build
# error, memory or depth bound reached).
run() {
  local name=$1; shift
  local d="$work/$name"
  mkdir -p "$d"
  cp "$model" "$d/remote_free.pml"
  local t0=$SECONDS
  if ! (cd "$d" && spin "$@" -a remote_free.pml >spin.out 2>&1); then
    echo "$SKIP_NAME: FAIL: $name: spin $* -a failed:"; cat "$d/spin.out"; return 1
  fi
  if ! (cd "$d" && "$CC_MODEL" "${PAN_OPT:--O2}" -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM -w -o pan pan.c 2>cc.out); then
    echo "$SKIP_NAME: FAIL: $name: the verifier did not build:"; cat "$d/cc.out"; return 1
  fi
  (cd "$d" && timeout 120 ./pan -m$DEPTH -n >pan.out 2>&1)
  local rc=$?
  local stored trans depth errors
  stored=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$d/pan.out" | head -1)
  trans=$(sed -n 's/^ *\([0-9e.+]*\) transitions.*/\1/p' "$d/pan.out" | head -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$d/pan.out" | head -1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$d/pan.out" | head -1)
  echo "$SKIP_NAME: $name (spin ${*:+$* }-a): errors: ${errors:-?}, ${stored:-?} states stored," \
       "${trans:-?} transitions, depth reached ${depth:-?}, $((SECONDS - t0)) s"
  if [ $rc -ne 0 ] || [ -z "$errors" ] || grep -qE "max search depth too small|out of memory|memory limit" "$d/pan.out"; then
    echo "$SKIP_NAME: FAIL: $name: the search did not complete (status $rc):"
    tail -20 "$d/pan.out"
    return 1
  fi
  echo "$errors" >"$d/errors"
}

# trail NAME SPIN_FLAGS...: the steps of the counterexample pan found,
# the shortest one if a breadth-first search finds it within the bounds.
trail() {
  local name=$1; shift
  local d="$work/$name"
  if (cd "$d" && "$CC_MODEL" -O2 -DSAFETY -DBFS -DMEMLIM=$MEMLIM -w -o pan_bfs pan.c 2>/dev/null &&
      timeout 60 ./pan_bfs -n >pan_bfs.out 2>&1) || grep -q "errors: [1-9]" "$d/pan_bfs.out" 2>/dev/null; then
    grep -m1 "assertion violated\|invalid end state" "$d/pan_bfs.out"
  else
    grep -m1 "assertion violated\|invalid end state" "$d/pan.out"
  fi
  (cd "$work/$name" && spin "$@" -t -p remote_free.pml 2>&1) |
    grep -E "^ *[0-9]+:[[:space:]]+proc +[1-9]" |
    grep -vE "\[(else|break|\(1\)|DO|\.\(goto\)|goto [^]]*|(hd|n|k|k2|b|tag|ok|ph|pt|srv|first|rs|lk) = 0)\]" |
    sed 's/^ *[0-9]*:[[:space:]]*//' | tail -60
}

status=0

# The protocol as the code has it: heap_destroy retires the object on its
# last tag.
if run fixed; then
  if [ "$(cat "$work/fixed/errors")" != 0 ]; then
    echo "$SKIP_NAME: FAIL: the model of the protocol violates a property; counterexample:"
    trail fixed
    status=1
  fi
else
  status=1
fi

# expect_violation NAME WHAT PATTERN SPIN_FLAGS...: the variant must fail,
# on an assertion matching PATTERN (a grep -E expression). Its verifier is
# built without optimisation (a sixth of the build time): its search stops
# at the first violation, within a second.
expect_violation() {
  local name=$1 what=$2 pattern=$3; shift 3
  if ! PAN_OPT=-O0 run "$name" "$@"; then status=1; return; fi
  if [ "$(cat "$work/$name/errors")" = 0 ]; then
    echo "$SKIP_NAME: FAIL: the model $what passed: the check does not see what it removes"
    status=1
  elif ! grep "assertion violated" "$work/$name/pan.out" | grep -qE "$pattern"; then
    echo "$SKIP_NAME: FAIL: the model $what failed, but not as expected:"
    trail "$name" "$@"
    status=1
  else
    echo "$SKIP_NAME: $what, as expected: $(grep -m1 'assertion violated' "$work/$name/pan.out")"
  fi
}

# Without the retirement the tag wraps. With the push guarded (as the
# code has it), the violation found can only be the wrap: a batch whose
# tag matches a later life of its heap object.
expect_violation no_retire "without retirement" \
  '\(inbox_tag!=pt\)\|\|\(s_life\[t\]==g\)|\(s_life\[t\]==\(b/3\)\)' -DNO_RETIRE

# Without the push guard, a push that loaded the old tag writes its tail's
# link after the heap's memory went (one destroy is enough).
expect_violation no_push_guard "without the push guard" 'mem==s_life\[t\]' -DNO_PUSH_GUARD

# Without the clear at the handover, a watch flag set before H was reused,
# whose look the background thread passed by while H was FREE, stays set:
# the next push into the empty inbox schedules no look, and the idle
# owner's blocks wait with none to come (P4).
expect_violation no_handover_clear "without the clear at the handover" \
  '\(state!=1\)\|\|\(inbox_head==255\)\)\|\|look_pending\)' -DNO_HANDOVER_CLEAR

# Without the retry of a BUSY watched heap, a round passes by H while an
# exiting owner's serve holds it, using up the look that a push landing
# after the serve's drain scheduled: the serve stores ABANDONED, and the
# push's blocks wait in the inbox with no look to come (P5). Only a
# thread's heap is abandoned: the search, made for that kind alone, finds
# it at once (with both kinds, after the first-class heap's 6.5 million
# states).
expect_violation no_busy_retry "without the retry of a busy heap" \
  '\(state!=2\)\|\|\(inbox_head==255\)\)\|\|look_pending\)' -DNO_BUSY_RETRY -DTHREAD_HEAP

if [ $status -eq 0 ]; then echo "$SKIP_NAME: PASS"; else echo "$SKIP_NAME: FAILED"; fi
exit $status
