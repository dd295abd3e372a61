//! Decode attention on the CPU: one query per request against its cached keys and values,
//! read in place from the KV pool by slot id (no gather copy), scores and softmax in f32.
//!
//! Why not torch's SDPA: for one query row the CPU kernels spend most of their time on setup
//! (a batch-1 decode step of SmolLM2 spent ~6 of ~21 ms in 30 SDPA calls over 512 keys); the
//! arithmetic is ~0.6 MFLOP per layer. Here a (request, KV head) pair is one loop over its keys
//! for all the query heads that share it (grouped-query attention without repeating K/V).

mod element;
mod kernel;

pub use element::{Bf16, KvElement};
pub use kernel::{decode_attention, AttnError, DecodeShape};
