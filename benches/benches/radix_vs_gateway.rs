//! sglr's prefix trees against a reconstruction of SGLang's Rust router tree core (the
//! gateway's approximate radix tree, `sglr_benches::gateway_tree`), side by side in one run,
//! on the paper-shaped trace (128 requests, 16 groups of 8, 256 shared + 256 own tokens) and
//! the heavy trace of `benches/radix_overhead.py` (2,000 requests of 1-4k tokens).
//!
//! - `kv/*`: the KV-cache use: sglr's `RadixTree` request cycle (match + lock + insert +
//!   unlock) against the gateway tree with one tenant (match + insert);
//! - `router/*`: two replicas: sglr's `PrefixForest::route` (one call: match both, choose,
//!   insert) against the gateway tree with two tenants (match + insert), same routing rule.
//!
//! Every iteration starts from an empty tree; throughput is in requests, so criterion's time
//! per iteration divided by the request count is the per-request cost.
//! `cargo bench -p sglr-benches --bench radix_vs_gateway`

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sglr_benches::gateway_tree::{token_text, GatewayTree};
use sglr_benches::radix_compare::{
    forest_route, gateway_route, gateway_single_tenant, radix_cycle, two_replica_forest, two_tenants,
};
use sglr_benches::{heavy_2k_trace, paper_overhead_trace};
use sglr_radix::RadixTree;

fn compare(c: &mut Criterion, name: &str, trace: &[Vec<u32>], measurement_secs: u64) {
    let texts: Vec<String> = trace.iter().map(|request| token_text(request)).collect();
    let tenants = two_tenants();
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(measurement_secs));
    group.throughput(Throughput::Elements(trace.len() as u64));

    group.bench_function("kv/sglr_radix_cycle", |b| {
        b.iter_batched_ref(RadixTree::new, |tree| radix_cycle(tree, trace), BatchSize::LargeInput)
    });
    group.bench_function("kv/gateway_1_tenant", |b| {
        b.iter_batched_ref(
            GatewayTree::new,
            |tree| gateway_single_tenant(tree, &texts, &tenants[0]),
            BatchSize::LargeInput,
        )
    });
    group.bench_function("router/sglr_forest_2_replicas", |b| {
        b.iter_batched_ref(two_replica_forest, |forest| forest_route(forest, trace), BatchSize::LargeInput)
    });
    group.bench_function("router/gateway_2_tenants", |b| {
        b.iter_batched_ref(
            GatewayTree::new,
            |tree| gateway_route(tree, &texts, &tenants),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn radix_vs_gateway(c: &mut Criterion) {
    compare(c, "radix_vs_gateway/paper_128", &paper_overhead_trace(), 3);
    compare(c, "radix_vs_gateway/heavy_2000", &heavy_2k_trace(), 10);
}

criterion_group!(benches, radix_vs_gateway);
criterion_main!(benches);
