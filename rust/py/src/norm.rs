//! `sglr-kernels`' RMSNorm over numpy views of torch tensors (bf16 arrives as int16 bits).

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use sglr_kernels::element::{Bf16, Element};

/// `out = weight * rms_normalized(x)` row by row: `x`, `out` `[rows, width]` and `weight`
/// `[width]`, all int16 (bf16 bits) or all float32, C-contiguous.
#[pyfunction]
pub(crate) fn rms_norm(
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    eps: f32,
    out: &Bound<'_, PyAny>,
) -> PyResult<()> {
    if let (Ok(x), Ok(weight), Ok(mut out)) = (
        x.extract::<PyReadonlyArray2<'_, i16>>(),
        weight.extract::<PyReadonlyArray1<'_, i16>>(),
        out.extract::<PyReadwriteArray2<'_, i16>>(),
    ) {
        return run(
            &x,
            &weight,
            eps,
            &mut out,
            |bits: &[i16]| {
                // SAFETY: `Bf16` is a `repr(transparent)` u16, with i16's size and alignment.
                unsafe { std::slice::from_raw_parts(bits.as_ptr().cast::<Bf16>(), bits.len()) }
            },
            |bits: &mut [i16]| {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts_mut(bits.as_mut_ptr().cast::<Bf16>(), bits.len()) }
            },
        );
    }
    if let (Ok(x), Ok(weight), Ok(mut out)) = (
        x.extract::<PyReadonlyArray2<'_, f32>>(),
        weight.extract::<PyReadonlyArray1<'_, f32>>(),
        out.extract::<PyReadwriteArray2<'_, f32>>(),
    ) {
        return run(&x, &weight, eps, &mut out, |v: &[f32]| v, |v: &mut [f32]| v);
    }
    Err(PyTypeError::new_err(
        "x, weight and out must all be int16 (bf16 bits) or float32 arrays (2-D, 1-D, 2-D)",
    ))
}

fn run<E: numpy::Element, T: Element>(
    x: &PyReadonlyArray2<'_, E>,
    weight: &PyReadonlyArray1<'_, E>,
    eps: f32,
    out: &mut PyReadwriteArray2<'_, E>,
    view: impl Fn(&[E]) -> &[T],
    view_mut: impl Fn(&mut [E]) -> &mut [T],
) -> PyResult<()> {
    if x.shape() != out.shape() || x.shape()[1] != weight.len() {
        return Err(PyValueError::new_err(format!(
            "rms_norm: x {:?}, weight [{}], out {:?}",
            x.shape(),
            weight.len(),
            out.shape()
        )));
    }
    let contiguous = |what: &str| PyValueError::new_err(format!("{what} must be a C-contiguous array"));
    let x = view(x.as_slice().map_err(|_| contiguous("x"))?);
    let weight = view(weight.as_slice().map_err(|_| contiguous("weight"))?);
    let out = view_mut(out.as_slice_mut().map_err(|_| contiguous("out"))?);
    sglr_kernels::norm::rms_norm(x, weight, eps, out)
        .map_err(|error| PyValueError::new_err(error.to_string()))
}
