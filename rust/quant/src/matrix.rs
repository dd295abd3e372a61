//! The quantized matrix (borrowed levels and scales) and its checked operations.

use std::thread;

use crate::kernel;

/// Levels per scale (GGUF's Q8_0 block).
pub const BLOCK_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QuantError {
    #[error("a Q8 matrix needs a column count that is a positive multiple of {BLOCK_LEN}, got {0}")]
    Columns(usize),
    #[error("{what}: expected {expected} values, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
    #[error("row id {id} out of range for a matrix of {rows} rows")]
    RowId { id: u64, rows: usize },
}

/// A `rows x cols` matrix of int8 levels with one f32 scale per block of `BLOCK_LEN` levels.
#[derive(Clone, Copy, Debug)]
pub struct Q8Matrix<'a> {
    levels: &'a [i8],
    scales: &'a [f32],
    rows: usize,
    cols: usize,
}

impl<'a> Q8Matrix<'a> {
    pub fn new(levels: &'a [i8], scales: &'a [f32], rows: usize, cols: usize) -> Result<Self, QuantError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(QuantError::Columns(cols));
        }
        check_len("levels", levels.len(), rows * cols)?;
        check_len("scales", scales.len(), rows * cols / BLOCK_LEN)?;
        Ok(Self { levels, scales, rows, cols })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
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
    ) -> Result<(), QuantError> {
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
    pub fn dequantize_rows(&self, row_ids: &[u32], out: &mut [f32]) -> Result<(), QuantError> {
        check_len("out", out.len(), row_ids.len() * self.cols)?;
        for (&id, dest) in row_ids.iter().zip(out.chunks_exact_mut(self.cols)) {
            let row = id as usize;
            if row >= self.rows {
                return Err(QuantError::RowId { id: u64::from(id), rows: self.rows });
            }
            let levels = &self.levels[row * self.cols..(row + 1) * self.cols];
            let scales = &self.scales[row * self.cols / BLOCK_LEN..(row + 1) * self.cols / BLOCK_LEN];
            for ((dest, levels), &scale) in
                dest.chunks_exact_mut(BLOCK_LEN).zip(levels.chunks_exact(BLOCK_LEN)).zip(scales)
            {
                for (d, &level) in dest.iter_mut().zip(levels) {
                    *d = f32::from(level) * scale;
                }
            }
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
        let blocks_per_row = self.cols / BLOCK_LEN;
        let dot = kernel::select();
        for (offset, row) in range.enumerate() {
            let levels = &self.levels[row * self.cols..(row + 1) * self.cols];
            let scales = &self.scales[row * blocks_per_row..(row + 1) * blocks_per_row];
            for i in 0..num_inputs {
                let input = &inputs[i * self.cols..(i + 1) * self.cols];
                out[i * out_stride + offset] = dot(levels, scales, input);
            }
        }
    }
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), QuantError> {
    if got == expected {
        Ok(())
    } else {
        Err(QuantError::Length { what, expected, got })
    }
}
