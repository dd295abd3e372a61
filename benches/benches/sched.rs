//! Selection latency vs. queue length (`cargo bench -p sglr-benches --bench sched`).
//!
//! - `steady/<policy>/<len>/<n>`: one `select` over `n` waiting requests whose matches are
//!   already known from earlier steps (the engine's every-step cost). The admitted requests
//!   are put back untimed after each step (new arrivals, matched afresh next step).
//! - `burst/<policy>/<len>/<n>`: the first `select` after `n` requests arrived at once (every
//!   prompt is matched for the first time), with the default per-step match budget and with
//!   an unbounded one: where the budget (the large-queue fallback) starts to matter.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sglr_benches::sched_trace::{sched_trace, SchedTrace};
use sglr_radix::{NodeId, RadixTree};
use sglr_sched::{Policy, SchedConfig, Scheduler, StepInput};

const QUEUE_LENS: [usize; 7] = [128, 256, 512, 1024, 2048, 4096, 8192];

fn config(policy: Policy, max_match_tokens_per_step: usize) -> SchedConfig {
    SchedConfig {
        policy,
        max_prefill_tokens: 16384,
        max_running_requests: 1024,
        max_match_tokens_per_step,
        ..SchedConfig::default()
    }
}

fn running() -> Vec<u32> {
    (0..64).map(|i| 100 + i * 3).collect()
}

fn filled(trace: &SchedTrace, config: SchedConfig) -> Scheduler<NodeId> {
    let mut sched = Scheduler::new(config).expect("valid config");
    for request in &trace.requests {
        sched.add(request.clone()).expect("unique rids");
    }
    sched
}

/// One timed `select`; the admitted requests go back into the queue (untimed).
fn timed_step(
    sched: &mut Scheduler<NodeId>,
    tree: &mut RadixTree,
    trace: &SchedTrace,
    running: &[u32],
) -> Duration {
    let input = StepInput { num_free_slots: 1 << 26, running_tokens_left: running, now_s: 0.0 };
    let start = Instant::now();
    let decision = black_box(sched.select(tree, &input).expect("select"));
    let elapsed = start.elapsed();
    for admission in &decision.admissions {
        if let Some(node) = admission.node {
            tree.unlock(node).expect("locked by select");
        }
        // A chunked admission is still held; start it over like the others.
        sched.remove(admission.rid);
        sched.add(trace.requests[admission.rid as usize].clone()).expect("admitted requests left the queue");
    }
    elapsed
}

fn steady(c: &mut Criterion) {
    let running = running();
    for (len_name, min_len, max_len) in [("2k", 2048, 2048), ("1-4k", 1024, 4096)] {
        for policy in [Policy::Lpm, Policy::DfsWeight, Policy::Fcfs] {
            let mut group = c.benchmark_group(format!("steady/{policy}/{len_name}"));
            group.sample_size(20).warm_up_time(Duration::from_millis(300));
            group.measurement_time(Duration::from_secs(2));
            for n in QUEUE_LENS {
                if len_name != "2k" && n > 2048 && policy != Policy::Lpm {
                    continue;
                }
                // Built on first use (criterion calls the closure once per sample, and not at
                // all for benchmarks the filter skips).
                let mut state = None;
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    let (trace, sched, tree) = state.get_or_insert_with(|| {
                        let mut trace = sched_trace(n, min_len, max_len, 7);
                        let mut sched = filled(&trace, config(policy, 1 << 20));
                        let mut tree = std::mem::take(&mut trace.tree);
                        // Warm: every request matched at least once.
                        for _ in 0..(n / 8).max(2) {
                            timed_step(&mut sched, &mut tree, &trace, &running);
                        }
                        (trace, sched, tree)
                    });
                    b.iter_custom(|iters| (0..iters).map(|_| timed_step(sched, tree, trace, &running)).sum())
                });
            }
            group.finish();
        }
    }
}

fn burst(c: &mut Criterion) {
    let running = running();
    for (budget_name, budget) in [("default-budget", 1usize << 20), ("unbounded", usize::MAX)] {
        let mut group = c.benchmark_group(format!("burst/lpm/2k/{budget_name}"));
        group.sample_size(10).warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(2));
        for n in QUEUE_LENS {
            let mut state = None;
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                let (trace, tree) = state.get_or_insert_with(|| {
                    let mut trace = sched_trace(n, 2048, 2048, 11);
                    let tree = std::mem::take(&mut trace.tree);
                    (trace, tree)
                });
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut sched = filled(trace, config(Policy::Lpm, budget));
                        total += timed_step(&mut sched, tree, trace, &running);
                    }
                    total
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, steady, burst);
criterion_main!(benches);
