//! 8-bit block-quantized weights multiplied as such on the CPU.
//!
//! A `Q8Matrix` is GGUF's Q8_0 format with its scales widened once at load: `rows x cols` int8
//! levels and one f32 scale per block of [`BLOCK_LEN`] levels of a row; weight `(r, c)` is
//! `levels[r * cols + c] * scales[r * cols / BLOCK_LEN + c / BLOCK_LEN]`. The product reads every
//! level once per call however many input rows there are, so a decode step's output head reads
//! 1 byte per weight (plus 1/8 for scales) instead of the 2 of a dequantized bf16 copy; the rows
//! it needs as embeddings are dequantized on demand.

mod kernel;
mod matrix;

pub use matrix::{Q8Matrix, QuantError, BLOCK_LEN};
