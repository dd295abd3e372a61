//! Zero-copy views of id arrays passed from Python.
//!
//! Token and slot ids arrive as numpy int32 / uint32 / int64 arrays or as Python sequences of
//! ints. 32-bit arrays are borrowed in place; anything else is converted once.

use std::borrow::Cow;

use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A read-only `u32` view of a Python id array, valid while the borrow guard lives.
pub(crate) enum IdArray<'py> {
    I32(PyReadonlyArray1<'py, i32>),
    U32(PyReadonlyArray1<'py, u32>),
    Owned(Vec<u32>),
}

impl<'py> IdArray<'py> {
    /// Accepts a 1-D numpy integer array or a sequence of non-negative ints below 2**32.
    pub(crate) fn extract(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        if let Ok(array) = obj.extract::<PyReadonlyArray1<'py, i32>>() {
            check_contiguous(array.is_contiguous(), what)?;
            // A branch-free OR over the sign bits vectorizes; an early-exit scan does not.
            if array.as_slice()?.iter().fold(0i32, |acc, &id| acc | id) < 0 {
                return Err(PyValueError::new_err(format!("{what} must be non-negative")));
            }
            return Ok(Self::I32(array));
        }
        if let Ok(array) = obj.extract::<PyReadonlyArray1<'py, u32>>() {
            check_contiguous(array.is_contiguous(), what)?;
            return Ok(Self::U32(array));
        }
        if let Ok(array) = obj.extract::<PyReadonlyArray1<'py, i64>>() {
            let values = array.as_array();
            let mut out = Vec::with_capacity(values.len());
            for &id in values.iter() {
                out.push(u32::try_from(id).map_err(|_| out_of_range(what, id))?);
            }
            return Ok(Self::Owned(out));
        }
        if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>() {
            return Err(PyTypeError::new_err(format!("{what} must be a sequence of ints, not str/bytes")));
        }
        let values: Vec<i64> = obj.extract().map_err(|_| {
            PyTypeError::new_err(format!("{what} must be a 1-D numpy integer array or a sequence of ints"))
        })?;
        let mut out = Vec::with_capacity(values.len());
        for id in values {
            out.push(u32::try_from(id).map_err(|_| out_of_range(what, id))?);
        }
        Ok(Self::Owned(out))
    }

    pub(crate) fn as_slice(&self) -> Cow<'_, [u32]> {
        match self {
            // NOTE: i32 and u32 share size and alignment, and `extract` rejected negatives.
            Self::I32(array) => {
                let data = array.as_slice().expect("checked contiguous");
                Cow::Borrowed(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u32>(), data.len()) })
            }
            Self::U32(array) => Cow::Borrowed(array.as_slice().expect("checked contiguous")),
            Self::Owned(values) => Cow::Borrowed(values.as_slice()),
        }
    }
}

fn check_contiguous(is_contiguous: bool, what: &str) -> PyResult<()> {
    if is_contiguous {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!("{what} must be a contiguous array")))
    }
}

fn out_of_range(what: &str, id: i64) -> PyErr {
    PyValueError::new_err(format!("{what} must be in [0, 2**32), got {id}"))
}

/// Hands slot ids to Python as an int32 numpy array (what torch indexing takes directly).
/// Slot ids stay below 2**31 (they index a KV pool), so the reinterpretation is value-preserving.
pub(crate) fn slots_to_numpy<'py>(py: Python<'py>, slots: Vec<u32>) -> Bound<'py, PyArray1<i32>> {
    let mut slots = std::mem::ManuallyDrop::new(slots);
    // SAFETY: u32 and i32 have the same size and alignment; the allocation moves over whole.
    let as_i32 =
        unsafe { Vec::from_raw_parts(slots.as_mut_ptr().cast::<i32>(), slots.len(), slots.capacity()) };
    PyArray1::from_vec(py, as_i32)
}

/// Extracts every element of a Python iterable of id arrays.
pub(crate) fn extract_all<'py>(list: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<IdArray<'py>>> {
    list.try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be an iterable of id arrays")))?
        .map(|item| IdArray::extract(&item?, what))
        .collect()
}
