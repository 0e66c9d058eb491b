//! brisk's statistics as Rust structs (feature `serde`). The fields are the
//! ones brisk prints (src/stats.c, src/counters.h); fields brisk adds later
//! are kept in `other`, and fields it drops read as 0.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Process-wide statistics ([`crate::stats`]). Levels go up and down and
/// have their peak beside them (`_peak`); counts only grow.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Stats {
    /// brisk's version.
    pub version: String,
    /// Whether this is brisk's hardened build.
    #[serde(with = "zero_one")]
    pub hardened: bool,
    /// The purge delay in force, in milliseconds (-1: never).
    pub purge_delay_ms: i64,
    /// Bytes mapped from the OS.
    pub mapped_bytes: i64,
    pub mapped_bytes_peak: i64,
    /// 4 MiB segments mapped.
    pub segments: i64,
    pub segments_peak: i64,
    /// Bytes mapped for huge blocks, their tails included.
    pub huge_bytes: i64,
    pub huge_bytes_peak: i64,
    /// Bytes of huge mappings kept for reuse.
    pub huge_retained: i64,
    pub huge_retained_peak: i64,
    /// Pages in use.
    pub pages: i64,
    pub pages_peak: i64,
    /// Heaps alive (threads' and first-class).
    pub heaps: i64,
    pub heaps_peak: i64,
    pub mmap_calls: i64,
    pub munmap_calls: i64,
    /// madvise calls (purges).
    pub madvise_calls: i64,
    /// Bytes returned to the OS by purges.
    pub purged_bytes: i64,
    pub huge_allocs: i64,
    pub large_allocs: i64,
    /// Batches of frees from other threads handed over.
    pub remote_batches: i64,
    /// Blocks freed by a thread other than their owner.
    pub remote_frees: i64,
    /// Heaps left by exiting threads, and those taken over by new threads.
    pub heaps_abandoned: i64,
    pub heaps_adopted: i64,
    /// Pointers handed back to the previous allocator (glibc).
    pub foreign_frees: i64,
    /// Bad inputs reported.
    pub errors: i64,
    /// Fields this version of the crate does not know.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Stats {
    /// Parse the JSON of `brisk_stats_json`.
    pub fn from_json(json: &str) -> Result<Stats, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// Statistics of one [`crate::Heap`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct HeapStats {
    /// Segments the heap owns.
    pub segments: u64,
    /// Pages in use, full ones included.
    pub pages: u64,
    pub full_pages: u64,
    /// Blocks allocated and not freed.
    pub blocks_in_use: u64,
    /// Bytes of the heap's pages.
    pub page_bytes: u64,
    pub generation: u64,
    /// Fields this version of the crate does not know.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl HeapStats {
    /// Parse the JSON of `brisk_heap_stats_json`.
    pub fn from_json(json: &str) -> Result<HeapStats, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// brisk prints flags as 0 or 1.
mod zero_one {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(u8::from(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Flag {
            Number(i64),
            Bool(bool),
        }
        Ok(match Flag::deserialize(d)? {
            Flag::Number(n) => n != 0,
            Flag::Bool(b) => b,
        })
    }
}
