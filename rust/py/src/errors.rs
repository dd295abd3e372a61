//! Maps core errors onto the exception classes of `sglr.errors` (pure Python), so Python code
//! catches one set of typed errors whichever side detected the problem.

use pyo3::prelude::*;
use sglr_radix::RadixError;

/// Builds an instance of `sglr.errors.<class_name>(message)`.
pub(crate) fn sglr_error(py: Python<'_>, class_name: &str, message: String) -> PyErr {
    let built = py
        .import("sglr.errors")
        .and_then(|module| module.getattr(class_name))
        .and_then(|class| class.call1((message,)));
    match built {
        Ok(instance) => PyErr::from_value(instance),
        Err(import_failure) => import_failure,
    }
}

pub(crate) fn radix_error(py: Python<'_>, error: RadixError) -> PyErr {
    let class_name = match &error {
        RadixError::LengthMismatch { .. } => "LengthMismatchError",
        RadixError::UnknownNode(_) => "UnknownNodeError",
        RadixError::StaleNode(_) => "StaleNodeError",
        RadixError::UnlockBelowZero(_) => "UnlockError",
        RadixError::Invariant(_) => "InvariantError",
    };
    sglr_error(py, class_name, error.to_string())
}
