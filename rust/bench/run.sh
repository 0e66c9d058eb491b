#!/usr/bin/env bash
# Rust allocation patterns (benches/patterns.rs): brisk against the system
# allocator (glibc), mimalloc, snmalloc and jemalloc, one bench binary per
# allocator. Prints a markdown table of median times and their ratio to
# brisk's (above 1: slower than brisk).
#
#   rust/bench/run.sh [ROUNDS] [criterion options...]
#
# Every allocator is built first; one that does not build is left out with
# its log named. Then ROUNDS rounds (default 2, the order reversed every
# other round) run each binary under `flock /tmp/brisk-bench.lock`, so that
# no two measurements on this machine overlap; a cell is the lowest of its
# rounds' criterion medians (the least disturbed run).
set -euo pipefail
cd "$(dirname "$0")"

rounds=${1:-2}
[ $# -gt 0 ] && shift
allocators=(brisk system mimalloc snmalloc jemalloc)
out=target/patterns
mkdir -p "$out"
rm -rf "$out"/round-*

features() { [ "$1" = system ] && echo "" || echo "--features $1"; }

built=()
for a in "${allocators[@]}"; do
  # shellcheck disable=SC2046
  if cargo bench --no-run --bench "$a" $(features "$a") >"$out/build-$a.log" 2>&1; then
    built+=("$a")
  else
    echo "$a: did not build, left out (rust/bench/$out/build-$a.log)" >&2
  fi
done

for ((r = 1; r <= rounds; r++)); do
  order=("${built[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#built[@]} - 1; i >= 0; i--)); do order+=("${built[$i]}"); done
  fi
  for a in "${order[@]}"; do
    echo "round $r/$rounds: $a" >&2
    # shellcheck disable=SC2046
    flock /tmp/brisk-bench.lock cargo bench -q --bench "$a" $(features "$a") -- "$@" \
      >"$out/run-$a-$r.log" 2>&1
    for est in target/criterion/*/"$a"/new/estimates.json; do
      pattern=$(basename "$(dirname "$(dirname "$(dirname "$est")")")")
      mkdir -p "$out/round-$r/$pattern"
      cp "$est" "$out/round-$r/$pattern/$a.json"
    done
  done
done

python3 - "$out" "${built[@]}" <<'EOF'
import glob, json, os, sys

out, allocators = sys.argv[1], sys.argv[2:]
best = {}  # (pattern, allocator) -> lowest median over the rounds, ns
for path in glob.glob(os.path.join(out, "round-*", "*", "*.json")):
    pattern = os.path.basename(os.path.dirname(path))
    allocator = os.path.basename(path)[: -len(".json")]
    median = json.load(open(path))["median"]["point_estimate"]
    key = (pattern, allocator)
    best[key] = min(best.get(key, median), median)

order = ["vec_growth_small", "vec_growth_large", "box_churn", "string_building",
         "hashmap_insert_remove", "cross_thread_drop"]
patterns = [p for p in order if any((p, a) in best for a in allocators)]

def fmt(ns):
    return f"{ns / 1000:.1f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"

print("| pattern | " + " | ".join(allocators) + " |")
print("|---|" + "---|" * len(allocators))
for p in patterns:
    base = best.get((p, "brisk"))
    cells = []
    for a in allocators:
        t = best.get((p, a))
        if t is None:
            cells.append("-")
        elif a == "brisk" or base is None:
            cells.append(fmt(t))
        else:
            cells.append(f"{fmt(t)} ({t / base:.2f})")
    print(f"| {p} | " + " | ".join(cells) + " |")
EOF
