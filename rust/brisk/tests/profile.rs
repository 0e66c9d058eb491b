//! The heap profiler from Rust: started and dumped through the safe
//! wrappers, it finds the memory a Rust program keeps.

#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

/// (in-use bytes, allocated bytes) from a heap profile's header.
fn header_bytes(text: &str) -> (u64, u64) {
    let first = text.lines().next().expect("an empty dump");
    let rest = first
        .strip_prefix("heap profile: ")
        .unwrap_or_else(|| panic!("not a heap profile: {first}"));
    let numbers: Vec<u64> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(numbers.len() >= 4, "bad header: {first}");
    (numbers[1], numbers[3])
}

#[test]
fn a_dump_finds_what_the_program_keeps() {
    let dir = std::env::temp_dir().join(format!("brisk-rust-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    brisk::set_option("PROFILE_RATE", 4096).unwrap();
    brisk::profile_start(dir.join("p").to_str().unwrap()).unwrap();

    let kept: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8; 2048]).collect();
    let path = dir.join("kept.heap");
    brisk::profile_dump(Some(path.to_str().unwrap())).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let (in_use, allocated) = header_bytes(&text);
    let want = 2000 * 2048;
    assert!(
        in_use as f64 >= 0.9 * want as f64 && allocated >= in_use,
        "{in_use} bytes in use, {allocated} allocated; {want} kept"
    );
    assert!(text.contains("\nMAPPED_LIBRARIES:\n"));
    assert!(dir.join("kept.collapsed").exists());
    drop(kept);

    brisk::profile_dump(None).unwrap();
    let auto = dir.join(format!("p.{}.0.heap", std::process::id()));
    assert!(auto.exists(), "no {}", auto.display());
    brisk::profile_stop();
    let err = brisk::profile_dump(Some("")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert!(brisk::profile_start("a\0b").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
