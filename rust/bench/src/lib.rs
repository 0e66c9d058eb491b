//! Nothing here: the benchmarks are in benches/.
