#!/usr/bin/env bash
# The crates as crates.io would serve them: the C sources copied into
# brisk-sys (scripts/crate_sources.sh), both crates packaged and checked by
# `cargo publish --dry-run` (which builds each from its .crate file), then a
# new project outside the repository that takes brisk from those .crate
# files (unpacked; the repository's paths are nowhere in its manifest) with
# the one-line global allocator, built and run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bash "$root/scripts/crate_sources.sh"
if ! diff -r "$root/src" "$here/brisk-sys/csrc/src" >/dev/null; then
  echo "package_test: FAIL: rust/brisk-sys/csrc/src differs from src/ after the copy" >&2
  exit 1
fi
cd "$here"
# both crates into target/package, each built from its .crate file (brisk
# against the packaged brisk-sys); then what an upload checks, stopped
# before it (the builds were just made)
rm -f target/package/brisk-sys-0.1.0.crate target/package/brisk-0.1.0.crate
cargo package -p brisk-sys -p brisk --allow-dirty
cargo publish -p brisk-sys -p brisk --dry-run --allow-dirty --no-verify
pkg="$here/target/package"
for c in brisk-sys brisk; do
  test -f "$pkg/$c-0.1.0.crate" || { echo "package_test: FAIL: no $pkg/$c-0.1.0.crate" >&2; exit 1; }
done
listing=$(tar tzf "$pkg/brisk-sys-0.1.0.crate")
if ! grep -q "/csrc/src/alloc/alloc.c$" <<<"$listing" || ! grep -q "/csrc/include/brisk.h$" <<<"$listing"; then
  echo "package_test: FAIL: the brisk-sys crate does not carry its C sources (csrc/src)" >&2; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$pkg/brisk-sys-0.1.0.crate" -C "$tmp"
tar xzf "$pkg/brisk-0.1.0.crate" -C "$tmp"
mkdir -p "$tmp/app/src"
cat >"$tmp/app/Cargo.toml" <<TOML
[package]
name = "brisk-new-user"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
brisk = "0.1"

# crates.io's copies, as packaged here
[patch.crates-io]
brisk = { path = "$tmp/brisk-0.1.0" }
brisk-sys = { path = "$tmp/brisk-sys-0.1.0" }

[workspace]
TOML
cat >"$tmp/app/src/main.rs" <<'RS'
#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

fn main() {
    let words: Vec<String> = (0..1000).map(|i| format!("word {i}")).collect();
    assert!(brisk::owns(words.as_ptr()), "the Vec is not brisk's");
    assert!(words.iter().all(|w| brisk::owns(w.as_ptr())), "a String is not brisk's");
    let heap = brisk::Heap::new();
    let mut v = brisk::allocator_api2::vec::Vec::new_in(&heap);
    v.extend(0..10_000u64);
    assert!(heap.contains(v.as_ptr()));
    println!("brisk-new-user: {} words and {} numbers from brisk", words.len(), v.len());
}
RS
if grep -q "$root/src\|\.\./\.\./src" "$tmp/app/Cargo.toml"; then
  echo "package_test: FAIL: the new project names the repository's sources" >&2; exit 1
fi
out=$(cd "$tmp/app" && CARGO_TARGET_DIR="$tmp/target" cargo run --quiet)
echo "$out"
grep -q "^brisk-new-user: 1000 words and 10000 numbers from brisk$" <<<"$out"
echo "package_test: passed: brisk-sys and brisk packaged with the C sources (publish dry run), a new project built from the .crate files and run"
