#!/usr/bin/env bash
# The fuzzer of test_fuzz.sh against the hardened build (guard pages, fill
# patterns, allocation kinds, shuffled pages), from the same seed corpus,
# for 30 s (BRISKTEST_FUZZ_HARDENED_SECONDS). It fails, skips and keeps a
# crashing input as test_fuzz.sh does, and prints the command that replays
# the run. The seed fuzz/corpus/seed-huge_page_steps alone crashes a build
# whose huge blocks lose their guard page when realloc resizes them in
# place.
export BRISKTEST_FUZZ_HARDENED=1
export BRISKTEST_FUZZ_SECONDS=${BRISKTEST_FUZZ_HARDENED_SECONDS:-30}
exec bash "$(dirname "${BASH_SOURCE[0]}")/test_fuzz.sh"
