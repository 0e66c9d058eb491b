#!/usr/bin/env bash
# brisk's fast-path rounds (malloc(32)/free; malloc(256)/malloc_usable_size/
# free) must cost what bench/fastpath_counts.txt records: not more (a
# regression) and not less (an out-of-date record). Instruction counts under
# callgrind repeat exactly, so this is not a timing test.
set -euo pipefail
cd "${BRISKTEST_SOURCE_DIR:-$(dirname "$0")/..}"
if ! command -v valgrind >/dev/null; then
  echo "test_fastpath_counts: FAILED: valgrind missing (scripts/setup.sh installs it)"; exit 1
fi
scripts/fastpath_counts.sh --check "${BRISKTEST_LIB:-build/libbrisk.so}"
