# Sourced by the shell tests: `skip WHY` ends a test that cannot run here
# with status 77 (ctest: skipped, never passed), or, under CI (CI=true),
# where nothing may be skipped, as a failure. SKIP_NAME is the prefix of
# the test's lines.
skip() {
  if [ "${CI:-}" = true ]; then echo "$SKIP_NAME: FAIL: $* (with CI=true nothing may be skipped)"; exit 1; fi
  echo "$SKIP_NAME: SKIPPED: $*"
  exit 77
}
