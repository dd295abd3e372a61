//! The CPU kernels of `sglr-quant` over numpy arrays: a Q8 matrix's levels (int8, `rows x cols`)
//! and scales (float32, `rows x cols / 32`) are borrowed in place, the GIL is released while the
//! product runs, and the caller's output array is written directly.

use numpy::{PyReadonlyArray2, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sglr_quant::{Q8Matrix, QuantError};

use crate::buffers::IdArray;

fn quant_error(error: QuantError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

fn contiguous<'a, T: numpy::Element>(array: &'a PyReadonlyArray2<'_, T>, what: &str) -> PyResult<&'a [T]> {
    array.as_slice().map_err(|_| PyValueError::new_err(format!("{what} must be a C-contiguous array")))
}

/// `out[i, r] = sum_c inputs[i, c] * W[r, c]` for the Q8 matrix `W = (levels, scales)`; inputs
/// `[n, cols]` and out `[n, rows]` float32, C-contiguous.
#[pyfunction]
#[pyo3(signature = (levels, scales, inputs, out, num_threads=1))]
pub(crate) fn q8_matmul_transposed(
    py: Python<'_>,
    levels: PyReadonlyArray2<'_, i8>,
    scales: PyReadonlyArray2<'_, f32>,
    inputs: PyReadonlyArray2<'_, f32>,
    mut out: PyReadwriteArray2<'_, f32>,
    num_threads: usize,
) -> PyResult<()> {
    let (rows, cols) = (levels.shape()[0], levels.shape()[1]);
    let num_inputs = inputs.shape()[0];
    let levels = contiguous(&levels, "levels")?;
    let scales = contiguous(&scales, "scales")?;
    let inputs = contiguous(&inputs, "inputs")?;
    let matrix = Q8Matrix::new(levels, scales, rows, cols).map_err(quant_error)?;
    let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a C-contiguous array"))?;
    py.detach(|| matrix.matmul_transposed(inputs, num_inputs, out, num_threads)).map_err(quant_error)
}

/// Rows `row_ids` of the Q8 matrix, dequantized into `out` (`[len(row_ids), cols]` float32).
#[pyfunction]
pub(crate) fn q8_dequantize_rows(
    levels: PyReadonlyArray2<'_, i8>,
    scales: PyReadonlyArray2<'_, f32>,
    row_ids: &Bound<'_, PyAny>,
    mut out: PyReadwriteArray2<'_, f32>,
) -> PyResult<()> {
    let (rows, cols) = (levels.shape()[0], levels.shape()[1]);
    let levels = contiguous(&levels, "levels")?;
    let scales = contiguous(&scales, "scales")?;
    let matrix = Q8Matrix::new(levels, scales, rows, cols).map_err(quant_error)?;
    let ids = IdArray::extract(row_ids, "row_ids")?;
    let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a C-contiguous array"))?;
    matrix.dequantize_rows(&ids.as_slice(), out).map_err(quant_error)
}
