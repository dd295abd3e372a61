//! Cache-aware admission of waiting requests (longest-prefix-match, DFS-weight, FCFS, ...).
//!
//! Filled in by the scheduling work; the crate exists so the workspace layout is final.
