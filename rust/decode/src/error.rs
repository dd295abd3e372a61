//! The one error type of the crate: every check happens before any work, so a failed call has
//! written nothing.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("{what}: expected {expected} values, got {got}")]
    Length { what: String, expected: usize, got: usize },
    #[error("a quantized matrix needs a column count that is a positive multiple of 32, got {0}")]
    Columns(usize),
    #[error("4-bit levels must be in 0..=15, found {0}")]
    Level(u8),
    #[error("model shape: {0}")]
    Shape(String),
    #[error("position {position} outside the rotary table's {num_positions} positions")]
    Position { position: usize, num_positions: usize },
    #[error(transparent)]
    Attention(#[from] sglr_attn::AttnError),
}

pub(crate) fn check_len(what: &str, got: usize, expected: usize) -> Result<(), DecodeError> {
    if got == expected {
        Ok(())
    } else {
        Err(DecodeError::Length { what: what.to_string(), expected, got })
    }
}
