//! brisk, the memory allocator, for Rust programs.
//!
//! brisk is a general-purpose allocator written in C (this crate builds it
//! from the repository's sources through `brisk-sys`): per-thread heaps with
//! a short inline fast path, cheap frees from other threads, and an address
//! registry that tells in one load whether a pointer is brisk's.
//!
//! # Setup: one line
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: brisk::Brisk = brisk::Brisk;
//!
//! fn main() {
//!     let words: Vec<String> = "served by brisk".split(' ').map(String::from).collect();
//!     assert!(brisk::owns(words.as_ptr()));
//!     assert!(words.iter().all(|w| brisk::owns(w.as_ptr())));
//! }
//! ```
//!
//! Only Rust's allocations go to brisk that way; C code in the process keeps
//! libc's `malloc`. The `override` feature makes brisk the `malloc` of the
//! whole process as well.
//!
//! # Heaps and arenas
//!
//! A [`Heap`] is a heap of its own, for a session, a connection or a
//! request: it allocates on its thread, its blocks may be freed anywhere,
//! and dropping it releases everything in it in one call. An [`Arena`]
//! bump-allocates from buffers of a heap and forgets everything at
//! [`Arena::reset`]. Both implement the `Allocator` trait of
//! [`allocator_api2`] (re-exported here), so the collections of that crate
//! and of `hashbrown` run on them on stable Rust:
//!
//! ```
//! use brisk::allocator_api2::vec::Vec;
//! use brisk::{Arena, Heap};
//!
//! let heap = Heap::new();
//! let mut ids = Vec::new_in(&heap);
//! ids.extend(0..10_000u64);
//! assert!(brisk::owns(ids.as_ptr()));
//!
//! let mut arena = Arena::new(&heap, 64 * 1024);
//! {
//!     let mut index = hashbrown::HashMap::new_in(&arena);
//!     for (i, id) in ids.iter().enumerate() {
//!         index.insert(*id, i);
//!     }
//!     assert_eq!(index[&1234], 1234);
//! }
//! arena.reset(); // every allocation of the map, forgotten at once
//! drop(arena);
//! drop(ids);
//! drop(heap); // the heap and what is left in it, in one call
//! ```
//!
//! # Features
//!
//! - `override`: compile brisk's definitions of `malloc`, `free`,
//!   `calloc`, `realloc`, `posix_memalign`, ... too, so that C code in the
//!   process (and libc's users) allocate from brisk.
//! - `hardened`: brisk's hardened build (freed blocks filled and checked,
//!   guard pages, randomized page order).
//! - `serde`: [`Stats`] and [`HeapStats`], the statistics parsed from
//!   brisk's JSON.

use core::ffi::{c_char, CStr};

pub use allocator_api2;
pub use brisk_sys as sys;

mod arena;
mod global;
mod heap;
#[cfg(feature = "serde")]
mod stats;

pub use arena::Arena;
pub use global::Brisk;
pub use heap::Heap;
#[cfg(feature = "serde")]
pub use stats::{HeapStats, Stats};

/// Whether `ptr` points into a block that brisk handed out and still holds.
/// Safe for any pointer value: answered from brisk's address registry, in
/// constant time and without a system call.
#[inline]
pub fn owns<T: ?Sized>(ptr: *const T) -> bool {
    unsafe { sys::brisk_owns(ptr.cast()) != 0 }
}

/// The bytes usable at `ptr`: at least the size requested; 0 for null.
///
/// # Safety
///
/// `ptr` is null or a live block from brisk (a pointer brisk did not hand
/// out is reported on stderr).
#[inline]
pub unsafe fn usable_size<T: ?Sized>(ptr: *const T) -> usize {
    sys::brisk_usable_size(ptr.cast())
}

/// The usable size a request of `size` bytes gets, computed without
/// allocating (what [`usable_size`] says of such a block); 0 when no block
/// can be that large.
#[inline]
pub fn good_size(size: usize) -> usize {
    unsafe { sys::brisk_good_size(size) }
}

/// Return the memory that the calling thread's heap holds but does not use
/// (and the process's cached segments and huge mappings) now, instead of
/// after the purge delay: all of it when `force`, otherwise what is already
/// past its delay.
pub fn collect(force: bool) {
    unsafe { sys::brisk_collect(force) }
}

/// The value of one of brisk's options (`"PURGE_DELAY"` or
/// `"BRISK_PURGE_DELAY"`, ...: the `BRISK_*` variables of the README), or
/// the error brisk reported on stderr (`NotFound` for a name that is no
/// option).
pub fn option(name: &str) -> std::io::Result<i64> {
    let name = option_name(name)?;
    let mut value: core::ffi::c_long = 0;
    match unsafe { sys::brisk_option_get(name.as_ptr(), &mut value) } {
        #[allow(clippy::useless_conversion)] // c_long is narrower than i64 on some targets
        0 => Ok(i64::from(value)),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

/// Change one of brisk's options while the program runs (those the README
/// marks so: `PURGE_DELAY`, `SEGMENT_CACHE`, `HUGE_PAGES`, `ON_ERROR`, `SHOW_STATS`,
/// `BACKGROUND`, `PROFILE_RATE`, `PROFILE_INTERVAL`, `PROFILE_LEAKS`). Errors are reported by brisk on stderr too: `NotFound`
/// for a name that is no option, `InvalidInput` for a value out of range,
/// `PermissionDenied` for an option read at start-up only.
pub fn set_option(name: &str, value: i64) -> std::io::Result<()> {
    let name = option_name(name)?;
    let value = core::ffi::c_long::try_from(value)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "value out of range"))?;
    match unsafe { sys::brisk_option_set(name.as_ptr(), value) } {
        0 => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

/// Start the heap profiler (see the README, "Finding where memory goes"):
/// from now on one allocated byte in `BRISK_PROFILE_RATE` (512 KiB by
/// default) is sampled with its stack, and the dumps that name no path
/// (`profile_dump(None)`, at exit, on `BRISK_PROFILE_SIGNAL`) go to
/// `<prefix>.<pid>.<seq>.heap` and `.collapsed`.
pub fn profile_start(prefix: &str) -> std::io::Result<()> {
    let prefix = c_text(prefix, "a NUL in the profile prefix")?;
    match unsafe { sys::brisk_profile_start(prefix.as_ptr()) } {
        0 => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

/// Stop sampling new allocations. What was sampled stays in the profile
/// until it is freed, and no dump is written at exit.
pub fn profile_stop() {
    unsafe { sys::brisk_profile_stop() }
}

/// Write a heap profile now: to `path` (and the collapsed stacks beside
/// it: `x.heap` gives `x.collapsed`), or with `None` to the next
/// `<prefix>.<pid>.<seq>.heap` of `profile_start` or `BRISK_PROFILE`.
pub fn profile_dump(path: Option<&str>) -> std::io::Result<()> {
    let path = path.map(|p| c_text(p, "a NUL in the profile path")).transpose()?;
    let ptr = path.as_ref().map_or(core::ptr::null(), |p| p.as_ptr());
    match unsafe { sys::brisk_profile_dump(ptr) } {
        0 => Ok(()),
        err => Err(std::io::Error::from_raw_os_error(err)),
    }
}

fn c_text(text: &str, what: &'static str) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(text).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, what))
}

fn option_name(name: &str) -> std::io::Result<std::ffi::CString> {
    c_text(name, "a NUL in the option name")
}

/// brisk's version, `"MAJOR.MINOR.PATCH"`.
pub fn version() -> &'static str {
    // A static ASCII string.
    unsafe { CStr::from_ptr(sys::brisk_version()) }
        .to_str()
        .unwrap_or("")
}

/// Process-wide statistics, as brisk prints them: one JSON object
/// (`version`, `hardened`, `purge_delay_ms`, then brisk's counters, levels
/// with their `_peak`, what a walk of brisk's memory finds and the
/// process's own figures).
pub fn stats_json() -> String {
    json_from(|buf, len| unsafe { sys::brisk_stats_json(buf, len) })
}

/// Counters back to 0, and the peak of every level (`mapped_bytes_peak`,
/// ...) to its current value.
pub fn stats_reset() {
    unsafe { sys::brisk_stats_reset() }
}

/// The calling thread's own heap (the one behind the global allocator), as
/// [`Heap::stats_json`] shows a heap.
pub fn thread_stats_json() -> String {
    json_from(|buf, len| unsafe { sys::brisk_thread_stats_json(buf, len) })
}

/// Process-wide statistics, parsed from [`stats_json`].
#[cfg(feature = "serde")]
pub fn stats() -> Result<Stats, serde_json::Error> {
    Stats::from_json(&stats_json())
}

/// The output of a snprintf-like writer (`fill(buf, len)` returns the length
/// it needed), which may need more room on a second try.
pub(crate) fn json_from(mut fill: impl FnMut(*mut c_char, usize) -> usize) -> String {
    let mut room = 512;
    loop {
        let mut buf = vec![0u8; room];
        let needed = fill(buf.as_mut_ptr().cast(), room);
        if needed < room {
            buf.truncate(needed);
            return String::from_utf8(buf).expect("brisk's JSON is ASCII");
        }
        room = needed + 64; // counters may grow between the two calls
    }
}
