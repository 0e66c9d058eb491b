//! With `override`, brisk's malloc is linked even when no Rust code names
//! it: this file calls no function of the malloc family itself, so only the
//! whole archive brings src/override.c's definitions in (with a linker that
//! takes archive members in command-line order, as GNU ld does).
#![cfg(feature = "override")]

#[test]
fn libc_allocates_from_brisk_though_nothing_here_names_malloc() {
    let s = unsafe { libc::strdup(c"copied by libc".as_ptr()) };
    assert!(brisk::owns(s), "strdup's block {s:p} is not brisk's");
    // Left allocated: freeing it here would name `free`.
}
