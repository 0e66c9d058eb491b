//! Raw declarations of brisk's C API, one for each function of
//! `include/brisk.h`, and the static library built from brisk's C sources.
//!
//! Everything here is `unsafe` and follows the C contracts documented in the
//! header; the `brisk` crate is the safe layer on top. With the `override`
//! feature the library also defines `malloc`, `free` and the rest of the
//! standard family, so brisk serves the whole process, C code included.
//! With `hardened` it is brisk's hardened build (`BRISK_HARDENED=1`).
#![no_std]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_long, c_uint, c_void};
use core::marker::{PhantomData, PhantomPinned};

pub const BRISK_VERSION_MAJOR: u32 = 0;
pub const BRISK_VERSION_MINOR: u32 = 1;
pub const BRISK_VERSION_PATCH: u32 = 0;

/// A first-class heap (`brisk_heap_t`), only ever behind a pointer.
#[repr(C)]
pub struct brisk_heap_t {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A session arena (`brisk_arena_t`), only ever behind a pointer.
#[repr(C)]
pub struct brisk_arena_t {
    _opaque: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub use libc::FILE;

extern "C" {
    // Allocation: NULL with errno = ENOMEM on failure; blocks are aligned to
    // at least 16 bytes; brisk_malloc(0) returns a unique pointer.
    pub fn brisk_malloc(size: usize) -> *mut c_void;
    pub fn brisk_calloc(count: usize, size: usize) -> *mut c_void;
    /// `size == 0` frees `p` and returns NULL, as `realloc` does.
    pub fn brisk_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    /// `alignment`: a power of two; any size.
    pub fn brisk_aligned_alloc(alignment: usize, size: usize) -> *mut c_void;

    // Release: NULL is ignored; bad pointers are reported and ignored.
    pub fn brisk_free(p: *mut c_void);
    /// `size`: the size that was requested (any size up to the usable one).
    pub fn brisk_free_sized(p: *mut c_void, size: usize);

    /// Bytes usable at `p` (at least the size requested); 0 for NULL.
    pub fn brisk_usable_size(p: *const c_void) -> usize;
    /// Non-zero when `p` points into a block brisk handed out and still
    /// holds; safe for any pointer value.
    pub fn brisk_owns(p: *const c_void) -> c_int;
    /// `"MAJOR.MINOR.PATCH"`, a static NUL-terminated string.
    pub fn brisk_version() -> *const c_char;

    /// Process-wide statistics as text (NULL: stderr).
    pub fn brisk_stats_print(out: *mut FILE);
    /// Process-wide statistics as one JSON object; returns the length it
    /// needed, excluding the NUL, like snprintf.
    pub fn brisk_stats_json(buf: *mut c_char, len: usize) -> usize;
    /// Return the calling thread's unused memory (and the process's cached
    /// segments and huge mappings) now.
    pub fn brisk_collect();
    /// Testing: requests for memory from the OS fail after `fail_after`
    /// more (negative: no limit) and with probability
    /// `fail_per_million / 10^6`; `(-1, 0)` switches it off.
    pub fn brisk_fault_injection(fail_after: c_long, fail_per_million: c_uint);

    // First-class heaps: a heap allocates only on the thread that created
    // it; its blocks may be freed from any thread.
    pub fn brisk_heap_new() -> *mut brisk_heap_t;
    pub fn brisk_heap_destroy(heap: *mut brisk_heap_t);
    pub fn brisk_heap_malloc(heap: *mut brisk_heap_t, size: usize) -> *mut c_void;
    pub fn brisk_heap_calloc(heap: *mut brisk_heap_t, count: usize, size: usize) -> *mut c_void;
    /// `p` may be a block of any heap (or NULL).
    pub fn brisk_heap_realloc(heap: *mut brisk_heap_t, p: *mut c_void, size: usize) -> *mut c_void;
    pub fn brisk_heap_aligned_alloc(
        heap: *mut brisk_heap_t,
        alignment: usize,
        size: usize,
    ) -> *mut c_void;
    /// JSON statistics of one heap; returns the length it needed.
    pub fn brisk_heap_stats_json(heap: *mut brisk_heap_t, buf: *mut c_char, len: usize) -> usize;

    // Session arenas: bump allocation over a heap (NULL: the calling
    // thread's heap), used by one thread at a time.
    pub fn brisk_arena_new(
        heap_or_null: *mut brisk_heap_t,
        initial_bytes: usize,
    ) -> *mut brisk_arena_t;
    /// `alignment`: a power of two, or 0 for 16.
    pub fn brisk_arena_alloc(
        arena: *mut brisk_arena_t,
        size: usize,
        alignment: usize,
    ) -> *mut c_void;
    pub fn brisk_arena_reset(arena: *mut brisk_arena_t);
    pub fn brisk_arena_destroy(arena: *mut brisk_arena_t);
}
