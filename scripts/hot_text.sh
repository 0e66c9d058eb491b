#!/usr/bin/env bash
# Write cmake/hot-text.list (cmake/hot-text-hardened.list for
# libbrisk-hardened.so): the functions of libbrisk that ordinary
# processes run, which the shared libraries' link puts first in their text
# (cmake/text_layout.cmake).
#
# The kernel maps a file's pages around each page fault in 64 KiB windows
# (fault-around), so a library whose start-up and allocation paths are
# spread over its text has all of it resident in every process. The
# functions listed are those callgrind sees run, under the library, by a
# few small programs: the cache, random, size-range (huge blocks too),
# request, realloc and messaging workloads (with purges at the default
# delay, at once and after 1 ms), ls and python, and the contended lock
# path, which callgrind cannot see. A function not listed still works; it only costs
# its window's pages when it runs. tests/test_text_layout.sh checks the
# resident text of a small process.
#
#   scripts/hot_text.sh [libbrisk.so]     (needs valgrind; after make build)
#   scripts/hot_text.sh build/libbrisk-hardened.so
set -euo pipefail
cd "$(dirname "$0")/.."
lib="$(readlink -f "${1:-build/libbrisk.so}")"
bin=build/bench
out=cmake/hot-text.list
case "$(basename "$lib")" in libbrisk-hardened*) out=cmake/hot-text-hardened.list ;; esac
[ -f "$lib" ] || { echo "hot_text: no library at $lib"; exit 1; }
command -v valgrind >/dev/null || { echo "hot_text: valgrind is needed"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
runs=(
  "$bin/bench_cache thrash 20000"
  "$bin/bench_random st 20000"
  "$bin/bench_sizes linear 20000"
  "$bin/bench_requests 4"
  "$bin/bench_realloc 20000"
  "$bin/bench_msgpipe 20000"
  "$bin/bench_xmalloc 20000"
  "$bin/bench_sizes large 8"
  "$bin/bench_sizes midlarge 20000"
  "ls -la /usr/lib"
  "python3 -c pass"
)
i=0
run() { # delay, command...
  i=$((i + 1))
  BRISK_PURGE_DELAY=$1 LD_PRELOAD="$lib" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$i" "${@:2}" \
    >"$tmp/out.$i" 2>&1 || { echo "hot_text: '${*:2}' failed under callgrind"; exit 1; }
}
for r in "${runs[@]}"; do
  # shellcheck disable=SC2086
  run 50 $r
done
# shellcheck disable=SC2086
{ run 0 $bin/bench_sizes linear 5000; run 1 $bin/bench_random st 20000; run 1 $bin/bench_requests 8; }
name="$(basename "$lib" | sed 's/\.so.*//')"
for f in "$tmp"/cg.*; do
  { callgrind_annotate --threshold=100 "$f" 2>/dev/null || true; } | sed -n -E "s/.*\?\?\?:([^ ']+)('[0-9]+)? \[.*$name.*/\1/p"
done | { grep -E '^[A-Za-z_][A-Za-z0-9_.]*$' || true; } |
  sed -E 's/\.(part|constprop|isra)\.[0-9]+//g' >"$tmp/seen"
# Valgrind runs one thread at a time, so callgrind never sees a lock
# found held; a program of two threads does, now and then (the waiting
# thread spins in lock_acquire_contended), and that one call made the
# whole text resident.
printf '%s\n' lock_acquire_contended >>"$tmp/seen"
# Returning memory runs when the machine's timing says (the background
# thread's round, the pool's surplus after a set's lock is let go), which
# the serialised threads under valgrind reach less often than a real run.
printf '%s\n' segment_unmap os_unmap unmap_raw pool_poll_slow pool_maintain heaps_background_round park_idle_inbox \
  segment_set_purge_idle lock_wake >>"$tmp/seen"
sort -u "$tmp/seen" >"$tmp/hot"
[ "$(wc -l <"$tmp/hot")" -ge 50 ] || { echo "hot_text: callgrind named too few functions of $lib"; exit 1; }
{
  echo "/* Written by scripts/hot_text.sh: the functions ordinary processes"
  echo "   run, first in libbrisk's text. $(wc -l <"$tmp/hot") functions."
  echo "   Each with its compiler's clones (name.part.N, .constprop.N, .isra.N),"
  echo "   which come and go with the code around a call. */"
  sed -E 's/^(.*)$/*(.text.\1 .text.\1.*)/' "$tmp/hot"
  echo "/* libgcc's helpers (__popcountdi2 where the CPU baseline has no"
  echo "   popcnt instruction): small, and called on these paths */"
  echo "*libgcc.a:*(.text .text.*)"
} >"$out"
echo "hot_text: $(wc -l <"$tmp/hot") functions written to $out"
