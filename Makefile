# The two commands of the README:
#   make bench   build brisk and run the benchmark comparison (quick matrix)
#   make test    build brisk and run every test (release, UBSan and TSan builds)
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build bench bench-full test test-release test-sanitize test-rust clean

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
	cd build && ctest --output-on-failure -j $(JOBS) --timeout 300

test-sanitize:
	cmake -S . -B build-ubsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=undefined -DBRISK_DEBUG_LEVEL=2 -DBRISK_BUILD_BENCH=OFF >/dev/null
	cmake --build build-ubsan -j $(JOBS)
	cd build-ubsan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -L sanitize
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_SANITIZE=thread -DBRISK_BUILD_BENCH=OFF >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -L tsan

# The Rust crates (rust/): the tests, again with the override and hardened
# features, and clippy.
test-rust:
	@if ! command -v cargo >/dev/null 2>&1; then \
	  if [ "$$CI" = "true" ]; then \
	    echo "test-rust: FAILED: cargo not found; the Rust tests need a Rust toolchain (rustup, stable)" >&2; exit 1; \
	  fi; \
	  echo "*** test-rust SKIPPED: cargo not found (install Rust with rustup to run the Rust tests) ***"; \
	else \
	  set -ex; cd rust; \
	  cargo test --workspace --features brisk/serde; \
	  cargo test -p brisk-sys -p brisk --tests --features brisk/serde,brisk/override,brisk/hardened; \
	  cargo clippy --workspace --all-targets -- -D warnings; \
	  cargo clippy --workspace --all-targets --all-features -- -D warnings; \
	fi

test: setup test-release test-sanitize test-rust

clean:
	rm -rf build build-ubsan build-tsan
