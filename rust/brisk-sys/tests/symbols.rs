//! The static library this crate links defines only brisk's public names
//! (and, with the `override` feature, the standard malloc family and
//! glibc's extras): brisk's internal functions are local to its one
//! object, so they can clash with nothing in the program.
use std::process::Command;

/// The names a program may see: `brisk_*`, and the standard ones.
const STANDARD: &[&str] = &[
    "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized", "free_aligned_sized",
    "malloc_trim", "mallinfo", "mallinfo2", "malloc_stats", "malloc_info", "mallopt",
];

#[test]
fn the_static_library_defines_only_public_names() {
    let lib = env!("LIBBRISK_STATIC_PATH");
    let out = Command::new("nm")
        .args(["--defined-only", "-g", lib])
        .output()
        .unwrap_or_else(|e| panic!("nm {lib}: {e} (binutils)"));
    assert!(out.status.success(), "nm {lib} failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| f[2])
        })
        .collect();
    assert!(names.contains(&"brisk_malloc"), "no brisk_malloc in {lib}: {names:?}");
    let others: Vec<&&str> = names
        .iter()
        .filter(|n| !n.starts_with("brisk_") && !STANDARD.contains(n))
        .collect();
    assert!(others.is_empty(), "{lib} defines names that are not brisk's public ones: {others:?}");
}
