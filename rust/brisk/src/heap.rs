use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use allocator_api2::alloc::{AllocError, Allocator};
use brisk_sys as sys;

use crate::global::MIN_ALIGN;

/// A first-class brisk heap: one per session, connection or request.
///
/// It allocates on the thread that created it, and only there: a `Heap` is
/// neither `Send` nor `Sync`. Its blocks may be freed from any thread.
/// Dropping it releases every block still in it at once, without visiting
/// them (`brisk_heap_destroy`); the borrow checker makes sure nothing
/// allocated from it is used afterwards, since collections borrow it.
///
/// ```
/// use brisk::allocator_api2::{boxed::Box, vec::Vec};
///
/// let heap = brisk::Heap::new();
/// let mut names = Vec::new_in(&heap);
/// for i in 0..100 {
///     names.push(i * 2);
/// }
/// let config = Box::new_in([0u8; 256], &heap);
/// assert!(brisk::owns(names.as_ptr()) && brisk::owns(config.as_ptr()));
/// assert!(heap.stats_json().contains("\"blocks_in_use\":"));
/// // No drop of `names` or `config` needed before the heap goes: the
/// // borrow checker orders them, and the heap releases all in one call.
/// ```
///
/// A heap cannot go to another thread:
///
/// ```compile_fail,E0277
/// let heap = brisk::Heap::new();
/// std::thread::spawn(move || {
///     let _block = heap.alloc(std::alloc::Layout::new::<u64>());
/// });
/// ```
///
/// nor be shared with one:
///
/// ```compile_fail,E0277
/// let heap = brisk::Heap::new();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let _block = heap.alloc(std::alloc::Layout::new::<u64>());
///     });
/// });
/// ```
pub struct Heap {
    raw: NonNull<sys::brisk_heap_t>,
    /// `!Send` and `!Sync`: brisk allocates from a heap on its thread only.
    _thread_bound: PhantomData<*mut ()>,
}

impl Heap {
    /// A new heap that allocates on the calling thread.
    ///
    /// # Panics
    ///
    /// When the system has no memory for the heap (see [`Heap::try_new`]).
    pub fn new() -> Heap {
        Heap::try_new().expect("brisk_heap_new: out of memory")
    }

    /// A new heap, or `None` when the system has no memory for it.
    pub fn try_new() -> Option<Heap> {
        let raw = NonNull::new(unsafe { sys::brisk_heap_new() })?;
        Some(Heap {
            raw,
            _thread_bound: PhantomData,
        })
    }

    /// A block for `layout` (any size, any alignment), or `None` when the
    /// system has no memory. Free it with [`Heap::dealloc`], or leave it to
    /// the heap's drop.
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let p = unsafe {
            if layout.align() <= MIN_ALIGN {
                sys::brisk_heap_malloc(self.raw.as_ptr(), layout.size())
            } else {
                sys::brisk_heap_aligned_alloc(self.raw.as_ptr(), layout.align(), layout.size())
            }
        };
        NonNull::new(p.cast())
    }

    /// As [`Heap::alloc`], with every byte zero.
    #[inline]
    pub fn alloc_zeroed(&self, layout: Layout) -> Option<NonNull<u8>> {
        if layout.align() <= MIN_ALIGN {
            let p = unsafe { sys::brisk_heap_calloc(self.raw.as_ptr(), 1, layout.size()) };
            return NonNull::new(p.cast());
        }
        let p = self.alloc(layout)?;
        unsafe { ptr::write_bytes(p.as_ptr(), 0, layout.size()) };
        Some(p)
    }

    /// Free a block before the heap goes.
    ///
    /// # Safety
    ///
    /// `ptr` was returned for `layout` by this heap (or another brisk
    /// allocation), is not used afterwards, and is freed once.
    #[inline]
    pub unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
        sys::brisk_free_sized(ptr.as_ptr().cast(), layout.size());
    }

    /// Whether `ptr` is the start of a block of this heap (one handed out,
    /// or freed since while its page stays in use); constant time, safe for
    /// any pointer value.
    pub fn contains<T: ?Sized>(&self, ptr: *const T) -> bool {
        unsafe { sys::brisk_heap_contains(self.raw.as_ptr(), ptr.cast()) != 0 }
    }

    /// The heap's statistics as brisk prints them: one JSON object
    /// (`segments`, `pages`, `full_pages`, `blocks_in_use`, `page_bytes`,
    /// `large_blocks`, `large_bytes`, `huge_blocks`, `huge_bytes`,
    /// `generation`).
    pub fn stats_json(&self) -> String {
        crate::json_from(|buf, len| unsafe {
            sys::brisk_heap_stats_json(self.raw.as_ptr(), buf, len)
        })
    }

    /// The heap's statistics, parsed from [`Heap::stats_json`].
    #[cfg(feature = "serde")]
    pub fn stats(&self) -> Result<crate::HeapStats, serde_json::Error> {
        crate::HeapStats::from_json(&self.stats_json())
    }

    /// The C heap, for the `brisk_heap_*` functions of brisk-sys. It stays
    /// valid while `self` lives; allocate from it on this thread only.
    pub fn as_raw(&self) -> *mut sys::brisk_heap_t {
        self.raw.as_ptr()
    }

    /// Move the block at `ptr` to `new` (or keep it when it has room).
    unsafe fn resize(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if new.align() <= MIN_ALIGN && new.size() != 0 {
            // brisk's realloc keeps (or grows in place) what it can and
            // returns 16-byte aligned blocks; a size of 0 would free.
            let q = sys::brisk_heap_realloc(self.raw.as_ptr(), ptr.as_ptr().cast(), new.size());
            let q = NonNull::new(q.cast::<u8>()).ok_or(AllocError)?;
            return Ok(NonNull::slice_from_raw_parts(q, new.size()));
        }
        let p = ptr.as_ptr();
        if p as usize & (new.align() - 1) == 0 && sys::brisk_usable_size(p.cast()) >= new.size() {
            return Ok(NonNull::slice_from_raw_parts(ptr, new.size()));
        }
        let q = self.alloc(new).ok_or(AllocError)?;
        ptr::copy_nonoverlapping(p, q.as_ptr(), old.size().min(new.size()));
        self.dealloc(ptr, old);
        Ok(NonNull::slice_from_raw_parts(q, new.size()))
    }
}

impl Default for Heap {
    fn default() -> Heap {
        Heap::new()
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        unsafe { sys::brisk_heap_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Heap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heap").field("raw", &self.raw).finish()
    }
}

/// For the collections of `allocator-api2` (and of crates that use it, such
/// as `hashbrown`): `Vec::new_in(&heap)`. `deallocate` frees at once with the
/// block's size; `grow` and `shrink` go through brisk's realloc when the
/// alignment is at most 16 bytes.
unsafe impl Allocator for Heap {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = self.alloc(layout).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = self.alloc_zeroed(layout).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        self.dealloc(ptr, layout)
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.resize(ptr, old_layout, new_layout)
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let q = self.resize(ptr, old_layout, new_layout)?;
        let start = q.cast::<u8>().as_ptr().add(old_layout.size());
        ptr::write_bytes(start, 0, new_layout.size() - old_layout.size());
        Ok(q)
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        self.resize(ptr, old_layout, new_layout)
    }
}
