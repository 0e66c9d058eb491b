# Shared steps of the scripts that check a spin model (tests/test_model.sh,
# tests/test_model_pages.sh); sourced, not run. Before sourcing, the script
# sets SKIP_NAME, src (the source tree), MODEL (the .pml file's name in
# tests/model/), MEMLIM (MB) and, optionally, TRAIL_DROP (a grep -E
# expression of the trail's steps left out: resets of locals, the
# checks' scratch) and PAN_TIMEOUT (s, 120 unless set). It skips loudly
# when spin or a C compiler is missing, and leaves `status` at 0.

. "$src/tests/skip.sh"
command -v spin >/dev/null || skip "spin not installed (scripts/setup.sh installs it)"
CC_MODEL="${CC:-}"
if [ -z "$CC_MODEL" ] || ! command -v "$CC_MODEL" >/dev/null; then
  CC_MODEL=$(command -v gcc || command -v cc || true)
fi
[ -n "$CC_MODEL" ] || skip "no C compiler for spin's verifier"

model="$src/tests/model/$MODEL"
work=$(mktemp -d "${TMPDIR:-/tmp}/brisk-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Searches are depth-first, bounded by DEPTH (-m) and MEMLIM (-DMEMLIM).
DEPTH=10000
status=0

# run NAME SPIN_FLAGS...: builds and runs the verifier of one variant in
# $work/NAME (optimised unless PAN_OPT says otherwise); leaves pan's report
# in $work/NAME/pan.out and its count of errors in $work/NAME/errors.
# Fails if the search could not be made (build error, memory or depth
# bound reached).
run() {
  local name=$1; shift
  local d="$work/$name"
  mkdir -p "$d"
  cp "$model" "$d/$MODEL"
  local t0=$SECONDS
  if ! (cd "$d" && spin "$@" -a "$MODEL" >spin.out 2>&1); then
    echo "$SKIP_NAME: FAIL: $name: spin $* -a failed:"; cat "$d/spin.out"; return 1
  fi
  if ! (cd "$d" && "$CC_MODEL" "${PAN_OPT:--O2}" -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM -w -o pan pan.c 2>cc.out); then
    echo "$SKIP_NAME: FAIL: $name: the verifier did not build:"; cat "$d/cc.out"; return 1
  fi
  (cd "$d" && timeout "${PAN_TIMEOUT:-120}" ./pan -m$DEPTH -n >pan.out 2>&1)
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
  (cd "$d" && spin "$@" -t -p "$MODEL" 2>&1) |
    grep -E "^ *[0-9]+:[[:space:]]+proc +[1-9]" |
    grep -vE "\[(else|break|\(1\)|DO|\.\(goto\)|goto [^]]*)\]" |
    grep -vE "${TRAIL_DROP:-^$}" |
    sed 's/^ *[0-9]*:[[:space:]]*//' | tail -60
}

# must_pass NAME SPIN_FLAGS...: the variant must hold every property.
must_pass() {
  local name=$1
  if ! run "$@"; then status=1; return; fi
  if [ "$(cat "$work/$name/errors")" != 0 ]; then
    echo "$SKIP_NAME: FAIL: the model ($name) violates a property; counterexample:"
    trail "$@"
    status=1
  fi
}

# expect_violation NAME WHAT PATTERN SPIN_FLAGS...: the variant must fail,
# on an assertion matching PATTERN (a grep -E expression). Its verifier is
# built without optimisation (a fraction of the build time): its search
# stops at the first violation, within a second.
expect_violation() {
  local name=$1 what=$2 pattern=$3; shift 3
  if ! PAN_OPT=-O0 run "$name" "$@"; then status=1; return; fi
  if [ "$(cat "$work/$name/errors")" = 0 ]; then
    echo "$SKIP_NAME: FAIL: the model $what passed: the check does not see what it changes"
    status=1
  elif ! grep "assertion violated" "$work/$name/pan.out" | grep -qE "$pattern"; then
    echo "$SKIP_NAME: FAIL: the model $what failed, but not as expected:"
    trail "$name" "$@"
    status=1
  else
    echo "$SKIP_NAME: $what, as expected: $(grep -m1 'assertion violated' "$work/$name/pan.out")"
  fi
}
