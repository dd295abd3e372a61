//! Quantized matrix times a few activation rows, split by weight rows over the current rayon
//! pool (the caller decides which pool by running inside its `install`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::dequant::to_bf16_bits;
use crate::error::{check_len, DecodeError};
use crate::isa::Isa;
use crate::quant::{QuantizedRow, QuantizedRows, QuantizedWeight};

/// A process-wide pool of `num_threads` threads, built on first use. Decode steps run inside
/// it (`ThreadPool::install`), so a step's parallel matmuls never cross to another pool.
pub fn shared_pool(num_threads: usize) -> Arc<ThreadPool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let num_threads = num_threads.max(1);
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    pools
        .entry(num_threads)
        .or_insert_with(|| {
            Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(num_threads)
                    .thread_name(|i| format!("sglr-decode-{i}"))
                    .build()
                    .expect("cannot start the decode thread pool"),
            )
        })
        .clone()
}

/// The whole matrix as f32 into `out` (`rows x cols`), rows split over the current pool.
pub fn dequantize_into<W: QuantizedWeight + ?Sized>(w: &W, out: &mut [f32]) -> Result<(), DecodeError> {
    let cols = w.cols();
    check_len("dequantized output", out.len(), w.rows() * cols)?;
    if cols > 0 {
        let isa = Isa::detect();
        out.par_chunks_mut(cols).enumerate().for_each(|(index, dest)| w.dequantize_row(isa, index, dest));
    }
    Ok(())
}

/// The whole matrix as bf16 bits into `out` (rounded to nearest even), rows split over the
/// current pool.
pub fn dequantize_bf16_into<W: QuantizedWeight + ?Sized>(w: &W, out: &mut [u16]) -> Result<(), DecodeError> {
    let cols = w.cols();
    check_len("dequantized output", out.len(), w.rows() * cols)?;
    if cols == 0 {
        return Ok(());
    }
    let isa = Isa::detect();
    out.par_chunks_mut(cols).enumerate().for_each_init(
        || vec![0.0f32; cols],
        |row_values, (index, dest)| {
            w.dequantize_row(isa, index, row_values);
            to_bf16_bits(isa, row_values, dest);
        },
    );
    Ok(())
}

/// Weight rows per parallel task at least: below, a task costs more to hand out than to run.
const MIN_ROWS_PER_TASK: usize = 64;

/// `out[i, r] = xs[i] . w[r]`: `out` is `xs.num_rows() x w.rows()`, row-major. `scratch` is
/// reused between calls (the row-major-by-weight partial results of a batch).
pub fn matmul<W: QuantizedWeight + ?Sized>(
    isa: Isa,
    w: &W,
    xs: &QuantizedRows,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> Result<(), DecodeError> {
    xs.check_cols(w.cols())?;
    let (num_inputs, num_rows) = (xs.num_rows(), w.rows());
    check_len("matmul output", out.len(), num_inputs * num_rows)?;
    if num_inputs == 0 || num_rows == 0 {
        return Ok(());
    }
    let rows: Vec<QuantizedRow<'_>> = (0..num_inputs).map(|i| xs.row(i)).collect();
    let num_tasks = rayon::current_num_threads().min(num_rows.div_ceil(MIN_ROWS_PER_TASK)).max(1);
    let rows_per_task = num_rows.div_ceil(num_tasks);
    if num_inputs == 1 {
        // One input: the output row is the weight-row order already.
        out.par_chunks_mut(rows_per_task).enumerate().for_each(|(task, chunk)| {
            let first = task * rows_per_task;
            for (offset, value) in chunk.iter_mut().enumerate() {
                w.row_dots(isa, first + offset, &rows, std::slice::from_mut(value));
            }
        });
        return Ok(());
    }
    scratch.resize(num_inputs * num_rows, 0.0);
    scratch.par_chunks_mut(rows_per_task * num_inputs).enumerate().for_each(|(task, chunk)| {
        let first = task * rows_per_task;
        for (offset, values) in chunk.chunks_exact_mut(num_inputs).enumerate() {
            w.row_dots(isa, first + offset, &rows, values);
        }
    });
    for (r, values) in scratch.chunks_exact(num_inputs).enumerate() {
        for (i, &v) in values.iter().enumerate() {
            out[i * num_rows + r] = v;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::Q4Matrix;

    #[test]
    fn threads_and_batch_sizes_give_the_same_result() {
        let (rows, cols) = (300, 64);
        let levels: Vec<u8> = (0..rows * cols).map(|i| ((i * 7 + 1) % 16) as u8).collect();
        let scales: Vec<f32> = (0..rows * cols / 32).map(|b| 0.01 + (b % 7) as f32 * 0.001).collect();
        let zeros: Vec<f32> = (0..rows * cols / 32).map(|b| (b % 5) as f32 * 0.01).collect();
        let matrix = Q4Matrix::from_levels(&levels, &scales, &zeros, rows, cols).unwrap();
        let values: Vec<f32> = (0..6 * cols).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut all = QuantizedRows::new();
        all.quantize(&values, cols).unwrap();
        let isa = Isa::detect();
        let mut batched = vec![0.0; 6 * rows];
        shared_pool(3).install(|| matmul(isa, &matrix, &all, &mut batched, &mut Vec::new())).unwrap();
        for i in 0..6 {
            let mut one = QuantizedRows::new();
            one.quantize(&values[i * cols..(i + 1) * cols], cols).unwrap();
            let mut single = vec![0.0; rows];
            shared_pool(1).install(|| matmul(isa, &matrix, &one, &mut single, &mut Vec::new())).unwrap();
            assert_eq!(&batched[i * rows..(i + 1) * rows], &single[..], "input {i}");
        }
    }

    #[test]
    fn shape_errors() {
        let matrix = Q4Matrix::from_levels(&[0; 64], &[1.0; 2], &[0.0; 2], 2, 32).unwrap();
        let mut xs = QuantizedRows::new();
        xs.quantize(&[1.0; 64], 64).unwrap();
        assert!(matches!(
            matmul(Isa::Portable, &matrix, &xs, &mut [0.0; 2], &mut Vec::new()),
            Err(DecodeError::Length { .. })
        ));
        xs.quantize(&[1.0; 32], 32).unwrap();
        assert!(matches!(
            matmul(Isa::Portable, &matrix, &xs, &mut [0.0; 3], &mut Vec::new()),
            Err(DecodeError::Length { .. })
        ));
    }
}
