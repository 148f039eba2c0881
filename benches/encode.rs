//! Benchmark placeholder; see BENCHMARKS.md.

fn main() {}
