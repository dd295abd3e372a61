//! `sglr-kernels`' decode attention over numpy views of torch tensors: the KV cache layers are
//! borrowed in place (bf16 arrives as int16, its bit pattern), the GIL is released while the
//! kernel runs, and the caller's output array is written directly.

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyReadwriteArray3, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use sglr_kernels::attn::{store_rows, AttnError, DecodeShape};
use sglr_kernels::element::{Bf16, Element};

fn attn_error(error: AttnError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

fn not_contiguous(what: &str) -> PyErr {
    PyValueError::new_err(format!("{what} must be a C-contiguous array"))
}

/// Reinterprets non-negative int32 ids as u32 (the kernel range-checks every slot it reads).
fn as_u32(ids: &[i32]) -> &[u32] {
    // SAFETY: i32 and u32 share size and alignment; a negative id becomes a value >= 2**31,
    // which the kernel rejects as outside the cache.
    unsafe { std::slice::from_raw_parts(ids.as_ptr().cast::<u32>(), ids.len()) }
}

/// Decode attention: `queries` `[B, Hq, D]` float32; `k_cache`, `v_cache` `[slots, Hkv, D]`
/// as int16 (bf16 bits) or float32; `slot_table` `[B, W]` int32 slot ids, `seq_lens` `[B]`
/// int32 (keys per request, at most W); `out` `[B, Hq, D]` float32. `window`: only the last
/// `window` keys of each request.
#[pyfunction]
#[pyo3(signature = (queries, k_cache, v_cache, slot_table, seq_lens, out, scale, window=None, num_threads=1))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_attention(
    py: Python<'_>,
    queries: PyReadonlyArray3<'_, f32>,
    k_cache: &Bound<'_, PyAny>,
    v_cache: &Bound<'_, PyAny>,
    slot_table: PyReadonlyArray2<'_, i32>,
    seq_lens: PyReadonlyArray1<'_, i32>,
    mut out: PyReadwriteArray3<'_, f32>,
    scale: f32,
    window: Option<usize>,
    num_threads: usize,
) -> PyResult<()> {
    let (num_heads, head_dim) = (queries.shape()[1], queries.shape()[2]);
    let queries = queries.as_slice().map_err(|_| not_contiguous("queries"))?;
    let table = slot_table.as_slice().map_err(|_| not_contiguous("slot_table"))?;
    let lens = seq_lens.as_slice().map_err(|_| not_contiguous("seq_lens"))?;
    if lens.iter().any(|&len| len < 0) {
        return Err(PyValueError::new_err("seq_lens must be non-negative"));
    }
    let out = out.as_slice_mut().map_err(|_| not_contiguous("out"))?;
    let (table, lens) = (as_u32(table), as_u32(lens));
    if let (Ok(k), Ok(v)) =
        (k_cache.extract::<PyReadonlyArray3<'_, i16>>(), v_cache.extract::<PyReadonlyArray3<'_, i16>>())
    {
        let shape = cache_shape(&k, &v, num_heads, head_dim)?;
        let k = bf16_slice(k.as_slice().map_err(|_| not_contiguous("k_cache"))?);
        let v = bf16_slice(v.as_slice().map_err(|_| not_contiguous("v_cache"))?);
        return run(py, shape, queries, k, v, table, lens, scale, window, out, num_threads);
    }
    if let (Ok(k), Ok(v)) =
        (k_cache.extract::<PyReadonlyArray3<'_, f32>>(), v_cache.extract::<PyReadonlyArray3<'_, f32>>())
    {
        let shape = cache_shape(&k, &v, num_heads, head_dim)?;
        let k = k.as_slice().map_err(|_| not_contiguous("k_cache"))?;
        let v = v.as_slice().map_err(|_| not_contiguous("v_cache"))?;
        return run(py, shape, queries, k, v, table, lens, scale, window, out, num_threads);
    }
    Err(PyTypeError::new_err("k_cache and v_cache must both be 3-D int16 (bf16 bits) or float32 arrays"))
}

fn cache_shape<T: numpy::Element>(
    k: &PyReadonlyArray3<'_, T>,
    v: &PyReadonlyArray3<'_, T>,
    num_heads: usize,
    head_dim: usize,
) -> PyResult<DecodeShape> {
    if k.shape() != v.shape() || k.shape()[2] != head_dim {
        return Err(PyValueError::new_err(format!(
            "k_cache {:?} / v_cache {:?} do not match head_dim {head_dim}",
            k.shape(),
            v.shape()
        )));
    }
    Ok(DecodeShape { num_heads, num_kv_heads: k.shape()[1], head_dim, num_slots: k.shape()[0] })
}

fn bf16_slice(bits: &[i16]) -> &[Bf16] {
    // SAFETY: `Bf16` is a `repr(transparent)` u16, with i16's size and alignment.
    unsafe { std::slice::from_raw_parts(bits.as_ptr().cast::<Bf16>(), bits.len()) }
}

#[allow(clippy::too_many_arguments)]
fn run<T: Element>(
    py: Python<'_>,
    shape: DecodeShape,
    queries: &[f32],
    k: &[T],
    v: &[T],
    table: &[u32],
    lens: &[u32],
    scale: f32,
    window: Option<usize>,
    out: &mut [f32],
    num_threads: usize,
) -> PyResult<()> {
    py.detach(|| {
        sglr_kernels::attn::decode_attention(
            shape,
            queries,
            k,
            v,
            table,
            lens,
            scale,
            window,
            out,
            num_threads,
        )
    })
    .map_err(attn_error)
}

/// Writes a decode step's new rows into the caches: `new_k`, `new_v` `[T, Hkv, D]` at rows
/// `slots` `[T]` (int32) of `k_cache`, `v_cache` `[slots, Hkv, D]`; all int16 (bf16 bits) or all
/// float32, C-contiguous.
#[pyfunction]
pub(crate) fn store_kv_rows(
    k_cache: &Bound<'_, PyAny>,
    v_cache: &Bound<'_, PyAny>,
    new_k: &Bound<'_, PyAny>,
    new_v: &Bound<'_, PyAny>,
    slots: PyReadonlyArray1<'_, i32>,
) -> PyResult<()> {
    let slots = as_u32(slots.as_slice().map_err(|_| not_contiguous("slots"))?);
    if slots.iter().any(|&slot| slot > i32::MAX as u32) {
        return Err(PyValueError::new_err("slots must be non-negative"));
    }
    for (cache, rows) in [(k_cache, new_k), (v_cache, new_v)] {
        if let (Ok(mut cache), Ok(rows)) =
            (cache.extract::<PyReadwriteArray3<'_, i16>>(), rows.extract::<PyReadonlyArray3<'_, i16>>())
        {
            store(&mut cache, &rows, slots)?;
        } else if let (Ok(mut cache), Ok(rows)) =
            (cache.extract::<PyReadwriteArray3<'_, f32>>(), rows.extract::<PyReadonlyArray3<'_, f32>>())
        {
            store(&mut cache, &rows, slots)?;
        } else {
            return Err(PyTypeError::new_err(
                "caches and new rows must all be 3-D int16 (bf16 bits) or float32 arrays",
            ));
        }
    }
    Ok(())
}

fn store<T: numpy::Element + Copy>(
    cache: &mut PyReadwriteArray3<'_, T>,
    rows: &PyReadonlyArray3<'_, T>,
    slots: &[u32],
) -> PyResult<()> {
    let row_len = cache.shape()[1] * cache.shape()[2];
    if rows.shape()[1..] != cache.shape()[1..] {
        return Err(PyValueError::new_err(format!(
            "new rows {:?} do not match the cache's rows {:?}",
            rows.shape(),
            cache.shape()
        )));
    }
    let rows = rows.as_slice().map_err(|_| not_contiguous("new rows"))?;
    let cache = cache.as_slice_mut().map_err(|_| not_contiguous("cache"))?;
    store_rows(cache, row_len, rows, slots).map_err(attn_error)
}
