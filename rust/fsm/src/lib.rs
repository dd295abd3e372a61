//! Regex and JSON-schema constraints compiled to a token-level compressed DFA.
//!
//! Filled in by the constrained-decoding work; the crate exists so the workspace layout is final.
