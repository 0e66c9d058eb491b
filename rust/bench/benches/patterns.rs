//! Typical allocation patterns of Rust programs, measured with whichever
//! global allocator the including bench file declares. Each pattern is a
//! criterion group; the function id is the allocator's name, so that
//! target/criterion/<pattern>/<allocator>/ holds each cell of the table.
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use criterion::Criterion;

pub fn main(allocator: &str) {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    vec_growth_small(&mut c, allocator);
    vec_growth_large(&mut c, allocator);
    box_churn(&mut c, allocator);
    string_building(&mut c, allocator);
    hashmap_insert_remove(&mut c, allocator);
    cross_thread_drop(&mut c, allocator);
    c.final_summary();
}

/// 200 vectors pushed from empty to 1..=200 elements: every growth step of
/// small vectors (a realloc each).
fn vec_growth_small(c: &mut Criterion, allocator: &str) {
    c.benchmark_group("vec_growth_small")
        .bench_function(allocator, |b| {
            b.iter(|| {
                for n in 1..=200u64 {
                    let mut v = Vec::new();
                    for i in 0..n {
                        v.push(i);
                    }
                    black_box(v);
                }
            })
        });
}

/// One vector pushed to 1 Mi u64 (8 MiB): large and huge reallocs.
fn vec_growth_large(c: &mut Criterion, allocator: &str) {
    c.benchmark_group("vec_growth_large")
        .bench_function(allocator, |b| {
            b.iter(|| {
                let mut v = Vec::new();
                for i in 0..(1u64 << 20) {
                    v.push(i);
                }
                black_box(v);
            })
        });
}

#[allow(dead_code)] // written, never read: it is the allocation that counts
struct Node {
    key: u64,
    value: u64,
    next: Option<Box<Node>>,
}

/// 1000 small boxes, half of them replaced, then all dropped.
fn box_churn(c: &mut Criterion, allocator: &str) {
    c.benchmark_group("box_churn")
        .bench_function(allocator, |b| {
            b.iter(|| {
                let mut boxes: Vec<Box<Node>> = Vec::with_capacity(1000);
                for i in 0..1000u64 {
                    boxes.push(Box::new(Node {
                        key: i,
                        value: i * 3,
                        next: None,
                    }));
                }
                for i in (0..1000).step_by(2) {
                    boxes[i] = Box::new(Node {
                        key: i as u64,
                        value: 0,
                        next: None,
                    });
                }
                black_box(&boxes);
            })
        });
}

/// 100 strings built with write!, 20 pieces each.
fn string_building(c: &mut Criterion, allocator: &str) {
    c.benchmark_group("string_building")
        .bench_function(allocator, |b| {
            b.iter(|| {
                let mut out = Vec::with_capacity(100);
                for i in 0..100u32 {
                    let mut s = String::new();
                    for j in 0..20u32 {
                        write!(s, "{j}:{i};").unwrap();
                    }
                    out.push(s);
                }
                black_box(out);
            })
        });
}

#[derive(Clone, Copy)]
struct Small {
    a: u64,
    b: [u32; 4],
}

/// A HashMap<u64, Small> filled with 10 000 entries, then emptied.
fn hashmap_insert_remove(c: &mut Criterion, allocator: &str) {
    c.benchmark_group("hashmap_insert_remove")
        .bench_function(allocator, |b| {
            b.iter(|| {
                let mut m: HashMap<u64, Small> = HashMap::new();
                for i in 0..10_000u64 {
                    m.insert(
                        i,
                        Small {
                            a: i,
                            b: [i as u32; 4],
                        },
                    );
                }
                let mut sum = 0u64;
                for i in 0..10_000u64 {
                    let s = m.remove(&i).unwrap();
                    sum += s.a + u64::from(s.b[0]);
                }
                black_box((m, sum));
            })
        });
}

/// Batches of 1000 boxed messages (16..256 bytes) allocated here and
/// dropped by a consumer thread, through a channel that holds 4 batches.
fn cross_thread_drop(c: &mut Criterion, allocator: &str) {
    let (tx, rx) = mpsc::sync_channel::<Vec<Box<[u8]>>>(4);
    let consumer = thread::spawn(move || {
        let mut n = 0usize;
        for batch in rx {
            n += batch.len();
            drop(batch);
        }
        n
    });
    c.benchmark_group("cross_thread_drop")
        .bench_function(allocator, |b| {
            b.iter(|| {
                let batch: Vec<Box<[u8]>> = (0..1000usize)
                    .map(|i| vec![i as u8; 16 + (i % 16) * 16].into_boxed_slice())
                    .collect();
                tx.send(batch).unwrap();
            })
        });
    drop(tx);
    black_box(consumer.join().unwrap());
}
