//! `sglr-kernels` for Python: the quantized matrices (owned by Rust, held by the model's layers)
//! and the fused CPU decode step over numpy views of torch tensors (bf16 arrives as int16 bits).

use std::sync::{Arc, RwLock};

use numpy::{
    PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2, PyReadwriteArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use rayon::ThreadPool;
use sglr_kernels::decode::{
    DecodeModel, HeadNorms, LayerLora, LayerWeights, LoraPair, ModelShape, RotaryTables, StepBatch,
};
use sglr_kernels::element::{Bf16, Element};
use sglr_kernels::error::DecodeError;
use sglr_kernels::gemm::{dequantize_bf16_into, dequantize_into, matmul, shared_pool};
use sglr_kernels::isa::Isa;
use sglr_kernels::quant::{
    gguf_matrix, GgufPart, Q4Matrix, Q8Matrix, QuantizedRows, QuantizedWeight, SharedWeight,
};

use crate::buffers::IdArray;

fn decode_error(error: DecodeError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

fn slice<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    array: &'a numpy::PyReadonlyArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a [T]> {
    array.as_slice().map_err(|_| PyValueError::new_err(format!("{what} must be a C-contiguous array")))
}

fn bf16_bits(bits: &mut [i16]) -> &mut [Bf16] {
    // SAFETY: `Bf16` is a `repr(transparent)` u16: i16's size and alignment, any bits valid.
    unsafe { std::slice::from_raw_parts_mut(bits.as_mut_ptr().cast::<Bf16>(), bits.len()) }
}

/// Quantizes `inputs` (`[T, cols]` float32) and multiplies on `num_threads` threads into `out`.
fn run_matmul<W: QuantizedWeight + ?Sized>(
    py: Python<'_>,
    weight: &W,
    inputs: PyReadonlyArray2<'_, f32>,
    mut out: PyReadwriteArray2<'_, f32>,
    num_threads: usize,
) -> PyResult<()> {
    if inputs.shape()[1] != weight.cols() || out.shape() != [inputs.shape()[0], weight.rows()] {
        return Err(PyValueError::new_err(format!(
            "matmul: inputs {:?}, out {:?} for a {} x {} matrix",
            inputs.shape(),
            out.shape(),
            weight.rows(),
            weight.cols()
        )));
    }
    let cols = weight.cols();
    let inputs = slice(&inputs, "inputs")?;
    let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a C-contiguous array"))?;
    let pool = shared_pool(num_threads);
    py.detach(|| {
        let mut quantized = QuantizedRows::new();
        quantized.quantize(inputs, cols)?;
        let isa = Isa::detect();
        pool.install(|| matmul(isa, weight, &quantized, out, &mut Vec::new()))
    })
    .map_err(decode_error)
}

/// The matrix into `out` (float32, or int16 holding bf16 bits) on `num_threads` threads.
fn run_dequantize<W: QuantizedWeight + ?Sized>(
    py: Python<'_>,
    matrix: &W,
    out: &Bound<'_, PyAny>,
    num_threads: usize,
) -> PyResult<()> {
    let pool = shared_pool(num_threads);
    if let Ok(mut out) = out.extract::<PyReadwriteArray2<'_, f32>>() {
        let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        return py.detach(|| pool.install(|| dequantize_into(matrix, out))).map_err(decode_error);
    }
    if let Ok(mut out) = out.extract::<PyReadwriteArray2<'_, i16>>() {
        let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        // SAFETY: i16 and u16 have one size and alignment; every bit pattern is valid for both.
        let bits = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u16>(), out.len()) };
        return py.detach(|| pool.install(|| dequantize_bf16_into(matrix, bits))).map_err(decode_error);
    }
    Err(PyTypeError::new_err("out must be a 2-D float32 or int16 (bf16 bits) array"))
}

/// A matrix from a GGUF checkpoint's parts as stored: `parts` is a list of `(type_name, blocks)`,
/// `blocks` a `[rows, bytes_per_row]` uint8 array of that part's rows in the file's block
/// format (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K); the parts' rows are stacked in order.
#[pyclass(frozen, name = "GgufMatrix", module = "sglr._core")]
pub(crate) struct PyGgufMatrix {
    pub(crate) inner: SharedWeight,
    type_names: Vec<String>,
}

#[pymethods]
impl PyGgufMatrix {
    #[new]
    fn new(py: Python<'_>, parts: Vec<(String, PyReadonlyArray2<'_, u8>)>, cols: usize) -> PyResult<Self> {
        let mut gguf_parts = Vec::with_capacity(parts.len());
        for (type_name, blocks) in &parts {
            gguf_parts.push(GgufPart { type_name, bytes: slice(blocks, "blocks")?, rows: blocks.shape()[0] });
        }
        let inner = py.detach(|| gguf_matrix(&gguf_parts, cols)).map_err(decode_error)?;
        Ok(Self { inner, type_names: parts.into_iter().map(|(name, _)| name).collect() })
    }

    /// A 4-bit matrix from levels `[rows, cols]` uint8 (0..15), `scales` and `zeros`
    /// `[rows, cols / 32]` float32 (`w = (q - 8) * scale + zero`; scale and `zero - 8 scale`
    /// stored as fp16, as GGUF's Q4_1 blocks hold them).
    #[staticmethod]
    fn from_levels(
        py: Python<'_>,
        levels: PyReadonlyArray2<'_, u8>,
        scales: PyReadonlyArray2<'_, f32>,
        zeros: PyReadonlyArray2<'_, f32>,
    ) -> PyResult<Self> {
        let (rows, cols) = (levels.shape()[0], levels.shape()[1]);
        let (levels, scales, zeros) =
            (slice(&levels, "levels")?, slice(&scales, "scales")?, slice(&zeros, "zeros")?);
        let matrix =
            py.detach(|| Q4Matrix::from_levels(levels, scales, zeros, rows, cols)).map_err(decode_error)?;
        Ok(Self { inner: Arc::new(matrix), type_names: vec!["Q4_1".to_string()] })
    }

    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }

    #[getter]
    fn cols(&self) -> usize {
        self.inner.cols()
    }

    #[getter]
    fn num_bytes(&self) -> usize {
        self.inner.num_bytes()
    }

    /// The parts' block types, in row order.
    #[getter]
    fn type_names(&self) -> Vec<String> {
        self.type_names.clone()
    }

    /// `out[i, r] = inputs[i] . W[r]` with the inputs quantized to int8 per block of 32.
    #[pyo3(signature = (inputs, out, num_threads=1))]
    fn matmul(
        &self,
        py: Python<'_>,
        inputs: PyReadonlyArray2<'_, f32>,
        out: PyReadwriteArray2<'_, f32>,
        num_threads: usize,
    ) -> PyResult<()> {
        run_matmul(py, self.inner.as_ref(), inputs, out, num_threads)
    }

    /// The matrix into `out` `[rows, cols]`: float32, or int16 holding bf16 bits (rounded to
    /// nearest even).
    #[pyo3(signature = (out, num_threads=1))]
    fn dequantize(&self, py: Python<'_>, out: &Bound<'_, PyAny>, num_threads: usize) -> PyResult<()> {
        run_dequantize(py, self.inner.as_ref(), out, num_threads)
    }

    /// Rows `row_ids`, dequantized into `out` (`[len(row_ids), cols]` float32): embedding lookups.
    fn dequantize_rows(&self, row_ids: &Bound<'_, PyAny>, out: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        dequantize_rows_into(self.inner.as_ref(), row_ids, out)
    }
}

/// Rows `row_ids` of `matrix`, dequantized into `out` (`[len(row_ids), cols]` float32).
fn dequantize_rows_into<W: QuantizedWeight + ?Sized>(
    matrix: &W,
    row_ids: &Bound<'_, PyAny>,
    mut out: PyReadwriteArray2<'_, f32>,
) -> PyResult<()> {
    let (rows, cols) = (matrix.rows(), matrix.cols());
    let ids = IdArray::extract(row_ids, "row_ids")?;
    let ids = ids.as_slice();
    if out.shape() != [ids.len(), cols] {
        return Err(PyValueError::new_err(format!(
            "out is {:?}, expected [{}, {cols}]",
            out.shape(),
            ids.len()
        )));
    }
    if let Some(&bad) = ids.iter().find(|&&id| id as usize >= rows) {
        return Err(PyValueError::new_err(format!("row id {bad} outside the matrix's {rows} rows")));
    }
    let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
    let isa = Isa::detect();
    for (&id, dest) in ids.iter().zip(out.chunks_exact_mut(cols)) {
        matrix.dequantize_row(isa, id as usize, dest);
    }
    Ok(())
}

/// A `GgufMatrix` or `Q8Matrix` as the fused step holds it.
fn shared_weight(matrix: &Bound<'_, PyAny>) -> PyResult<SharedWeight> {
    if let Ok(q8) = matrix.cast::<PyQ8Matrix>() {
        return Ok(q8.get().inner.clone());
    }
    if let Ok(gguf) = matrix.cast::<PyGgufMatrix>() {
        return Ok(gguf.get().inner.clone());
    }
    Err(PyTypeError::new_err("matrices must be GgufMatrix or Q8Matrix objects"))
}

type LevelsScales<'py> = (Bound<'py, PyArray2<i8>>, Bound<'py, PyArray2<f32>>);

/// An 8-bit matrix (GGUF Q8_0 blocks): levels `[rows, cols]` int8, scales `[rows, cols / 32]`.
#[pyclass(frozen, name = "Q8Matrix", module = "sglr._core")]
pub(crate) struct PyQ8Matrix {
    pub(crate) inner: Arc<Q8Matrix>,
}

#[pymethods]
impl PyQ8Matrix {
    #[new]
    fn new(levels: PyReadonlyArray2<'_, i8>, scales: PyReadonlyArray2<'_, f32>) -> PyResult<Self> {
        let (rows, cols) = (levels.shape()[0], levels.shape()[1]);
        if scales.shape()[0] != rows {
            return Err(PyValueError::new_err(format!("{} scale rows for {rows} rows", scales.shape()[0])));
        }
        let matrix =
            Q8Matrix::new(slice(&levels, "levels")?.to_vec(), slice(&scales, "scales")?.to_vec(), rows, cols)
                .map_err(decode_error)?;
        Ok(Self { inner: Arc::new(matrix) })
    }

    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.inner.rows(), self.inner.cols())
    }

    /// Copies of the levels and scales (for tests and checks; the matrix keeps its own).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<LevelsScales<'py>> {
        let (rows, cols) = (self.inner.rows(), self.inner.cols());
        let levels = numpy::PyArray1::from_slice(py, self.inner.levels()).reshape([rows, cols])?;
        let scales = numpy::PyArray1::from_slice(py, self.inner.scales()).reshape([rows, cols / 32])?;
        Ok((levels, scales))
    }

    /// `out[i, r] = inputs[i] . W[r]` in f32 from the exact levels (activations not quantized).
    #[pyo3(signature = (inputs, out, num_threads=1))]
    fn matmul_f32(
        &self,
        py: Python<'_>,
        inputs: PyReadonlyArray2<'_, f32>,
        mut out: PyReadwriteArray2<'_, f32>,
        num_threads: usize,
    ) -> PyResult<()> {
        let num_inputs = inputs.shape()[0];
        let inputs = slice(&inputs, "inputs")?;
        let out =
            out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be a C-contiguous array"))?;
        py.detach(|| self.inner.matmul_transposed(inputs, num_inputs, out, num_threads)).map_err(decode_error)
    }

    /// `out[i, r] = inputs[i] . W[r]` with the inputs quantized to int8 per block of 32.
    #[pyo3(signature = (inputs, out, num_threads=1))]
    fn matmul(
        &self,
        py: Python<'_>,
        inputs: PyReadonlyArray2<'_, f32>,
        out: PyReadwriteArray2<'_, f32>,
        num_threads: usize,
    ) -> PyResult<()> {
        run_matmul(py, self.inner.as_ref(), inputs, out, num_threads)
    }

    /// Rows `row_ids`, dequantized into `out` (`[len(row_ids), cols]` float32).
    fn dequantize_rows(&self, row_ids: &Bound<'_, PyAny>, out: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        dequantize_rows_into(self.inner.as_ref(), row_ids, out)
    }
}

type LayerTuple<'py> = (
    PyReadonlyArray1<'py, f32>,
    Bound<'py, PyAny>,
    Option<PyReadonlyArray1<'py, f32>>,
    Bound<'py, PyAny>,
    PyReadonlyArray1<'py, f32>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<usize>,
    Option<(PyReadonlyArray1<'py, f32>, PyReadonlyArray1<'py, f32>, f32)>,
);

/// A LoRA pair as Python hands it over: shrink `[rank, in]`, expand `[out, rank]` float32.
type PairArrays<'py> = Option<(PyReadonlyArray2<'py, f32>, PyReadonlyArray2<'py, f32>)>;
/// An adapter's pairs on one layer's q/k/v, o, gate/up and down matmuls.
type LayerPairs<'py> = (PairArrays<'py>, PairArrays<'py>, PairArrays<'py>, PairArrays<'py>);

fn lora_pair(arrays: PairArrays<'_>, what: &str) -> PyResult<Option<LoraPair>> {
    let Some((shrink, expand)) = arrays else {
        return Ok(None);
    };
    let ([rank, in_features], [out_features, expand_rank]) = (
        <[usize; 2]>::try_from(shrink.shape()).expect("2-D"),
        <[usize; 2]>::try_from(expand.shape()).expect("2-D"),
    );
    if expand_rank != rank {
        return Err(PyValueError::new_err(format!(
            "{what}: shrink {:?} and expand {:?} are not a rank-{rank} pair",
            shrink.shape(),
            expand.shape()
        )));
    }
    let shrink = slice(&shrink, "shrink")?.to_vec();
    LoraPair::new(rank, in_features, out_features, shrink, slice(&expand, "expand")?)
        .map(Some)
        .map_err(decode_error)
}

/// A pre-norm decoder's decode step in one call (`sglr-kernels`' `decode`). Layers are tuples
/// `(input_norm, qkv, qkv_bias | None, o, post_norm, gate_up, down, sliding_window | None,
/// (q_norm, k_norm, eps) | None)`,
/// norms float32, matrices `GgufMatrix`; `head` a `Q8Matrix`, `GgufMatrix` or None
/// (then `step` returns the final-normalized hidden states); `rope_cos`, `rope_sin` `[positions, head_dim / 2]` float32.
/// LoRA adapters are loaded by id (`add_adapter`) and named per request in `step`.
#[pyclass(frozen, name = "CpuDecodeModel", module = "sglr._core")]
pub(crate) struct PyCpuDecodeModel {
    // A lock, not a borrow: loading an adapter waits for a running step (outside the GIL).
    model: RwLock<DecodeModel>,
    pool: Arc<ThreadPool>,
}

#[pymethods]
impl PyCpuDecodeModel {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (hidden_size, num_heads, num_kv_heads, head_dim, intermediate_size, rms_norm_eps,
                        attention_scale, layers, final_norm, head, rope_cos, rope_sin, num_threads))]
    fn new(
        hidden_size: usize,
        num_heads: usize,
        num_kv_heads: usize,
        head_dim: usize,
        intermediate_size: usize,
        rms_norm_eps: f32,
        attention_scale: f32,
        layers: Vec<LayerTuple<'_>>,
        final_norm: PyReadonlyArray1<'_, f32>,
        head: Option<Bound<'_, PyAny>>,
        rope_cos: PyReadonlyArray2<'_, f32>,
        rope_sin: PyReadonlyArray2<'_, f32>,
        num_threads: usize,
    ) -> PyResult<Self> {
        let shape = ModelShape {
            hidden_size,
            num_heads,
            num_kv_heads,
            head_dim,
            intermediate_size,
            rms_norm_eps,
            attention_scale,
        };
        let mut weights = Vec::with_capacity(layers.len());
        for (input_norm, qkv, qkv_bias, o, post_norm, gate_up, down, sliding_window, head_norms) in layers {
            let head_norms = head_norms
                .map(|(q, k, eps)| -> PyResult<HeadNorms> {
                    Ok(HeadNorms { q: slice(&q, "q_norm")?.to_vec(), k: slice(&k, "k_norm")?.to_vec(), eps })
                })
                .transpose()?;
            weights.push(LayerWeights {
                input_norm: slice(&input_norm, "input_norm")?.to_vec(),
                qkv: shared_weight(&qkv)?,
                qkv_bias: qkv_bias.map(|b| slice(&b, "qkv_bias").map(<[f32]>::to_vec)).transpose()?,
                o: shared_weight(&o)?,
                post_norm: slice(&post_norm, "post_norm")?.to_vec(),
                gate_up: shared_weight(&gate_up)?,
                down: shared_weight(&down)?,
                sliding_window,
                head_norms,
            });
        }
        let rotary = RotaryTables {
            cos: slice(&rope_cos, "rope_cos")?.to_vec(),
            sin: slice(&rope_sin, "rope_sin")?.to_vec(),
        };
        let model = DecodeModel::new(
            shape,
            weights,
            slice(&final_norm, "final_norm")?.to_vec(),
            head.as_ref().map(shared_weight).transpose()?,
            rotary,
        )
        .map_err(decode_error)?;
        Ok(Self { model: RwLock::new(model), pool: shared_pool(num_threads) })
    }

    #[getter]
    fn output_width(&self) -> usize {
        self.read().output_width()
    }

    #[getter]
    fn isa(&self) -> &'static str {
        self.read().isa().name()
    }

    /// Loads a LoRA adapter as `adapter_id` (> 0, not loaded): `layers` has one tuple per layer
    /// of its `(qkv, o, gate_up, down)` pairs, each None or `(shrink [rank, in], expand [out,
    /// rank])` float32 with the scaling folded into expand.
    fn add_adapter(&self, py: Python<'_>, adapter_id: u32, layers: Vec<LayerPairs<'_>>) -> PyResult<()> {
        let mut adapter = Vec::with_capacity(layers.len());
        for (index, (qkv, o, gate_up, down)) in layers.into_iter().enumerate() {
            let what = |name: &str| format!("adapter {adapter_id} layer {index} {name}");
            adapter.push(LayerLora {
                qkv: lora_pair(qkv, &what("qkv"))?,
                o: lora_pair(o, &what("o"))?,
                gate_up: lora_pair(gate_up, &what("gate_up"))?,
                down: lora_pair(down, &what("down"))?,
            });
        }
        py.detach(|| self.write().add_adapter(adapter_id, adapter)).map_err(decode_error)
    }

    fn remove_adapter(&self, py: Python<'_>, adapter_id: u32) -> PyResult<()> {
        py.detach(|| self.write().remove_adapter(adapter_id)).map_err(decode_error)
    }

    /// The loaded adapters' ids, in increasing order.
    #[getter]
    fn adapter_ids(&self) -> Vec<u32> {
        self.read().adapter_ids()
    }

    /// One decode step. `hidden` `[B, hidden_size]` float32: the tokens' embeddings (used as
    /// the residual stream: overwritten); `positions`, `seq_lens`, `out_slots` `[B]` ids;
    /// `slot_table` `[B, W]` int32; `k_cache`, `v_cache` every layer's rows (int16 bf16 bits
    /// or float32, C-contiguous); `out` `[B, output_width]` float32; `adapter_ids` None (every
    /// request runs the base model) or `[B]` ids, each 0 (the base) or a loaded adapter's.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (hidden, positions, slot_table, seq_lens, out_slots, k_cache, v_cache, out,
                        adapter_ids=None))]
    fn step(
        &self,
        py: Python<'_>,
        mut hidden: PyReadwriteArray2<'_, f32>,
        positions: &Bound<'_, PyAny>,
        slot_table: PyReadonlyArray2<'_, i32>,
        seq_lens: &Bound<'_, PyAny>,
        out_slots: &Bound<'_, PyAny>,
        k_cache: &Bound<'_, PyAny>,
        v_cache: &Bound<'_, PyAny>,
        mut out: PyReadwriteArray2<'_, f32>,
        adapter_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let adapter_ids = adapter_ids.map(|ids| IdArray::extract(ids, "adapter_ids")).transpose()?;
        let adapter_ids = adapter_ids.as_ref().map(IdArray::as_slice);
        let positions = IdArray::extract(positions, "positions")?;
        let seq_lens = IdArray::extract(seq_lens, "seq_lens")?;
        let out_slots = IdArray::extract(out_slots, "out_slots")?;
        let table = slice(&slot_table, "slot_table")?;
        // NOTE: i32 -> u32 keeps the bits; a negative entry becomes an out-of-range slot, which
        // the step's checks reject.
        let table = unsafe { std::slice::from_raw_parts(table.as_ptr().cast::<u32>(), table.len()) };
        let (positions, seq_lens, out_slots) =
            (positions.as_slice(), seq_lens.as_slice(), out_slots.as_slice());
        let batch = StepBatch {
            positions: &positions,
            slot_table: table,
            seq_lens: &seq_lens,
            out_slots: &out_slots,
            adapter_ids: adapter_ids.as_deref().unwrap_or(&[]),
        };
        let hidden =
            hidden.as_slice_mut().map_err(|_| PyValueError::new_err("hidden must be C-contiguous"))?;
        let out = out.as_slice_mut().map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        if let (Ok(mut k), Ok(mut v)) = (
            k_cache.extract::<PyReadwriteArrayDyn<'_, i16>>(),
            v_cache.extract::<PyReadwriteArrayDyn<'_, i16>>(),
        ) {
            let k = bf16_bits(
                k.as_slice_mut().map_err(|_| PyValueError::new_err("k_cache must be C-contiguous"))?,
            );
            let v = bf16_bits(
                v.as_slice_mut().map_err(|_| PyValueError::new_err("v_cache must be C-contiguous"))?,
            );
            return self.run(py, hidden, batch, k, v, out);
        }
        if let (Ok(mut k), Ok(mut v)) = (
            k_cache.extract::<PyReadwriteArrayDyn<'_, f32>>(),
            v_cache.extract::<PyReadwriteArrayDyn<'_, f32>>(),
        ) {
            let k = k.as_slice_mut().map_err(|_| PyValueError::new_err("k_cache must be C-contiguous"))?;
            let v = v.as_slice_mut().map_err(|_| PyValueError::new_err("v_cache must be C-contiguous"))?;
            return self.run(py, hidden, batch, k, v, out);
        }
        Err(PyTypeError::new_err("k_cache and v_cache must both be int16 (bf16 bits) or float32 arrays"))
    }
}

impl PyCpuDecodeModel {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, DecodeModel> {
        self.model.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, DecodeModel> {
        self.model.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn run<T: Element>(
        &self,
        py: Python<'_>,
        hidden: &mut [f32],
        batch: StepBatch<'_>,
        k_cache: &mut [T],
        v_cache: &mut [T],
        out: &mut [f32],
    ) -> PyResult<()> {
        py.detach(|| self.pool.install(|| self.read().step(hidden, batch, k_cache, v_cache, out)))
            .map_err(decode_error)
    }
}
