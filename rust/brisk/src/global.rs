use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use core::ptr;

use brisk_sys as sys;

/// The alignment of every block of brisk's malloc.
pub(crate) const MIN_ALIGN: usize = 16;

/// brisk as Rust's global allocator:
///
/// ```
/// #[global_allocator]
/// static GLOBAL: brisk::Brisk = brisk::Brisk;
/// # fn main() { let b = Box::new(7u64); assert!(brisk::owns(&*b)); }
/// ```
///
/// Every `Layout` is honoured: alignments up to 16 bytes come from brisk's
/// malloc, larger ones from `brisk_aligned_alloc`. `dealloc` passes the size
/// to brisk (`brisk_free_sized`), `alloc_zeroed` uses `brisk_calloc` (which
/// does not clear memory fresh from the OS twice), and `realloc` grows in
/// place where brisk can. When memory runs out the methods return null, so
/// Rust's `handle_alloc_error` reports it.
///
/// Blocks may be freed from any thread. A `Brisk` holds no state: the heaps
/// behind it are brisk's per-thread heaps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Brisk;

#[inline]
unsafe fn alloc_aligned(layout: Layout) -> *mut u8 {
    sys::brisk_aligned_alloc(layout.align(), layout.size()).cast()
}

unsafe impl GlobalAlloc for Brisk {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            sys::brisk_malloc(layout.size()).cast()
        } else {
            alloc_aligned(layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= MIN_ALIGN {
            return sys::brisk_calloc(1, layout.size()).cast();
        }
        let p = alloc_aligned(layout);
        if !p.is_null() {
            ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sys::brisk_free_sized(ptr.cast(), layout.size());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // brisk_realloc keeps 16-byte alignment; a size of 0 would free.
        if layout.align() <= MIN_ALIGN && new_size != 0 {
            return sys::brisk_realloc(ptr.cast(), new_size).cast();
        }
        realloc_aligned(ptr, layout, new_size)
    }
}

/// An over-aligned block (or a new size of 0): keep it when it has room,
/// else move it to a new block of the same alignment.
#[cold]
unsafe fn realloc_aligned(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    if sys::brisk_usable_size(ptr as *const c_void) >= new_size {
        return ptr;
    }
    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
    let new = alloc_aligned(new_layout);
    if !new.is_null() {
        ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
        sys::brisk_free_sized(ptr.cast(), layout.size());
    }
    new
}
