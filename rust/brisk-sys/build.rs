//! Compiles brisk's C sources into a static library, with the flags of the
//! library target in CMakeLists.txt: the repository's `src/` and `include/`
//! (two levels up from this crate) when the crate is built inside the
//! repository, else the copy the packaged crate carries (`csrc/`, written by
//! `scripts/crate_sources.sh` before packaging). Linux on x86-64 and
//! aarch64 only: anywhere else the build stops with a message saying so.
//!
//! Left out by default: `src/api/override.c` (the standard malloc family),
//! `src/api/extras.c` (glibc's extras: `malloc_trim`, `mallinfo2`,
//! `mallopt`, ...), `src/api/override_new.c` and `src/api/new_handler.cpp`
//! (C++ operator new and delete). A Rust program picks brisk with
//! `#[global_allocator]`; the `override` feature adds `override.c` and
//! `extras.c` and links the
//! whole archive, so that `malloc` and friends of the whole process are
//! brisk's. The `valgrind` and `asan` features build brisk for a memory
//! checker (`-DBRISK_VALGRIND=1`, `-DBRISK_ASAN=1`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Files of `src/api/` that define the standard allocation symbols.
const OVERRIDE_ONLY: &[&str] = &["override.c", "extras.c", "override_new.c"];

fn main() {
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || (arch != "x86_64" && arch != "aarch64") {
        panic!(
            "brisk supports Linux on x86-64 and aarch64 only; this target is {} on {}",
            os, arch
        );
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest.join("..").join("..");
    // Inside the repository: this crate is its rust/brisk-sys.
    let root = if repo.join("rust").join("brisk-sys").join("build.rs").is_file()
        && repo.join("src").join("alloc").join("alloc.c").is_file()
    {
        repo
    } else {
        manifest.join("csrc")
    };
    let src = root.join("src");
    let include = root.join("include");
    if !include.join("brisk.h").is_file() || !src.is_dir() {
        panic!(
            "brisk-sys builds brisk from its C sources, expected at {} and {} \
             (in a copy of the crate made outside the repository, run scripts/crate_sources.sh first)",
            src.display(),
            include.display()
        );
    }

    // A directory: Cargo rebuilds when any file in it changes, is added or
    // removed.
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=build.rs");

    let override_malloc = env::var_os("CARGO_FEATURE_OVERRIDE").is_some();
    let hardened = env::var_os("CARGO_FEATURE_HARDENED").is_some();
    let valgrind = env::var_os("CARGO_FEATURE_VALGRIND").is_some();
    let asan = env::var_os("CARGO_FEATURE_ASAN").is_some();

    let mut sources = c_sources(&src);
    if override_malloc {
        sources.push(src.join("api").join("override.c"));
        sources.push(src.join("api").join("extras.c"));
    }
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }

    let mut build = cc::Build::new();
    build
        .files(&sources)
        .include(&include)
        .include(&src)
        .std("gnu11")
        .opt_level(3)
        .pic(true)
        .define("_GNU_SOURCE", None)
        .define("NDEBUG", None)
        .define("BRISK_DEBUG_LEVEL", "0")
        .warnings(true)
        .flag("-Wno-unused-parameter")
        .flag("-fvisibility=hidden")
        .flag("-fno-semantic-interposition")
        .flag("-ftls-model=initial-exec")
        .flag("-fno-builtin-malloc")
        .flag("-fno-builtin-free")
        .flag("-fno-builtin-calloc")
        .flag("-fno-builtin-realloc");
    if hardened {
        build.define("BRISK_HARDENED", "1");
    }
    // The builds for memory checkers (src/os/checker.h): every block told to
    // valgrind's memcheck, or poisoned for AddressSanitizer, with red
    // zones; brisk's own code is never instrumented.
    if valgrind {
        let dir = tool("VALGRIND_INCLUDE", "/usr/include");
        if !Path::new(&dir).join("valgrind").join("memcheck.h").is_file() {
            panic!(
                "brisk-sys: the valgrind feature needs valgrind's headers, not found in {dir} \
                 (apt-get install valgrind, or set VALGRIND_INCLUDE to the directory that holds valgrind/)"
            );
        }
        build.include(&dir).define("BRISK_VALGRIND", "1");
    }
    if asan {
        build.define("BRISK_ASAN", "1").flag("-fno-sanitize=address");
    }
    // One object, linked from all of brisk's with their hidden (internal)
    // symbols made local, in a static library of its own: a program that
    // links it sees only brisk's public names (and, with `override`, the
    // malloc family and glibc's extras), as with libbrisk.so. The test
    // `tests/symbols.rs` lists them (LIBBRISK_STATIC_PATH).
    let objects = build.compile_intermediates();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let prelinked = out.join("brisk_prelinked.o");
    run(Command::new(tool("LD", "ld")).arg("-r").arg("-o").arg(&prelinked).args(&objects));
    run(Command::new(tool("OBJCOPY", "objcopy")).arg("--localize-hidden").arg(&prelinked));
    let lib = out.join("libbrisk.a");
    let _ = fs::remove_file(&lib);
    run(build.get_archiver().arg("crs").arg(&lib).arg(&prelinked));
    println!("cargo:rustc-link-search=native={}", out.display());
    if override_malloc {
        // Nothing in a Rust program names `malloc` before libc is on the
        // link line, so the object would not be pulled in: link it whole.
        println!("cargo:rustc-link-lib=static:+whole-archive=brisk");
    } else {
        println!("cargo:rustc-link-lib=static=brisk");
    }
    println!("cargo:rustc-env=LIBBRISK_STATIC_PATH={}", lib.display());
    if override_malloc {
        // This crate's own tests check that the whole archive is linked,
        // with the linker whose archive order would drop it otherwise.
        println!("cargo:rustc-link-arg-tests=-fuse-ld=bfd");
    }

    // For build scripts of crates that link brisk-sys: DEP_BRISK_INCLUDE.
    println!("cargo:include={}", include.display());
}

/// A tool named by an environment variable (as cc reads CC and AR), else
/// by its usual name.
fn tool(var: &str, default: &str) -> String {
    println!("cargo:rerun-if-env-changed={var}");
    env::var(var).unwrap_or_else(|_| default.to_string())
}

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("brisk-sys: could not run {cmd:?}: {e} (binutils: ld, objcopy)"));
    assert!(status.success(), "brisk-sys: {cmd:?} failed: {status}");
}

/// Every `*.c` file of `src/`'s layer folders except the override files,
/// sorted.
fn c_sources(src: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(src)
        .unwrap_or_else(|e| panic!("reading {}: {e}", src.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .flat_map(|dir| {
            fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
                .map(|entry| entry.expect("directory entry").path())
                .collect::<Vec<_>>()
        })
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !OVERRIDE_ONLY.contains(&name)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no C sources in {}", src.display());
    out
}
