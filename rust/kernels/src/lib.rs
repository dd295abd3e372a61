//! The CPU kernels of sglr, by concept. Each module uses only the ones listed before it (no
//! module cycle):
//!
//! - [`isa`]: the instruction set every kernel dispatches on, decided once per process: the
//!   CPU's best, capped by `SGLR_CPU_ISA` to run a lesser CPU's code paths (and `simd`, the
//!   vector pieces several kernels share).
//! - [`block`]: GGUF's block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K): block
//!   sizes, runs of scales, nibble unpacking, and the row views the kernels read.
//! - [`element`]: row elements, f32 or bf16 carried as its bits.
//! - [`norm`]: RMSNorm rows.
//! - [`attn`]: decode attention over the KV slot pool, read in place by slot id.
//! - [`moe`]: the routed experts of a mixture-of-experts block for decode-sized batches.
//! - [`error`]: the error of the quantized matrices and the decode step.
//! - `dequant`: quantized rows back to f32, f32 rows to bf16.
//! - [`quant`]: quantized matrices kept as stored (one `Q8Matrix` for every 8-bit use), the int8
//!   activations, and the integer (and f32) dot products of a weight row against a few
//!   activation rows.
//! - [`gemm`]: a quantized matrix times activation rows over a rayon pool, and whole matrices
//!   dequantized.
//! - [`decode`]: a Llama-shaped model's whole decode step in one call.
//!
//! Every kernel has a portable version and vector versions picked at run time (wheels are
//! built for a generic x86-64, so the instructions cannot be assumed); the vector versions are
//! tested against the portable ones.

pub mod attn;
pub mod block;
pub mod decode;
mod dequant;
pub mod element;
pub mod error;
pub mod gemm;
pub mod isa;
pub mod moe;
pub mod norm;
pub mod quant;
#[cfg(target_arch = "x86_64")]
mod simd;
