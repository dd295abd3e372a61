//! Times `expert_mlp` on Mixtral-shaped experts (hidden 512, intermediate 1792, 8 experts, top-2)
//! over four layers' weights (more than the caches hold), for a few batch sizes.
//!
//!     cargo run --release -p sglr-kernels --example expert_timing [threads]

use std::time::Instant;

use sglr_kernels::moe::{expert_mlp, pack_panels, ExpertWeights};

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(1, |a| a.parse().expect("threads"));
    let (experts, hidden, inter, top_k, layers) = (8, 512, 1792, 2, 4);
    let fill = |n: usize, seed: usize| -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + seed * 104_729) % 2001) as f32 - 1000.0) * 1e-4).collect()
    };
    // Packing the stack as one matrix packs each expert (expert blocks are whole panels).
    let w13: Vec<Vec<f32>> = (0..layers)
        .map(|l| pack_panels(&fill(experts * 2 * inter * hidden, l), experts * 2 * inter, hidden).unwrap())
        .collect();
    let w2: Vec<Vec<f32>> = (0..layers)
        .map(|l| pack_panels(&fill(experts * inter * hidden, l + 9), experts * hidden, inter).unwrap())
        .collect();
    let bytes = layers * experts * 3 * inter * hidden * 4;
    for tokens in [1usize, 4, 8, 16, 32, 64, 256] {
        let x = fill(tokens * hidden, 3);
        let ids: Vec<i64> = (0..tokens * top_k).map(|p| ((p * 3) % experts) as i64).collect();
        let wts = vec![0.5f32; tokens * top_k];
        let mut out = vec![0.0f32; tokens * hidden];
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for l in 0..layers {
                let w = ExpertWeights::new(&w13[l], &w2[l], experts, hidden, inter).unwrap();
                expert_mlp(&w, &x, &ids, &wts, top_k, &mut out, threads).unwrap();
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "tokens {tokens:3}: {:7.2} ms for {layers} layers, {:5.1} GB/s",
            best * 1e3,
            bytes as f64 / best / 1e9
        );
    }
}
