use core::alloc::Layout;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use allocator_api2::alloc::{AllocError, Allocator};
use brisk_sys as sys;

use crate::Heap;

/// Bump allocation over a [`Heap`]: a session arena.
///
/// Allocation moves a pointer through the current buffer; when the buffer
/// runs out the arena takes a new one from its heap, twice the size of the
/// last, so it fails only when the system has no memory. Blocks are not
/// freed one by one: [`Arena::reset`] forgets every allocation at once
/// (keeping the first buffer), and dropping the arena returns all its
/// buffers. An arena borrows its heap, so it cannot outlive it, and like its
/// heap it stays on the thread that created it.
///
/// ```
/// use brisk::allocator_api2::vec::Vec;
///
/// let heap = brisk::Heap::new();
/// let mut arena = brisk::Arena::new(&heap, 64 * 1024);
/// for burst in 0..3 {
///     {
///         let mut msgs = Vec::new_in(&arena);
///         for i in 0..1000 {
///             msgs.push(arena.alloc_str(&format!("burst {burst} message {i}")));
///         }
///         assert_eq!(&*msgs[999], format!("burst {burst} message 999"));
///     } // the borrows of the arena end here,
///     arena.reset(); // so it may forget everything
/// }
/// ```
///
/// `reset` needs every borrow of the arena to be over:
///
/// ```compile_fail,E0502
/// let heap = brisk::Heap::new();
/// let mut arena = brisk::Arena::new(&heap, 4096);
/// let s = arena.alloc_str("kept too long");
/// arena.reset();
/// println!("{s}");
/// ```
pub struct Arena<'h> {
    raw: NonNull<sys::brisk_arena_t>,
    /// Tied to its heap: neither `Send` nor `Sync`, and not longer-lived.
    _heap: PhantomData<&'h Heap>,
}

impl<'h> Arena<'h> {
    /// An arena on `heap` whose first buffer holds `initial_bytes` (at
    /// least 4 KiB).
    ///
    /// # Panics
    ///
    /// When the system has no memory for it (see [`Arena::try_new`]).
    pub fn new(heap: &'h Heap, initial_bytes: usize) -> Arena<'h> {
        Arena::try_new(heap, initial_bytes).expect("brisk_arena_new: out of memory")
    }

    /// An arena on `heap`, or `None` when the system has no memory for it.
    pub fn try_new(heap: &'h Heap, initial_bytes: usize) -> Option<Arena<'h>> {
        let raw = NonNull::new(unsafe { sys::brisk_arena_new(heap.as_raw(), initial_bytes) })?;
        Some(Arena {
            raw,
            _heap: PhantomData,
        })
    }

    /// A block for `layout`, valid until the arena is reset or dropped; `None`
    /// when the system has no memory.
    #[inline]
    pub fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        // Layout alignments are powers of two, which brisk_arena_alloc takes.
        let p = unsafe { sys::brisk_arena_alloc(self.raw.as_ptr(), layout.size(), layout.align()) };
        NonNull::new(p.cast())
    }

    /// A copy of `src` in the arena.
    ///
    /// # Panics
    ///
    /// When the system has no memory.
    // Each call hands out memory no other reference covers, and `reset`
    // (the only reuse of it) takes `&mut self`.
    #[allow(clippy::mut_from_ref)]
    pub fn alloc_slice_copy<T: Copy>(&self, src: &[T]) -> &mut [T] {
        let layout = Layout::for_value(src);
        let p = self
            .alloc(layout)
            .expect("brisk_arena_alloc: out of memory")
            .cast::<T>();
        unsafe {
            ptr::copy_nonoverlapping(src.as_ptr(), p.as_ptr(), src.len());
            core::slice::from_raw_parts_mut(p.as_ptr(), src.len())
        }
    }

    /// A copy of `s` in the arena.
    ///
    /// # Panics
    ///
    /// When the system has no memory.
    #[allow(clippy::mut_from_ref)]
    pub fn alloc_str(&self, s: &str) -> &mut str {
        let bytes = self.alloc_slice_copy(s.as_bytes());
        unsafe { core::str::from_utf8_unchecked_mut(bytes) }
    }

    /// Forget every allocation: the first buffer is kept for what comes
    /// next, the others go back to the heap.
    pub fn reset(&mut self) {
        unsafe { sys::brisk_arena_reset(self.raw.as_ptr()) }
    }

    /// The C arena, for the `brisk_arena_*` functions of brisk-sys.
    pub fn as_raw(&self) -> *mut sys::brisk_arena_t {
        self.raw.as_ptr()
    }
}

impl Drop for Arena<'_> {
    fn drop(&mut self) {
        unsafe { sys::brisk_arena_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Arena<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena").field("raw", &self.raw).finish()
    }
}

/// For the collections of `allocator-api2` and `hashbrown`:
/// `HashMap::new_in(&arena)`. `deallocate` does nothing (the memory comes
/// back at [`Arena::reset`] or drop); `shrink` keeps the block.
unsafe impl Allocator for Arena<'_> {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = self.alloc(layout).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, layout.size()))
    }

    #[inline]
    unsafe fn deallocate(&self, _ptr: NonNull<u8>, _layout: Layout) {}

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old_layout: Layout,
        new_layout: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if ptr.as_ptr() as usize & (new_layout.align() - 1) == 0 {
            return Ok(NonNull::slice_from_raw_parts(ptr, new_layout.size()));
        }
        let q = self.alloc(new_layout).ok_or(AllocError)?;
        ptr::copy_nonoverlapping(
            ptr.as_ptr(),
            q.as_ptr(),
            new_layout.size().min(old_layout.size()),
        );
        Ok(NonNull::slice_from_raw_parts(q, new_layout.size()))
    }
}
