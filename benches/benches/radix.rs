//! Radix tree throughput on shared-prefix traces: match, insert, the per-request cycle
//! (match + lock + insert + unlock), and eviction. Reported as tokens/s.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sglr_benches::{heavy_trace, paper_overhead_trace};
use sglr_radix::RadixTree;

fn populated(trace: &[Vec<u32>]) -> RadixTree {
    let mut tree = RadixTree::new();
    let mut next_slot = 0u32;
    for request in trace {
        let slots: Vec<u32> = (next_slot..next_slot + request.len() as u32).collect();
        next_slot += request.len() as u32;
        tree.insert(None, request, &slots).unwrap();
    }
    tree
}

/// One request as the scheduler runs it: match, lock the prefix, insert the whole sequence
/// (fresh slots for the uncached part), unlock.
fn request_cycle(tree: &mut RadixTree, request: &[u32], next_slot: &mut u32) {
    let matched = tree.match_prefix(None, request);
    tree.lock(matched.node).unwrap();
    let mut slots = matched.slots;
    let num_new = (request.len() - slots.len()) as u32;
    slots.extend(*next_slot..*next_slot + num_new);
    *next_slot += num_new;
    tree.insert(None, request, &slots).unwrap();
    tree.unlock(matched.node).unwrap();
}

fn bench_trace(c: &mut Criterion, name: &str, trace: &[Vec<u32>], sample_size: usize) {
    let num_tokens: usize = trace.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group(name);
    group.sample_size(sample_size);
    group.throughput(Throughput::Elements(num_tokens as u64));

    group.bench_function("request_cycle", |b| {
        b.iter_batched_ref(
            RadixTree::new,
            |tree| {
                let mut next_slot = 0;
                for request in trace {
                    request_cycle(tree, request, &mut next_slot);
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("insert", |b| b.iter_batched(|| (), |()| populated(trace), BatchSize::LargeInput));
    group.bench_function("match_prefix", |b| {
        b.iter_batched_ref(
            || populated(trace),
            |tree| {
                for request in trace {
                    std::hint::black_box(tree.match_prefix(None, request));
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("match_prefix_len", |b| {
        b.iter_batched_ref(
            || populated(trace),
            |tree| {
                for request in trace {
                    std::hint::black_box(tree.match_prefix_len(None, request));
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("evict_all_in_steps_of_4096", |b| {
        b.iter_batched_ref(
            || populated(trace),
            |tree| while !tree.evict(4096).is_empty() {},
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn radix_benches(c: &mut Criterion) {
    bench_trace(c, "paper_overhead_128x512", &paper_overhead_trace(), 50);
    bench_trace(c, "heavy_10k_requests", &heavy_trace(), 10);
}

criterion_group!(benches, radix_benches);
criterion_main!(benches);
