//! With `override`, brisk's malloc is linked even when no Rust code names
//! it: this file calls no function of the malloc family itself, so only the
//! whole archive brings src/override.c's definitions in. The build script
//! links this crate's tests with GNU ld under `override`: it takes archive
//! members in command-line order, and brisk's archive comes before std's
//! references to malloc (lld would pull the member in anyway).
#![cfg(feature = "override")]

#[test]
fn libc_allocates_from_brisk_though_nothing_here_names_malloc() {
    let s = unsafe { libc::strdup(c"copied by libc".as_ptr()) };
    assert!(
        unsafe { brisk_sys::brisk_owns(s.cast()) } != 0,
        "strdup's block {s:p} is not brisk's"
    );
    // Left allocated: freeing it here would name `free`.
}
