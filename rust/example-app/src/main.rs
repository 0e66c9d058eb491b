//! A program that takes brisk as its allocator the way a new project does:
//! the dependency line in Cargo.toml and the one line below.
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

fn main() {
    let numbers: Vec<u64> = (0..10_000).collect();
    let text = format!("{} numbers, the last {}", numbers.len(), numbers[9_999]);
    let boxed = Box::new([0u8; 100_000]);
    let mut index = HashMap::new();
    for (i, n) in numbers.iter().enumerate().take(100) {
        index.insert(*n, i.to_string());
    }
    let blocks: [(&str, *const u8); 4] = [
        ("Vec", numbers.as_ptr().cast()),
        ("String", text.as_ptr()),
        ("Box", boxed.as_ptr()),
        ("HashMap value", index[&42].as_ptr()),
    ];
    for (what, p) in blocks {
        assert!(
            brisk::owns(p),
            "the {what} at {p:p} was not allocated by brisk"
        );
    }

    // Allocated here, dropped on another thread.
    let (tx, rx) = mpsc::channel::<Vec<String>>();
    let dropper = thread::spawn(move || rx.iter().map(|v| v.len()).sum::<usize>());
    for i in 0..100 {
        tx.send((0..50).map(|j| format!("{i}:{j}")).collect())
            .unwrap();
    }
    drop(tx);
    assert_eq!(dropper.join().unwrap(), 5000);

    println!(
        "brisk {} served every allocation of this program",
        brisk::version()
    );
}
