#!/usr/bin/env bash
# Instructions per fast-path round, calling loop included, counted with
# callgrind over N and 2N rounds (the difference divided by N), which
# repeats exactly, unlike times on a shared machine. Two rounds:
#   pair     malloc(32) + free
#   usable   malloc(256) + malloc_usable_size + free
#
#   scripts/fastpath_counts.sh [libbrisk.so]           measure brisk and the peers
#                                                      found, write the record
#   scripts/fastpath_counts.sh --check [libbrisk.so]   compare brisk with the record
#
# The hardened build (libbrisk-hardened.so beside libbrisk.so) is counted
# too, on the pair round (brisk-hardened.pair). The record is
# bench/fastpath_counts.txt. --check fails when a count cannot be taken
# (the hardened library missing included), when brisk's count grew by
# more than half an instruction, and when it fell by more than one: then
# the record is out of date and must be written again (run without
# --check and commit it).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
lib="$(readlink -f "${1:-build/libbrisk.so}")"
record=bench/fastpath_counts.txt
[ -f "$lib" ] || { echo "fastpath_counts: no library at $lib"; exit 1; }
hardened="$(dirname "${1:-build/libbrisk.so}")/libbrisk-hardened.so"
[ -e "$hardened" ] || { echo "fastpath_counts: no hardened library at $hardened (build it first)"; exit 1; }
hardened="$(readlink -f "$hardened")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cc -O2 -fno-builtin bench/fastpath.c -o "$tmp/fastpath"
N=1000000

# count PRELOAD ROUNDS SIZE MODE: callgrind's total, or a message and failure.
count() {
  local out rc=0
  out=$(env ${1:+LD_PRELOAD="$1"} valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
        "$tmp/fastpath" "$2" "$3" "$4" 2>&1) || rc=$?
  local n
  n=$(printf '%s\n' "$out" | sed -n 's/.*Collected : \([0-9][0-9]*\).*/\1/p' | tail -1)
  if [ $rc -ne 0 ] || [ -z "$n" ] || [ "$n" -le 0 ]; then
    echo "fastpath_counts: no instruction count from valgrind (exit status $rc) for" \
         "${1:-glibc}, $2 rounds:" >&2
    printf '%s\n' "$out" | tail -5 | sed 's/^/    /' >&2
    return 1
  fi
  echo "$n"
}

# per_round PRELOAD SIZE MODE: instructions per round, one decimal.
per_round() {
  local a b
  a=$(count "$1" $N "$2" "$3") || return 1
  b=$(count "$1" $((2 * N)) "$2" "$3") || return 1
  if [ "$b" -le "$a" ]; then
    echo "fastpath_counts: $((2 * N)) rounds counted no more than $N ($b <= $a)" >&2
    return 1
  fi
  awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }'
}

if [ $check = 1 ]; then
  fails=0
  for round in "brisk pair 32 pair" "brisk usable 256 usable" "brisk-hardened pair 32 pair"; do
    set -- $round
    name=$1; shift
    which="$lib"; [ "$name" = brisk ] || which="$hardened"
    recorded=$(awk -v k="$name.$1" '$1 == k { print $2 }' "$record")
    [ -n "$recorded" ] || { echo "fastpath_counts: $record has no line '$name.$1'"; exit 1; }
    now=$(per_round "$which" "$2" "$3") || exit 1
    echo "$name $1: $now instructions per round (recorded: $recorded)"
    if awk -v now="$now" -v rec="$recorded" 'BEGIN { exit !(now > rec + 0.5) }'; then
      echo "fastpath_counts: $name's $1 round grew: $now > $recorded instructions"; fails=1
    elif awk -v now="$now" -v rec="$recorded" 'BEGIN { exit !(now < rec - 1) }'; then
      echo "fastpath_counts: $name's $1 round is cheaper than recorded ($now < $recorded):"
      echo "  the record is out of date; write it again with scripts/fastpath_counts.sh and commit it"
      fails=1
    fi
  done
  exit $fails
fi

# The peers: the process's own malloc (glibc), Debian's packages, and any
# library named in BRISK_PEERS as name=path,name=path (not needed for --check).
peers=("glibc=")
for p in mimalloc=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 \
         jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
         tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
  [ -e "${p#*=}" ] && peers+=("$p")
done
IFS=, read -r -a extra <<<"${BRISK_PEERS:-}"
peers+=("${extra[@]}")
{
  echo "# instructions per round, calling loop included: callgrind over $N and $((2 * N))"
  echo "# rounds, difference / $N (scripts/fastpath_counts.sh)"
  echo "#   pair:   malloc(32) + free"
  echo "#   usable: malloc(256) + malloc_usable_size + free"
  echo "# $(date -u +%Y-%m-%d), $(cc --version | head -1)"
  for round in "pair 32 pair" "usable 256 usable"; do
    set -- $round
    echo "brisk.$1 $(per_round "$lib" "$2" "$3")"
    [ "$1" = pair ] && echo "brisk-hardened.$1 $(per_round "$hardened" "$2" "$3")"
    for p in "${peers[@]}"; do
      [ -n "$p" ] || continue
      v=$(per_round "${p#*=}" "$2" "$3" 2>/dev/null) || v="n/a"
      echo "${p%%=*}.$1 $v"
    done
  done
} > "$tmp/record"
mv "$tmp/record" "$record"
cat "$record"
