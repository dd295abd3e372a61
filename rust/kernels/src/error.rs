//! The error of the quantized matrices, their products and the decode step (attention, the
//! experts and RMSNorm have their own, which a step's error wraps): every check happens before
//! any work, so a failed call has written nothing.

use crate::attn::AttnError;
use crate::norm::NormError;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("{what}: expected {expected} values, got {got}")]
    Length { what: String, expected: usize, got: usize },
    #[error("a quantized matrix needs a column count that is a positive multiple of 32, got {0}")]
    Columns(usize),
    #[error("4-bit levels must be in 0..=15, found {0}")]
    Level(u8),
    #[error("a {kind} matrix needs a column count that is a positive multiple of 256, got {cols}")]
    SuperColumns { kind: &'static str, cols: usize },
    #[error("{kind} matrix row {row}: a non-finite fp16 scale")]
    Scale { kind: &'static str, row: usize },
    #[error("GGUF block type {0} cannot be kept quantized (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K can)")]
    BlockType(String),
    #[error("model shape: {0}")]
    Shape(String),
    #[error("position {position} outside the rotary table's {num_positions} positions")]
    Position { position: usize, num_positions: usize },
    #[error("row id {id} out of range for a matrix of {rows} rows")]
    RowId { id: u64, rows: usize },
    #[error("LoRA adapter id {0} is taken (0 is the base model)")]
    AdapterTaken(u32),
    #[error("LoRA adapter {0} is not loaded")]
    UnknownAdapter(u32),
    #[error(transparent)]
    Attention(#[from] AttnError),
    #[error(transparent)]
    Norm(#[from] NormError),
}

pub(crate) fn check_len(what: &str, got: usize, expected: usize) -> Result<(), DecodeError> {
    if got == expected {
        Ok(())
    } else {
        Err(DecodeError::Length { what: what.to_string(), expected, got })
    }
}
