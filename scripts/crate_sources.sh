#!/usr/bin/env bash
# Copy brisk's C sources into the brisk-sys crate (rust/brisk-sys/csrc), so
# that the crate cargo packages carries them: csrc/src, csrc/include and the
# licence. Run before `cargo package` (make crates, and the crates' package
# test); never edit csrc by hand. Inside the repository the crate builds from
# ../../src itself (build.rs), so a stale csrc is never compiled there, and
# the package test compares the copy with src/ before it packages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/rust/brisk-sys/csrc"
rm -rf "$out"
mkdir -p "$out/src" "$out/include"
cp -r "$root"/src/. "$out/src/"
cp "$root"/include/*.h "$out/include/"
cp "$root/LICENSE" "$root/rust/brisk-sys/LICENSE"
cp "$root/LICENSE" "$root/rust/brisk/LICENSE"
echo "crate_sources: $(find "$out/src" -type f | wc -l) files of src/ and $(ls "$out/include" | wc -l) of include/ copied into rust/brisk-sys/csrc"
