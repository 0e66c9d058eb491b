#!/usr/bin/env bash
# What a free on another thread costs, its share of the owner's take-back
# included: instructions, and the first-level and last-level misses of
# callgrind's simulated caches (one cache for both threads: what moving a
# line between cores costs is not in it), per block of bench_handoff
# (bench/handoff.c) at R and 2R rounds, the difference over R * N. For
# each allocator and size: the local round (the owner frees), the remote
# one (the other thread frees, the owner takes back), and remote - local.
#
#   scripts/handoff_counts.sh [name=lib.so ...]
#
# With no argument: brisk (build/libbrisk.so), glibc, and Debian's
# mimalloc, jemalloc and tcmalloc where installed. Needs valgrind and a
# build (build/bench/bench_handoff).
set -euo pipefail
cd "$(dirname "$0")/.."
prog=build/bench/bench_handoff
[ -x "$prog" ] || { echo "handoff_counts: no $prog (build first)"; exit 1; }
command -v valgrind >/dev/null || { echo "handoff_counts: valgrind not found"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

allocs=("$@")
if [ ${#allocs[@]} -eq 0 ]; then
  allocs=("brisk=$(readlink -f build/libbrisk.so)" "glibc=")
  for p in mimalloc=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 \
           jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
           tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
    [ -f "${p#*=}" ] && allocs+=("$p")
  done
fi

# counts LIB MODE N SIZE ROUNDS: "Ir D1 LL" (misses: reads and writes)
counts() {
  local out rc=0
  out=$(valgrind --tool=callgrind --cache-sim=yes --trace-children=yes \
          --callgrind-out-file="$tmp/cg.%p" env ${1:+LD_PRELOAD="$1"} \
          "$prog" "$2" "$3" "$4" "$5" 2>&1) || rc=$?
  local f
  f=$(ls -t "$tmp"/cg.* 2>/dev/null | head -1)
  if [ $rc -ne 0 ] || [ -z "$f" ]; then
    echo "handoff_counts: valgrind failed (status $rc) for ${1:-glibc} $2 $3 $4 $5:" >&2
    printf '%s\n' "$out" | tail -5 | sed 's/^/    /' >&2
    return 1
  fi
  # the totals line: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
  local line
  line=$(sed -n 's/^totals: //p' "$f" | tail -1)
  rm -f "$tmp"/cg.*
  [ -n "$line" ] || { echo "handoff_counts: no totals for ${1:-glibc}" >&2; return 1; }
  set -- $line
  echo "$1 $(($5 + $6)) $(($8 + $9))"
}

# per_block LIB MODE N SIZE R: "Ir D1 LL" per block, one decimal
per_block() {
  local a b
  a=$(counts "$1" "$2" "$3" "$4" "$5") || return 1
  b=$(counts "$1" "$2" "$3" "$4" $(($5 * 2))) || return 1
  awk -v a="$a" -v b="$b" -v n=$(($3 * $5)) 'BEGIN {
    split(a, x, " "); split(b, y, " ");
    printf "%.1f %.2f %.2f", (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n }'
}

printf '| allocator | size | local: instr, D1, LL | remote: instr, D1, LL | remote - local: instr, D1, LL |\n'
printf '|---|---|---|---|---|\n'
for a in "${allocs[@]}"; do
  name=${a%%=*}; lib=${a#*=}
  for spec in "64 1000 40" "131072 64 40"; do
    set -- $spec
    size=$1 n=$2 r=$3
    l=$(per_block "$lib" local "$n" "$size" "$r") || { echo "| $name | $size | failed | | |"; continue; }
    m=$(per_block "$lib" remote "$n" "$size" "$r") || { echo "| $name | $size | $l | failed | |"; continue; }
    d=$(awk -v l="$l" -v m="$m" 'BEGIN { split(l, x, " "); split(m, y, " ");
          printf "%.1f, %.2f, %.2f", y[1] - x[1], y[2] - x[2], y[3] - x[3] }')
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$size" "${l// /, }" "${m// /, }" "$d"
  done
done
