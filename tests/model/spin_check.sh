# The checks of a spin model, sourced by the tests that run one
# (tests/test_model*.sh). The caller sets, before sourcing:
#   SKIP_NAME   the test's name, for its lines and tests/skip.sh
#   MODEL       the model's file name under tests/model/
#   TIME        seconds a search may take
#   TRAIL_QUIET a grep -E expression of assignments `name = 0` left out
#               of a printed counterexample (locals reset by the model)
# and then calls expect_pass and expect_violation, and ends with
# `finish`. Searches are depth-first with the bounds below: depth (-m) and
# memory (-DMEMLIM, MB); a search that reaches a bound fails the test.
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
. "$src/tests/skip.sh"
command -v spin >/dev/null || skip "spin not installed (scripts/setup.sh installs it)"
CC_MODEL="${CC:-}"
if [ -z "$CC_MODEL" ] || ! command -v "$CC_MODEL" >/dev/null; then
  CC_MODEL=$(command -v gcc || command -v cc || true)
fi
[ -n "$CC_MODEL" ] || skip "no C compiler for spin's verifier"

work=$(mktemp -d "${TMPDIR:-/tmp}/brisk-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
DEPTH=10000
MEMLIM=1024
status=0

# run NAME SPIN_FLAGS...: builds and runs the verifier of one variant in
# $work/NAME; leaves pan's report in $work/NAME/pan.out. Fails if the
# search could not be made (build error, memory, depth or time bound
# reached).
run() {
  local name=$1; shift
  local d="$work/$name"
  mkdir -p "$d"
  cp "$src/tests/model/$MODEL" "$d/$MODEL"
  local t0=$SECONDS
  if ! (cd "$d" && spin "$@" -a "$MODEL" >spin.out 2>&1); then
    echo "$SKIP_NAME: FAIL: $name: spin $* -a failed:"; cat "$d/spin.out"; return 1
  fi
  if ! (cd "$d" && "$CC_MODEL" -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM -w -o pan pan.c 2>cc.out); then
    echo "$SKIP_NAME: FAIL: $name: the verifier did not build:"; cat "$d/cc.out"; return 1
  fi
  (cd "$d" && timeout "$TIME" ./pan -m$DEPTH -n >pan.out 2>&1)
  local rc=$?
  local stored trans depth errors
  stored=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$d/pan.out" | head -1)
  trans=$(sed -n 's/^ *\([0-9e.+]*\) transitions.*/\1/p' "$d/pan.out" | head -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$d/pan.out" | head -1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$d/pan.out" | head -1)
  echo "$SKIP_NAME: $name (spin ${*:+$* }-a): errors: ${errors:-?}, ${stored:-?} states stored," \
       "${trans:-?} transitions, depth reached ${depth:-?}, $((SECONDS - t0)) s"
  if [ $rc -eq 124 ]; then
    echo "$SKIP_NAME: FAIL: $name: the search did not end within $TIME s"
    return 1
  fi
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
      timeout "$TIME" ./pan_bfs -n >pan_bfs.out 2>&1) || grep -q "errors: [1-9]" "$d/pan_bfs.out" 2>/dev/null; then
    grep -m1 "assertion violated\|invalid end state" "$d/pan_bfs.out"
  else
    grep -m1 "assertion violated\|invalid end state" "$d/pan.out"
  fi
  (cd "$d" && spin "$@" -t -p "$MODEL" 2>&1) |
    grep -E "^ *[0-9]+:[[:space:]]+proc +[1-9]" |
    grep -vE "\[(else|break|\(1\)|DO|\.\(goto\)|goto [^]]*|($TRAIL_QUIET) = 0)\]" |
    sed 's/^ *[0-9]*:[[:space:]]*//' | tail -60
}

# expect_pass NAME SPIN_FLAGS...: the protocol as the code has it.
expect_pass() {
  local name=$1; shift
  if run "$name" "$@"; then
    if [ "$(cat "$work/$name/errors")" != 0 ]; then
      echo "$SKIP_NAME: FAIL: the model of the protocol ($name) violates a property; counterexample:"
      trail "$name" "$@"
      status=1
    fi
  else
    status=1
  fi
}

# expect_violation NAME WHAT PATTERN SPIN_FLAGS...: the variant must fail,
# on an assertion matching PATTERN (a grep -E expression; spin prints the
# expression after the preprocessor).
expect_violation() {
  local name=$1 what=$2 pattern=$3; shift 3
  if ! run "$name" "$@"; then status=1; return; fi
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

finish() {
  if [ $status -eq 0 ]; then echo "$SKIP_NAME: PASS"; else echo "$SKIP_NAME: FAILED"; fi
  exit $status
}
