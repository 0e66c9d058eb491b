#[global_allocator]
static GLOBAL: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

#[path = "patterns.rs"]
mod patterns;

fn main() {
    patterns::main("snmalloc");
}
