//! `out = x @ w.T` for a few rows of `x` against a weight packed in column panels: the product
//! every expert of a decode step computes.
//!
//! The packed weight holds [`PANEL`] output columns at a time, `k` rows of them contiguous
//! (`[n / PANEL, k, PANEL]`), so a pass over a panel streams its bytes once in address order
//! while up to [`X_ROWS`] input rows are multiplied with them (broadcast one input value, two
//! fused multiply-adds per row): the weight is read at about memory speed and each value of it
//! serves every row of a pass. An AVX2+FMA version is picked at run time (wheels are built for a
//! generic x86-64) and a portable one otherwise; both accumulate in f32 in input order.

use std::ops::Range;

/// Output columns per panel: two 8-lane vectors.
pub const PANEL: usize = 16;
/// Input rows per pass over a panel: `2 * X_ROWS` accumulators plus two weight vectors and a
/// broadcast fit the 16 AVX2 registers.
const X_ROWS: usize = 6;

/// Input rows from which a call prefetches each next panel while it multiplies the current one
/// (Mixtral-shaped experts, one thread, timed in turns on a shared box: 3 to 8 rows ~10-20%
/// faster; 1 or 2 rows, where the weight streams at memory speed anyway, a little slower).
const PREFETCH_MIN_ROWS: usize = 3;

/// One product's operands: `x` is `num_rows x k` row-major, `w` a packed `[n / PANEL, k, PANEL]`
/// weight; lengths are checked by the caller.
#[derive(Clone, Copy)]
pub(crate) struct Operands<'a> {
    pub x: &'a [f32],
    pub num_rows: usize,
    pub w: &'a [f32],
    pub k: usize,
}

/// `out[m * out_stride + (c - PANEL * panels.start)] = sum_i x[m, i] * w[c, i]` for every input
/// row `m` and every column `c` of the panels in `panels`.
pub(crate) fn matmul_panels(ops: Operands<'_>, panels: Range<usize>, out: &mut [f32], out_stride: usize) {
    let width = panels.len() * PANEL;
    assert!(ops.x.len() >= ops.num_rows * ops.k && ops.w.len() >= panels.end * ops.k * PANEL);
    assert!(
        width <= out_stride && (ops.num_rows == 0 || out.len() >= (ops.num_rows - 1) * out_stride + width)
    );
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::Isa::detect().has_avx2() {
            // SAFETY: AVX2 and FMA are present, and the asserts above bound every x, w and out
            // index the kernel touches (rows < num_rows, panels < panels.end, output columns <
            // width <= out_stride).
            unsafe { avx2::matmul_panels(ops, panels, out, out_stride) };
            return;
        }
    }
    matmul_panels_portable(ops, panels, out, out_stride);
}

pub(crate) fn matmul_panels_portable(
    ops: Operands<'_>,
    panels: Range<usize>,
    out: &mut [f32],
    out_stride: usize,
) {
    let k = ops.k;
    for (offset, panel) in panels.enumerate() {
        let w = &ops.w[panel * k * PANEL..(panel + 1) * k * PANEL];
        for m in 0..ops.num_rows {
            let x = &ops.x[m * k..(m + 1) * k];
            let mut acc = [0.0f32; PANEL];
            for (&value, w_row) in x.iter().zip(w.chunks_exact(PANEL)) {
                for (a, &wv) in acc.iter_mut().zip(w_row) {
                    *a = value.mul_add(wv, *a);
                }
            }
            let start = m * out_stride + offset * PANEL;
            out[start..start + PANEL].copy_from_slice(&acc);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use crate::moe::panels::{Operands, PANEL, PREFETCH_MIN_ROWS, X_ROWS};

    /// See `super::matmul_panels`; the caller checked the features and the bounds.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn matmul_panels(
        ops: Operands<'_>,
        panels: Range<usize>,
        out: &mut [f32],
        out_stride: usize,
    ) {
        // Passes of balanced size (8 rows: 4 + 4, not 6 + 2).
        let passes = ops.num_rows.div_ceil(X_ROWS);
        let end = panels.end;
        for (offset, panel) in panels.enumerate() {
            let w = ops.w.as_ptr().add(panel * ops.k * PANEL);
            let mut m = 0;
            // Enough rows make a pass compute-bound, and memory would idle behind it: the last
            // pass fetches the next panel meanwhile.
            let next = (ops.num_rows >= PREFETCH_MIN_ROWS && panel + 1 < end).then(|| w.add(ops.k * PANEL));
            for pass in 0..passes {
                let rows = (ops.num_rows - m) / (passes - pass);
                let x = ops.x.as_ptr().add(m * ops.k);
                let out_at = out.as_mut_ptr().add(m * out_stride + offset * PANEL);
                let t = Tile { x, w, k: ops.k, out_at, out_stride };
                match (rows, next.filter(|_| pass + 1 == passes)) {
                    (6, None) => t.run::<6, false>(w),
                    (5, None) => t.run::<5, false>(w),
                    (4, None) => t.run::<4, false>(w),
                    (3, None) => t.run::<3, false>(w),
                    (2, None) => t.run::<2, false>(w),
                    (_, None) => t.run::<1, false>(w),
                    (6, Some(p)) => t.run::<6, true>(p),
                    (5, Some(p)) => t.run::<5, true>(p),
                    (4, Some(p)) => t.run::<4, true>(p),
                    (3, Some(p)) => t.run::<3, true>(p),
                    (2, Some(p)) => t.run::<2, true>(p),
                    (_, Some(p)) => t.run::<1, true>(p),
                }
                m += rows;
            }
        }
    }

    /// `R` input rows (stride `k`) against one panel, into `out_at[r * out_stride + 0..PANEL]`.
    #[derive(Clone, Copy)]
    struct Tile {
        x: *const f32,
        w: *const f32,
        k: usize,
        out_at: *mut f32,
        out_stride: usize,
    }

    impl Tile {
        /// With `PREFETCH`, also asks for the panel at `prefetch` (one cache line per step).
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn run<const R: usize, const PREFETCH: bool>(&self, prefetch: *const f32) {
            let Tile { x, w, k, out_at, out_stride } = *self;
            let mut lo = [_mm256_setzero_ps(); R];
            let mut hi = [_mm256_setzero_ps(); R];
            for i in 0..k {
                if PREFETCH {
                    _mm_prefetch::<_MM_HINT_T0>(prefetch.add(i * PANEL).cast::<i8>());
                }
                let w_lo = _mm256_loadu_ps(w.add(i * PANEL));
                let w_hi = _mm256_loadu_ps(w.add(i * PANEL + 8));
                for r in 0..R {
                    let value = _mm256_broadcast_ss(&*x.add(r * k + i));
                    lo[r] = _mm256_fmadd_ps(value, w_lo, lo[r]);
                    hi[r] = _mm256_fmadd_ps(value, w_hi, hi[r]);
                }
            }
            for r in 0..R {
                _mm256_storeu_ps(out_at.add(r * out_stride), lo[r]);
                _mm256_storeu_ps(out_at.add(r * out_stride + 8), hi[r]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_portable_agree_for_every_pass_size() {
        let k = 37; // not a multiple of 8: the kernels loop over k one value at a time
        for rows in 1..=13 {
            let x: Vec<f32> = (0..rows * k).map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.07).collect();
            let w: Vec<f32> = (0..3 * PANEL * k).map(|i| ((i * 7 % 31) as f32 - 15.0) * 0.05).collect();
            let ops = Operands { x: &x, num_rows: rows, w: &w, k };
            let stride = 2 * PANEL + 5;
            let mut portable = vec![f32::NAN; rows * stride];
            let mut selected = vec![f32::NAN; rows * stride];
            matmul_panels_portable(ops, 1..3, &mut portable, stride);
            matmul_panels(ops, 1..3, &mut selected, stride);
            for m in 0..rows {
                for c in 0..2 * PANEL {
                    let (p, s) = (portable[m * stride + c], selected[m * stride + c]);
                    // Both sum in input order with fused multiply-adds: the same bits.
                    assert_eq!(p.to_bits(), s.to_bits(), "row {m} column {c}: {p} vs {s}");
                    let column = PANEL + c; // panels start at 1
                    let exact: f32 = (0..k)
                        .map(|i| x[m * k + i] * w[((column / PANEL) * k + i) * PANEL + column % PANEL])
                        .sum();
                    assert!((p - exact).abs() < 1e-4, "{p} vs {exact}");
                }
                assert!(portable[m * stride + 2 * PANEL].is_nan(), "wrote past the panels");
            }
        }
    }
}
