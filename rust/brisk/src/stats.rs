//! brisk's statistics as Rust structs (feature `serde`). The fields are the
//! ones brisk prints (src/stats.c, src/counters.h); fields brisk adds later
//! are kept in `other`, and fields it drops read as 0.
//!
//! The serde implementations are written out (by the macro below) rather
//! than derived, so that the feature costs no proc-macro build.
use std::collections::BTreeMap;

use serde::de::{Deserialize, Deserializer, Error as _};
use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Value};

/// A field type of brisk's JSON.
trait Field: Sized {
    fn from_value(v: &Value) -> Option<Self>;
    fn to_value(&self) -> Value;
}

impl Field for i64 {
    fn from_value(v: &Value) -> Option<i64> {
        v.as_i64()
    }
    fn to_value(&self) -> Value {
        Value::from(*self)
    }
}

impl Field for u64 {
    fn from_value(v: &Value) -> Option<u64> {
        v.as_u64()
    }
    fn to_value(&self) -> Value {
        Value::from(*self)
    }
}

impl Field for String {
    fn from_value(v: &Value) -> Option<String> {
        v.as_str().map(str::to_owned)
    }
    fn to_value(&self) -> Value {
        Value::from(self.as_str())
    }
}

/// brisk prints flags as 0 or 1.
impl Field for bool {
    fn from_value(v: &Value) -> Option<bool> {
        v.as_bool().or_else(|| v.as_i64().map(|n| n != 0))
    }
    fn to_value(&self) -> Value {
        Value::from(u8::from(*self))
    }
}

macro_rules! json_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// Fields this version of the crate does not know.
            pub other: BTreeMap<String, Value>,
        }

        impl $name {
            /// The names of the fields, as brisk prints them.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Parse brisk's JSON.
            pub fn from_json(json: &str) -> Result<$name, serde_json::Error> {
                serde_json::from_str(json)
            }

            fn from_map(mut map: Map<String, Value>) -> Result<$name, String> {
                let mut out = $name::default();
                $(
                    if let Some(v) = map.remove(stringify!($field)) {
                        out.$field = Field::from_value(&v)
                            .ok_or_else(|| format!("field {}: unexpected {v}", stringify!($field)))?;
                    }
                )*
                out.other = map.into_iter().collect();
                Ok(out)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                $name::from_map(Map::deserialize(d)?).map_err(D::Error::custom)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = Map::new();
                $(map.insert(stringify!($field).to_owned(), self.$field.to_value());)*
                for (k, v) in &self.other {
                    map.insert(k.clone(), v.clone());
                }
                map.serialize(s)
            }
        }
    };
}

json_struct! {
    /// Process-wide statistics ([`crate::stats`]). Levels go up and down and
    /// have their peak beside them (`_peak`); counts only grow.
    pub struct Stats {
        /// brisk's version.
        version: String,
        /// Whether this is brisk's hardened build.
        hardened: bool,
        /// The purge delay in force, in milliseconds (-1: never).
        purge_delay_ms: i64,
        /// Bytes mapped from the OS.
        mapped_bytes: i64,
        mapped_bytes_peak: i64,
        /// 4 MiB segments mapped.
        segments: i64,
        segments_peak: i64,
        /// Bytes mapped for huge blocks, their tails included.
        huge_bytes: i64,
        huge_bytes_peak: i64,
        /// Bytes of huge mappings kept for reuse.
        huge_retained: i64,
        huge_retained_peak: i64,
        /// Huge blocks in use.
        huge_blocks: i64,
        huge_blocks_peak: i64,
        /// Pages in use.
        pages: i64,
        pages_peak: i64,
        /// Heaps alive (threads' and first-class).
        heaps: i64,
        heaps_peak: i64,
        mmap_calls: i64,
        munmap_calls: i64,
        /// madvise calls (purges).
        madvise_calls: i64,
        /// Bytes returned to the OS by purges.
        purged_bytes: i64,
        /// System calls the OS refused: mmap (or a growing mremap), mremap,
        /// the background thread's start, purges (locked memory: the memory
        /// stays resident and is never taken for zero), munmap, and the
        /// hardened build's guard-page mprotect.
        map_failures: i64,
        remap_failures: i64,
        thread_failures: i64,
        /// membarrier calls the OS refused (the large keep is then off).
        fence_failures: i64,
        purge_failures: i64,
        unmap_failures: i64,
        protect_failures: i64,
        /// Guarded samples handed out (`BRISK_GUARD_RATE`), and those live
        /// (with their peak).
        guarded_allocs: i64,
        guarded_live: i64,
        guarded_live_peak: i64,
        huge_allocs: i64,
        large_allocs: i64,
        /// Spans of freed large blocks a thread kept unused for a purge
        /// delay, given back to its set by the background thread (purged at
        /// once if the thread was idle).
        large_keep_returned: i64,
        /// Batches of frees from other threads handed over.
        remote_batches: i64,
        /// Blocks freed by a thread other than their owner, and of those,
        /// the blocks the background thread took from an idle owner's inbox.
        remote_frees: i64,
        remote_parked: i64,
        /// Heaps left by exiting threads, and those taken over by new threads.
        heaps_abandoned: i64,
        heaps_adopted: i64,
        /// Pointers handed back to the previous allocator (glibc).
        foreign_frees: i64,
        /// The background purger: threads running (0 or 1, with its peak),
        /// purge rounds, and wake-ups.
        background_threads: i64,
        background_threads_peak: i64,
        background_rounds: i64,
        background_wakeups: i64,
        background_wake_calls: i64,
        /// Heap profiler frame rules read from unwind tables (misses of its
        /// rule cache), and of those, the ones read through the object's
        /// mapping rather than its file (which makes the pages resident).
        profile_rules_read: i64,
        profile_rules_read_mapped: i64,
        /// Heap profiler stack walks left to libgcc's unwinder (a frame
        /// whose unwind rules brisk's own walk does not read).
        profile_unwinder_walks: i64,
        /// Bad inputs reported.
        errors: i64,
        /// From a walk of brisk's memory: bytes of pages and large blocks in
        /// use, bytes mapped but free, the part of those not yet returned to
        /// the OS, free runs, and bytes of huge blocks in use.
        span_bytes: i64,
        free_bytes: i64,
        free_resident_bytes: i64,
        free_chunks: i64,
        huge_block_bytes: i64,
        /// The process as the OS sees it: resident bytes now and at the
        /// peak, page faults without and with I/O.
        process_rss_bytes: i64,
        process_rss_peak_bytes: i64,
        process_minor_faults: i64,
        process_major_faults: i64,
    }
}

json_struct! {
    /// Statistics of one [`crate::Heap`] ([`crate::Heap::stats`]).
    pub struct HeapStats {
        /// Segments the heap owns.
        segments: u64,
        /// Pages in use, full ones included.
        pages: u64,
        full_pages: u64,
        /// Blocks allocated and not freed (large and huge ones included).
        blocks_in_use: u64,
        /// Bytes of the heap's pages.
        page_bytes: u64,
        /// Large blocks in use, and the bytes of their spans.
        large_blocks: u64,
        large_bytes: u64,
        /// Huge blocks of the heap in use, and their bytes (a thread's own
        /// heap has none: its huge blocks belong to no heap).
        huge_blocks: u64,
        huge_bytes: u64,
        generation: u64,
    }
}
