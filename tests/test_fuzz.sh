#!/usr/bin/env bash
# Fuzzing: build fuzz/fuzz_ops.c as a libFuzzer target with clang and run
# it for about a minute over a copy of the seed corpus fuzz/corpus.
#
# brisk's sources are compiled into the target with -fsanitize=fuzzer-no-link
# (so libFuzzer sees coverage inside brisk) and internal assertions
# (BRISK_DEBUG_LEVEL=2); no AddressSanitizer: brisk is the process's malloc
# in the fuzzer. BRISK_ON_ERROR=abort turns any "brisk: error:" line into a
# crash. If the sources or the target do not build with clang, the test
# fails: a fuzzer without coverage inside brisk would pass while finding
# little.
#
# Fails when libFuzzer reports a crash, a timeout or a model mismatch; the
# input is kept in $BRISKTEST_BIN_DIR/fuzz-artifacts with the command that
# replays it. When clang or libFuzzer is missing it is skipped (exit 77,
# which ctest shows as skipped), and under CI (CI=true) it fails instead.
# Each run draws a new seed and prints it, so that a failure can be
# replayed with BRISKTEST_FUZZ_SEED.
#
# Knobs (environment):
#   BRISKTEST_FUZZ_SECONDS   fuzzing time (default 60)
#   BRISKTEST_FUZZ_OUT       keep the build and the grown corpus in this directory
#   BRISKTEST_FUZZ_HARDENED  1: build brisk with BRISK_HARDENED=1
#   BRISKTEST_FUZZ_JOBS      parallel fuzzing processes (default 1)
#   BRISKTEST_FUZZ_SEED      libFuzzer seed (default: a new one each run, printed)
#   BRISKTEST_FUZZ_PROFILE   1: the heap profiler on, sampling about every 4 KiB
# Longer runs: see fuzz/README.md.
set -u

SRC=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=${BRISKTEST_BUILD_DIR:-$SRC/build}
ART=${BRISKTEST_BIN_DIR:-$BUILD/tests}/fuzz-artifacts
FUZZ_SECONDS=${BRISKTEST_FUZZ_SECONDS:-60}
HARDENED=${BRISKTEST_FUZZ_HARDENED:-0}
JOBS=${BRISKTEST_FUZZ_JOBS:-1}
PROFILE=${BRISKTEST_FUZZ_PROFILE:-0}

skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "[fuzz] FAILED: clang with libFuzzer is needed under CI (scripts/setup.sh installs clang libclang-rt-14-dev)"
    [ -n "${1:-}" ] && echo "  ($1)"
    exit 1
  fi
  echo "SKIPPED: clang with libFuzzer not installed (apt-get install clang libclang-rt-14-dev)"
  [ -n "${1:-}" ] && echo "  ($1)"
  exit 77
}

CC=""
for c in clang clang-14 clang-15 clang-16 clang-13; do
  if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
done
[ -n "$CC" ] || skip "no clang in PATH"
CXX=${CC/clang/clang++}
command -v "$CXX" >/dev/null 2>&1 || CXX=clang++
command -v "$CXX" >/dev/null 2>&1 || skip "no clang++ in PATH"

if [ -n "${BRISKTEST_FUZZ_OUT:-}" ]; then
  W=$BRISKTEST_FUZZ_OUT
  mkdir -p "$W"
else
  W=$(mktemp -d /tmp/brisk-fuzz.XXXXXX)
  trap 'rm -rf "$W"' EXIT
fi

# Is libFuzzer there?
cat >"$W/probe.c" <<'EOF'
int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }
EOF
"$CC" -fsanitize=fuzzer "$W/probe.c" -o "$W/probe" >"$W/probe.log" 2>&1 || skip "$CC -fsanitize=fuzzer failed: $(head -c 300 "$W/probe.log")"

t0=$(date +%s)
echo "[fuzz] building with $CC ($("$CC" --version | head -1))"
COMMON=(-g -O2 -fPIC -D_GNU_SOURCE -DBRISK_DEBUG_LEVEL=2 "-DBRISK_HARDENED=$HARDENED" -I"$SRC/include" -I"$SRC/src"
  -fvisibility=hidden -fno-semantic-interposition -ftls-model=initial-exec
  -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc
  -fsanitize=fuzzer-no-link -Wno-unused-command-line-argument)
mkdir -p "$W/obj"
built_from_source=1
for f in "$SRC"/src/*/*.c "$SRC"/src/*/*.cpp; do
  [ -e "$f" ] || continue
  o="$W/obj/$(basename "$f").o"
  case "$f" in
    *.cpp) "$CXX" -std=c++17 "${COMMON[@]}" -c "$f" -o "$o" ;;
    */override_new.c) "$CC" -std=gnu11 -fexceptions "${COMMON[@]}" -c "$f" -o "$o" ;;
    *) "$CC" -std=gnu11 "${COMMON[@]}" -c "$f" -o "$o" ;;
  esac >>"$W/build.log" 2>&1 &
  # two compilers at a time
  if [ "$(jobs -rp | wc -l)" -ge 2 ]; then wait -n || built_from_source=0; fi
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || built_from_source=0; done
if [ "$built_from_source" = 1 ]; then
  "$CC" -std=gnu11 -g -O1 -fsanitize=fuzzer -I"$SRC/include" -c "$SRC/fuzz/fuzz_ops.c" -o "$W/fuzz_ops.o" >>"$W/build.log" 2>&1 &&
    "$CXX" -fsanitize=fuzzer "$W/fuzz_ops.o" "$W"/obj/*.o -lpthread -o "$W/fuzz_ops" >>"$W/build.log" 2>&1 ||
    built_from_source=0
fi
if [ "$built_from_source" = 0 ]; then
  echo "[fuzz] FAILED: brisk's sources or the fuzz target do not build with $CC:"
  tail -30 "$W/build.log" | sed 's/^/    /'
  exit 1
fi
echo "[fuzz] built in $(( $(date +%s) - t0 )) s$([ "$HARDENED" = 1 ] && echo ' (hardened)')"

# Corpus: a copy of the seeds (libFuzzer adds what it finds to the first directory).
mkdir -p "$W/corpus"
cp "$SRC"/fuzz/corpus/* "$W/corpus/" 2>/dev/null || true
nseeds=$(ls "$W/corpus" | wc -l)
[ "$nseeds" -gt 0 ] || echo "[fuzz] NOTE: no seed corpus in $SRC/fuzz/corpus (run fuzz/make_corpus.py)"

# A clean brisk environment, errors are crashes.
for v in $(compgen -e | grep '^BRISK_'); do unset "$v"; done
export BRISK_ON_ERROR=abort
# The heap profiler on, sampling about every 4 KiB allocated: its paths
# (samples, their frees, the stack walks checked against libgcc's) under
# the same sequences; the profile is written into the work directory.
if [ "$PROFILE" = 1 ]; then
  export BRISK_PROFILE="$W/profile" BRISK_PROFILE_RATE=4096
  echo "[fuzz] heap profiler on (BRISK_PROFILE_RATE=4096)"
fi

echo "[fuzz] fuzzing for ${FUZZ_SECONDS} s from $nseeds seed inputs"
t1=$(date +%s)
# A new seed each run (so the suite explores further every time), printed so
# that a failing run can be repeated with BRISKTEST_FUZZ_SEED.
SEED=${BRISKTEST_FUZZ_SEED:-$(( (RANDOM << 15 | RANDOM) % 2147483646 + 1 ))}
knobs="$([ "$HARDENED" = 1 ] && echo 'BRISKTEST_FUZZ_HARDENED=1 ')$([ "$PROFILE" = 1 ] && echo 'BRISKTEST_FUZZ_PROFILE=1 ')"
echo "[fuzz] seed $SEED (replay this run: ${knobs}BRISKTEST_FUZZ_SEED=$SEED bash tests/test_fuzz.sh)"
args=(-max_total_time="$FUZZ_SECONDS" -timeout=30 -rss_limit_mb=4096 -max_len=2500 -print_final_stats=1
  -seed="$SEED" -artifact_prefix="$W/")
if [ "$JOBS" -gt 1 ]; then args+=(-jobs="$JOBS" -workers="$JOBS"); fi
(cd "$W" && ./fuzz_ops "${args[@]}" corpus >"$W/fuzz.log" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - t1 ))
execs=$(grep -h 'stat::number_of_executed_units' "$W"/fuzz.log "$W"/fuzz-*.log 2>/dev/null | awk '{s+=$2} END {print s+0}')
grown=$(ls "$W/corpus" | wc -l)

crashes=$(ls "$W"/crash-* "$W"/timeout-* "$W"/oom-* "$W"/leak-* 2>/dev/null)
if [ $rc -ne 0 ] || [ -n "$crashes" ] || grep -q "fuzz_ops: model mismatch\|brisk: error:\|brisk: assertion failed" "$W"/fuzz*.log; then
  echo "[fuzz] FAILED after ${elapsed} s (libFuzzer exit status $rc, $execs inputs run, seed $SEED)"
  grep -h -B2 -A30 "fuzz_ops: model mismatch\|brisk: error:\|brisk: assertion\|==ERROR\|deadly signal\|Test unit written" "$W"/fuzz*.log |
    head -80 | sed 's/^/    /'
  mkdir -p "$ART"
  for c in $crashes; do
    cp "$c" "$ART/"
    echo "[fuzz] input kept: $ART/$(basename "$c") ($(stat -c %s "$c") bytes); first operations:"
    od -An -tx1 -w5 -v "$c" | head -12 | sed 's/^/      op a b c d:/'
    echo "[fuzz] replay: BRISK_ON_ERROR=abort <fuzz_ops> $ART/$(basename "$c")"
    echo "       (build <fuzz_ops> with BRISKTEST_FUZZ_OUT=dir bash tests/test_fuzz.sh, see fuzz/README.md)"
  done
  exit 1
fi
echo "[fuzz] ok: $execs inputs in ${elapsed} s, corpus $nseeds -> $grown inputs, no crash"
exit 0
