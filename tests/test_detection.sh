#!/usr/bin/env bash
# brisk's rows of the detection table in docs/SECURITY.md ("What it
# catches, measured"), measured again: scripts/detection_table.py --check
# runs every attack of tests/attack_probe.c and attack_probe_cxx.cpp under
# libbrisk.so (also with every allocation a guarded sample,
# BRISK_GUARD_RATE=1) and libbrisk-hardened.so and compares each cell with EXPECTED
# in the script. Any cell that differs fails the test, a detection that
# became a miss as much as a miss that became a detection: either way the
# table in the docs is stale (measure it again with the command given
# there, then update EXPECTED and the table together).
# Without the hardened library (-DBRISK_HARDENED=OFF) the test exits 77
# (skipped); with CI=true that is a failure.
set -u
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
build="${BRISKTEST_BUILD_DIR:-$src/build}"
bin="${BRISKTEST_BIN_DIR:-$build/tests}"
lib="${BRISKTEST_LIB:-$build/libbrisk.so}"
hardened="$build/libbrisk-hardened.so"
SKIP_NAME="test_detection"
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
[ -e "$hardened" ] || skip "$hardened not built (-DBRISK_HARDENED=OFF?)"
command -v python3 >/dev/null || skip "python3 is not installed"
tmp=$(mktemp -d /tmp/brisk-detection.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
python3 "$src/scripts/detection_table.py" --check --bin-dir "$bin" --json "$tmp/cells.json" \
  brisk="$lib" brisk-hardened="$hardened" brisk-guards="$lib,BRISK_GUARD_RATE=1"
rc=$?
if [ $rc -ne 0 ]; then
  keep="/tmp/test_detection-$$.json"
  cp "$tmp/cells.json" "$keep" 2>/dev/null && echo "test_detection: every cell's stdout and stderr: $keep"
  echo "test_detection: FAIL ($((SECONDS - start)) s)"
  exit 1
fi
echo "test_detection: ok: brisk's rows as in docs/SECURITY.md ($((SECONDS - start)) s)"
