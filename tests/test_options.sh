#!/usr/bin/env bash
# Options read from the environment, checked on small programs run under
# LD_PRELOAD=$BRISKTEST_LIB with an otherwise clean environment (env -i, so no
# BRISK_* variable from the caller leaks in):
#   - no option: no output on stderr, program output unchanged
#   - BRISK_SHOW_STATS=1 prints, at exit, a header and one line per
#     statistic of src/base/counters.h with its value (and peak), then one per
#     figure of src/runtime/stats.h (what brisk holds, the process); =0 prints nothing
#   - BRISK_VERBOSE=1 prints one line per option of src/runtime/options.h with the
#     value in force, and nothing else; =0 prints nothing
#   - BRISK_SEGMENT_CACHE and BRISK_PURGE_DELAY change what a program keeps
#     after freeing a 256 MiB burst (tests/memory_probe.c)
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
# The statistics' names and kinds, from their one list (src/base/counters.h).
src=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
stat_fields=$(sed -n 's/^ *X(\([a-z_]*\), \(COUNT\|LEVEL\),.*/\1 \2/p' "$src/src/base/counters.h")
[ -n "$stat_fields" ] || { echo "[options] FAILED: no statistics found in src/base/counters.h"; exit 1; }
# Then the walked figures and the process's (src/runtime/stats.h), printed as counts.
extra_fields=$(sed -n -e '/define BRISK_USAGE_FIELDS/,/^$/s/^ *X(\([a-z_]*\), ".*/\1 COUNT/p' \
                      -e '/define BRISK_PROCESS_FIELDS/,/^$/s/^ *X(\([a-z_]*\), [a-z_]*, ".*/\1 COUNT/p' "$src/src/runtime/stats.h")
[ "$(echo "$extra_fields" | wc -l)" -ge 9 ] || { echo "[options] FAILED: the figures of src/runtime/stats.h not found"; exit 1; }
stat_fields=$(printf '%s\n%s\n' "$stat_fields" "$extra_fields")

# check_stats NAME: stderr is the header and exactly one well-formed line per
# statistic, in the list's order: "brisk:   name: N  (...)", or for a level
# "brisk:   name: N, peak P  (...)" with P >= N.
check_stats() {
  if [ $rc -ne 0 ]; then bad "$1" "program exited $rc"; show; return; fi
  local want got
  want=$( { echo "brisk: brisk statistics:"; while read -r f k; do echo "$f $k"; done <<<"$stat_fields"; } )
  got=$(sed -E -e 's/^brisk:   ([a-z_]+): (-?[0-9]+), peak (-?[0-9]+)  \(.*\)$/\1 LEVEL \2 \3/;t' \
               -e 's/^brisk:   ([a-z_]+): (-?[0-9]+)  \(.*\)$/\1 COUNT \2/;t' \
               -e '/^brisk: brisk statistics:$/b' -e 's/^/unexpected line: /' "$tmp/err" |
        awk '$2 == "LEVEL" && $4 + 0 < $3 + 0 { print "peak below value: " $0; next }
             $2 == "LEVEL" || $2 == "COUNT" { print $1 " " $2; next } { print }')
  if [ "$got" != "$want" ]; then
    bad "$1" "the statistics are not one line per field of src/base/counters.h"
    diff <(echo "$want") <(echo "$got") | head -10 | sed 's/^/      /'
    return
  fi
  ok "$1 ($(wc -l <"$tmp/err") lines: the header and every statistic)"
}
# stat NAME [peak]: a value from the last statistics printed.
stat() { sed -E -n 's/^brisk:   ([a-z_]+): (-?[0-9]+)(, peak (-?[0-9]+))?  .*/\1 \2 \4/p' "$tmp/err" |
  awk -v f="$1" -v p="${2:-}" '$1 == f { v = (p == "peak") ? $3 : $2 } END { print v + 0 }'; }
run BRISK_SHOW_STATS=1 -- /bin/true
check_stats "BRISK_SHOW_STATS=1 /bin/true"
run BRISK_SHOW_STATS=1 -- /usr/bin/python3 -c 'x = [bytearray(i % 3000) for i in range(20000)]; print(len(x))'
check_stats "BRISK_SHOW_STATS=1 python3 (allocating)"
if [ "$(cat "$tmp/out")" != "20000" ]; then bad "BRISK_SHOW_STATS=1 python3" "stdout changed: $(head -c 200 "$tmp/out")"; fi
if [ "$(stat mmap_calls)" -lt 1 ] || [ "$(stat mapped_bytes peak)" -lt 4194304 ] || [ "$(stat segments peak)" -lt 1 ] \
   || [ "$(stat heaps peak)" -lt 1 ]; then
  bad "BRISK_SHOW_STATS=1 python3" "after 20000 allocations: mmap_calls $(stat mmap_calls), peak mapped_bytes" \
      "$(stat mapped_bytes peak), peak segments $(stat segments peak), peak heaps $(stat heaps peak)"
else ok "BRISK_SHOW_STATS=1 python3: $(stat mmap_calls) mmap calls, $(stat mapped_bytes peak) bytes mapped at the peak"; fi
# ls (coreutils) closes stdout and stderr itself at exit (gnulib close_stdout),
# before brisk's exit hook runs: the statistics must still come out.
run BRISK_SHOW_STATS=1 -- ls /
check_stats "BRISK_SHOW_STATS=1 ls / (ls closes fd 2 before exit)"
if ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_SHOW_STATS=1 ls /" "stdout changed (stats must go to stderr)"; fi
run BRISK_SHOW_STATS=0 -- ls /
if [ $rc -ne 0 ] || [ -s "$tmp/err" ]; then bad "BRISK_SHOW_STATS=0" "rc=$rc, expected no output on stderr"; show
else ok "BRISK_SHOW_STATS=0 prints nothing"; fi

# --- BRISK_VERBOSE ------------------------------------------------------------
# Every option of the table (src/runtime/options.h), once, with the value in force.
options=$(sed -n 's/^ *X([a-z_]*, \([A-Z_]*\),.*/\1/p' "$src/src/runtime/options.h")
[ -n "$options" ] || { echo "[options] FAILED: no options found in src/runtime/options.h"; exit 1; }
run BRISK_VERBOSE=1 BRISK_PURGE_DELAY=7 BRISK_SEGMENT_CACHE=3 BRISK_ON_ERROR=abort -- ls /
if [ $rc -ne 0 ]; then bad "BRISK_VERBOSE=1" "ls exited $rc"; show
elif ! cmp -s "$tmp/out" "$tmp/ls.ref"; then bad "BRISK_VERBOSE=1" "ls output changed"
else
  missing=""
  for o in $options; do
    [ "$(grep -c "^brisk: option BRISK_$o=" "$tmp/err")" = 1 ] || missing="$missing $o"
  done
  if [ -n "$missing" ]; then bad "BRISK_VERBOSE=1" "no single line for:$missing"; show
  elif [ "$(grep -vc '^brisk: option BRISK_[A-Z_]*=[^ ]* (.*)$' "$tmp/err")" != 0 ]; then
    bad "BRISK_VERBOSE=1" "lines other than the options"; show
  elif ! grep -q '^brisk: option BRISK_PURGE_DELAY=7 ' "$tmp/err" || ! grep -q '^brisk: option BRISK_SEGMENT_CACHE=3 ' "$tmp/err" \
       || ! grep -q '^brisk: option BRISK_ON_ERROR=abort ' "$tmp/err" || ! grep -q '^brisk: option BRISK_VERBOSE=1 ' "$tmp/err"; then
    bad "BRISK_VERBOSE=1" "the values in force are not the ones set"; show
  else ok "BRISK_VERBOSE=1: $(wc -l <"$tmp/err") option lines with the values set"; fi
fi
run BRISK_VERBOSE=0 -- ls /
if [ $rc -ne 0 ] || [ -s "$tmp/err" ]; then bad "BRISK_VERBOSE=0" "rc=$rc, expected no output on stderr"; show
else ok "BRISK_VERBOSE=0 prints nothing"; fi

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

# --- BRISK_SEGMENT_CACHE and BRISK_PURGE_DELAY: a 256 MiB burst freed -------
probe=${BRISKTEST_BIN_DIR:-$src/build/tests}/memory_probe
if [ ! -x "$probe" ]; then bad "memory options" "no memory probe at $probe"; else
# probe VAR=value... -- SCENARIO AT_MS: runs it; field NAME reads the last SAMPLE.
probe() {
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env -i PATH=/usr/bin:/bin LD_PRELOAD="$lib" "${vars[@]}" "$probe" "$1" 64 256 "$2" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  grep -q '^DONE$' "$tmp/out" || rc=99
}
field() { awk -v f="$1" '/^SAMPLE/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) v = kv[2] } } END { print v }' "$tmp/out"; }
pct_below() { awk -v p="$(field pct)" -v m="$1" 'BEGIN { exit !(p < m) }'; }
summary() { echo "segments $(field segments), RSS $(field pct)% of the burst, $(field purged_bytes) bytes purged, $(field munmap_calls) munmaps"; }

# Counted once things settle (300 ms after the frees: while the background
# thread purges some slices of a segment, that segment reaches the pool
# only when it gives them back). In use then: the program's own (1) and
# brisk's, once the background thread has started (1): at most 3.
probe BRISK_SEGMENT_CACHE=0 -- sleep 300
if [ $rc -ne 0 ] || [ "$(field segments)" -gt 3 ] || ! pct_below 5; then
  bad "BRISK_SEGMENT_CACHE=0" "empty segments must be unmapped: $(summary)"; show
else ok "BRISK_SEGMENT_CACHE=0: 300 ms after the frees, $(summary)"; fi
probe BRISK_SEGMENT_CACHE=8 -- sleep 300
if [ $rc -ne 0 ] || [ "$(field segments)" -lt 8 ] || [ "$(field segments)" -gt 11 ]; then
  bad "BRISK_SEGMENT_CACHE=8" "expected 8 kept segments and at most 3 in use: $(summary)"; show
else ok "BRISK_SEGMENT_CACHE=8: 300 ms after the frees, $(summary)"; fi
probe -- sleep 300
if [ $rc -ne 0 ] || [ "$(field segments)" -lt 32 ] || [ "$(field segments)" -gt 35 ]; then
  bad "BRISK_SEGMENT_CACHE default" "expected 32 kept segments and at most 3 in use: $(summary)"; show
else ok "BRISK_SEGMENT_CACHE default (32): 300 ms after the frees, $(summary)"; fi

probe BRISK_PURGE_DELAY=0 -- sleep 0
if [ $rc -ne 0 ] || [ "$(field purged_bytes)" -le 0 ] || ! pct_below 5; then
  bad "BRISK_PURGE_DELAY=0" "kept segments must be purged at once: $(summary)"; show
else ok "BRISK_PURGE_DELAY=0: right after the frees, $(summary)"; fi
probe BRISK_PURGE_DELAY=-1 -- classcache 300
if [ $rc -ne 0 ] || [ "$(field purged_bytes)" != 0 ] || pct_below 40; then
  bad "BRISK_PURGE_DELAY=-1" "nothing may be purged: $(summary)"; show
else ok "BRISK_PURGE_DELAY=-1: after 300 ms of allocation, $(summary)"; fi
fi

if [ $fails -ne 0 ]; then echo "[options] FAILED: $fails checks"; exit 1; fi
echo "[options] all checks passed"
