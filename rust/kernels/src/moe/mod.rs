//! Routed expert MLPs of a mixture-of-experts block on the CPU, for decode-sized batches.
//!
//! Why: a decode step gives each expert a handful of tokens, and its cost is reading the
//! experts' weights. A GEMM library tuned for large batches reads them well below memory speed
//! at those sizes (oneDNN, one thread, Mixtral-shaped experts at 1-2 rows: ~12-14 of ~31 GB/s). Here
//! the (token, expert) pairs are sorted by expert and each expert's rows multiply its weights,
//! packed once in column panels, in one streaming pass (`panels`).

mod experts;
mod panels;

pub use experts::{expert_mlp, pack_panels, ExpertWeights, MoeError};
pub use panels::PANEL;
