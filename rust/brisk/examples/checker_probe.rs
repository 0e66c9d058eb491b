//! A Rust program with brisk as its global allocator and one heap bug of the
//! kind named on its command line, for `rust/checker_test.sh`: built with
//! the `valgrind` feature, valgrind's memcheck must report it with this
//! file's line; built without, it must not.

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

use std::hint::black_box;
use std::ptr;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "clean" => {
            let mut v: Vec<Vec<u8>> = Vec::new();
            for i in 0..5000usize {
                v.push(vec![i as u8; 1 + i % 3000]);
                if i % 3 == 0 {
                    v.swap_remove(i / 7 % v.len());
                }
            }
            let moved = std::thread::spawn(move || v.iter().map(|b| b.len()).sum::<usize>());
            black_box(moved.join().unwrap());
        }
        "use-after-free" => {
            let p = Box::into_raw(Box::new([7u8; 40]));
            // SAFETY: none; the bug the checker must report.
            unsafe {
                drop(Box::from_raw(p));
                black_box(ptr::read_volatile(p.cast::<u8>().add(3)));
            }
        }
        "overflow" => {
            let v = black_box(vec![1u8; 40]);
            // SAFETY: none; one byte past the block.
            unsafe { ptr::write_volatile(v.as_ptr().add(40).cast_mut(), 2) };
        }
        "leak" => {
            let b = Box::new([3u8; 100]);
            std::mem::forget(black_box(b));
        }
        _ => {
            eprintln!("usage: checker_probe clean|use-after-free|overflow|leak");
            std::process::exit(2);
        }
    }
    println!("{mode}: done");
}
