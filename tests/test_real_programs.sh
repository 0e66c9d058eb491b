#!/usr/bin/env bash
# Real programs under LD_PRELOAD=$BRISKTEST_LIB, each compared byte for byte with
# the same run without brisk; the wall time of both runs is printed as
#   real program timing: <name> glibc=X.XXs brisk=Y.YYs
#
#   python-threads  python3 (PYTHONMALLOC=malloc, so every object goes through
#                   malloc) with 4 threads building dicts, lists and strings,
#                   regex, sorting, json dumps/loads, hashlib; deterministic
#                   output
#   g++             g++ -O1 -c of a generated C++ file using <map>, <string>,
#                   <vector>, <regex>, <unordered_map>, <set>, <sstream>; the
#                   object files, the linked programs and the programs' output
#                   must be identical
#   sort-*          sort of a generated 1M-line file: a large buffer
#                   (-S 200M), a small buffer with temporary files (-S 2M),
#                   and --parallel=2 with numeric keys
#   everyday tools  ls -laR /usr/include, grep -rn, gzip + gunzip, perl with a
#                   large hash, awk with an associative array, find | sort,
#                   tar
# Every command must exit 0 in both runs, the brisk run must not print
# "brisk: error" or a loader error, and a first check makes sure the preload
# is in effect (python's malloc returns blocks that brisk_owns()).
# A program that is not installed is skipped: the others run, and the test
# then exits 77 (skipped); with CI=true a missing program is a failure.
# BRISKTEST_KEEP=1 keeps the temporary directory for inspection.
set -uo pipefail
: "${BRISKTEST_LIB:?BRISKTEST_LIB must point to libbrisk.so}"
BRISK=$(cd "$(dirname "$BRISKTEST_LIB")" && pwd)/$(basename "$BRISKTEST_LIB")
# the programs run without the test harness's variables (brisk reports
# unknown BRISK_* names); options a user sets (BRISK_VERBOSE...) pass through
unset BRISKTEST_LIB BRISKTEST_SOURCE_DIR BRISKTEST_BUILD_DIR BRISKTEST_BIN_DIR
tmp=$(mktemp -d /tmp/brisk-real.XXXXXX)
if [ "${BRISKTEST_KEEP:-0}" = 1 ]; then
  echo "test_real_programs: keeping $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
failures=0
skipped=()
fail() { echo "test_real_programs: FAIL: $*" >&2; failures=$((failures + 1)); }
# have NAME PROGRAM...: true when every program is installed; otherwise the
# run NAME is skipped (a failure under CI=true)
have() {
  local name=$1 p missing=()
  shift
  for p in "$@"; do command -v "$p" >/dev/null || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${CI:-}" = true ]; then
    fail "$name: ${missing[*]} not installed (with CI=true every program the tests use must be)"
  else
    echo "test_real_programs: SKIP: $name: ${missing[*]} not installed"
    skipped+=("$name")
  fi
  return 1
}
PY=$(python3 -c 'import sys; print(sys.executable)')
CXX=${CXX:-g++}
export tmp PY CXX

# --- is the preload in effect? ------------------------------------------------
owned=$(LD_PRELOAD="$BRISK" "$PY" -c '
import ctypes
lib = ctypes.CDLL(None)
lib.malloc.restype = ctypes.c_void_p
lib.malloc.argtypes = [ctypes.c_size_t]
lib.free.argtypes = [ctypes.c_void_p]
lib.brisk_owns.argtypes = [ctypes.c_void_p]
p = lib.malloc(100)
print(lib.brisk_owns(p))
lib.free(p)' 2>"$tmp/preload.err")
if [ "$owned" != 1 ]; then
  cat "$tmp/preload.err" >&2
  echo "test_real_programs: FAIL: LD_PRELOAD=$BRISK is not in effect in python3 (brisk_owns(malloc(100)) = '$owned')" >&2
  exit 1
fi

# --- inputs -----------------------------------------------------------------------
cat >"$tmp/work.py" <<'EOF'
import collections, hashlib, json, random, re, sys, threading

def work(tid, n, out):
    rnd = random.Random(1000 + tid)
    d = {}
    for i in range(n):
        k = "key-%d-%d-%s" % (tid, i, "x" * rnd.randrange(0, 40))
        d[k] = (i, [rnd.random() for _ in range(rnd.randrange(0, 6))], str(i) * rnd.randrange(1, 5))
    words = collections.Counter()
    text = " ".join(k for k in d if len(k) % 3 == 0)
    for w in re.findall(r"key-(\d+)-(\d+)", text):
        words[w[1][-2:]] += 1
    items = sorted(d.items(), key=lambda kv: (len(kv[0]), kv[0]))
    blob = json.dumps([[k, v[0], v[2]] for k, v in items[:: max(1, n // 5000)]], sort_keys=True)
    back = json.loads(blob)
    big = [bytearray(rnd.randrange(1000, 200000)) for _ in range(200)]
    s = sum(len(b) for b in big)
    del big
    h = hashlib.sha256(blob.encode())
    for k, v in items:
        h.update(k.encode())
        h.update(repr(v[1]).encode())
    chunks = [("%x" % (i * 2654435761 % 4294967296)) * (i % 50) for i in range(n // 4)]
    h.update("".join(sorted(chunks)).encode())
    out[tid] = "thread %d: %d keys, %d json items, %d bytes, top %s, sha256 %s" % (
        tid, len(d), len(back), s, sorted(words.most_common(3)), h.hexdigest())

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
out = [None] * 4
ts = [threading.Thread(target=work, args=(t, n, out)) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(out))
EOF

"$PY" - "$tmp/prog.cpp" 2 <<'EOF'
import sys
path, n = sys.argv[1], int(sys.argv[2])
src = ['''#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
template <int N> struct Rec { std::string name; std::vector<int> vals; std::map<std::string, int> attrs; };
static unsigned long long seed = 12345;
static unsigned rnd() { seed = seed * 6364136223846793005ULL + 1442695040888963407ULL; return (unsigned)(seed >> 33); }
''']
for i in range(n):
    src.append('''
static std::string f%(i)d(int k) {
  std::map<std::string, std::vector<Rec<%(i)d>>> m;
  for (int j = 0; j < k; j++) {
    Rec<%(i)d> r; r.name = "r%(i)d_" + std::to_string(rnd() %% 1000);
    for (int q = 0; q < 20; q++) r.vals.push_back((int)(rnd() %% 100));
    r.attrs[r.name] = j; r.attrs["k" + std::to_string(j %% 7)] = (int)r.vals.size();
    m[r.name.substr(0, 4 + j %% 3)].push_back(std::move(r));
  }
  std::ostringstream os;
  std::regex re("r%(i)d_([0-9]+)");
  long total = 0;
  for (auto &kv : m) for (auto &r : kv.second) {
    std::smatch sm;
    if (std::regex_match(r.name, sm, re)) total += std::stol(sm[1].str());
    total += std::accumulate(r.vals.begin(), r.vals.end(), 0L);
    std::sort(r.vals.begin(), r.vals.end());
  }
  std::unordered_map<int, std::set<std::string>> u;
  for (auto &kv : m) u[(int)kv.first.size()].insert(kv.first);
  os << "f%(i)d " << m.size() << " " << total << " " << u.size();
  return os.str();
}''' % {'i': i})
src.append('int main() {')
for i in range(n):
    src.append('  std::puts(f%d(3000 + %d).c_str());' % (i, i))
src.append('  return 0;\n}')
open(path, 'w').write('\n'.join(src) + '\n')
EOF

awk 'BEGIN { srand(42); for (i = 0; i < 1000000; i++)
  printf "%08x %d %s\n", int(rand() * 4294967295), int(rand() * 1000000),
         substr("abcdefghijklmnopqrstuvwxyzabcdefghij", int(rand() * 26) + 1, 3 + int(rand() * 8)) }' >"$tmp/big.txt"
head -c 8000000 "$tmp/big.txt" >"$tmp/mid.txt"
# warm the page cache so that the first (glibc) run is not penalised
find /usr/include -type f -exec cat {} + >/dev/null 2>&1
ls -laR /usr/include >/dev/null 2>&1

# --- run a command with and without brisk, compare, time ---------------------------
# run_pair NAME COMMAND: COMMAND is a bash snippet run in a fresh directory
# ($tmp/NAME.glibc or $tmp/NAME.brisk); its stdout and every file it leaves
# in that directory are compared.
secs() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }
run_pair() {
  local name=$1 cmd=$2 mode dir t0 t1 rc
  declare -A took
  for mode in glibc brisk; do
    dir="$tmp/$name.$mode"
    mkdir -p "$dir"
    t0=$(date +%s%N)
    if [ $mode = brisk ]; then
      (cd "$dir" && LD_PRELOAD="$BRISK" bash -c "$cmd") >"$tmp/$name.$mode.stdout" 2>"$tmp/$name.$mode.stderr"
    else
      (cd "$dir" && env -u LD_PRELOAD bash -c "$cmd") >"$tmp/$name.$mode.stdout" 2>"$tmp/$name.$mode.stderr"
    fi
    rc=$?
    t1=$(date +%s%N)
    took[$mode]=$((t1 - t0))
    if [ $rc -ne 0 ]; then
      head -c 2000 "$tmp/$name.$mode.stderr" >&2
      if [ $rc -gt 128 ]; then
        fail "$name: the $mode run was killed by signal $((rc - 128)) (command: $cmd)"
      else
        fail "$name: the $mode run exited with status $rc (command: $cmd)"
      fi
    fi
  done
  if grep -qE "brisk: error|brisk: warning|ld\.so|cannot be preloaded" "$tmp/$name.brisk.stderr"; then
    grep -E "brisk:|ld\.so|preload" "$tmp/$name.brisk.stderr" | head -5 >&2
    fail "$name: brisk or the loader complained (above)"
  fi
  if ! cmp -s "$tmp/$name.glibc.stdout" "$tmp/$name.brisk.stdout"; then
    fail "$name: output differs with brisk: $(cmp "$tmp/$name.glibc.stdout" "$tmp/$name.brisk.stdout" 2>&1 | head -1)"
  fi
  local f
  for f in $(cd "$tmp/$name.glibc" && find . -type f | sort); do
    if ! cmp -s "$tmp/$name.glibc/$f" "$tmp/$name.brisk/$f"; then
      fail "$name: file $f differs with brisk"
    fi
  done
  if [ "$(cd "$tmp/$name.glibc" && find . -type f | sort)" != "$(cd "$tmp/$name.brisk" && find . -type f | sort)" ]; then
    fail "$name: the two runs left different files"
  fi
  echo "real program timing: $name glibc=$(secs "${took[glibc]}")s brisk=$(secs "${took[brisk]}")s" \
       "(output $(wc -c <"$tmp/$name.glibc.stdout") bytes)"
}

run_pair python-threads 'PYTHONMALLOC=malloc "$PY" "$tmp/work.py" 15000'
have g++ "$CXX" && run_pair g++ '"$CXX" -O1 -c "$tmp/prog.cpp" -o prog.o && "$CXX" prog.o -o prog && ./prog'
run_pair sort-large-buffer 'LC_ALL=C sort -S 200M "$tmp/big.txt"'
run_pair sort-small-buffer 'LC_ALL=C sort -S 2M -T . "$tmp/big.txt"'
run_pair sort-parallel 'LC_ALL=C sort --parallel=2 -S 100M -k2,2n -k1,1 "$tmp/big.txt"'
run_pair ls-R 'ls -laR /usr/include'
run_pair grep-r 'grep -rn "define.*_MAX" /usr/include'
have gzip-gunzip gzip gunzip md5sum &&
  run_pair gzip-gunzip 'gzip -n -6 -c "$tmp/mid.txt" >mid.gz && gunzip -c mid.gz | cmp - "$tmp/mid.txt" && md5sum <mid.gz'
have perl-hash perl && run_pair perl-hash "perl -e 'my %h; for my \$i (1..300000) { \$h{\"k\$i\"} = [\$i, \"v\" x (\$i % 50)]; }
  my \$s = 0; for my \$k (sort keys %h) { \$s += length(\$h{\$k}[1]) + \$h{\$k}[0]; } print \"\$s\\n\";'"
run_pair awk-assoc 'awk "{ c[\$3]++; s[\$3] += \$2 } END { for (k in c) print k, c[k], s[k] }" "$tmp/mid.txt" | LC_ALL=C sort'
run_pair find-sort 'find /usr/include -name "*.h" | LC_ALL=C sort'
have tar tar md5sum && run_pair tar 'tar -cf - --sort=name --mtime=@0 --owner=0 --group=0 -C /usr/include linux | md5sum'

if [ $failures -ne 0 ]; then
  echo "test_real_programs: $failures failure(s)" >&2
  exit 1
fi
if [ ${#skipped[@]} -ne 0 ]; then
  echo "test_real_programs: SKIPPED: the other runs passed; not run: ${skipped[*]}"
  exit 77
fi
echo "test_real_programs: PASS"
