#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "patterns.rs"]
mod patterns;

fn main() {
    patterns::main("jemalloc");
}
