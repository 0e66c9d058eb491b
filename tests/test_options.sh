#!/usr/bin/env bash
# Options read from the environment, checked on small programs run under
# LD_PRELOAD=$BRISKTEST_LIB with an otherwise clean environment (env -i, so no
# BRISK_* variable from the caller leaks in):
#   - no option: no output on stderr, program output unchanged
#   - BRISK_SHOW_STATS=1 prints statistics to stderr at exit; =0 prints nothing
#   - BRISK_VERBOSE=1 runs normally
#   - an unknown BRISK_* name gives "brisk: warning: unknown option BRISK_X"
#     (once per name); names that merely look similar (BRISKY) are not ours
#   - BRISK_ON_ERROR=bogus gives a warning naming BRISK_ON_ERROR; =abort none
set -u
lib=${BRISKTEST_LIB:-}
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  echo "[options] FAILED: BRISKTEST_LIB is not set or not a file ('$lib')"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok()   { echo "[options] $1: ok"; }
bad()  { echo "[options] $1: FAILED: $2"; fails=$((fails + 1)); }
show() { echo "      stderr was:"; sed 's/^/      | /' "$tmp/err" | head -20; }

# run VAR=value... -- command args...   (stdout -> $tmp/out, stderr -> $tmp/err, rc -> $rc)
run() {
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env -i PATH=/usr/bin:/bin LC_ALL=C LD_PRELOAD="$lib" "${vars[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

LC_ALL=C ls / >"$tmp/ls.ref" 2>/dev/null

# --- baseline --------------------------------------------------------------
run -- ls /
if [ $rc -ne 0 ]; then bad "no options" "ls exited $rc"; show
elif ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "no options" "ls output differs from a run without brisk"
elif [ -s "$tmp/err" ]; then bad "no options" "stderr is not empty without any option"; show
else ok "no options (ls /: same output, silent)"; fi

run BRISKY=1 -- /bin/true
if [ $rc -ne 0 ] || [ -s "$tmp/err" ]; then bad "BRISKY=1 (not a BRISK_ name)" "rc=$rc, stderr not empty"; show
else ok "BRISKY=1 is not reported"; fi

# --- BRISK_SHOW_STATS -------------------------------------------------------
check_stats() { # name
  if [ $rc -ne 0 ]; then bad "$1" "program exited $rc"; show; return; fi
  if ! grep -qi 'brisk' "$tmp/err"; then bad "$1" "no statistics on stderr (no word 'brisk')"; show; return; fi
  if ! grep -Eqi 'alloc|malloc|free|peak|rss|bytes|heap|page|segment|span|mapped|reserved|committed|purge' "$tmp/err" \
     || ! grep -q '[0-9]' "$tmp/err"; then
    bad "$1" "stderr has no statistics text (counters/bytes)"; show; return
  fi
  if grep -q 'brisk: error' "$tmp/err"; then bad "$1" "an error line was printed"; show; return; fi
  ok "$1 ($(wc -l <"$tmp/err") lines of stats on stderr)"
}
run BRISK_SHOW_STATS=1 -- /bin/true
check_stats "BRISK_SHOW_STATS=1 /bin/true"
run BRISK_SHOW_STATS=1 -- /usr/bin/python3 -c 'x = [bytearray(i % 3000) for i in range(20000)]; print(len(x))'
check_stats "BRISK_SHOW_STATS=1 python3 (allocating)"
if [ "$(cat "$tmp/out")" != "20000" ]; then bad "BRISK_SHOW_STATS=1 python3" "stdout changed: $(head -c 200 "$tmp/out")"; fi
grep -q '[1-9]' "$tmp/err" || bad "BRISK_SHOW_STATS=1 python3" "all statistics are zero after 20000 allocations"
# ls (coreutils) closes stdout and stderr itself at exit (gnulib close_stdout),
# before brisk's exit hook runs: the statistics must still come out.
run BRISK_SHOW_STATS=1 -- ls /
check_stats "BRISK_SHOW_STATS=1 ls / (ls closes fd 2 before exit)"
if ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_SHOW_STATS=1 ls /" "stdout changed (stats must go to stderr)"; fi
run BRISK_SHOW_STATS=0 -- ls /
if [ $rc -ne 0 ] || [ -s "$tmp/err" ]; then bad "BRISK_SHOW_STATS=0" "rc=$rc, expected no output on stderr"; show
else ok "BRISK_SHOW_STATS=0 prints nothing"; fi

# --- BRISK_VERBOSE ------------------------------------------------------------
run BRISK_VERBOSE=1 -- ls /
if [ $rc -ne 0 ]; then bad "BRISK_VERBOSE=1" "ls exited $rc"; show
elif ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_VERBOSE=1" "ls output changed"
elif grep -q 'brisk: error' "$tmp/err"; then bad "BRISK_VERBOSE=1" "an error line was printed"; show
else ok "BRISK_VERBOSE=1 ($(wc -l <"$tmp/err") lines on stderr)"; fi

# --- unknown options -------------------------------------------------------
run BRISK_NOSUCH=1 -- ls /
n=$(grep -Fxc 'brisk: warning: unknown option BRISK_NOSUCH' "$tmp/err")
if [ "$n" != 1 ]; then bad "BRISK_NOSUCH=1" "expected exactly one line 'brisk: warning: unknown option BRISK_NOSUCH', found $n"; show
elif [ $rc -ne 0 ] || ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_NOSUCH=1" "rc=$rc or ls output changed"
elif [ "$(grep -vc 'brisk: warning: unknown option BRISK_NOSUCH' "$tmp/err")" != 0 ]; then
  bad "BRISK_NOSUCH=1" "other lines besides the warning"; show
else ok "BRISK_NOSUCH=1 -> 'brisk: warning: unknown option BRISK_NOSUCH'"; fi

run BRISK_NOSUCH=1 -- /bin/true
if ! grep -Fxq 'brisk: warning: unknown option BRISK_NOSUCH' "$tmp/err" || [ $rc -ne 0 ]; then
  bad "BRISK_NOSUCH=1 /bin/true" "warning missing (rc=$rc)"; show
else ok "BRISK_NOSUCH=1 /bin/true warns too"; fi

run BRISK_FOO=1 BRISK_BAR_BAZ=x -- ls /
if grep -Fxq 'brisk: warning: unknown option BRISK_FOO' "$tmp/err" \
   && grep -Fxq 'brisk: warning: unknown option BRISK_BAR_BAZ' "$tmp/err" && [ $rc -eq 0 ]; then
  ok "two unknown options -> two warnings"
else bad "BRISK_FOO=1 BRISK_BAR_BAZ=x" "expected one warning line per unknown name (rc=$rc)"; show; fi

# --- BRISK_ON_ERROR -----------------------------------------------------------
run BRISK_ON_ERROR=bogus -- ls /
if ! grep -Eq '^brisk: warning: .*BRISK_ON_ERROR' "$tmp/err"; then
  bad "BRISK_ON_ERROR=bogus" "no 'brisk: warning: ...BRISK_ON_ERROR...' line"; show
elif [ $rc -ne 0 ] || ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_ON_ERROR=bogus" "rc=$rc or ls output changed"
else ok "BRISK_ON_ERROR=bogus -> $(grep -m1 'BRISK_ON_ERROR' "$tmp/err")"; fi

run BRISK_ON_ERROR=abort -- ls /
if [ $rc -ne 0 ] || [ -s "$tmp/err" ]; then bad "BRISK_ON_ERROR=abort" "a valid value must be silent (rc=$rc)"; show
else ok "BRISK_ON_ERROR=abort accepted silently"; fi

if [ $fails -ne 0 ]; then echo "[options] FAILED: $fails checks"; exit 1; fi
echo "[options] all checks passed"
