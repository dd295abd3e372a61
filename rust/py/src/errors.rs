//! Maps core errors onto the exception classes of `sglr.errors` (pure Python), so Python code
//! catches one set of typed errors whichever side detected the problem.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sglr_fsm::FsmError;
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

pub(crate) fn fsm_error(py: Python<'_>, error: FsmError) -> PyErr {
    let class_name = match &error {
        FsmError::InvalidRegex(_) => "InvalidRegexError",
        FsmError::UnsupportedRegex(_) => "UnsupportedRegexError",
        FsmError::AutomatonTooLarge { .. } => "ConstraintTooLargeError",
        FsmError::EmptyLanguage => "EmptyConstraintError",
        FsmError::InvalidSchema { .. } => "InvalidSchemaError",
        FsmError::UnsupportedSchema { .. } => "UnsupportedSchemaError",
        FsmError::InvalidVocabulary(_) | FsmError::VocabularyMismatch { .. } => "VocabularyError",
        FsmError::UnknownState { .. } => "UnknownStateError",
        FsmError::TokenOutOfRange { .. } | FsmError::TokenNotAllowed { .. } => "TokenNotAllowedError",
        FsmError::BitmaskTooSmall { .. } => "BitmaskShapeError",
        FsmError::Invariant(_) => "InvariantError",
    };
    let message = error.to_string();
    if let FsmError::UnsupportedSchema { keyword, path, .. } = &error {
        // The keyword and location travel as attributes so callers can report them.
        let built =
            py.import("sglr.errors").and_then(|module| module.getattr(class_name)).and_then(|class| {
                let kwargs = PyDict::new(py);
                kwargs.set_item("keyword", keyword)?;
                kwargs.set_item("path", path)?;
                class.call((message,), Some(&kwargs))
            });
        return match built {
            Ok(instance) => PyErr::from_value(instance),
            Err(import_failure) => import_failure,
        };
    }
    sglr_error(py, class_name, message)
}
