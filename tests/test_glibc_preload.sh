#!/usr/bin/env bash
# glibc's allocator extras (malloc_trim, mallinfo2, mallinfo, malloc_info,
# malloc_stats, mallopt) from a plain C program that knows nothing of brisk:
# tests/test_glibc_extras.c compiled here against glibc only (no brisk
# header, no -lbrisk), then
#   1. run under LD_PRELOAD=$BRISKTEST_LIB: every check of the program passes
#      with brisk's answers (it finds brisk through dlsym);
#   2. run without it: the same program passes on glibc's own functions, so
#      its checks hold for what it measures, not for brisk alone;
#   3. malloc_info's XML is parsed with python3's xml.etree, under brisk and
#      under glibc: both are well-formed and have the same shape (glibc's
#      elements in glibc's order, each <heap> with the same children), and
#      brisk's totals match brisk_stats_json taken right after it
#      (BRISK_BACKGROUND=0, so nothing moves between the two): mmap count
#      and size = huge_blocks and huge_block_bytes, rest = free_chunks and
#      free_bytes, system current + mmap size = mapped_bytes, system max =
#      mapped_bytes_peak, the heaps' system sizes whole 4 MiB segments.
# A missing gcc or python3 is a skip (exit 77), a failure under CI=true.
set -u
lib=${BRISKTEST_LIB:-}
src=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
SKIP_NAME="[preload]"
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
[ -n "$lib" ] && [ -f "$lib" ] || { echo "[preload] FAILED: BRISKTEST_LIB is not set or not a file ('$lib')"; exit 1; }
command -v gcc >/dev/null || skip "gcc not found"
command -v python3 >/dev/null || skip "python3 not found"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok()  { echo "[preload] $1: ok"; }
bad() { echo "[preload] $1: FAILED: $2"; fails=$((fails + 1)); }

prog=$tmp/extras
if ! gcc -O2 -Wall -Wextra -o "$prog" "$src/tests/test_glibc_extras.c" -ldl -pthread >"$tmp/cc.log" 2>&1; then
  echo "[preload] FAILED: gcc could not build tests/test_glibc_extras.c against glibc:"; sed 's/^/      | /' "$tmp/cc.log"
  exit 1
fi
if ldd "$prog" | grep -q brisk; then bad "build" "the program is linked to brisk: $(ldd "$prog" | grep brisk)"
else ok "tests/test_glibc_extras.c built against glibc alone"; fi

run() { # name expect-word env...
  local name=$1 want=$2; shift 2
  env "$@" "$prog" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ]; then bad "$name" "exited $rc"; sed 's/^/      | /' "$tmp/out" | grep -v ': ok$' | head -30
  elif ! grep -q "extras are $want" "$tmp/out"; then bad "$name" "the program did not find $want extras: $(head -1 "$tmp/out")"
  else ok "$name ($(grep -c ' ok$' "$tmp/out") sections; $(grep 'malloc_trim(0) =' "$tmp/out" | sed 's/^\[extras\] *//'))"; fi
}
run "LD_PRELOAD=libbrisk.so" "brisk's" LD_PRELOAD="$lib"
run "glibc alone" "glibc's"

# malloc_info under each, with brisk's JSON right after it.
env LD_PRELOAD="$lib" BRISK_BACKGROUND=0 "$prog" "$tmp/brisk.xml" "$tmp/brisk.json" 2>"$tmp/err" \
  || bad "malloc_info dump (brisk)" "exited $?: $(head -3 "$tmp/err")"
"$prog" "$tmp/glibc.xml" "$tmp/glibc.json" 2>"$tmp/err" || bad "malloc_info dump (glibc)" "exited $?"

python3 - "$tmp/brisk.xml" "$tmp/brisk.json" "$tmp/glibc.xml" >"$tmp/py.out" 2>&1 <<'EOF'
import json, sys
import xml.etree.ElementTree as ET

def shape(root):
    """What a tool reading glibc's output relies on: the top-level elements
    in order, each <heap>'s children (the sizes list aside)."""
    top = [(e.tag, e.get("type")) for e in root if e.tag != "heap"]
    heaps = [[(c.tag, c.get("type")) for c in h] for h in root.findall("heap")]
    return top, heaps

def totals(root):
    return {(e.tag, e.get("type")): e for e in root if e.tag != "heap"}

fails = []
brisk = ET.parse(sys.argv[1]).getroot()   # raises on XML that is not well-formed
glibc = ET.parse(sys.argv[3]).getroot()
stats = json.load(open(sys.argv[2]))
if brisk.tag != "malloc" or brisk.get("version") != "brisk-0.1.0":
    fails.append(f"root <{brisk.tag} version={brisk.get('version')}>")
btop, bheaps = shape(brisk)
gtop, gheaps = shape(glibc)
if btop != gtop:
    fails.append(f"top-level elements {btop} differ from glibc's {gtop}")
for i, h in enumerate(bheaps):
    if gheaps and h != gheaps[0]:
        fails.append(f"heap {i}: children {h} differ from glibc's {gheaps[0]}")
if not bheaps:
    fails.append("no <heap> element")
t = totals(brisk)
def num(key, attr):
    return int(t[key].get(attr))
want = {
    "mmap count = huge_blocks": (num(("total", "mmap"), "count"), stats["huge_blocks"]),
    "mmap size = huge_block_bytes": (num(("total", "mmap"), "size"), stats["huge_block_bytes"]),
    "rest count = free_chunks": (num(("total", "rest"), "count"), stats["free_chunks"]),
    "rest size = free_bytes": (num(("total", "rest"), "size"), stats["free_bytes"]),
    "system current + mmap size = mapped_bytes":
        (num(("system", "current"), "size") + num(("total", "mmap"), "size"), stats["mapped_bytes"]),
    "system max = mapped_bytes_peak": (num(("system", "max"), "size"), stats["mapped_bytes_peak"]),
    "fast = 0": (num(("total", "fast"), "size"), 0),
}
for what, (got, exp) in want.items():
    if got != exp:
        fails.append(f"{what}: {got} in the XML, {exp} in brisk_stats_json")
if stats["huge_blocks"] < 2:
    fails.append(f"the program holds 2 huge blocks, huge_blocks is {stats['huge_blocks']}")
heap_system = 0
for h in brisk.findall("heap"):
    cur = int(h.find("system[@type='current']").get("size"))
    rest = int(h.find("total[@type='rest']").get("size"))
    heap_system += cur
    if cur == 0 or cur % (4 << 20) or rest > cur:
        fails.append(f"heap {h.get('nr')}: system {cur}, rest {rest}")
if heap_system > num(("system", "current"), "size"):
    fails.append(f"the heaps' system sizes add up to {heap_system}, above the total")
for f in fails:
    print("FAIL", f)
print(f"{len(bheaps)} heaps; mmap {num(('total', 'mmap'), 'count')} blocks, {num(('total', 'mmap'), 'size')} bytes; "
      f"system {num(('system', 'current'), 'size')}; glibc's: {len(gheaps)} heap(s), {len(gtop)} totals")
sys.exit(1 if fails else 0)
EOF
if [ $? -ne 0 ]; then bad "malloc_info XML" "$(cat "$tmp/py.out")"; sed 's/^/      | /' "$tmp/brisk.xml" | tail -12
else ok "malloc_info XML parses (xml.etree), has glibc's shape, totals match brisk_stats_json: $(tail -1 "$tmp/py.out")"; fi

if [ $fails -ne 0 ]; then echo "[preload] FAILED: $fails checks"; exit 1; fi
echo "[preload] all checks passed"
