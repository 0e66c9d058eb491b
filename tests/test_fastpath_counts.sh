#!/usr/bin/env bash
# The malloc(32)/free fast path must not grow past the recorded count
# (bench/fastpath_counts.txt). Instruction counts under callgrind repeat
# exactly, so this is not a timing test.
set -euo pipefail
cd "${BRISKTEST_SOURCE_DIR:-$(dirname "$0")/..}"
if ! command -v valgrind >/dev/null; then
  echo "test_fastpath_counts: valgrind missing (scripts/setup.sh installs it)"; exit 1
fi
scripts/fastpath_counts.sh --check "${BRISKTEST_LIB:-build/libbrisk.so}"
echo "1 passed, 0 failed"
