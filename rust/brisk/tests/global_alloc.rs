//! brisk as the global allocator: every layout, realloc, zeroed memory,
//! blocks that cross threads.
use std::alloc::{self, GlobalAlloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::thread;

use brisk::Brisk;
use brisk_sys as sys;

#[global_allocator]
static GLOBAL: Brisk = Brisk;

const MIB: usize = 1 << 20;

/// The bytes of a block tagged `tag`: a cycle of 251 (prime) bytes that
/// starts at a place given by the tag, so that a block shifted, truncated
/// or mixed up with another does not match. Written and compared in chunks
/// (memcpy, memcmp) to stay fast in unoptimized test builds.
const CYCLE: usize = 251;

fn cycle() -> &'static [u8; 2 * CYCLE] {
    static BYTES: std::sync::OnceLock<[u8; 2 * CYCLE]> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| std::array::from_fn(|k| ((k % CYCLE) * 7 % CYCLE) as u8))
}

fn pattern(tag: usize, i: usize) -> u8 {
    cycle()[(tag + i) % CYCLE]
}

fn fill_slice(bytes: &mut [u8], tag: usize) {
    let start = tag % CYCLE;
    for chunk in bytes.chunks_mut(CYCLE) {
        chunk.copy_from_slice(&cycle()[start..start + chunk.len()]);
    }
}

/// The index of the first byte that is not the pattern of `tag`.
fn mismatch(bytes: &[u8], tag: usize) -> Option<usize> {
    let start = tag % CYCLE;
    for (n, chunk) in bytes.chunks(CYCLE).enumerate() {
        if chunk != &cycle()[start..start + chunk.len()] {
            let i = chunk
                .iter()
                .enumerate()
                .position(|(j, &b)| b != pattern(tag, j))
                .unwrap();
            return Some(n * CYCLE + i);
        }
    }
    None
}

unsafe fn fill(p: *mut u8, len: usize, tag: usize) {
    fill_slice(std::slice::from_raw_parts_mut(p, len), tag);
}

unsafe fn check(p: *const u8, len: usize, tag: usize) {
    if let Some(i) = mismatch(std::slice::from_raw_parts(p, len), tag) {
        panic!(
            "byte {i} of block {tag} at {p:p}: {:#x}, not {:#x}",
            *p.add(i),
            pattern(tag, i)
        );
    }
}

fn owned(p: *const u8) -> bool {
    unsafe { sys::brisk_owns(p.cast()) != 0 }
}

#[test]
fn std_collections_are_served_by_brisk() {
    let v: Vec<u64> = (0..10_000).collect();
    let s = "x".repeat(100_000);
    let b = Box::new([7u8; 3 * MIB / 2]);
    let mut m = HashMap::new();
    m.insert(1u32, String::from("one"));
    assert!(brisk::owns(v.as_ptr()));
    assert!(brisk::owns(s.as_ptr()));
    assert!(brisk::owns(b.as_ptr()));
    assert!(brisk::owns(m[&1].as_ptr()));
    assert!(unsafe { brisk::usable_size(v.as_ptr()) } >= 10_000 * 8);
    // A pointer brisk never handed out.
    let on_stack = 0u64;
    assert!(!brisk::owns(&on_stack));
}

#[test]
fn every_alignment_up_to_1_mib() {
    let mut align = 1;
    while align <= MIB {
        for size in [1, 7, 16, 24, align, align + 1, 3 * align + 5, 1000, 70_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            for zeroed in [false, true] {
                let p = unsafe {
                    if zeroed {
                        alloc::alloc_zeroed(layout)
                    } else {
                        alloc::alloc(layout)
                    }
                };
                assert!(!p.is_null(), "{layout:?}");
                assert_eq!(p as usize % align, 0, "{layout:?} gave {p:p}");
                assert!(
                    owned(p) && owned(p.wrapping_add(size - 1)),
                    "{layout:?} at {p:p}"
                );
                assert!(unsafe { brisk::usable_size(p) } >= size);
                unsafe {
                    if zeroed {
                        let bytes = std::slice::from_raw_parts(p, size);
                        assert!(bytes.iter().all(|&b| b == 0), "{layout:?} not zero");
                    }
                    fill(p, size, size + align);
                    check(p, size, size + align);
                    alloc::dealloc(p, layout);
                }
            }
        }
        align *= 2;
    }
}

#[test]
fn zero_sized_layouts_are_handled() {
    for align in [1, 16, 64, 4096] {
        let layout = Layout::from_size_align(0, align).unwrap();
        unsafe {
            let p = Brisk.alloc(layout);
            assert!(
                !p.is_null() && (p as usize).is_multiple_of(align),
                "{layout:?}"
            );
            let q = Brisk.alloc(layout);
            assert_ne!(p, q, "two live zero-sized blocks share an address");
            // From size 0 up, and back to 0.
            let r = Brisk.realloc(p, layout, 100);
            assert!(!r.is_null() && (r as usize).is_multiple_of(align));
            fill(r, 100, 1);
            let big = Layout::from_size_align(100, align).unwrap();
            let s = Brisk.realloc(r, big, 0);
            assert!(!s.is_null(), "realloc to 0 must keep a block, not free it");
            Brisk.dealloc(s, layout);
            Brisk.dealloc(q, layout);
            let z = Brisk.alloc_zeroed(layout);
            assert!(!z.is_null());
            Brisk.dealloc(z, layout);
        }
    }
}

#[test]
fn realloc_keeps_data_across_growth_and_shrink() {
    let sizes = [
        1,
        10,
        100,
        1000,
        10_000,
        100_000,
        3 * MIB,
        700_000,
        5000,
        40,
        5,
    ];
    for align in [1, 8, 16, 32, 64, 4096, 65536] {
        let mut layout = Layout::from_size_align(sizes[0], align).unwrap();
        let mut p = unsafe { alloc::alloc(layout) };
        assert!(!p.is_null());
        unsafe { fill(p, layout.size(), align) };
        for &size in &sizes[1..] {
            let q = unsafe { alloc::realloc(p, layout, size) };
            assert!(!q.is_null(), "realloc {layout:?} -> {size}");
            assert_eq!(
                q as usize % align,
                0,
                "realloc {layout:?} -> {size} gave {q:p}"
            );
            unsafe {
                check(q, layout.size().min(size), align);
                fill(q, size, align);
            }
            assert!(owned(q));
            p = q;
            layout = Layout::from_size_align(size, align).unwrap();
        }
        unsafe { alloc::dealloc(p, layout) };
    }
}

#[test]
fn realloc_within_the_usable_size_stays_in_place() {
    for align in [8, 16, 64, 256, 4096] {
        for size in [24, 100, 3000, 100_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = Brisk.alloc(layout);
                assert!(!p.is_null());
                fill(p, size, 3);
                let usable = brisk::usable_size(p);
                assert!(usable >= size);
                let q = Brisk.realloc(p, layout, usable);
                assert_eq!(p, q, "{layout:?} grown to its usable size {usable} moved");
                check(q, size, 3);
                Brisk.dealloc(q, Layout::from_size_align(usable, align).unwrap());
            }
        }
    }
}

#[test]
fn alloc_zeroed_is_zero_on_reused_memory() {
    // Small, medium, large and huge blocks, plain and over-aligned.
    let layouts: Vec<Layout> = [8, 48, 256, 1000, 5000, 40_000, 200_000, 3 * MIB]
        .iter()
        .flat_map(|&s| [16, 128].map(|a| Layout::from_size_align(s, a).unwrap()))
        .collect();
    let mut reused = 0;
    for round in 0..3 {
        // Dirty blocks, free them, and ask for zeroed ones of the same
        // layouts: brisk hands the freed blocks out again.
        let mut freed = Vec::new();
        for &layout in &layouts {
            for _ in 0..if layout.size() > 100_000 { 2 } else { 8 } {
                unsafe {
                    let p = alloc::alloc(layout);
                    assert!(!p.is_null());
                    p.write_bytes(0xa5, layout.size());
                    freed.push((p as usize, layout));
                }
            }
        }
        for &(p, layout) in freed.iter().rev() {
            unsafe { alloc::dealloc(p as *mut u8, layout) };
        }
        let mut live = Vec::new();
        for &(old, layout) in &freed {
            unsafe {
                let p = alloc::alloc_zeroed(layout);
                assert!(!p.is_null());
                if freed.iter().any(|&(f, _)| f == p as usize) {
                    reused += 1;
                }
                let bytes = std::slice::from_raw_parts(p, layout.size());
                if let Some(i) = bytes.iter().position(|&b| b != 0) {
                    panic!(
                        "round {round}: {layout:?} at {p:p} has {:#x} at byte {i} (was {old:#x})",
                        bytes[i]
                    );
                }
                live.push((p, layout));
            }
        }
        for (p, layout) in live {
            unsafe { alloc::dealloc(p, layout) };
        }
    }
    // The check is only worth something on dirty memory.
    assert!(reused > layouts.len(), "only {reused} blocks were reused");
}

#[test]
fn blocks_allocated_on_one_thread_are_dropped_on_another() {
    const PRODUCERS: usize = 3;
    const BATCHES: usize = 40;
    let (tx, rx) = mpsc::channel::<(usize, Vec<Box<[u8]>>)>();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                for batch in 0..BATCHES {
                    let tag = t * 1000 + batch;
                    let blocks: Vec<Box<[u8]>> = (0..64)
                        .map(|i| {
                            // Mostly small, some medium and large, a huge one
                            // now and then.
                            let len = match i {
                                63 if batch % 20 == 0 => 3 * MIB,
                                62 => 100_000,
                                13 | 29 | 45 => 9000,
                                _ => 1 + (i * 37 + batch) % 700,
                            };
                            let mut b = vec![0u8; len].into_boxed_slice();
                            fill_slice(&mut b, tag + i);
                            b
                        })
                        .collect();
                    tx.send((tag, blocks)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = thread::spawn(move || {
        let mut seen = BTreeMap::new();
        for (tag, blocks) in rx {
            for (i, b) in blocks.iter().enumerate() {
                assert!(brisk::owns(b.as_ptr()));
                if let Some(j) = mismatch(b, tag + i) {
                    panic!("block {i} of batch {tag}: byte {j} is {:#x}", b[j]);
                }
            }
            *seen.entry(tag / 1000).or_insert(0) += blocks.len();
            drop(blocks); // freed here, on a thread that does not own them
        }
        seen
    });
    for p in producers {
        p.join().unwrap();
    }
    let seen = consumer.join().unwrap();
    assert_eq!(seen.len(), PRODUCERS);
    assert!(seen.values().all(|&n| n == BATCHES * 64), "{seen:?}");

    // The producers' threads are gone and their blocks freed remotely: the
    // memory serves new allocations as before.
    let again: Vec<Box<[u8]>> = (0..1000)
        .map(|i| vec![(i % 256) as u8; 64].into_boxed_slice())
        .collect();
    assert!(again
        .iter()
        .enumerate()
        .all(|(i, b)| b.iter().all(|&x| x == (i % 256) as u8)));
}
