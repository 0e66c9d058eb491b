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

/// The visitor of `brisk_heap_visit`: returns 0 to go on.
pub type brisk_block_visitor_t = Option<
    unsafe extern "C" fn(
        heap: *mut brisk_heap_t,
        block: *mut c_void,
        size: usize,
        arg: *mut c_void,
    ) -> c_int,
>;

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
    /// The usable size a request of `size` bytes gets, without allocating
    /// (`brisk_usable_size(brisk_malloc(size))`); 0 when none can be that
    /// large.
    pub fn brisk_good_size(size: usize) -> usize;
    /// `brisk_malloc` that stores the block's usable size in `*usable`
    /// (when not NULL; 0 on failure).
    pub fn brisk_malloc_usable(size: usize, usable: *mut usize) -> *mut c_void;
    /// A block whose whole usable size is zero.
    pub fn brisk_zalloc(size: usize) -> *mut c_void;
    /// `brisk_realloc` that zeroes what the block gains (up to its new
    /// usable size); NULL: `brisk_zalloc`; size 0 frees.
    pub fn brisk_rezalloc(p: *mut c_void, size: usize) -> *mut c_void;
    /// Resize in place, or NULL with `p` unchanged.
    pub fn brisk_expand(p: *mut c_void, size: usize) -> *mut c_void;
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
    /// Counters back to 0, the peaks of levels to their current values.
    pub fn brisk_stats_reset();
    /// The calling thread's own heap as JSON (the fields of
    /// `brisk_heap_stats_json`); returns the length it needed.
    pub fn brisk_thread_stats_json(buf: *mut c_char, len: usize) -> usize;
    /// Return the calling thread's unused memory (and the process's cached
    /// segments and huge mappings) now: all of it when `force`, else what
    /// is past its purge delay.
    pub fn brisk_collect(force: bool);
    /// An option's value (`name`: `"PURGE_DELAY"` or `"BRISK_PURGE_DELAY"`);
    /// 0 or an errno value (ENOENT, EINVAL), reported on stderr.
    pub fn brisk_option_get(name: *const c_char, value: *mut c_long) -> c_int;
    /// Change an option while running; 0 or an errno value (ENOENT,
    /// EINVAL, EPERM for an option read at start-up only).
    pub fn brisk_option_set(name: *const c_char, value: c_long) -> c_int;
    /// Testing: the system calls chosen by `brisk_fault_injection_calls`
    /// (by default mmap) fail after `fail_after` more (negative: no limit)
    /// and with probability `fail_per_million / 10^6`; `(-1, 0)` switches
    /// it off.
    pub fn brisk_fault_injection(fail_after: c_long, fail_per_million: c_uint);
    /// Testing: which calls `brisk_fault_injection` makes fail, a sum of
    /// 1 mmap (and a growing mremap), 2 munmap, 4 madvise, 8 mremap,
    /// 16 mprotect, 32 the background thread's start.
    pub fn brisk_fault_injection_calls(kinds: c_uint);

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
    /// A block of `heap` whose whole usable size is zero.
    pub fn brisk_heap_zalloc(heap: *mut brisk_heap_t, size: usize) -> *mut c_void;
    /// JSON statistics of one heap, on its thread; returns the length it
    /// needed.
    pub fn brisk_heap_stats_json(heap: *mut brisk_heap_t, buf: *mut c_char, len: usize) -> usize;
    /// Call `visitor(heap, block, usable size, arg)` for every live block
    /// of `heap`, on its thread; a non-zero return ends the walk and is
    /// returned; -1 for a heap not usable here.
    pub fn brisk_heap_visit(
        heap: *mut brisk_heap_t,
        visitor: brisk_block_visitor_t,
        arg: *mut c_void,
    ) -> c_int;
    /// Non-zero when `p` is the start of a block of `heap` (on its thread).
    pub fn brisk_heap_contains(heap: *mut brisk_heap_t, p: *const c_void) -> c_int;

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

    // The heap profiler: a random sample of the bytes allocated (one per
    // BRISK_PROFILE_RATE bytes on average) recorded with its stack.
    /// Start sampling; dumps without a path go to
    /// `<prefix>.<pid>.<seq>.heap`. 0, or EINVAL for a NULL or empty
    /// prefix, ENAMETOOLONG (reported).
    pub fn brisk_profile_start(prefix: *const c_char) -> c_int;
    /// Stop sampling new allocations; what was sampled stays until freed.
    pub fn brisk_profile_stop();
    /// Write the heap profile to `path` and its collapsed stacks beside it
    /// (NULL: the next `<prefix>.<pid>.<seq>.heap`); 0 or an errno value.
    pub fn brisk_profile_dump(path: *const c_char) -> c_int;
}
