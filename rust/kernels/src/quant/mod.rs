//! Quantized matrices kept as stored, and their products with a few activation rows.
//!
//! The activations are quantized to int8 per block of 32 once per matmul (`act`), and each
//! weight row's dot products against them are exact integer sums per block, scaled once in f32
//! (`dot` for the 4-, 5- and 8-bit formats, `kdot` for the K-quants). An 8-bit matrix also
//! multiplies f32 activations as they are (`q8_f32`: the output head's few-row logits). The
//! `QuantizedWeight` trait is what the matmul runs, whatever the format; `gguf_matrix` builds one
//! from a checkpoint's parts.

mod act;
mod dot;
mod gguf;
mod kdot;
mod kquant;
mod q4;
mod q8;
mod q8_f32;
mod stack;
mod weight;

pub use act::{QuantizedRow, QuantizedRows};
pub use dot::{q4_dots, q8_dots, MAX_GROUP};
pub use gguf::{gguf_matrix, GgufPart};
pub use kdot::kquant_dots;
pub use kquant::KQuantMatrix;
pub use q4::Q4Matrix;
pub use q8::Q8Matrix;
pub use stack::RowStack;
pub use weight::{QuantizedWeight, SharedWeight};
