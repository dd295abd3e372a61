//! The schema errors (`FsmError`'s schema variants) as this crate writes them.

use sglr_fsm::FsmError;

/// A keyword (or keyword value) the compiler cannot enforce, named with where and why.
pub(crate) fn unsupported(keyword: &str, path: &str, reason: &str) -> FsmError {
    FsmError::UnsupportedSchema { keyword: keyword.into(), path: path.into(), reason: reason.into() }
}

/// A schema that is not valid JSON Schema at `path`.
pub(crate) fn invalid(path: &str, message: impl Into<String>) -> FsmError {
    FsmError::InvalidSchema { path: path.into(), message: message.into() }
}
