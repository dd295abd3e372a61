//! A whole decode step of a Llama-shaped model on the CPU, over weights kept as GGUF stores them
//! (Q4_0 / Q4_1, Q8_0 and the K-quants Q4_K, Q5_K, Q6_K; an 8-bit output head), in one call.
//!
//! Why: a small model's batch-1 decode step is a few hundred tiny operations. Run one by one
//! from Python each costs microseconds of dispatch, a dtype round trip and an intra-op thread
//! team of its own, which together cost more than the arithmetic, and a second thread made the
//! step slower, not faster. Here a step is one call: activations are quantized to int8 per block
//! of 32 once per matmul, every dot product is an exact integer sum per block (AVX-512 VNNI or
//! AVX2, `dot.rs`), and the matmuls split their rows over one rayon pool that lives as long as
//! the process, so a second core helps.
//!
//! The results differ from a bf16 or f32 computation by the activations' int8 rounding (about
//! 0.4% of a block's largest value); `benches/results/smollm2_cpu_gguf.md` reports the effect on
//! greedy tokens.

mod act;
mod dequant;
mod dot;
mod error;
mod gemm;
mod gguf;
mod kdot;
mod kquant;
mod model;
mod q4;
mod stack;
mod vector;

pub use act::{QuantizedRow, QuantizedRows};
pub use dot::{q4_dots, q8_dots, Isa, MAX_GROUP};
pub use error::DecodeError;
pub use gemm::{dequantize_bf16_into, dequantize_into, matmul, shared_pool, QuantizedWeight, SharedWeight};
pub use gguf::{gguf_matrix, GgufPart};
pub use kdot::kquant_dots;
pub use kquant::{KQuant, KQuantMatrix, SUPER_LEN};
pub use model::{CacheElement, DecodeModel, LayerWeights, ModelShape, RotaryTables, StepBatch};
pub use q4::{Q4Format, Q4Matrix, Q4Row, Q8Matrix, Q8Row, BLOCK_LEN, SCALE_RUN};
pub use stack::RowStack;
