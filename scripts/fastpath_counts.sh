#!/usr/bin/env bash
# Instructions per malloc(32)/free pair, loop included, for brisk, glibc and
# Debian's mimalloc: callgrind counts over N and 2N pairs, the difference
# divided by N. Instruction counts repeat exactly, unlike times on a shared
# machine.
#   scripts/fastpath_counts.sh [--check] [libbrisk.so]
# Writes bench/fastpath_counts.txt; with --check, compares brisk's count
# with the recorded one instead and fails if it grew.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
lib="${1:-build/libbrisk.so}"
lib="$(readlink -f "$lib")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cc -O2 -fno-builtin bench/fastpath.c -o "$tmp/fastpath"
N=1000000

count() { # $1: preload ("" for none), $2: pairs
  if [ -n "$1" ]; then
    LD_PRELOAD="$1" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$tmp/fastpath" "$2" 2>&1
  else
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$tmp/fastpath" "$2" 2>&1
  fi | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_pair() {
  local a b
  a=$(count "$1" $N); b=$(count "$1" $((2 * N)))
  awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }'
}

brisk=$(per_pair "$lib")
if [ $check = 1 ]; then
  recorded=$(awk '$1 == "brisk" { print $2 }' bench/fastpath_counts.txt)
  echo "brisk: $brisk instructions per malloc(32)/free pair (recorded: $recorded)"
  awk -v now="$brisk" -v rec="$recorded" 'BEGIN { exit (now > rec + 0.5) ? 1 : 0 }' \
    || { echo "fast path regression: $brisk > $recorded"; exit 1; }
  exit 0
fi
glibc=$(per_pair "")
mi=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
mimalloc=$( [ -e $mi ] && per_pair $mi || echo "n/a")
{
  echo "# instructions per malloc(32)/free pair, calling loop included"
  echo "# (callgrind, $N and $((2 * N)) pairs, difference / $N; scripts/fastpath_counts.sh)"
  echo "# $(date -u +%Y-%m-%d), $(cc --version | head -1), $(dpkg-query -W -f='mimalloc ${Version}' libmimalloc2.0 2>/dev/null || true)"
  echo "brisk $brisk"
  echo "glibc $glibc"
  echo "mimalloc $mimalloc"
} > bench/fastpath_counts.txt
cat bench/fastpath_counts.txt
