#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "patterns.rs"]
mod patterns;

fn main() {
    patterns::main("mimalloc");
}
