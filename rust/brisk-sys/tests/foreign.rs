//! Without `override`, brisk is not the process's malloc: a block of the
//! C library's malloc passed to brisk is reported and left alone, never
//! handed to the C library's free behind the program's back.
#![cfg(not(feature = "override"))]

fn errors_reported() -> u64 {
    let mut buf = vec![0u8; 4096];
    let n = unsafe { brisk_sys::brisk_stats_json(buf.as_mut_ptr().cast(), buf.len()) };
    let json = std::str::from_utf8(&buf[..n.min(buf.len() - 1)]).unwrap();
    let at = json.find("\"errors\":").expect("no errors field") + "\"errors\":".len();
    json[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_c_library_block_is_reported_not_freed() {
    let p = unsafe { libc::malloc(64) };
    assert!(!p.is_null());
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x5a, 64) };
    let before = errors_reported();
    unsafe { brisk_sys::brisk_free(p) };
    assert_eq!(unsafe { brisk_sys::brisk_usable_size(p) }, 0);
    assert_eq!(errors_reported(), before + 2, "both calls must be reported");
    // Still the C library's and intact: freeing it there is no double free.
    assert!((0..64).all(|i| unsafe { *p.cast::<u8>().add(i) } == 0x5a));
    unsafe { libc::free(p) };
}
