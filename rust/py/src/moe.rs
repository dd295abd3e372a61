//! `sglr-kernels`' routed expert MLPs over numpy views of torch tensors: the packed expert weights
//! are borrowed in place, the GIL is released while the kernel runs, and the caller's output
//! array is written directly.

use numpy::{PyReadonlyArray2, PyReadonlyArray4, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sglr_kernels::moe::{expert_mlp, ExpertWeights, MoeError, PANEL};

fn moe_error(error: MoeError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

fn not_contiguous(what: &str) -> PyErr {
    PyValueError::new_err(format!("{what} must be a C-contiguous array"))
}

/// `out[t] = sum_k topk_weights[t, k] * expert_{topk_ids[t, k]}(hidden[t])`: `hidden` and `out`
/// `[T, H]` float32, `topk_ids` `[T, K]` int64, `topk_weights` `[T, K]` float32; the experts'
/// packed weights `w13_panels` `[E, 2 * I / 16, H, 16]` (gate rows, then up rows) and
/// `w2_panels` `[E, H / 16, I, 16]` float32.
#[pyfunction]
#[pyo3(signature = (hidden, w13_panels, w2_panels, topk_ids, topk_weights, out, num_threads=1))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn moe_expert_mlp(
    py: Python<'_>,
    hidden: PyReadonlyArray2<'_, f32>,
    w13_panels: PyReadonlyArray4<'_, f32>,
    w2_panels: PyReadonlyArray4<'_, f32>,
    topk_ids: PyReadonlyArray2<'_, i64>,
    topk_weights: PyReadonlyArray2<'_, f32>,
    mut out: PyReadwriteArray2<'_, f32>,
    num_threads: usize,
) -> PyResult<()> {
    let (s13, s2) = (w13_panels.shape(), w2_panels.shape());
    let (num_experts, hidden_size, intermediate) = (s13[0], s13[2], s2[2]);
    if s13[3] != PANEL
        || s2 != [num_experts, hidden_size / PANEL, intermediate, PANEL]
        || s13[1] * PANEL != 2 * intermediate
    {
        return Err(PyValueError::new_err(format!("expert panels {s13:?} / {s2:?} do not fit together")));
    }
    if hidden.shape()[1] != hidden_size || topk_ids.shape() != topk_weights.shape() {
        return Err(PyValueError::new_err(format!(
            "hidden {:?}, topk_ids {:?}, topk_weights {:?} do not fit the experts' hidden size {hidden_size}",
            hidden.shape(),
            topk_ids.shape(),
            topk_weights.shape()
        )));
    }
    let top_k = topk_ids.shape()[1];
    let w13 = w13_panels.as_slice().map_err(|_| not_contiguous("w13_panels"))?;
    let w2 = w2_panels.as_slice().map_err(|_| not_contiguous("w2_panels"))?;
    let weights = ExpertWeights::new(w13, w2, num_experts, hidden_size, intermediate).map_err(moe_error)?;
    let hidden = hidden.as_slice().map_err(|_| not_contiguous("hidden"))?;
    let ids = topk_ids.as_slice().map_err(|_| not_contiguous("topk_ids"))?;
    let routing = topk_weights.as_slice().map_err(|_| not_contiguous("topk_weights"))?;
    let out = out.as_slice_mut().map_err(|_| not_contiguous("out"))?;
    py.detach(|| expert_mlp(&weights, hidden, ids, routing, top_k, out, num_threads)).map_err(moe_error)
}
