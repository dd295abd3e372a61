//! Two uses, both on one trace (`paper` or `heavy`, as in `benches/radix_vs_gateway.rs`):
//!
//! - `radix_trace <which> <trace>`: one pass of one tree (`which` in {none, radix, gateway1,
//!   forest, gateway2}), for instruction counts under
//!   `valgrind --tool=callgrind target/release/examples/radix_trace <which> <trace>`. Those are
//!   deterministic, unlike wall time on a shared machine. Trace and text construction are
//!   counted too: `which = none` is that part alone, to subtract. `radix_trace <which> <trace>
//!   <passes>` runs it that many times (each on a fresh tree), for `perf record`.
//! - `radix_trace interleaved <trace> [rounds]`: wall time with the four trees interleaved
//!   round by round (each round runs every tree once on a fresh tree), so load that comes and
//!   goes hits all of them alike. Prints per-request medians and the median of the per-round
//!   ratios gateway / sglr. A fifth row, `keys`, reads the trace's tokens once (an OR over
//!   them): the floor that reading the requests from memory sets for any tree.

use std::time::Instant;

use sglr_benches::gateway_tree::{token_text, GatewayTree};
use sglr_benches::radix_compare::{
    forest_route, gateway_route, gateway_single_tenant, radix_cycle, two_replica_forest, two_tenants,
};
use sglr_benches::{heavy_2k_trace, paper_overhead_trace};
use sglr_radix::RadixTree;

/// Interleaved in this order; `keys` (last, so that it leaves the caches as they were for the
/// trees) only reads every request's tokens once: the memory traffic no tree can avoid.
const TREES: [&str; 5] = ["radix", "gateway1", "forest", "gateway2", "keys"];

/// Runs one tree over the trace; returns the seconds spent in tree calls (building and
/// dropping the empty tree excluded).
fn run(which: &str, trace: &[Vec<u32>], texts: &[String]) -> f64 {
    let tenants = two_tenants();
    match which {
        "none" => 0.0,
        "radix" => {
            let mut tree = RadixTree::new();
            let start = Instant::now();
            radix_cycle(&mut tree, trace);
            start.elapsed().as_secs_f64()
        }
        "gateway1" => {
            let tree = GatewayTree::new();
            let start = Instant::now();
            gateway_single_tenant(&tree, texts, &tenants[0]);
            start.elapsed().as_secs_f64()
        }
        "forest" => {
            let mut forest = two_replica_forest();
            let start = Instant::now();
            std::hint::black_box(forest_route(&mut forest, trace));
            start.elapsed().as_secs_f64()
        }
        "gateway2" => {
            let tree = GatewayTree::new();
            let start = Instant::now();
            std::hint::black_box(gateway_route(&tree, texts, &tenants));
            start.elapsed().as_secs_f64()
        }
        "keys" => {
            let start = Instant::now();
            let bits = trace.iter().flatten().fold(0u32, |bits, &token| bits | token);
            std::hint::black_box(bits);
            start.elapsed().as_secs_f64()
        }
        other => panic!("unknown tree {other}"),
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn interleaved(trace: &[Vec<u32>], texts: &[String], rounds: usize) {
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); TREES.len()];
    for _ in 0..rounds {
        for (which, samples) in TREES.iter().zip(&mut times) {
            samples.push(run(which, trace, texts));
        }
    }
    let per_round_ratio = |ours: usize, theirs: usize| {
        let mut ratios: Vec<f64> = times[theirs].iter().zip(&times[ours]).map(|(t, o)| t / o).collect();
        median(&mut ratios)
    };
    let (kv_ratio, router_ratio) = (per_round_ratio(0, 1), per_round_ratio(2, 3));
    println!("{} requests, {rounds} rounds, medians", trace.len());
    for (which, samples) in TREES.iter().zip(&times) {
        let seconds = median(&mut samples.clone());
        println!(
            "{which:<9} {:>9.3} ms  {:>8.2} us/request",
            seconds * 1e3,
            seconds * 1e6 / trace.len() as f64
        );
    }
    println!("gateway1 / radix  (KV, 1 tenant):       {kv_ratio:.2}x");
    println!("gateway2 / forest (router, 2 replicas): {router_ratio:.2}x");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: radix_trace <none|radix|gateway1|forest|gateway2|keys|interleaved> <paper|heavy> [rounds|passes]";
    let (which, trace_name) = match args.as_slice() {
        [_, which, trace] | [_, which, trace, _] => (which.as_str(), trace.as_str()),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let trace = match trace_name {
        "paper" => paper_overhead_trace(),
        "heavy" => heavy_2k_trace(),
        other => panic!("unknown trace {other}; {usage}"),
    };
    let texts: Vec<String> = trace.iter().map(|request| token_text(request)).collect();
    if which == "interleaved" {
        let rounds = args.get(3).map_or(21, |rounds| rounds.parse().expect("rounds: a number"));
        interleaved(&trace, &texts, rounds);
    } else {
        let passes = args.get(3).map_or(1, |passes| passes.parse().expect("passes: a number"));
        for _ in 0..passes {
            run(which, &trace, &texts);
        }
    }
}
