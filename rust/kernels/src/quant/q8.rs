//! An 8-bit matrix as GGUF's Q8_0 stores it, its scales widened once at load: `rows x cols` int8
//! levels and one f32 scale per block of [`BLOCK_LEN`] levels of a row; weight `(r, c)` is
//! `levels[r * cols + c] * scales[r * cols / BLOCK_LEN + c / BLOCK_LEN]`.
//!
//! It multiplies int8 activations through the integer kernels (`QuantizedWeight`, as every
//! quantized matrix does) and f32 activations as they are (`matmul_transposed`). The f32 product
//! reads every level once per call however many input rows there are, so a decode step's output
//! head reads 1 byte per weight (plus 1/8 for scales) instead of the 2 of a dequantized bf16
//! copy; the rows it needs as embeddings are dequantized on demand (`dequantize_rows`).

use std::thread;

use half::f16;

use super::q8_f32;
use crate::block::{Q8Row, BLOCK_LEN, Q8_BLOCK_BYTES};
use crate::error::{check_len, DecodeError};
use crate::isa::Isa;

/// A `rows x cols` matrix of int8 levels (-128..=127) with one f32 scale per block of
/// `BLOCK_LEN` levels: `w_i = scale * q_i`.
#[derive(Debug)]
pub struct Q8Matrix {
    levels: Vec<i8>,
    scales: Vec<f32>,
    rows: usize,
    cols: usize,
}

impl Q8Matrix {
    pub fn new(levels: Vec<i8>, scales: Vec<f32>, rows: usize, cols: usize) -> Result<Self, DecodeError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(DecodeError::Columns(cols));
        }
        check_len("levels", levels.len(), rows * cols)?;
        check_len("scales", scales.len(), rows * cols / BLOCK_LEN)?;
        Ok(Self { levels, scales, rows, cols })
    }

    /// From GGUF Q8_0 blocks as stored (34 bytes: fp16 `d`, 32 int8 levels), in `parts` of whole
    /// rows (a fused matrix's checkpoint tensors), read in place.
    pub fn from_gguf(parts: &[&[u8]], rows: usize, cols: usize) -> Result<Self, DecodeError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(DecodeError::Columns(cols));
        }
        let num_bytes: usize = parts.iter().map(|p| p.len()).sum();
        check_len("Q8_0 bytes", num_bytes, rows * cols / BLOCK_LEN * Q8_BLOCK_BYTES)?;
        let mut levels = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows * cols / BLOCK_LEN);
        let blocks = parts.iter().flat_map(|part| part.chunks_exact(Q8_BLOCK_BYTES));
        for (index, block) in blocks.enumerate() {
            let scale = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
            if !scale.is_finite() {
                return Err(DecodeError::Scale { kind: "Q8_0", row: index / (cols / BLOCK_LEN) });
            }
            scales.push(scale);
            levels.extend(block[2..].iter().map(|&b| b as i8));
        }
        Ok(Self { levels, scales, rows, cols })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn levels(&self) -> &[i8] {
        &self.levels
    }

    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    pub fn row(&self, index: usize) -> Q8Row<'_> {
        let blocks = self.cols / BLOCK_LEN;
        Q8Row {
            levels: &self.levels[index * self.cols..(index + 1) * self.cols],
            scales: &self.scales[index * blocks..(index + 1) * blocks],
        }
    }

    /// `out[i, r] = sum_c inputs[i, c] * weight(r, c)` for `num_inputs` input rows: `inputs` is
    /// `num_inputs x cols`, `out` `num_inputs x rows`, both row-major. The matrix rows are split
    /// over `num_threads` scoped threads (1 = the calling thread only).
    pub fn matmul_transposed(
        &self,
        inputs: &[f32],
        num_inputs: usize,
        out: &mut [f32],
        num_threads: usize,
    ) -> Result<(), DecodeError> {
        check_len("inputs", inputs.len(), num_inputs * self.cols)?;
        check_len("out", out.len(), num_inputs * self.rows)?;
        if num_inputs == 0 || self.rows == 0 {
            return Ok(());
        }
        let num_threads = num_threads.clamp(1, self.rows.div_ceil(256));
        if num_threads == 1 {
            self.rows_into(inputs, num_inputs, 0..self.rows, out, self.rows);
            return Ok(());
        }
        let rows_per_thread = self.rows.div_ceil(num_threads);
        if num_inputs == 1 {
            // One input: each thread owns a contiguous slice of the output.
            thread::scope(|scope| {
                for (index, chunk) in out.chunks_mut(rows_per_thread).enumerate() {
                    let start = index * rows_per_thread;
                    let range = start..start + chunk.len();
                    scope.spawn(move || self.rows_into(inputs, 1, range, chunk, chunk.len()));
                }
            });
            return Ok(());
        }
        // Several inputs: each thread fills its own `num_inputs x chunk` block, copied out after.
        let blocks: Vec<(usize, Vec<f32>)> = thread::scope(|scope| {
            let handles: Vec<_> = (0..num_threads)
                .map(|index| {
                    let start = (index * rows_per_thread).min(self.rows);
                    let end = (start + rows_per_thread).min(self.rows);
                    scope.spawn(move || {
                        let mut block = vec![0.0; num_inputs * (end - start)];
                        self.rows_into(inputs, num_inputs, start..end, &mut block, end - start);
                        (start, block)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a Q8 matmul thread panicked")).collect()
        });
        for (start, block) in blocks {
            let width = block.len() / num_inputs;
            for i in 0..num_inputs {
                let dest = i * self.rows + start;
                out[dest..dest + width].copy_from_slice(&block[i * width..(i + 1) * width]);
            }
        }
        Ok(())
    }

    /// Dequantized copies of rows `row_ids` into `out` (`row_ids.len() x cols`).
    pub fn dequantize_rows(&self, row_ids: &[u32], out: &mut [f32]) -> Result<(), DecodeError> {
        check_len("out", out.len(), row_ids.len() * self.cols)?;
        let isa = Isa::detect();
        for (&id, dest) in row_ids.iter().zip(out.chunks_exact_mut(self.cols)) {
            let row = id as usize;
            if row >= self.rows {
                return Err(DecodeError::RowId { id: u64::from(id), rows: self.rows });
            }
            crate::dequant::q8_row(isa, self.row(row), dest);
        }
        Ok(())
    }

    /// Matrix rows `range` against every input; `out[i * out_stride + (r - range.start)]`.
    fn rows_into(
        &self,
        inputs: &[f32],
        num_inputs: usize,
        range: std::ops::Range<usize>,
        out: &mut [f32],
        out_stride: usize,
    ) {
        let dot = q8_f32::select(Isa::detect());
        for (offset, row) in range.enumerate() {
            let Q8Row { levels, scales } = self.row(row);
            for i in 0..num_inputs {
                let input = &inputs[i * self.cols..(i + 1) * self.cols];
                out[i * out_stride + offset] = dot(levels, scales, input);
            }
        }
    }
}
