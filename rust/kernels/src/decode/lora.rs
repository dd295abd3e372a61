//! LoRA deltas inside the decode step: an adapter's low-rank pair for one of a layer's matmuls,
//! and the kernel that adds `(x_b . shrink^T) . expand^T` to the matmul's output row `b` for the
//! rows `b` of each adapter present in the batch (a segmented shrink and expand, one group of
//! rows per adapter), from the matmul's f32 input (before its int8 quantization).
//!
//! The pairs are f32 with the adapter's scaling folded into `expand`; they are small (rank 8-64)
//! but a batch over several adapters reads each one's pairs once per step, so the kernel streams
//! them: the shrink rows against up to four input rows at a time, the expand matrix stored in
//! panels of 16 output columns (`PANEL`, every rank's 16 values contiguous) and accumulated for
//! up to four rows at a time. A panel keeps only its ranks between the first and the last with
//! a nonzero value: the expand matrix of a fused projection (q/k/v, gate/up) whose parts have
//! their own `lora_A`s is block-diagonal, zero outside each part's ranks, and those zeros are
//! neither stored nor read. Both halves split over the current rayon pool once the work is
//! large enough; the split never changes a value (every output is summed in one order).

use std::ops::Range;

use rayon::prelude::*;

use crate::error::{check_len, DecodeError};
use crate::isa::Isa;

/// Output columns per panel of an expand matrix (two AVX2 vectors).
const PANEL: usize = 16;

/// Multiply-adds per parallel task at least: below, handing a task out costs more than it saves
/// (a matmul task of `gemm`'s 64 weight rows does about as many integer products for a few rows).
const MIN_MACS_PER_TASK: usize = 1 << 16;

/// One adapter's low-rank pair on one matmul: `shrink` `[rank x in_features]` and `expand`
/// `[out_features x rank]`, row-major, the scaling folded into `expand`.
pub struct LoraPair {
    rank: usize,
    in_features: usize,
    out_features: usize,
    shrink: Vec<f32>,
    /// `expand` by panels of `PANEL` output columns, each panel's ranks `spans[p].ranks` only:
    /// value (column `p * PANEL + l`, rank `r`) at `spans[p].start + (r - ranks.start) * PANEL +
    /// l`, zero past the last column.
    panels: Vec<f32>,
    spans: Vec<PanelSpan>,
}

/// Where a panel's values start in `LoraPair::panels`, and the ranks it keeps.
#[derive(Clone, Debug)]
struct PanelSpan {
    start: usize,
    ranks: Range<usize>,
}

impl LoraPair {
    pub fn new(
        rank: usize,
        in_features: usize,
        out_features: usize,
        shrink: Vec<f32>,
        expand: &[f32],
    ) -> Result<Self, DecodeError> {
        if rank == 0 || in_features == 0 || out_features == 0 {
            return Err(DecodeError::Shape(format!(
                "a LoRA pair of rank {rank} from {in_features} to {out_features} features"
            )));
        }
        check_len("LoRA shrink", shrink.len(), rank * in_features)?;
        check_len("LoRA expand", expand.len(), out_features * rank)?;
        let (mut panels, mut spans) = (Vec::new(), Vec::new());
        for columns in expand.chunks(rank * PANEL) {
            let nonzero = |r: &usize| columns.chunks_exact(rank).any(|values| values[*r] != 0.0);
            let first = (0..rank).find(nonzero).unwrap_or(0);
            let end = (0..rank).rev().find(nonzero).map_or(first, |last| last + 1);
            spans.push(PanelSpan { start: panels.len(), ranks: first..end });
            for r in first..end {
                let mut lanes = [0.0; PANEL];
                lanes.iter_mut().zip(columns.chunks_exact(rank)).for_each(|(lane, values)| *lane = values[r]);
                panels.extend_from_slice(&lanes);
            }
        }
        Ok(Self { rank, in_features, out_features, shrink, panels, spans })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn in_features(&self) -> usize {
        self.in_features
    }

    pub fn out_features(&self) -> usize {
        self.out_features
    }
}

/// An adapter's pairs on one layer's four matmuls (None: that matmul is not adapted).
#[derive(Default)]
pub struct LayerLora {
    pub qkv: Option<LoraPair>,
    pub o: Option<LoraPair>,
    pub gate_up: Option<LoraPair>,
    pub down: Option<LoraPair>,
}

/// The rows of a batch that use one adapter, and its pair on the matmul at hand.
#[derive(Clone, Copy)]
pub struct LoraGroup<'a> {
    pub pair: &'a LoraPair,
    pub rows: &'a [usize],
}

/// Buffers `add_lora_deltas` reuses between calls.
#[derive(Default)]
pub struct LoraScratch {
    /// Every group's shrunk rows, one item per (group, rank) of `max_rows` values.
    shrunk: Vec<f32>,
    /// The groups' first item (`len + 1` entries).
    rank_starts: Vec<usize>,
    /// The deltas of a parallel expand, by task: `[group rows][task columns]`.
    deltas: Vec<f32>,
    /// `0..` the groups' rows, and each group's first one in it.
    positions: Vec<usize>,
    row_starts: Vec<usize>,
}

/// `out[b] += (xs[b] . shrink^T) . expand^T` for every row `b` of every group, over the current
/// rayon pool; `xs` is `B x in_features`, `out` `B x out_features` (every group's pair has
/// those). Rows in no group are not touched.
pub fn add_lora_deltas(
    isa: Isa,
    groups: &[LoraGroup<'_>],
    xs: &[f32],
    out: &mut [f32],
    scratch: &mut LoraScratch,
) -> Result<(), DecodeError> {
    let Some(first) = groups.first() else {
        return Ok(());
    };
    let (in_features, out_features) = (first.pair.in_features, first.pair.out_features);
    if let Some(other) =
        groups.iter().find(|g| (g.pair.in_features, g.pair.out_features) != (in_features, out_features))
    {
        return Err(DecodeError::Shape(format!(
            "LoRA pairs of {in_features} -> {out_features} and {} -> {} features on one matmul",
            other.pair.in_features, other.pair.out_features
        )));
    }
    let num_rows = xs.len() / in_features;
    check_len("LoRA input", xs.len(), num_rows * in_features)?;
    check_len("LoRA output", out.len(), num_rows * out_features)?;
    if let Some(&row) = groups.iter().flat_map(|g| g.rows).find(|&&row| row >= num_rows) {
        return Err(DecodeError::Shape(format!("LoRA row {row} in a batch of {num_rows}")));
    }
    let max_rows = groups.iter().map(|g| g.rows.len()).max().unwrap_or(0);
    if max_rows == 0 {
        return Ok(());
    }
    let LoraScratch { shrunk, rank_starts, deltas, positions, row_starts } = scratch;
    rank_starts.clear();
    rank_starts.push(0);
    for group in groups {
        rank_starts.push(rank_starts[rank_starts.len() - 1] + group.pair.rank);
    }
    shrink_all(isa, groups, xs, max_rows, rank_starts, shrunk);

    let num_panels = out_features.div_ceil(PANEL);
    let work: usize = groups.iter().map(|g| g.rows.len() * g.pair.rank * out_features).sum();
    let num_tasks = task_count(work, num_panels);
    let shrunk_of = |g: usize| &shrunk[rank_starts[g] * max_rows..rank_starts[g + 1] * max_rows];
    if num_tasks == 1 {
        for (g, group) in groups.iter().enumerate() {
            let t = shrunk_of(g);
            expand_group(isa, group.pair, t, max_rows, 0..num_panels, out, group.rows, out_features);
        }
        return Ok(());
    }
    // Each task's columns of every group row go to `deltas`, then into `out` in row order.
    positions.clear();
    row_starts.clear();
    row_starts.push(0);
    for group in groups {
        row_starts.push(row_starts[row_starts.len() - 1] + group.rows.len());
    }
    let total_rows = row_starts[groups.len()];
    positions.extend(0..total_rows);
    let panels_per_task = num_panels.div_ceil(num_tasks);
    let task_columns = panels_per_task * PANEL;
    deltas.clear();
    deltas.resize(total_rows * out_features, 0.0);
    deltas.par_chunks_mut(total_rows * task_columns).enumerate().for_each(|(task, chunk)| {
        let width = chunk.len() / total_rows;
        let panels = task * panels_per_task..((task + 1) * panels_per_task).min(num_panels);
        for (g, group) in groups.iter().enumerate() {
            let dest_rows = &positions[row_starts[g]..row_starts[g + 1]];
            expand_group(isa, group.pair, shrunk_of(g), max_rows, panels.clone(), chunk, dest_rows, width);
        }
    });
    for (task, chunk) in deltas.chunks(total_rows * task_columns).enumerate() {
        let width = chunk.len() / total_rows;
        let first_column = task * task_columns;
        for (&row, delta) in groups.iter().flat_map(|g| g.rows).zip(chunk.chunks_exact(width)) {
            let dest = &mut out[row * out_features + first_column..][..width];
            dest.iter_mut().zip(delta).for_each(|(d, v)| *d += v);
        }
    }
    Ok(())
}

/// Tasks for `work` multiply-adds over at most `max_tasks` items on the current pool.
fn task_count(work: usize, max_tasks: usize) -> usize {
    rayon::current_num_threads().min(work / MIN_MACS_PER_TASK).min(max_tasks).max(1)
}

/// `shrunk[(rank_starts[g] + r) * max_rows + k] = xs[rows_g[k]] . shrink_g[r]`, the (group, rank)
/// items split over the pool.
fn shrink_all(
    isa: Isa,
    groups: &[LoraGroup<'_>],
    xs: &[f32],
    max_rows: usize,
    rank_starts: &[usize],
    shrunk: &mut Vec<f32>,
) {
    let num_items = rank_starts[groups.len()];
    shrunk.clear();
    shrunk.resize(num_items * max_rows, 0.0);
    let in_features = groups[0].pair.in_features;
    let run = |first_item: usize, chunk: &mut [f32]| {
        for (offset, dest) in chunk.chunks_exact_mut(max_rows).enumerate() {
            let item = first_item + offset;
            let g = rank_starts.partition_point(|&start| start <= item) - 1;
            let LoraGroup { pair, rows } = groups[g];
            let r = item - rank_starts[g];
            let weights = &pair.shrink[r * in_features..(r + 1) * in_features];
            shrink_rank(isa, xs, in_features, rows, weights, &mut dest[..rows.len()]);
        }
    };
    let work: usize = groups.iter().map(|g| g.rows.len() * g.pair.rank * in_features).sum();
    let num_tasks = task_count(work, num_items);
    if num_tasks == 1 {
        return run(0, shrunk);
    }
    let per_task = num_items.div_ceil(num_tasks);
    shrunk
        .par_chunks_mut(per_task * max_rows)
        .enumerate()
        .for_each(|(task, chunk)| run(task * per_task, chunk));
}

/// `out[k] = xs[rows[k]] . weights` (`xs` rows of `in_features`).
fn shrink_rank(isa: Isa, xs: &[f32], in_features: usize, rows: &[usize], weights: &[f32], out: &mut [f32]) {
    assert!(weights.len() == in_features && out.len() == rows.len());
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() {
        // SAFETY: AVX2 and FMA were detected; the rows are sliced (bounds-checked) before use.
        unsafe { simd::shrink_rank(xs, in_features, rows, weights, out) };
        return;
    }
    let _ = isa;
    for (dest, &row) in out.iter_mut().zip(rows) {
        let x = &xs[row * in_features..(row + 1) * in_features];
        *dest = x.iter().zip(weights).map(|(a, b)| a * b).sum();
    }
}

/// `dest[dest_rows[k] * stride + c - first column] += sum_r t[r * t_stride + k] * expand[c, r]`
/// for the columns `c` of `panels` and the rows `k` of a group (`dest_rows.len()` of them).
#[allow(clippy::too_many_arguments)]
fn expand_group(
    isa: Isa,
    pair: &LoraPair,
    t: &[f32],
    t_stride: usize,
    panels: Range<usize>,
    dest: &mut [f32],
    dest_rows: &[usize],
    stride: usize,
) {
    let (rank, out_features) = (pair.rank, pair.out_features);
    let num_rows = dest_rows.len();
    let first_column = panels.start * PANEL;
    let span = (panels.end * PANEL).min(out_features).saturating_sub(first_column);
    assert!(num_rows <= t_stride && t.len() >= (rank - 1) * t_stride + num_rows && span <= stride);
    assert!(dest_rows.iter().all(|&q| q * stride + span <= dest.len()));
    for panel in panels {
        let PanelSpan { start, ranks } = pair.spans[panel].clone();
        if ranks.is_empty() {
            continue; // an all-zero panel adds nothing
        }
        let values = &pair.panels[start..start + ranks.len() * PANEL];
        let column = panel * PANEL - first_column;
        let width = PANEL.min(out_features - panel * PANEL);
        for k0 in (0..num_rows).step_by(4) {
            let rows = &dest_rows[k0..(k0 + 4).min(num_rows)];
            let (rank, t) = (ranks.len(), &t[ranks.start * t_stride + k0..]);
            let block = Block { values, rank, t, t_stride, rows, stride, column, width };
            #[cfg(target_arch = "x86_64")]
            if isa.has_avx2() {
                // SAFETY: AVX2 and FMA were detected; the asserts above bound every access.
                unsafe {
                    match rows.len() {
                        4 => simd::expand_block::<4>(&block, dest),
                        3 => simd::expand_block::<3>(&block, dest),
                        2 => simd::expand_block::<2>(&block, dest),
                        _ => simd::expand_block::<1>(&block, dest),
                    }
                }
                continue;
            }
            expand_block_portable(&block, dest);
        }
    }
}

/// One panel of an expand matrix against up to four rows' shrunk values.
struct Block<'a> {
    /// The panel's kept ranks: `rank x PANEL`.
    values: &'a [f32],
    rank: usize,
    /// Row `j`'s value of rank `r` at `t[r * t_stride + j]`.
    t: &'a [f32],
    t_stride: usize,
    /// Row `j` adds to `dest[rows[j] * stride + column ..][..width]`.
    rows: &'a [usize],
    stride: usize,
    column: usize,
    width: usize,
}

fn expand_block_portable(block: &Block<'_>, dest: &mut [f32]) {
    for (j, &row) in block.rows.iter().enumerate() {
        let mut acc = [0.0f32; PANEL];
        for (r, values) in block.values.chunks_exact(PANEL).enumerate() {
            let t = block.t[r * block.t_stride + j];
            acc.iter_mut().zip(values).for_each(|(a, &v)| *a += t * v);
        }
        let out = &mut dest[row * block.stride + block.column..][..block.width];
        out.iter_mut().zip(acc).for_each(|(o, a)| *o += a);
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use crate::decode::lora::{Block, PANEL};
    use crate::simd::horizontal_sum;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn shrink_rank(
        xs: &[f32],
        in_features: usize,
        rows: &[usize],
        weights: &[f32],
        out: &mut [f32],
    ) {
        let whole = in_features / 8 * 8;
        for (block, dest) in rows.chunks(4).zip(out.chunks_mut(4)) {
            // Unused lanes multiply the weights by themselves (valid memory; results dropped).
            let mut inputs = [weights; 4];
            for (input, &row) in inputs.iter_mut().zip(block) {
                *input = &xs[row * in_features..(row + 1) * in_features];
            }
            let mut acc = [_mm256_setzero_ps(); 4];
            for i in (0..whole).step_by(8) {
                let w = _mm256_loadu_ps(weights.as_ptr().add(i));
                for (a, input) in acc.iter_mut().zip(&inputs) {
                    *a = _mm256_fmadd_ps(_mm256_loadu_ps(input.as_ptr().add(i)), w, *a);
                }
            }
            for ((d, a), input) in dest.iter_mut().zip(acc).zip(&inputs) {
                let tail: f32 = input[whole..].iter().zip(&weights[whole..]).map(|(x, w)| x * w).sum();
                *d = horizontal_sum(a) + tail;
            }
        }
    }

    /// `N` = `block.rows.len()` rows of one panel (the caller bounded every index).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn expand_block<const N: usize>(block: &Block<'_>, dest: &mut [f32]) {
        let mut acc = [[_mm256_setzero_ps(); 2]; N];
        let values = block.values.as_ptr();
        let t = block.t.as_ptr();
        for r in 0..block.rank {
            let low = _mm256_loadu_ps(values.add(r * PANEL));
            let high = _mm256_loadu_ps(values.add(r * PANEL + 8));
            for (j, a) in acc.iter_mut().enumerate() {
                let scale = _mm256_broadcast_ss(&*t.add(r * block.t_stride + j));
                a[0] = _mm256_fmadd_ps(scale, low, a[0]);
                a[1] = _mm256_fmadd_ps(scale, high, a[1]);
            }
        }
        for (a, &row) in acc.iter().zip(block.rows) {
            let out = dest.as_mut_ptr().add(row * block.stride + block.column);
            if block.width == PANEL {
                _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), a[0]));
                _mm256_storeu_ps(out.add(8), _mm256_add_ps(_mm256_loadu_ps(out.add(8)), a[1]));
            } else {
                let mut lanes = [0.0f32; PANEL];
                _mm256_storeu_ps(lanes.as_mut_ptr(), a[0]);
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), a[1]);
                for (l, &v) in lanes[..block.width].iter().enumerate() {
                    *out.add(l) += v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::shared_pool;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// A random pair; `zero(column, rank)` says which values of `expand` are zero.
    fn pair(
        rank: usize,
        in_features: usize,
        out_features: usize,
        seed: u64,
        zero: impl Fn(usize, usize) -> bool,
    ) -> (LoraPair, Vec<f32>, Vec<f32>) {
        let shrink = values(rank * in_features, seed);
        let mut expand = values(out_features * rank, seed + 1);
        for (i, value) in expand.iter_mut().enumerate() {
            if zero(i / rank, i % rank) {
                *value = 0.0;
            }
        }
        (LoraPair::new(rank, in_features, out_features, shrink.clone(), &expand).unwrap(), shrink, expand)
    }

    /// A group for `naive`: shrink, expand, rank, rows.
    type NaiveGroup<'a> = (&'a [f32], &'a [f32], usize, &'a [usize]);

    /// The naive loop in f64, and each value's scale (the sum of its products' magnitudes).
    fn naive(
        xs: &[f32],
        in_features: usize,
        out_features: usize,
        groups: &[NaiveGroup<'_>],
        out: &mut [f64],
        scale: &mut [f64],
    ) {
        for &(shrink, expand, rank, rows) in groups {
            for &b in rows {
                let x = &xs[b * in_features..(b + 1) * in_features];
                let (mut t, mut t_abs) = (vec![0.0f64; rank], vec![0.0f64; rank]);
                for r in 0..rank {
                    for i in 0..in_features {
                        let p = f64::from(x[i]) * f64::from(shrink[r * in_features + i]);
                        t[r] += p;
                        t_abs[r] += p.abs();
                    }
                }
                for c in 0..out_features {
                    for r in 0..rank {
                        let e = f64::from(expand[c * rank + r]);
                        out[b * out_features + c] += t[r] * e;
                        scale[b * out_features + c] += t_abs[r] * e.abs();
                    }
                }
            }
        }
    }

    #[test]
    fn deltas_match_the_naive_loop_on_every_isa_and_leave_other_rows_alone() {
        // Odd sizes (tails of every loop), three adapters of different ranks over interleaved
        // rows, rows 1 and 6 of the base; small and large enough to split over tasks. The first
        // adapter's expand is block-diagonal (three parts of 8 ranks, as a packed q/k/v), the
        // second's zero on its first 20 columns (a panel without ranks, one with some).
        for (in_features, out_features) in [(37, 45), (64, 16), (576, 3072), (1536, 200usize)] {
            let num_rows = 9;
            let xs = values(num_rows * in_features, 7);
            let ranks = [24, 16, 1];
            let part = out_features.div_ceil(3);
            let pairs = [
                pair(24, in_features, out_features, 1, |c, r| c / part != r / 8),
                pair(16, in_features, out_features, 2, |c, _| c < 20),
                pair(1, in_features, out_features, 3, |_, _| false),
            ];
            let rows: [&[usize]; 3] = [&[0, 4, 5, 8, 2], &[3], &[7]];
            let start = values(num_rows * out_features, 9);
            let mut want: Vec<f64> = start.iter().map(|&v| f64::from(v)).collect();
            let mut scale = vec![0.0; want.len()];
            let naive_groups: Vec<NaiveGroup<'_>> =
                (0..3).map(|g| (&pairs[g].1[..], &pairs[g].2[..], ranks[g], rows[g])).collect();
            naive(&xs, in_features, out_features, &naive_groups, &mut want, &mut scale);
            // Every sum is of at most `in_features + rank + 1` rounded terms.
            let bound = (in_features + 24 + 2) as f64 * f64::from(f32::EPSILON);
            let groups: Vec<_> = (0..3).map(|g| LoraGroup { pair: &pairs[g].0, rows: rows[g] }).collect();
            let mut first: Option<Vec<f32>> = None;
            for isa in Isa::available() {
                for threads in [1, 3] {
                    let mut out = start.clone();
                    let mut scratch = LoraScratch::default();
                    shared_pool(threads)
                        .install(|| add_lora_deltas(isa, &groups, &xs, &mut out, &mut scratch))
                        .unwrap();
                    for (i, (&got, (&w, &s))) in out.iter().zip(want.iter().zip(&scale)).enumerate() {
                        let tolerance = bound * (s + f64::from(start[i]).abs());
                        assert!(
                            (f64::from(got) - w).abs() <= tolerance,
                            "{isa:?} {threads} threads {in_features}x{out_features} value {i}: {got} vs {w}"
                        );
                    }
                    for base in [1, 6] {
                        let row = base * out_features..(base + 1) * out_features;
                        assert_eq!(out[row.clone()], start[row], "base row {base} changed");
                    }
                    // The split over tasks never changes a value; only the instruction set may.
                    match (&first, threads) {
                        (Some(single), 3) => assert_eq!(&out, single, "{isa:?}: 3 threads vs 1"),
                        _ => first = Some(out),
                    }
                }
            }
        }
    }

    #[test]
    fn panels_keep_the_ranks_between_the_first_and_last_nonzero_one() {
        let (pair, _, _) = pair(6, 8, 40, 4, |c, r| if c < 16 { r != 2 && r != 4 } else { c < 32 });
        let kept: Vec<_> = pair.spans.iter().map(|s| s.ranks.clone()).collect();
        assert_eq!(kept, vec![2..5, 0..0, 0..6]);
        assert_eq!(pair.panels.len(), (3 + 6) * PANEL);
    }

    #[test]
    fn shapes_are_checked() {
        assert!(matches!(LoraPair::new(2, 4, 3, vec![0.0; 7], &[0.0; 6]), Err(DecodeError::Length { .. })));
        assert!(matches!(LoraPair::new(2, 4, 3, vec![0.0; 8], &[0.0; 5]), Err(DecodeError::Length { .. })));
        assert!(matches!(LoraPair::new(0, 4, 3, vec![], &[]), Err(DecodeError::Shape(_))));
        let (a, _, _) = pair(2, 4, 3, 1, |_, _| false);
        let (b, _, _) = pair(2, 4, 5, 2, |_, _| false);
        let mut scratch = LoraScratch::default();
        let isa = Isa::detect();
        let mut out = vec![0.0; 6];
        let bad_row = [LoraGroup { pair: &a, rows: &[2] }];
        assert!(add_lora_deltas(isa, &bad_row, &[0.0; 8], &mut out, &mut scratch).is_err());
        let mixed = [LoraGroup { pair: &a, rows: &[0] }, LoraGroup { pair: &b, rows: &[1] }];
        assert!(add_lora_deltas(isa, &mixed, &[0.0; 8], &mut out, &mut scratch).is_err());
        let good = [LoraGroup { pair: &a, rows: &[1] }];
        assert!(add_lora_deltas(isa, &good, &[0.0; 8], &mut out[..5], &mut scratch).is_err());
        assert!(add_lora_deltas(isa, &good, &[0.0; 8], &mut out, &mut scratch).is_ok());
    }
}
