//! Activations quantized to int8 per block of 32, the other side of every integer dot product:
//! `x[i] ~= scale_b * level[i]` with levels in -127..=127, and per block `scaled_sum_b = scale_b *
//! sum(levels)`, which a 4-bit matrix's per-block minimum multiplies (`sum_i (d q_i + m) x_i`).

use crate::dot::Isa;
use crate::error::{check_len, DecodeError};
use crate::q4::{padded_blocks, BLOCK_LEN};
use crate::vector::quantize_block;

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

#[cfg(test)]
mod tests {
    use super::*;

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
