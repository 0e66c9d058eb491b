//! Heaps and arenas as allocators of allocator-api2 and hashbrown
//! collections.
use std::alloc::Layout;
use std::ptr::NonNull;
use std::thread;

use allocator_api2::alloc::Allocator;
use allocator_api2::boxed::Box as ABox;
use allocator_api2::vec::Vec as AVec;
use brisk::{Arena, Heap};

/// A field of brisk's JSON statistics (a flat object of numbers).
fn json_field(json: &str, name: &str) -> i64 {
    let key = format!("\"{name}\":");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {json}"))
        + key.len();
    let digits: String = json[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().unwrap()
}

#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Line([u64; 8]);

#[test]
fn vec_and_box_on_a_heap() {
    let heap = Heap::new();
    let before = json_field(&heap.stats_json(), "blocks_in_use");
    let mut v = AVec::new_in(&heap);
    for i in 0..100_000u64 {
        v.push(i * 3);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
    assert!(brisk::owns(v.as_ptr()));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(&v[..], &[0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);

    let boxes: Vec<ABox<[u8; 40], &Heap>> = (0..100)
        .map(|i| ABox::new_in([i as u8; 40], &heap))
        .collect();
    assert!(boxes
        .iter()
        .enumerate()
        .all(|(i, b)| b.iter().all(|&x| x == i as u8)));
    let during = json_field(&heap.stats_json(), "blocks_in_use");
    assert!(during >= before + 100, "blocks_in_use {before} -> {during}");
    drop(boxes);
    let after = json_field(&heap.stats_json(), "blocks_in_use");
    assert!(
        after <= during - 100,
        "blocks_in_use {during} -> {after} after 100 frees"
    );
}

#[test]
fn over_aligned_elements_on_a_heap() {
    let heap = Heap::new();
    let mut v: AVec<Line, &Heap> = AVec::new_in(&heap);
    for i in 0..5000u64 {
        v.push(Line([i; 8]));
        assert_eq!(v.as_ptr() as usize % 64, 0);
    }
    assert!(v.iter().enumerate().all(|(i, l)| *l == Line([i as u64; 8])));
    v.truncate(3);
    v.shrink_to_fit();
    assert_eq!(v.as_ptr() as usize % 64, 0);
    assert_eq!(v[2], Line([2; 8]));
}

#[test]
fn heap_grow_and_shrink_keep_data_and_alignment() {
    let heap = Heap::new();
    for align in [1, 8, 16, 32, 64, 4096, 65536] {
        let sizes = [8, 100, 5000, 200_000, 3 << 20, 1000, 16];
        let mut layout = Layout::from_size_align(sizes[0], align).unwrap();
        let mut p = heap.allocate(layout).unwrap().cast::<u8>();
        unsafe { p.as_ptr().write_bytes(0x11, layout.size()) };
        for &size in &sizes[1..] {
            let new = Layout::from_size_align(size, align).unwrap();
            let q = unsafe {
                if size >= layout.size() {
                    heap.grow_zeroed(p, layout, new)
                } else {
                    heap.shrink(p, layout, new)
                }
            }
            .unwrap();
            assert_eq!(q.len(), size);
            let q = q.cast::<u8>();
            assert_eq!(q.as_ptr() as usize % align, 0, "{layout:?} -> {new:?}");
            let bytes = unsafe { std::slice::from_raw_parts(q.as_ptr(), size) };
            let kept = layout.size().min(size);
            assert!(
                bytes[..kept].iter().all(|&b| b == 0x11),
                "{layout:?} -> {new:?} lost data"
            );
            assert!(
                bytes[kept..].iter().all(|&b| b == 0),
                "{layout:?} -> {new:?} not zeroed"
            );
            unsafe { q.as_ptr().write_bytes(0x11, size) };
            p = q;
            layout = new;
        }
        unsafe { heap.deallocate(p, layout) };
    }
}

#[test]
fn heap_realloc_within_the_usable_size_stays_in_place() {
    let heap = Heap::new();
    for align in [16, 64, 4096] {
        let layout = Layout::from_size_align(100, align).unwrap();
        let p = heap.allocate(layout).unwrap().cast::<u8>();
        let usable = unsafe { brisk::usable_size(p.as_ptr()) };
        let bigger = Layout::from_size_align(usable, align).unwrap();
        let q = unsafe { heap.grow(p, layout, bigger) }
            .unwrap()
            .cast::<u8>();
        assert_eq!(
            p, q,
            "align {align}: growing to the usable size {usable} moved the block"
        );
        unsafe { heap.deallocate(q, bigger) };
    }
}

#[test]
fn heap_zeroed_memory_is_zero_after_reuse() {
    let heap = Heap::new();
    for align in [16, 256] {
        for size in [24, 512, 3000, 40_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let dirty: Vec<NonNull<u8>> = (0..16).map(|_| heap.alloc(layout).unwrap()).collect();
            for p in &dirty {
                unsafe { p.as_ptr().write_bytes(0xee, size) };
            }
            for p in dirty.iter().rev() {
                unsafe { heap.dealloc(*p, layout) };
            }
            // A heap hands freed blocks out again once the page's fresh
            // ones are used up: allocate until the dirty ones come back.
            let mut reused = 0;
            let mut live = Vec::new();
            while reused < dirty.len() && live.len() < 10_000 {
                let p = heap.allocate_zeroed(layout).unwrap().cast::<u8>();
                reused += dirty.contains(&p) as usize;
                let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), size) };
                assert!(
                    bytes.iter().all(|&b| b == 0),
                    "{layout:?} at {p:?} not zero"
                );
                live.push(p);
            }
            assert!(reused > 0, "{layout:?}: no block was reused");
            for p in live {
                unsafe { heap.deallocate(p, layout) };
            }
        }
    }
}

#[test]
fn hashmaps_on_a_heap_and_on_an_arena() {
    let heap = Heap::new();
    let arena = Arena::new(&heap, 16 * 1024);
    let mut on_heap = hashbrown::HashMap::new_in(&heap);
    let mut on_arena = hashbrown::HashMap::new_in(&arena);
    for i in 0..20_000u64 {
        on_heap.insert(i, format!("v{i}"));
        on_arena.insert(i, [i; 3]);
    }
    for i in (0..20_000u64).step_by(2) {
        assert_eq!(on_heap.remove(&i), Some(format!("v{i}")));
        assert_eq!(on_arena.remove(&i), Some([i; 3]));
    }
    assert_eq!(on_heap.len(), 10_000);
    assert_eq!(on_arena.len(), 10_000);
    for i in (1..20_000u64).step_by(2) {
        assert_eq!(on_heap[&i], format!("v{i}"));
        assert_eq!(on_arena[&i], [i; 3]);
    }
    let (k, _) = on_arena.iter().next().unwrap();
    assert!(brisk::owns(k));
}

#[test]
fn arena_overflows_into_new_buffers() {
    let heap = Heap::new();
    let arena = Arena::new(&heap, 4096);
    let mut blocks = Vec::new();
    for i in 0..2000usize {
        let layout = Layout::from_size_align(1 + i % 1500, 1 << (i % 8)).unwrap();
        let p = arena.alloc(layout).unwrap();
        assert_eq!(p.as_ptr() as usize % layout.align(), 0);
        assert!(brisk::owns(p.as_ptr()));
        unsafe { p.as_ptr().write_bytes(i as u8, layout.size()) };
        blocks.push((p, layout.size()));
    }
    // Nothing was overwritten by a later allocation.
    for (i, &(p, len)) in blocks.iter().enumerate() {
        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), len) };
        assert!(bytes.iter().all(|&b| b == i as u8), "block {i} overwritten");
    }
    // Large alignments too.
    for shift in 5..=16 {
        let layout = Layout::from_size_align(100, 1 << shift).unwrap();
        let p = arena.alloc(layout).unwrap();
        assert_eq!(p.as_ptr() as usize % layout.align(), 0);
    }
    let s = arena.alloc_str("a string in the arena");
    s.make_ascii_uppercase();
    assert_eq!(s, "A STRING IN THE ARENA");
    assert_eq!(arena.alloc_slice_copy(&[1u32, 2, 3]), &[1, 2, 3]);
}

#[test]
fn arena_reset_starts_again_at_its_first_buffer() {
    let heap = Heap::new();
    let mut arena = Arena::new(&heap, 8192);
    let layout = Layout::from_size_align(64, 16).unwrap();
    let first = arena.alloc(layout).unwrap();
    for _ in 0..1000 {
        arena.alloc(layout).unwrap(); // past the first buffer
    }
    let blocks_before = heap.stats_json();
    arena.reset();
    assert_eq!(
        arena.alloc(layout).unwrap(),
        first,
        "reset did not rewind the arena"
    );
    // The buffers after the first went back to the heap.
    let freed = json_field(&blocks_before, "blocks_in_use")
        - json_field(&heap.stats_json(), "blocks_in_use");
    assert!(freed >= 1, "{blocks_before} -> {}", heap.stats_json());
}

#[test]
fn arena_deallocate_keeps_memory_and_shrink_stays_in_place() {
    let heap = Heap::new();
    let arena = Arena::new(&heap, 4096);
    let layout = Layout::from_size_align(256, 32).unwrap();
    let p = arena.allocate(layout).unwrap().cast::<u8>();
    unsafe { p.as_ptr().write_bytes(7, 256) };
    let small = Layout::from_size_align(100, 32).unwrap();
    let q = unsafe { arena.shrink(p, layout, small) }.unwrap();
    assert_eq!(q.cast::<u8>(), p);
    unsafe { arena.deallocate(p, small) };
    // Bump allocation: a deallocated block is not handed out again.
    let r = arena.allocate(layout).unwrap().cast::<u8>();
    assert_ne!(r, p);
    assert_eq!(unsafe { *p.as_ptr().add(99) }, 7);
}

#[test]
fn heap_blocks_may_be_freed_on_other_threads() {
    let heap = Heap::new();
    let layout = Layout::from_size_align(48, 8).unwrap();
    let errors = json_field(&brisk::stats_json(), "errors");
    for round in 0..10 {
        let blocks: Vec<usize> = (0..500)
            .map(|i| {
                let p = heap.alloc(layout).unwrap();
                unsafe { p.as_ptr().write_bytes((round + i) as u8, 48) };
                p.as_ptr() as usize
            })
            .collect();
        thread::spawn(move || {
            for (i, &p) in blocks.iter().enumerate() {
                let p = p as *mut u8;
                assert_eq!(unsafe { *p.add(47) }, (round + i) as u8);
                unsafe { brisk::sys::brisk_free_sized(p.cast(), 48) };
            }
        })
        .join()
        .unwrap();
    }
    // The heap takes its blocks back and goes on allocating.
    let v: Vec<NonNull<u8>> = (0..5000).map(|_| heap.alloc(layout).unwrap()).collect();
    assert!(v.iter().all(|p| brisk::owns(p.as_ptr())));
    assert_eq!(
        json_field(&brisk::stats_json(), "errors"),
        errors,
        "brisk reported an error"
    );
}
