#!/usr/bin/env bash
# The model of the remote-free protocol (tests/model/remote_free.pml,
# docs/DESIGN.md "The model of the remote-free protocol"), checked with spin:
# the model as the code has it must pass (no assertion violated, no invalid
# end state); the model without the retirement of a heap object on its
# last tag (-DNO_RETIRE) must fail, a batch of a destroyed life being linked
# into a later life once the tag wraps; and the model without the push
# guard (-DNO_PUSH_GUARD) must fail, a push writing into a destroyed life.
# Prints the states and the depth of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model
MODEL=remote_free.pml
TIME=120
TRAIL_QUIET='hd|n|k|k2|b|tag|ok|ph|pt|srv'
. "${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/model/spin_check.sh"

# The protocol as the code has it: heap_destroy retires the object on its
# last tag.
expect_pass fixed

# Without the retirement the tag wraps. With the push guarded (as the
# code has it), the violation found can only be the wrap: a batch whose
# tag matches a later life of its heap object.
expect_violation no_retire "without retirement" \
  '\(inbox_tag!=pt\)\|\|\(s_life\[t\]==g\)|\(s_life\[t\]==\(b/3\)\)' -DNO_RETIRE

# Without the push guard, a push that loaded the old tag writes its tail's
# link after the heap's memory went (one destroy is enough).
expect_violation no_push_guard "without the push guard" 'mem==s_life\[t\]' -DNO_PUSH_GUARD

finish
