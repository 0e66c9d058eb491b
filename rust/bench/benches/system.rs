//! The system allocator (glibc's malloc): Rust's default.
#[path = "patterns.rs"]
mod patterns;

fn main() {
    patterns::main("system");
}
