# The two commands of the README:
#   make bench   build brisk and run the benchmark comparison (quick matrix)
#   make test    build brisk and run every test (release, UBSan and TSan builds)
SHELL := /bin/bash
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Tests to leave out, by request: `make test SKIP=fuzz,real_programs,rust`
# (a name is a test's name without `test_`, matched as a prefix; `rust`
# is the Rust crates). A test that cannot run and is not named here (it
# exits 77, which ctest reports as skipped) fails the run.
SKIP ?=
comma := ,
empty :=
space := $(empty) $(empty)
SKIP_LIST := $(strip $(subst $(comma),$(space),$(SKIP)))
SKIP_TESTS := $(filter-out rust,$(SKIP_LIST))
CTEST_SKIP := $(if $(SKIP_TESTS),-E "^test_($(subst $(space),|,$(SKIP_TESTS)))",)
# ctest (its status kept through tee), then a failure if any test was
# skipped without being asked to be
CTEST_RUN = ctest --output-on-failure -j $(JOBS) $(CTEST_SKIP)
CTEST_CHECK = if grep -q "(Skipped)" ctest.log; then \
	  echo "make test: FAILED: tests that could not run (above); name them in SKIP to leave them out:"; \
	  grep "(Skipped)" ctest.log; exit 1; fi

.PHONY: all setup build bench bench-full test test-release test-sanitize test-rust deb clean

all: build

setup:
	@bash scripts/setup.sh

build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j $(JOBS)

bench: setup build
	python3 bench/harness.py --quick

bench-full: setup build
	python3 bench/harness.py --full

test-release: build
	cd build && { set -o pipefail; $(CTEST_RUN) --timeout 300 | tee ctest.log; } && $(CTEST_CHECK)

test-sanitize:
	cmake -S . -B build-ubsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=undefined -DBRISK_DEBUG_LEVEL=2 -DBRISK_BUILD_BENCH=OFF >/dev/null
	cmake --build build-ubsan -j $(JOBS)
	cd build-ubsan && { set -o pipefail; UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(CTEST_RUN) -L sanitize | tee ctest.log; } && $(CTEST_CHECK)
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=thread -DBRISK_BUILD_BENCH=OFF >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && { set -o pipefail; TSAN_OPTIONS=halt_on_error=1 $(CTEST_RUN) -L tsan | tee ctest.log; } && $(CTEST_CHECK)

# The Rust crates (rust/): the tests, again with the override and hardened
# features, clippy, and the crates as packaged (rust/package_test.sh).
test-rust:
	@if [ -n "$(filter rust,$(SKIP_LIST))" ]; then \
	  echo "test-rust: left out by request (SKIP=$(SKIP))"; \
	elif ! command -v cargo >/dev/null 2>&1; then \
	  echo "test-rust: FAILED: cargo not found; the Rust tests need a Rust toolchain (rustup, stable), or make test SKIP=rust" >&2; exit 1; \
	else \
	  set -ex; cd rust; \
	  cargo test --workspace --features brisk/serde; \
	  cargo test -p brisk-sys -p brisk --tests --features brisk/serde,brisk/override,brisk/hardened; \
	  cargo clippy --workspace --all-targets -- -D warnings; \
	  cargo clippy --workspace --all-targets --all-features -- -D warnings; \
	  bash package_test.sh; \
	  bash checker_test.sh; \
	fi

# Debian packages (libbrisk0, libbrisk-dev) into build-deb/, checked by lintian.
deb: setup
	bash scripts/deb.sh build-deb

test: setup test-release test-sanitize test-rust
	@echo "make test: passed: the release build's tests, the UBSan and TSan builds' labelled tests$(if $(filter rust,$(SKIP_LIST)),, and the Rust crates)$(if $(SKIP_LIST),; left out by request: $(SKIP_LIST),; nothing left out)"

clean:
	rm -rf build build-ubsan build-tsan
