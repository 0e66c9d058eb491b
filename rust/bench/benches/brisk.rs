#[global_allocator]
static GLOBAL: brisk::Brisk = brisk::Brisk;

#[path = "patterns.rs"]
mod patterns;

fn main() {
    let probe = Box::new(0u64);
    assert!(brisk::owns(&*probe), "the global allocator is not brisk");
    patterns::main("brisk");
}
