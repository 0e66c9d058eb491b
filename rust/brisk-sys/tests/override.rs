//! With the `override` feature the C malloc family of the process is
//! brisk's; without it, libc keeps its own.
use brisk_sys::brisk_owns;

fn owned(p: *const libc::c_void) -> bool {
    unsafe { brisk_owns(p) != 0 }
}

#[cfg(feature = "override")]
#[test]
fn libc_malloc_resolves_to_brisk() {
    unsafe {
        let p = libc::malloc(100);
        assert!(owned(p), "malloc(100) = {p:p} is not brisk's");
        assert_eq!(libc::malloc_usable_size(p), brisk_sys::brisk_usable_size(p));
        let p = libc::realloc(p, 100_000);
        assert!(owned(p));
        libc::free(p);

        let z = libc::calloc(10, 1000) as *mut u8;
        assert!(owned(z.cast()) && (0..10_000).all(|i| *z.add(i) == 0));
        libc::free(z.cast());

        let mut m = std::ptr::null_mut();
        assert_eq!(libc::posix_memalign(&mut m, 4096, 5000), 0);
        assert!(owned(m) && (m as usize).is_multiple_of(4096));
        libc::free(m);
        let a = libc::aligned_alloc(256, 1000);
        assert!(owned(a) && (a as usize).is_multiple_of(256));
        libc::free(a);

        // Code inside libc allocates through the same symbol.
        let s = libc::strdup(c"copied by libc".as_ptr());
        assert!(owned(s.cast()), "strdup's block is not brisk's");
        assert_eq!(std::ffi::CStr::from_ptr(s).to_str(), Ok("copied by libc"));
        libc::free(s.cast());
    }
}

#[cfg(not(feature = "override"))]
#[test]
fn libc_malloc_is_left_alone_by_default() {
    unsafe {
        let p = libc::malloc(100);
        assert!(
            !p.is_null() && !owned(p),
            "malloc is brisk's without the override feature"
        );
        let s = libc::strdup(c"copied by libc".as_ptr());
        assert!(!owned(s.cast()));
        libc::free(s.cast());
        libc::free(p);
    }
}

// glibc's extras come with the override: mallopt answers 0 for a parameter
// brisk does not know (glibc's answers 1), and mallinfo2 counts brisk's
// blocks.
#[cfg(feature = "override")]
#[test]
fn glibc_extras_are_brisks() {
    unsafe {
        assert_eq!(libc::mallopt(12345, 1), 0);
        assert_eq!(libc::mallopt(libc::M_ARENA_MAX, 2), 1);
        let before = libc::mallinfo2().uordblks;
        let blocks: Vec<*mut libc::c_void> = (0..64).map(|_| libc::malloc(60_000)).collect();
        assert!(libc::mallinfo2().uordblks >= before + 64 * 60_000);
        for p in blocks {
            libc::free(p);
        }
        libc::malloc_trim(0);
    }
}

#[cfg(not(feature = "override"))]
#[test]
fn glibc_extras_are_left_alone_by_default() {
    unsafe { assert_eq!(libc::mallopt(12345, 1), 1) };
}
