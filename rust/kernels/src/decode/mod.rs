//! A whole decode step of a pre-norm decoder (Llama, Qwen2, Qwen3, Mistral, ...) on the CPU, over weights kept as GGUF stores them
//! (Q4_0 / Q4_1, Q5_0 / Q5_1, Q8_0 and the K-quants Q4_K, Q5_K, Q6_K; an 8-bit output head), in
//! one call.
//!
//! Why: a small model's batch-1 decode step is a few hundred tiny operations. Run one by one
//! from Python each costs microseconds of dispatch, a dtype round trip and an intra-op thread
//! team of its own, which together cost more than the arithmetic, and a second thread made the
//! step slower, not faster. Here a step is one call: activations are quantized to int8 per block
//! of 32 once per matmul, every dot product is an exact integer sum per block (AVX-512 VNNI or
//! AVX2, `quant/dot.rs`), and the matmuls split their rows over one rayon pool that lives as long
//! as the process, so a second core helps.
//!
//! The results differ from a bf16 or f32 computation by the activations' int8 rounding (about
//! 0.4% of a block's largest value); `benches/results/smollm2_cpu_gguf.md` reports the effect on
//! greedy tokens.
//!
//! LoRA adapters (`lora`) run inside the step: each of a layer's four matmuls adds, for every
//! adapter of the batch, its low-rank delta over that adapter's rows, computed in f32 from the
//! matmul's input before quantization; the base model's rows are computed as without adapters.

mod lora;
mod model;
mod silu;

pub use lora::{add_lora_deltas, LayerLora, LoraGroup, LoraPair, LoraScratch};
pub use model::{DecodeModel, HeadNorms, LayerWeights, ModelShape, RotaryTables, StepBatch, BASE_ADAPTER};
