//! `expert_mlp` against a token-by-token f64 reference, over thread counts, row counts that take
//! several passes, experts without tokens, and its input checks.

use proptest::prelude::*;
use sglr_kernels::moe::{expert_mlp, pack_panels, ExpertWeights, MoeError, PANEL};

struct Case {
    experts: usize,
    hidden: usize,
    inter: usize,
    top_k: usize,
    w13: Vec<f32>,
    w2: Vec<f32>,
    x: Vec<f32>,
    ids: Vec<i64>,
    routing: Vec<f32>,
}

/// Deterministic values in [-1, 1) from a seed (no RNG dependency).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

impl Case {
    fn new(experts: usize, hidden: usize, inter: usize, tokens: usize, top_k: usize, seed: u64) -> Self {
        let scale = |v: Vec<f32>, s: f32| v.into_iter().map(|x| x * s).collect::<Vec<_>>();
        let w13 = scale(values(experts * 2 * inter * hidden, seed), 1.0 / (hidden as f32).sqrt());
        let w2 = scale(values(experts * hidden * inter, seed + 1), 1.0 / (inter as f32).sqrt());
        let x = values(tokens * hidden, seed + 2);
        // Distinct experts per token; the last expert gets none (an empty run).
        let ids = (0..tokens * top_k)
            .map(|p| (((p / top_k) * 3 + (p % top_k) * 5 + seed as usize) % (experts - 1)) as i64)
            .collect::<Vec<_>>();
        let routing = values(tokens * top_k, seed + 3).into_iter().map(|v| 0.5 + 0.5 * v).collect();
        Self { experts, hidden, inter, top_k, w13, w2, x, ids, routing }
    }

    fn packed(&self) -> (Vec<f32>, Vec<f32>) {
        let (e, h, i) = (self.experts, self.hidden, self.inter);
        (pack_panels(&self.w13, e * 2 * i, h).unwrap(), pack_panels(&self.w2, e * h, i).unwrap())
    }

    fn run(&self, num_threads: usize) -> Vec<f32> {
        let (w13, w2) = self.packed();
        let weights = ExpertWeights::new(&w13, &w2, self.experts, self.hidden, self.inter).unwrap();
        let mut out = vec![f32::NAN; self.x.len()];
        expert_mlp(&weights, &self.x, &self.ids, &self.routing, self.top_k, &mut out, num_threads).unwrap();
        out
    }

    fn reference(&self) -> Vec<f64> {
        let (h, i) = (self.hidden, self.inter);
        let mut out = vec![0.0f64; self.x.len()];
        for (t, x) in self.x.chunks_exact(h).enumerate() {
            for k in 0..self.top_k {
                let e = self.ids[t * self.top_k + k] as usize;
                let w13 = &self.w13[e * 2 * i * h..(e + 1) * 2 * i * h];
                let w2 = &self.w2[e * h * i..(e + 1) * h * i];
                let dot =
                    |row: &[f32], v: &[f64]| row.iter().zip(v).map(|(&a, &b)| f64::from(a) * b).sum::<f64>();
                let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                let act: Vec<f64> = (0..i)
                    .map(|j| {
                        let gate = dot(&w13[j * h..(j + 1) * h], &xs);
                        let up = dot(&w13[(i + j) * h..(i + j + 1) * h], &xs);
                        gate / (1.0 + (-gate).exp()) * up
                    })
                    .collect();
                for c in 0..h {
                    out[t * h + c] +=
                        f64::from(self.routing[t * self.top_k + k]) * dot(&w2[c * i..(c + 1) * i], &act);
                }
            }
        }
        out
    }
}

fn assert_close(got: &[f32], expected: &[f64]) {
    for (index, (&g, &e)) in got.iter().zip(expected).enumerate() {
        assert!((f64::from(g) - e).abs() <= 1e-4 + 1e-4 * e.abs(), "value {index}: {g} vs {e}");
    }
}

#[test]
fn matches_the_reference_for_one_token_to_many_per_expert() {
    // 1 token: one row per expert; 40 tokens x top-2 over 5 used experts: 16 rows, three passes.
    for (tokens, top_k) in [(1, 1), (3, 2), (7, 3), (40, 2)] {
        let case = Case::new(6, 32, 24, tokens, top_k, tokens as u64);
        assert_close(&case.run(1), &case.reference());
    }
}

#[test]
fn any_thread_count_gives_the_same_bits() {
    // Enough products to split four ways (128 pairs x 256 x 128 gate/up products > 4 x 2^20).
    let case = Case::new(8, 128, 128, 64, 2, 9);
    let one = case.run(1);
    assert_close(&one, &case.reference());
    for threads in [2, 3, 8] {
        assert_eq!(case.run(threads), one, "{threads} threads");
    }
}

#[test]
fn packing_puts_each_value_in_its_panel() {
    let (n, k) = (2 * PANEL, 3);
    let matrix: Vec<f32> = (0..n * k).map(|v| v as f32).collect();
    let packed = pack_panels(&matrix, n, k).unwrap();
    for r in 0..n {
        for c in 0..k {
            assert_eq!(packed[((r / PANEL) * k + c) * PANEL + r % PANEL], matrix[r * k + c]);
        }
    }
    assert!(matches!(pack_panels(&matrix[..(n - 1) * k], n - 1, k), Err(MoeError::Shape(_))));
}

#[test]
fn bad_inputs_are_errors() {
    let case = Case::new(4, 16, 8, 2, 2, 1);
    let (w13, w2) = case.packed();
    assert!(matches!(ExpertWeights::new(&w13, &w2, 4, 16, 7), Err(MoeError::Unpackable { .. })));
    assert!(matches!(ExpertWeights::new(&w13[1..], &w2, 4, 16, 8), Err(MoeError::Shape(_))));
    let weights = ExpertWeights::new(&w13, &w2, 4, 16, 8).unwrap();
    let mut out = vec![0.0; case.x.len()];
    let bad_ids = [0i64, 1, 4, 2];
    assert_eq!(
        expert_mlp(&weights, &case.x, &bad_ids, &case.routing, 2, &mut out, 1),
        Err(MoeError::ExpertId { token: 1, id: 4, num_experts: 4 })
    );
    assert!(matches!(
        expert_mlp(&weights, &case.x, &case.ids[..3], &case.routing, 2, &mut out, 1),
        Err(MoeError::Shape(_))
    ));
    assert!(matches!(
        expert_mlp(&weights, &case.x, &case.ids, &case.routing, 2, &mut out[1..], 1),
        Err(MoeError::Shape(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_shapes_match_the_reference(
        experts in 2usize..6, hidden_panels in 1usize..4, inter in (1usize..5).prop_map(|v| v * 8),
        tokens in 1usize..20, top_k in 1usize..3, seed in 0u64..1000,
    ) {
        let top_k = top_k.min(experts - 1);
        let case = Case::new(experts, hidden_panels * PANEL, inter, tokens, top_k, seed);
        assert_close(&case.run(1 + (seed as usize % 3)), &case.reference());
    }
}
