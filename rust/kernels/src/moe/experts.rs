//! The routed experts of one MoE block for a batch of tokens, grouped by expert.

use std::ops::Range;
use std::thread;

use super::panels::{matmul_panels, Operands, PANEL};

/// Below this many multiply-adds per thread a phase stays on the calling thread: spawning
/// threads costs more than it saves.
const MIN_PRODUCTS_PER_THREAD: usize = 1 << 20;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MoeError {
    #[error("expert shape: {0}")]
    Shape(String),
    #[error("hidden size {hidden} and 2 x intermediate size {intermediate} must be multiples of {PANEL}")]
    Unpackable { hidden: usize, intermediate: usize },
    #[error("token {token}: expert id {id} outside 0..{num_experts}")]
    ExpertId { token: usize, id: i64, num_experts: usize },
}

/// Stacked expert weights, each expert's matrix packed by [`pack_panels`]: `w13` holds
/// `[2 * intermediate, hidden]` per expert (its gate rows, then its up rows), `w2`
/// `[hidden, intermediate]`.
#[derive(Clone, Copy, Debug)]
pub struct ExpertWeights<'a> {
    w13: &'a [f32],
    w2: &'a [f32],
    num_experts: usize,
    hidden: usize,
    intermediate: usize,
}

impl<'a> ExpertWeights<'a> {
    pub fn new(
        w13: &'a [f32],
        w2: &'a [f32],
        num_experts: usize,
        hidden: usize,
        intermediate: usize,
    ) -> Result<Self, MoeError> {
        if hidden % PANEL != 0 || (2 * intermediate) % PANEL != 0 {
            return Err(MoeError::Unpackable { hidden, intermediate });
        }
        let per_expert = hidden * intermediate;
        check_len("w13", w13.len(), num_experts * 2 * per_expert)?;
        check_len("w2", w2.len(), num_experts * per_expert)?;
        Ok(Self { w13, w2, num_experts, hidden, intermediate })
    }

    fn w13_of(&self, expert: usize) -> &'a [f32] {
        let size = 2 * self.intermediate * self.hidden;
        &self.w13[expert * size..(expert + 1) * size]
    }

    fn w2_of(&self, expert: usize) -> &'a [f32] {
        let size = self.hidden * self.intermediate;
        &self.w2[expert * size..(expert + 1) * size]
    }
}

/// `out[t] = sum_k topk_weights[t, k] * expert_{topk_ids[t, k]}(hidden[t])`, where an expert is
/// `w2 @ (silu(gate @ h) * (up @ h))`. `hidden` and `out` are `[tokens, hidden]`, the routing
/// `[tokens, top_k]`, all row-major. Each expert multiplies all its tokens at once; the `top_k`
/// terms of a token are added in order `k = 0, 1, ...` (deterministic for any thread count).
pub fn expert_mlp(
    weights: &ExpertWeights<'_>,
    hidden: &[f32],
    topk_ids: &[i64],
    topk_weights: &[f32],
    top_k: usize,
    out: &mut [f32],
    num_threads: usize,
) -> Result<(), MoeError> {
    let h = weights.hidden;
    if top_k == 0 || h == 0 {
        return Err(MoeError::Shape(format!("top_k {top_k}, hidden size {h}")));
    }
    if hidden.len() % h != 0 {
        return Err(MoeError::Shape(format!("hidden has {} values, not rows of {h}", hidden.len())));
    }
    let num_tokens = hidden.len() / h;
    check_len("topk_ids", topk_ids.len(), num_tokens * top_k)?;
    check_len("topk_weights", topk_weights.len(), num_tokens * top_k)?;
    check_len("out", out.len(), num_tokens * h)?;
    for (pair, &id) in topk_ids.iter().enumerate() {
        if id < 0 || id as usize >= weights.num_experts {
            return Err(MoeError::ExpertId { token: pair / top_k, id, num_experts: weights.num_experts });
        }
    }
    let groups = Groups::of(topk_ids, weights.num_experts);
    let num_pairs = topk_ids.len();
    let i = weights.intermediate;

    // The pairs' inputs in expert order: each expert's rows are one contiguous run.
    let mut sorted_inputs = vec![0.0f32; num_pairs * h];
    for (row, &pair) in sorted_inputs.chunks_exact_mut(h).zip(&groups.pairs) {
        let token = pair / top_k;
        row.copy_from_slice(&hidden[token * h..(token + 1) * h]);
    }
    let mut gate_up = vec![0.0f32; num_pairs * 2 * i];
    grouped_matmul(&groups, &sorted_inputs, h, |e| weights.w13_of(e), 2 * i, &mut gate_up, num_threads);
    let mut activations = vec![0.0f32; num_pairs * i];
    for (act, gu) in activations.chunks_exact_mut(i).zip(gate_up.chunks_exact(2 * i)) {
        let (gate, up) = gu.split_at(i);
        for ((a, &g), &u) in act.iter_mut().zip(gate).zip(up) {
            *a = silu(g) * u;
        }
    }
    let mut sorted_out = vec![0.0f32; num_pairs * h];
    grouped_matmul(&groups, &activations, i, |e| weights.w2_of(e), h, &mut sorted_out, num_threads);

    // Back to pair order, then each token's weighted sum in choice order.
    let mut pair_rows = vec![0usize; num_pairs];
    for (sorted, &pair) in groups.pairs.iter().enumerate() {
        pair_rows[pair] = sorted;
    }
    for (token, dest) in out.chunks_exact_mut(h).enumerate() {
        for choice in 0..top_k {
            let pair = token * top_k + choice;
            let weight = topk_weights[pair];
            let row = &sorted_out[pair_rows[pair] * h..(pair_rows[pair] + 1) * h];
            if choice == 0 {
                for (d, &v) in dest.iter_mut().zip(row) {
                    *d = v * weight;
                }
            } else {
                for (d, &v) in dest.iter_mut().zip(row) {
                    *d += v * weight;
                }
            }
        }
    }
    Ok(())
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// The (token, choice) pairs sorted by expert (stable), and each expert's run of them.
struct Groups {
    /// Pair ids (`token * top_k + choice`) in expert order.
    pairs: Vec<usize>,
    /// `(expert, first sorted row, rows)` for each expert with at least one pair.
    runs: Vec<(usize, usize, usize)>,
}

impl Groups {
    fn of(topk_ids: &[i64], num_experts: usize) -> Self {
        let mut counts = vec![0usize; num_experts];
        for &id in topk_ids {
            counts[id as usize] += 1;
        }
        let mut runs = Vec::new();
        let mut next = vec![0usize; num_experts];
        let mut start = 0;
        for (expert, &count) in counts.iter().enumerate() {
            next[expert] = start;
            if count > 0 {
                runs.push((expert, start, count));
            }
            start += count;
        }
        let mut pairs = vec![0usize; topk_ids.len()];
        for (pair, &id) in topk_ids.iter().enumerate() {
            pairs[next[id as usize]] = pair;
            next[id as usize] += 1;
        }
        Self { pairs, runs }
    }
}

/// `(run, panels, rows x columns values)`: one thread's share of one expert's product.
type Piece = (usize, Range<usize>, Vec<f32>);

/// For each expert run: `out[rows, :n] = inputs[rows, :k] @ weight_of(expert).T` (a packed
/// `n x k`). Threads split the concatenated panels of all runs evenly, each writing its own
/// pieces, copied into `out` after.
fn grouped_matmul<'w>(
    groups: &Groups,
    inputs: &[f32],
    k: usize,
    weight_of: impl Fn(usize) -> &'w [f32] + Sync,
    n: usize,
    out: &mut [f32],
    num_threads: usize,
) {
    let panels_per_run = n / PANEL;
    let total_panels = groups.runs.len() * panels_per_run;
    let products: usize = groups.runs.iter().map(|&(_, _, rows)| rows * n * k).sum();
    let num_threads = num_threads.clamp(1, (products / MIN_PRODUCTS_PER_THREAD).max(1));
    let piece = |run: usize, panels: Range<usize>, dest: &mut [f32], stride: usize| {
        let (expert, first, rows) = groups.runs[run];
        let ops =
            Operands { x: &inputs[first * k..(first + rows) * k], num_rows: rows, w: weight_of(expert), k };
        matmul_panels(ops, panels, dest, stride);
    };
    if num_threads == 1 {
        for (run, &(_, first, _)) in groups.runs.iter().enumerate() {
            piece(run, 0..panels_per_run, &mut out[first * n..], n);
        }
        return;
    }
    let per_thread = total_panels.div_ceil(num_threads);
    let pieces: Vec<Vec<Piece>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..num_threads)
            .map(|index| {
                let piece = &piece;
                scope.spawn(move || {
                    let end = ((index + 1) * per_thread).min(total_panels);
                    let mut done = Vec::new();
                    let mut at = index * per_thread;
                    while at < end {
                        let (run, first_panel) = (at / panels_per_run, at % panels_per_run);
                        let panels = first_panel..panels_per_run.min(first_panel + end - at);
                        let width = panels.len() * PANEL;
                        let mut values = vec![0.0f32; groups.runs[run].2 * width];
                        piece(run, panels.clone(), &mut values, width);
                        at += panels.len();
                        done.push((run, panels, values));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("an expert matmul thread panicked")).collect()
    });
    for (run, panels, values) in pieces.into_iter().flatten() {
        let first = groups.runs[run].1;
        let width = panels.len() * PANEL;
        for (row, chunk) in values.chunks_exact(width).enumerate() {
            let start = (first + row) * n + panels.start * PANEL;
            out[start..start + width].copy_from_slice(chunk);
        }
    }
}

/// A row-major `n x k` matrix in the packed layout the experts use: `[n / PANEL, k, PANEL]`,
/// element `(r, c)` at `((r / PANEL) * k + c) * PANEL + r % PANEL`. `n` must be a multiple of
/// [`PANEL`].
pub fn pack_panels(matrix: &[f32], n: usize, k: usize) -> Result<Vec<f32>, MoeError> {
    if n % PANEL != 0 {
        return Err(MoeError::Shape(format!("{n} rows are not a multiple of {PANEL}")));
    }
    check_len("matrix", matrix.len(), n * k)?;
    let mut packed = vec![0.0f32; n * k];
    for (r, row) in matrix.chunks_exact(k.max(1)).enumerate().take(n) {
        for (c, &value) in row.iter().enumerate() {
            packed[((r / PANEL) * k + c) * PANEL + r % PANEL] = value;
        }
    }
    Ok(packed)
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), MoeError> {
    if got == expected {
        Ok(())
    } else {
        Err(MoeError::Shape(format!("{what} has {got} values, expected {expected}")))
    }
}
