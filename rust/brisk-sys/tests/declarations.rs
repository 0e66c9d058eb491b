//! The declarations match include/brisk.h, and the library links and runs.
use std::collections::BTreeSet;
use std::ffi::CStr;

use brisk_sys::*;

/// The name of each function declared with BRISK_API (at a line start).
fn header_functions(header: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in header.match_indices("\nBRISK_API ") {
        let decl = &header[i..];
        let decl = &decl[..decl.find(';').expect("declaration ends with ;")];
        let paren = decl.find('(').expect("a function declaration");
        let before = decl[..paren].trim_end();
        let name = before
            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap();
        names.insert(name.to_string());
    }
    names
}

fn rust_functions(lib: &str) -> BTreeSet<String> {
    lib.match_indices("pub fn ")
        .map(|(i, m)| {
            let rest = &lib[i + m.len()..];
            rest[..rest.find('(').unwrap()].to_string()
        })
        .collect()
}

#[test]
fn every_function_of_the_header_is_declared() {
    let header = header_functions(include_str!("../../../include/brisk.h"));
    let rust = rust_functions(include_str!("../src/lib.rs"));
    assert!(header.len() >= 24, "parsed only {header:?}");
    assert_eq!(
        header, rust,
        "include/brisk.h and brisk-sys/src/lib.rs differ"
    );
}

#[test]
fn the_library_links_and_serves() {
    unsafe {
        let p = brisk_malloc(100) as *mut u8;
        assert!(!p.is_null());
        assert_eq!(p as usize % 16, 0);
        assert_ne!(brisk_owns(p.cast()), 0);
        assert!(brisk_usable_size(p.cast()) >= 100);
        p.write_bytes(0x5a, 100);
        brisk_free_sized(p.cast(), 100);

        let v = CStr::from_ptr(brisk_version()).to_str().unwrap();
        let want = format!("{BRISK_VERSION_MAJOR}.{BRISK_VERSION_MINOR}.{BRISK_VERSION_PATCH}");
        assert_eq!(v, want);

        // The statistics include the process's page faults, which may
        // change between the two calls (and with them the length by a
        // digit or two): room to spare, and the second call's own length.
        let needed = brisk_stats_json(std::ptr::null_mut(), 0);
        let mut buf = vec![0u8; needed + 256];
        let got = brisk_stats_json(buf.as_mut_ptr().cast(), buf.len());
        assert!(got < buf.len() && got.abs_diff(needed) < 64, "{got} against {needed}");
        let json = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
        assert_eq!(json.len(), got);
        assert!(
            json.starts_with("{\"version\":\"") && json.ends_with('}'),
            "{json}"
        );
    }
}
