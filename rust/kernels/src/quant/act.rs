//! Activations quantized to int8 per block of 32, the other side of every integer dot product:
//! `x[i] ~= scale_b * level[i]` with levels in -127..=127, and per block `scaled_sum_b = scale_b *
//! sum(levels)`, which a 4-bit matrix's per-block minimum multiplies (`sum_i (d q_i + m) x_i`).

use crate::block::{padded_blocks, BLOCK_LEN};
use crate::error::{check_len, DecodeError};
use crate::isa::Isa;

/// One quantized row, borrowed from `QuantizedRows`; `scales` and `scaled_sums` are zero-padded
/// to a multiple of `SCALE_RUN` blocks, as a 4-bit row's scales are.
#[derive(Clone, Copy, Debug)]
pub struct QuantizedRow<'a> {
    pub levels: &'a [i8],
    pub scales: &'a [f32],
    pub scaled_sums: &'a [f32],
}

/// `num_rows` rows of `cols` activations, quantized; the buffers are reused from step to step.
#[derive(Debug)]
pub struct QuantizedRows {
    levels: Vec<i8>,
    scales: Vec<f32>,
    scaled_sums: Vec<f32>,
    cols: usize,
    num_rows: usize,
    isa: Isa,
}

impl Default for QuantizedRows {
    fn default() -> Self {
        Self::new()
    }
}

impl QuantizedRows {
    pub fn new() -> Self {
        Self {
            levels: Vec::new(),
            scales: Vec::new(),
            scaled_sums: Vec::new(),
            cols: 0,
            num_rows: 0,
            isa: Isa::detect(),
        }
    }

    /// Quantizes `values` (`num_rows x cols`, row-major) in place of the previous contents.
    pub fn quantize(&mut self, values: &[f32], cols: usize) -> Result<(), DecodeError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(DecodeError::Columns(cols));
        }
        if values.len() % cols != 0 {
            return Err(DecodeError::Shape(format!("{} activations in rows of {cols}", values.len())));
        }
        let (blocks, stride) = (cols / BLOCK_LEN, padded_blocks(cols / BLOCK_LEN));
        let num_rows = values.len() / cols;
        self.levels.resize(values.len(), 0);
        self.scales.clear();
        self.scales.resize(num_rows * stride, 0.0);
        self.scaled_sums.clear();
        self.scaled_sums.resize(num_rows * stride, 0.0);
        let block_slots = (0..num_rows).flat_map(|row| (0..blocks).map(move |b| row * stride + b));
        for ((block, levels), slot) in
            values.chunks_exact(BLOCK_LEN).zip(self.levels.chunks_exact_mut(BLOCK_LEN)).zip(block_slots)
        {
            let (step, sum) = quantize_block(self.isa, block, levels);
            self.scales[slot] = step;
            self.scaled_sums[slot] = step * sum as f32;
        }
        self.cols = cols;
        self.num_rows = num_rows;
        Ok(())
    }

    pub fn num_rows(&self) -> usize {
        self.num_rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn row(&self, index: usize) -> QuantizedRow<'_> {
        let stride = padded_blocks(self.cols / BLOCK_LEN);
        QuantizedRow {
            levels: &self.levels[index * self.cols..(index + 1) * self.cols],
            scales: &self.scales[index * stride..(index + 1) * stride],
            scaled_sums: &self.scaled_sums[index * stride..(index + 1) * stride],
        }
    }

    /// Dequantized row `index` (what the integer kernels effectively multiply), for tests.
    pub fn dequantized_row(&self, index: usize) -> Vec<f32> {
        let row = self.row(index);
        row.levels.iter().enumerate().map(|(i, &q)| f32::from(q) * row.scales[i / BLOCK_LEN]).collect()
    }

    pub(crate) fn check_cols(&self, cols: usize) -> Result<(), DecodeError> {
        check_len("quantized activation columns", self.cols, cols)
    }
}

/// Quantizes one block of 32 values (a max, a scale, a rounding): levels in -127..=127 with
/// `value ~= step * level`; returns `(step, sum of levels)`. The portable version rounds as the
/// vector one does (ties to even), so results do not depend on the instruction set.
pub(crate) fn quantize_block(isa: Isa, block: &[f32], levels: &mut [i8]) -> (f32, i32) {
    assert!(block.len() == 32 && levels.len() == 32);
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        // SAFETY: every non-portable `Isa` was detected with AVX2 and FMA; both slices hold 32
        // values.
        return unsafe { simd::quantize_block(block, levels) };
    }
    let _ = isa;
    let max_abs = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let step = max_abs / 127.0;
    let inverse = if step > 0.0 { 1.0 / step } else { 0.0 };
    let mut sum = 0;
    for (level, &value) in levels.iter_mut().zip(block) {
        // |value * inverse| <= 127 up to rounding; the clamp keeps it a valid level.
        let q = (value * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
        *level = q;
        sum += i32::from(q);
    }
    (step, sum)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn quantize_block(block: &[f32], levels: &mut [i8]) -> (f32, i32) {
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let values: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(block.as_ptr().add(8 * i)));
        let mut max = _mm256_and_ps(values[0], magnitude);
        for v in &values[1..] {
            max = _mm256_max_ps(max, _mm256_and_ps(*v, magnitude));
        }
        let halves = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps::<1>(max));
        let pairs = _mm_max_ps(halves, _mm_movehl_ps(halves, halves));
        let max_abs = _mm_cvtss_f32(_mm_max_ss(pairs, _mm_shuffle_ps::<1>(pairs, pairs)));
        let step = max_abs / 127.0;
        let inverse = _mm256_set1_ps(if step > 0.0 { 1.0 / step } else { 0.0 });
        // Round to nearest even, then saturate to i8 (|level| <= 127 already).
        let ints: [__m256i; 4] =
            std::array::from_fn(|i| _mm256_cvtps_epi32(_mm256_mul_ps(values[i], inverse)));
        let sum = _mm256_add_epi32(_mm256_add_epi32(ints[0], ints[1]), _mm256_add_epi32(ints[2], ints[3]));
        let packed =
            _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
        // The packs interleave 128-bit lanes: put the four groups of four back in order.
        let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(levels.as_mut_ptr().cast(), ordered);
        let halves = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256::<1>(sum));
        let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32::<0b01_00_11_10>(halves));
        let total = _mm_cvtsi128_si32(_mm_add_epi32(pairs, _mm_shuffle_epi32::<0b00_00_00_01>(pairs)));
        (step, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instruction_set_quantizes_alike() {
        for seed in 0..50 {
            let block: Vec<f32> =
                (0..32).map(|i| ((i * 7 + seed) as f32 * 0.37).sin() * (seed as f32 + 0.5)).collect();
            let results: Vec<_> = Isa::available()
                .into_iter()
                .map(|isa| {
                    let mut levels = [0i8; 32];
                    let (step, sum) = quantize_block(isa, &block, &mut levels);
                    (step, sum, levels)
                })
                .collect();
            assert!(results.windows(2).all(|w| w[0] == w[1]), "seed {seed}: {results:?}");
            let (step, sum, levels) = results[0];
            assert_eq!(sum, levels.iter().map(|&q| i32::from(q)).sum::<i32>());
            for (&v, &q) in block.iter().zip(&levels) {
                assert!((v - step * f32::from(q)).abs() <= step * 0.5 + 1e-6);
            }
        }
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        let values: Vec<f32> = (0..128).map(|i| ((i as f32) * 0.731).sin() * (1.0 + i as f32)).collect();
        let mut rows = QuantizedRows::new();
        rows.quantize(&values, 64).unwrap();
        assert_eq!(rows.num_rows(), 2);
        for r in 0..2 {
            let back = rows.dequantized_row(r);
            let row = rows.row(r);
            for (i, (&v, &b)) in values[r * 64..(r + 1) * 64].iter().zip(&back).enumerate() {
                let step = row.scales[i / BLOCK_LEN];
                assert!((v - b).abs() <= step * 0.5 + 1e-6, "{v} vs {b}");
            }
            assert_eq!(row.scales.len(), 8, "two blocks padded to a run of eight");
            assert!(row.scales[2..].iter().chain(&row.scaled_sums[2..]).all(|&v| v == 0.0));
            for (b, &sum) in row.scaled_sums[..2].iter().enumerate() {
                let levels: i32 =
                    row.levels[b * BLOCK_LEN..(b + 1) * BLOCK_LEN].iter().map(|&q| i32::from(q)).sum();
                assert_eq!(sum, row.scales[b] * levels as f32);
            }
        }
    }

    #[test]
    fn zero_blocks_quantize_to_zero() {
        let mut rows = QuantizedRows::new();
        rows.quantize(&[0.0; 32], 32).unwrap();
        assert!(rows.row(0).levels.iter().all(|&q| q == 0));
        assert_eq!(rows.row(0).scales, &[0.0; 8]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let mut rows = QuantizedRows::new();
        assert_eq!(rows.quantize(&[0.0; 40], 40), Err(DecodeError::Columns(40)));
        assert!(matches!(rows.quantize(&[0.0; 48], 32), Err(DecodeError::Shape(_))));
    }
}
