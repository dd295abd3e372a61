//! Criterion benchmarks live in `benches/`; shared trace generators live here.
