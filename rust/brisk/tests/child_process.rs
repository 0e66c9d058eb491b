//! What brisk does with misuse and with no memory left, each in a child
//! process of its own (this test binary again, running one test with
//! CHILD_MODE set): the fault injection is process-wide, the reports go to
//! stderr, and a failed allocation may abort.
use std::alloc::{self, Layout};
use std::env;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::thread;

use brisk::{Arena, Heap};
use brisk_sys as sys;

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

/// Not `BRISK_*`: brisk reports unknown options of its own prefix.
const CHILD_MODE: &str = "RUST_BRISK_TEST_CHILD";
const DONE: &str = "child: done";
/// More than brisk keeps of freed huge blocks (128 MiB), so it must come
/// from the OS.
const TOO_BIG: usize = 256 << 20;

fn is_child(test: &str) -> bool {
    env::var(CHILD_MODE).is_ok_and(|m| m == test)
}

/// Run `test` alone in a child process that takes the child's side.
fn run_child(test: &str) -> (Output, String, String) {
    let out = Command::new(env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, test)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

#[test]
fn heap_used_from_another_thread_is_reported_and_fails() {
    const TEST: &str = "heap_used_from_another_thread_is_reported_and_fails";
    if is_child(TEST) {
        unsafe {
            let heap = sys::brisk_heap_new();
            assert!(!heap.is_null());
            let addr = heap as usize;
            let (p, errno) = thread::spawn(move || {
                let p = sys::brisk_heap_malloc(addr as *mut sys::brisk_heap_t, 64);
                (p as usize, std::io::Error::last_os_error().raw_os_error())
            })
            .join()
            .unwrap();
            println!("child: heap {addr:#x} from another thread gave {p:#x}, errno {errno:?}");
            // The heap still works on its own thread.
            let q = sys::brisk_heap_malloc(heap, 64);
            assert!(!q.is_null());
            sys::brisk_heap_destroy(heap);
        }
        println!("{DONE}");
        return;
    }
    let (out, stdout, stderr) = run_child(TEST);
    assert!(
        out.status.success() && stdout.contains(DONE),
        "{out:?}\n{stdout}\n{stderr}"
    );
    let heap = stdout
        .split("child: heap ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("no heap address in {stdout}"));
    assert!(
        stdout.contains(" gave 0x0, errno Some(22)"),
        "not null with EINVAL: {stdout}"
    );
    let line = format!(
        "brisk: error: brisk_heap_malloc({heap}): the heap allocates only on the thread that created it"
    );
    assert!(
        stderr.lines().any(|l| l == line),
        "no line {line:?} in stderr:\n{stderr}"
    );
}

#[test]
fn out_of_memory_returns_null() {
    const TEST: &str = "out_of_memory_returns_null";
    if is_child(TEST) {
        let small = Layout::from_size_align(64, 16).unwrap();
        let big = Layout::from_size_align(TOO_BIG, 16).unwrap();
        let big_aligned = Layout::from_size_align(TOO_BIG, 4096).unwrap();
        let heap = Heap::new();
        let arena = Arena::new(&heap, 4096);
        let results = unsafe {
            let keep = alloc::alloc(small);
            keep.write_bytes(0x5a, 64);
            sys::brisk_fault_injection(0, 0);
            let r = [
                alloc::alloc(big),
                alloc::alloc_zeroed(big),
                alloc::alloc(big_aligned),
                alloc::alloc_zeroed(big_aligned),
                alloc::realloc(keep, small, TOO_BIG),
                heap.alloc(big).map_or(std::ptr::null_mut(), |p| p.as_ptr()),
                heap.alloc(big_aligned)
                    .map_or(std::ptr::null_mut(), |p| p.as_ptr()),
                arena
                    .alloc(big)
                    .map_or(std::ptr::null_mut(), |p| p.as_ptr()),
            ];
            sys::brisk_fault_injection(-1, 0);
            // The block a failed realloc had stays as it was.
            assert!((0..64).all(|i| *keep.add(i) == 0x5a));
            alloc::dealloc(keep, small);
            r
        };
        assert!(results.iter().all(|p| p.is_null()), "{results:?}");
        // Memory is back: the same requests succeed.
        unsafe {
            let p = alloc::alloc_zeroed(big_aligned);
            assert!(!p.is_null() && (p as usize).is_multiple_of(4096));
            assert_eq!(*p.add(TOO_BIG - 1), 0);
            alloc::dealloc(p, big_aligned);
        }
        assert!(heap.alloc(big).is_some());
        assert!(arena.alloc(big).is_some());
        println!("{DONE}");
        return;
    }
    let (out, stdout, stderr) = run_child(TEST);
    assert!(
        out.status.success() && stdout.contains(DONE),
        "{out:?}\n{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("brisk: error"), "{stderr}");
}

#[test]
fn out_of_memory_reaches_handle_alloc_error() {
    const TEST: &str = "out_of_memory_reaches_handle_alloc_error";
    if is_child(TEST) {
        unsafe { sys::brisk_fault_injection(0, 0) };
        let v: Vec<u8> = Vec::with_capacity(TOO_BIG); // aborts in handle_alloc_error
        unsafe { sys::brisk_fault_injection(-1, 0) };
        println!("child: got {:p}", v.as_ptr());
        return;
    }
    let (out, stdout, stderr) = run_child(TEST);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{out:?}\n{stdout}\n{stderr}"
    );
    let line = format!("memory allocation of {TOO_BIG} bytes failed");
    assert!(stderr.contains(&line), "no {line:?} in stderr:\n{stderr}");
    assert!(!stdout.contains("child: got"), "{stdout}");
}

#[test]
fn dropping_a_heap_releases_its_blocks() {
    const TEST: &str = "dropping_a_heap_releases_its_blocks";
    if is_child(TEST) {
        let heap = Heap::new();
        let blocks: Vec<usize> = (0..3000usize)
            .map(|i| {
                let size = match i % 100 {
                    99 => 200_000,
                    _ => 8 + i % 1000,
                };
                let layout = Layout::from_size_align(size, 8 << (i % 4)).unwrap();
                heap.alloc(layout).unwrap().as_ptr() as usize
            })
            .collect();
        assert!(blocks.iter().all(|&p| brisk::owns(p as *const u8)));
        drop(heap);
        let kept = blocks
            .iter()
            .filter(|&&p| brisk::owns(p as *const u8))
            .count();
        assert_eq!(
            kept, 0,
            "{kept} blocks still owned after the heap was dropped"
        );
        println!("{DONE}");
        return;
    }
    let (out, stdout, stderr) = run_child(TEST);
    assert!(
        out.status.success() && stdout.contains(DONE),
        "{out:?}\n{stdout}\n{stderr}"
    );
}
