//! The example program builds, runs, and finds its allocations brisk's.
use std::process::Command;

#[test]
fn the_program_runs_on_brisk() {
    let out = Command::new(env!("CARGO_BIN_EXE_brisk-example"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    let want = format!(
        "brisk {} served every allocation of this program\n",
        brisk::version()
    );
    assert_eq!(stdout, want);
    assert!(stderr.is_empty(), "{stderr}");
}
