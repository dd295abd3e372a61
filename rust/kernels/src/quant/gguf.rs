//! One quantized matrix from a checkpoint's GGUF parts (the q, k and v of a fused projection,
//! say), each kept in its own block format: consecutive 4-bit parts (Q4_0 / Q4_1) share one
//! `Q4Matrix`, as do consecutive 5-bit ones (Q5_0 / Q5_1), consecutive parts of one K-quant type
//! or of Q8_0 are joined, and parts of different kinds are stacked (`RowStack`).

use std::sync::Arc;

use super::kquant::KQuantMatrix;
use super::q4::Q4Matrix;
use super::q8::Q8Matrix;
use super::stack::RowStack;
use super::weight::SharedWeight;
use crate::block::{KQuant, Q4Format};
use crate::error::DecodeError;

/// A part's block type, by GGUF's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BlockType {
    Q4(Q4Format),
    Q8,
    K(KQuant),
}

impl BlockType {
    fn parse(name: &str) -> Result<Self, DecodeError> {
        match name {
            "Q4_0" => Ok(Self::Q4(Q4Format::Symmetric)),
            "Q4_1" => Ok(Self::Q4(Q4Format::WithMin)),
            "Q5_0" => Ok(Self::Q4(Q4Format::FiveBitSymmetric)),
            "Q5_1" => Ok(Self::Q4(Q4Format::FiveBitWithMin)),
            "Q8_0" => Ok(Self::Q8),
            other => {
                KQuant::from_name(other).map(Self::K).ok_or_else(|| DecodeError::BlockType(other.to_string()))
            }
        }
    }

    /// Parts of the same group become one matrix (4-bit formats together, 5-bit ones together).
    fn same_group(self, other: Self) -> bool {
        match (self, other) {
            (Self::Q4(a), Self::Q4(b)) => a.has_fifth_bit() == b.has_fifth_bit(),
            _ => self == other,
        }
    }
}

/// A GGUF part: its block type's name, its bytes as stored, its number of rows.
#[derive(Clone, Copy, Debug)]
pub struct GgufPart<'a> {
    pub type_name: &'a str,
    pub bytes: &'a [u8],
    pub rows: usize,
}

/// The parts, in row order, as one matrix of `cols` columns.
pub fn gguf_matrix(parts: &[GgufPart<'_>], cols: usize) -> Result<SharedWeight, DecodeError> {
    let types = parts.iter().map(|p| BlockType::parse(p.type_name)).collect::<Result<Vec<_>, _>>()?;
    if parts.is_empty() {
        return Err(DecodeError::Shape("a matrix of no parts".into()));
    }
    let mut matrices: Vec<SharedWeight> = Vec::new();
    let mut start = 0;
    while start < parts.len() {
        let end = (start..parts.len()).find(|&i| !types[start].same_group(types[i])).unwrap_or(parts.len());
        let group = &parts[start..end];
        let rows: usize = group.iter().map(|p| p.rows).sum();

        matrices.push(match types[start] {
            BlockType::Q4(_) => {
                let q4_parts: Vec<_> = group
                    .iter()
                    .zip(&types[start..end])
                    .map(|(p, t)| match t {
                        BlockType::Q4(format) => (*format, p.bytes, p.rows),
                        _ => unreachable!("grouped with a 4-bit part"),
                    })
                    .collect();
                Arc::new(Q4Matrix::from_gguf(&q4_parts, cols)?)
            }
            BlockType::Q8 => {
                let bytes: Vec<&[u8]> = group.iter().map(|p| p.bytes).collect();
                Arc::new(Q8Matrix::from_gguf(&bytes, rows, cols)?)
            }
            BlockType::K(kind) => {
                // The matrix owns its bytes: the parts joined, the one copy.
                let bytes = group.iter().flat_map(|p| p.bytes.iter().copied()).collect();
                Arc::new(KQuantMatrix::new(kind, bytes, rows, cols)?)
            }
        });
        start = end;
    }
    if matrices.len() == 1 {
        return Ok(matrices.pop().expect("one matrix"));
    }
    Ok(Arc::new(RowStack::new(matrices)?))
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;
    use crate::isa::Isa;

    fn q4_0_row(blocks: usize, scale: f32) -> Vec<u8> {
        let mut bytes = Vec::new();
        for b in 0..blocks {
            bytes.extend_from_slice(&f16::from_f32(scale).to_bits().to_le_bytes());
            bytes.extend((0..16).map(|j| ((j + b) % 16) as u8 | ((((j * 3) % 16) as u8) << 4)));
        }
        bytes
    }

    fn q8_0_row(blocks: usize, scale: f32) -> Vec<u8> {
        let mut bytes = Vec::new();
        for _ in 0..blocks {
            bytes.extend_from_slice(&f16::from_f32(scale).to_bits().to_le_bytes());
            bytes.extend((0..32).map(|j| (j as i8 - 16) as u8));
        }
        bytes
    }

    #[test]
    fn mixed_parts_stack_in_row_order_and_keep_their_values() {
        let cols = 64;
        let (a, b) = (q4_0_row(2, 0.5), q8_0_row(2, 0.25));
        let parts = [
            GgufPart { type_name: "Q4_0", bytes: &a, rows: 1 },
            GgufPart { type_name: "Q8_0", bytes: &b, rows: 1 },
        ];
        let matrix = gguf_matrix(&parts, cols).unwrap();
        assert_eq!((matrix.rows(), matrix.cols()), (2, cols));
        let mut row = vec![0.0; cols];
        matrix.dequantize_row(Isa::detect(), 0, &mut row);
        // Q4_0 block 0, weight 0: (low nibble 0 - 8) * 0.5; weight 16: (0 * 3 % 16 - 8) * 0.5.
        assert_eq!((row[0], row[16]), (-4.0, -4.0));
        assert_eq!(row[33], (1 + 1 - 8) as f32 * 0.5); // block 1, weight 1: nibble (1 + 1) % 16
        matrix.dequantize_row(Isa::detect(), 1, &mut row);
        assert_eq!((row[0], row[31], row[63]), (-16.0 * 0.25, 15.0 * 0.25, 15.0 * 0.25));
    }

    #[test]
    fn unsupported_types_and_bad_sizes_are_errors() {
        let bytes = q4_0_row(1, 1.0);
        assert_eq!(
            gguf_matrix(&[GgufPart { type_name: "IQ4_NL", bytes: &bytes, rows: 1 }], 32).err(),
            Some(DecodeError::BlockType("IQ4_NL".into()))
        );
        assert!(matches!(
            gguf_matrix(&[GgufPart { type_name: "Q4_0", bytes: &bytes, rows: 2 }], 32),
            Err(DecodeError::Length { .. })
        ));
        let mut bad = bytes.clone();
        bad[0..2].copy_from_slice(&f16::INFINITY.to_bits().to_le_bytes());
        assert_eq!(
            gguf_matrix(&[GgufPart { type_name: "Q4_0", bytes: &bad, rows: 1 }], 32).err(),
            Some(DecodeError::Scale { kind: "Q4_0", row: 0 })
        );
    }
}
