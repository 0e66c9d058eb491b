//! The thin wrappers: statistics, version, collect.
use std::alloc::Layout;

use brisk::Heap;

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

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

#[test]
fn version_is_the_headers() {
    let v = brisk::version();
    let want = format!(
        "{}.{}.{}",
        brisk::sys::BRISK_VERSION_MAJOR,
        brisk::sys::BRISK_VERSION_MINOR,
        brisk::sys::BRISK_VERSION_PATCH
    );
    assert_eq!(v, want);
}

#[test]
fn stats_json_is_one_object_that_counts() {
    let json = brisk::stats_json();
    assert!(
        json.starts_with(&format!("{{\"version\":\"{}\"", brisk::version())),
        "{json}"
    );
    assert!(json.ends_with('}') && !json.contains('\0'), "{json}");
    let hardened = i64::from(cfg!(feature = "hardened"));
    assert_eq!(json_field(&json, "hardened"), hardened, "{json}");

    let large = json_field(&json, "large_allocs");
    let v = vec![1u8; 300_000]; // a large block
    let json = brisk::stats_json();
    assert!(json_field(&json, "large_allocs") > large, "{json}");
    assert!(json_field(&json, "mapped_bytes") >= 4 << 20, "{json}");
    drop(v);
}

#[test]
fn heap_stats_json_counts_the_heaps_blocks() {
    let heap = Heap::new();
    let json = heap.stats_json();
    for field in [
        "segments",
        "pages",
        "full_pages",
        "blocks_in_use",
        "page_bytes",
        "large_blocks",
        "large_bytes",
        "huge_blocks",
        "huge_bytes",
        "generation",
    ] {
        json_field(&json, field);
    }
    let layout = Layout::new::<[u64; 4]>();
    let blocks: Vec<_> = (0..50).map(|_| heap.alloc(layout).unwrap()).collect();
    let json = heap.stats_json();
    assert!(json_field(&json, "blocks_in_use") >= 50, "{json}");
    assert!(json_field(&json, "pages") >= 1, "{json}");
    for p in blocks {
        unsafe { heap.dealloc(p, layout) };
    }
}

#[test]
fn collect_returns_freed_huge_memory() {
    // The only test here that allocates huge blocks.
    let retained = |json: &str| json_field(json, "huge_retained");
    let v = vec![7u8; 8 << 20];
    drop(v);
    let json = brisk::stats_json();
    if !cfg!(feature = "hardened") {
        // The hardened build keeps no freed huge mapping.
        assert!(
            retained(&json) > 0,
            "a freed huge mapping is kept for reuse: {json}"
        );
    }
    brisk::collect(true);
    let json = brisk::stats_json();
    assert_eq!(retained(&json), 0, "{json}");
}

#[cfg(feature = "serde")]
mod serde_stats {
    use std::collections::BTreeSet;

    use brisk::{Heap, HeapStats, Stats};
    use serde_json::Value;

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn stats_has_a_field_for_each_of_brisks() {
        let json = brisk::stats_json();
        let stats = brisk::stats().unwrap();
        assert!(
            stats.other.is_empty(),
            "fields the struct lacks: {:?}",
            stats.other
        );
        // And the struct has no field brisk does not print.
        let printed = keys(&serde_json::from_str(&json).unwrap());
        let ours = keys(&serde_json::to_value(&stats).unwrap());
        assert_eq!(printed, ours);
        assert_eq!(stats.version, brisk::version());
        assert_eq!(stats.hardened, cfg!(feature = "hardened"));
        assert!(stats.mapped_bytes > 0 && stats.mapped_bytes <= stats.mapped_bytes_peak);
        assert!(stats.heaps >= 1 && stats.segments >= 1);
    }

    #[test]
    fn heap_stats_has_a_field_for_each_of_brisks() {
        let heap = Heap::new();
        let json = heap.stats_json();
        let stats = heap.stats().unwrap();
        assert!(stats.other.is_empty(), "{:?}", stats.other);
        let printed = keys(&serde_json::from_str(&json).unwrap());
        assert_eq!(printed, keys(&serde_json::to_value(&stats).unwrap()));
        let mut v = brisk::allocator_api2::vec::Vec::new_in(&heap);
        v.extend(0..100u64);
        let boxes: Vec<_> = (0..20)
            .map(|i| brisk::allocator_api2::boxed::Box::new_in(i, &heap))
            .collect();
        assert!(heap.stats().unwrap().blocks_in_use >= 21);
        drop(boxes);
    }

    #[test]
    fn unknown_fields_are_kept_and_missing_ones_read_as_zero() {
        let s = Stats::from_json(
            r#"{"version":"9.9.9","hardened":1,"segments":3,"later_field":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(s.version, "9.9.9");
        assert!(s.hardened);
        assert_eq!(s.segments, 3);
        assert_eq!(s.mapped_bytes, 0);
        assert_eq!(s.other["later_field"], serde_json::json!([1, 2]));
        let h = HeapStats::from_json(r#"{"blocks_in_use":5,"x":true}"#).unwrap();
        assert_eq!((h.blocks_in_use, h.pages), (5, 0));
        assert_eq!(h.other["x"], Value::Bool(true));
        assert!(Stats::from_json("{\"segments\":\"many\"}").is_err());
    }
}

#[test]
fn good_size_is_the_usable_size_of_a_block() {
    for size in (0..70_000)
        .step_by(97)
        .chain([1 << 20, 3 << 20, (5 << 20) + 1])
    {
        let p = unsafe { brisk::sys::brisk_malloc(size) };
        assert!(!p.is_null());
        assert_eq!(
            brisk::good_size(size),
            unsafe { brisk::usable_size(p) },
            "size {size}"
        );
        unsafe { brisk::sys::brisk_free(p) };
    }
    assert_eq!(brisk::good_size(usize::MAX), 0);
}

#[test]
fn options_are_read_and_changed_while_running() {
    let delay = brisk::option("PURGE_DELAY").unwrap();
    assert_eq!(brisk::option("BRISK_PURGE_DELAY").unwrap(), delay);
    brisk::set_option("PURGE_DELAY", 250).unwrap();
    assert_eq!(brisk::option("PURGE_DELAY").unwrap(), 250);
    assert!(brisk::stats_json().contains("\"purge_delay_ms\":250"));
    brisk::set_option("PURGE_DELAY", delay).unwrap();
    let e = brisk::option("NOSUCH").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    let e = brisk::set_option("PURGE_DELAY", -2).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    let e = brisk::set_option("VERBOSE", 1).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    assert!(brisk::set_option("PURGE\0DELAY", 1).is_err());
}

#[test]
fn thread_stats_count_the_threads_large_blocks() {
    std::thread::spawn(|| {
        let large = |json: &str| json_field(json, "large_blocks");
        let before = large(&brisk::thread_stats_json());
        let v = vec![1u8; 300_000];
        assert_eq!(large(&brisk::thread_stats_json()), before + 1);
        drop(v);
        assert_eq!(large(&brisk::thread_stats_json()), before);
    })
    .join()
    .unwrap();
}

#[test]
fn heap_contains_its_blocks_only() {
    let heap = Heap::new();
    let layout = Layout::from_size_align(100, 8).unwrap();
    let p = heap.alloc(layout).unwrap();
    assert!(heap.contains(p.as_ptr()));
    assert!(!heap.contains(unsafe { p.as_ptr().add(16) }));
    let other = Box::new([0u8; 100]); // the global allocator's: another heap
    assert!(!heap.contains(other.as_ptr()));
    unsafe { heap.dealloc(p, layout) };
}
