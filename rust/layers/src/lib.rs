//! Small per-token CPU layer kernels, for decode steps where torch's per-op cost dominates the
//! arithmetic (a 576-wide RMSNorm row is ~1 us of work and ~30 us through torch's composite
//! `rms_norm` on a bf16 input).

mod rms_norm;

pub use rms_norm::{rms_norm, Bf16Bits, NormElement, NormError};
