//! A 4- or 5-bit matrix as GGUF's Q4_0 / Q4_1 / Q5_0 / Q5_1 store it (the block layout:
//! `crate::block`): nibbles and fifth bits copied as they are, fp16 scales and minimums (20 (24)
//! bytes per 32 weights), each row's scales padded to whole runs of `SCALE_RUN`.

use half::f16;

use crate::block::{padded_blocks, Q4Format, Q4Row, BLOCK_BYTES, BLOCK_LEN};
use crate::error::{check_len, DecodeError};
use crate::isa::Isa;

#[derive(Debug)]
pub struct Q4Matrix {
    nibbles: Vec<u8>,
    /// 5-bit matrices: per block, bit i is weight i's fifth bit; empty for 4-bit ones.
    fifth_bits: Vec<u32>,
    /// fp16 bits.
    scales: Vec<u16>,
    mins: Vec<u16>,
    rows: usize,
    cols: usize,
}

impl Q4Matrix {
    /// From levels (`rows x cols`, each 0..=15), and per block `scales` and `zeros` in the
    /// `(q - 8) * scale + zero` form (`rows x cols / 32`). The scale and the minimum `zero - 8
    /// scale` are stored as fp16 (exact for GGUF's blocks, whose values are fp16 already).
    pub fn from_levels(
        levels: &[u8],
        scales: &[f32],
        zeros: &[f32],
        rows: usize,
        cols: usize,
    ) -> Result<Self, DecodeError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(DecodeError::Columns(cols));
        }
        check_len("levels", levels.len(), rows * cols)?;
        check_len("scales", scales.len(), rows * cols / BLOCK_LEN)?;
        check_len("zeros", zeros.len(), rows * cols / BLOCK_LEN)?;
        if let Some(&bad) = levels.iter().find(|&&q| q > 15) {
            return Err(DecodeError::Level(bad));
        }
        let mut nibbles = vec![0u8; rows * cols / 2];
        for (block, packed) in levels.chunks_exact(BLOCK_LEN).zip(nibbles.chunks_exact_mut(BLOCK_BYTES)) {
            for (j, byte) in packed.iter_mut().enumerate() {
                *byte = block[j] | (block[j + BLOCK_BYTES] << 4);
            }
        }
        // (q - 8) s + z = s q + (z - 8 s): for GGUF's blocks z - 8 s gives back the stored min.
        let (blocks, stride) = (cols / BLOCK_LEN, padded_blocks(cols / BLOCK_LEN));
        let (mut padded_scales, mut padded_mins) = (vec![0u16; rows * stride], vec![0u16; rows * stride]);
        for (row, (dest_scales, dest_mins)) in
            padded_scales.chunks_exact_mut(stride).zip(padded_mins.chunks_exact_mut(stride)).enumerate()
        {
            for b in 0..blocks {
                let (scale, zero) = (scales[row * blocks + b], zeros[row * blocks + b]);
                dest_scales[b] = f16::from_f32(scale).to_bits();
                dest_mins[b] = f16::from_f32(zero - 8.0 * scale).to_bits();
            }
        }
        Ok(Self { nibbles, fifth_bits: Vec::new(), scales: padded_scales, mins: padded_mins, rows, cols })
    }

    /// From GGUF's blocks, as stored: `parts` of consecutive rows `(format, bytes, rows)`, so a
    /// fused matrix (q/k/v, gate/up) may mix formats, all 4-bit or all 5-bit. Nibbles and fifth
    /// bits are copied as they are (the layout is GGUF's); Q4_0's minimum is `-8 d`, Q5_0's
    /// `-16 d`, exact in fp16.
    pub fn from_gguf(parts: &[(Q4Format, &[u8], usize)], cols: usize) -> Result<Self, DecodeError> {
        if cols == 0 || cols % BLOCK_LEN != 0 {
            return Err(DecodeError::Columns(cols));
        }
        let five = parts.first().is_some_and(|&(format, _, _)| format.has_fifth_bit());
        if parts.iter().any(|&(format, _, _)| format.has_fifth_bit() != five) {
            return Err(DecodeError::Shape("4-bit and 5-bit blocks in one matrix".into()));
        }
        let mut fifth_bits = Vec::new();
        let (blocks, stride) = (cols / BLOCK_LEN, padded_blocks(cols / BLOCK_LEN));
        let rows: usize = parts.iter().map(|&(_, _, rows)| rows).sum();
        let mut nibbles = Vec::with_capacity(rows * blocks * BLOCK_BYTES);
        let (mut scales, mut mins) = (vec![0u16; rows * stride], vec![0u16; rows * stride]);
        let mut row = 0;
        for &(format, bytes, part_rows) in parts {
            let block_bytes = format.block_bytes();
            check_len(&format!("{} bytes", format.name()), bytes.len(), part_rows * blocks * block_bytes)?;
            for row_bytes in bytes.chunks_exact(blocks * block_bytes) {
                for (b, block) in row_bytes.chunks_exact(block_bytes).enumerate() {
                    let scale = f16::from_bits(u16::from_le_bytes([block[0], block[1]]));
                    let min = match format {
                        Q4Format::Symmetric => f16::from_f32(-8.0 * scale.to_f32()),
                        Q4Format::FiveBitSymmetric => f16::from_f32(-16.0 * scale.to_f32()),
                        _ => f16::from_bits(u16::from_le_bytes([block[2], block[3]])),
                    };
                    if five {
                        let at = if format.has_min() { 4 } else { 2 };
                        fifth_bits.push(u32::from_le_bytes([
                            block[at],
                            block[at + 1],
                            block[at + 2],
                            block[at + 3],
                        ]));
                    }
                    if !scale.is_finite() || !min.is_finite() {
                        return Err(DecodeError::Scale { kind: format.name(), row });
                    }
                    scales[row * stride + b] = scale.to_bits();
                    mins[row * stride + b] = min.to_bits();
                    nibbles.extend_from_slice(&block[block_bytes - BLOCK_BYTES..]);
                }
                row += 1;
            }
        }
        Ok(Self { nibbles, fifth_bits, scales, mins, rows, cols })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn num_bytes(&self) -> usize {
        self.nibbles.len() + 4 * self.fifth_bits.len() + 2 * (self.scales.len() + self.mins.len())
    }

    pub fn row(&self, index: usize) -> Q4Row<'_> {
        let (blocks, stride) = (self.cols / BLOCK_LEN, padded_blocks(self.cols / BLOCK_LEN));
        let fifth_bits = if self.fifth_bits.is_empty() {
            &[][..]
        } else {
            &self.fifth_bits[index * blocks..(index + 1) * blocks]
        };
        Q4Row {
            nibbles: &self.nibbles[index * blocks * BLOCK_BYTES..(index + 1) * blocks * BLOCK_BYTES],
            fifth_bits,
            scales: &self.scales[index * stride..(index + 1) * stride],
            mins: &self.mins[index * stride..(index + 1) * stride],
        }
    }

    /// Row `index` as f32 into `out` (`cols` values).
    pub fn dequantize_row(&self, index: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols);
        crate::dequant::q4_row(Isa::detect(), self.row(index), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::Q8Matrix;

    #[test]
    fn packs_gguf_nibble_order_and_dequantizes() {
        let levels: Vec<u8> = (0..64).map(|i| (i * 7 % 16) as u8).collect();
        // fp16-exact scales and minimums (zero - 8 scale), as GGUF's are.
        let scales = [0.5f32, 0.25];
        let zeros = [1.0f32, -2.0];
        let matrix = Q4Matrix::from_levels(&levels, &scales, &zeros, 1, 64).unwrap();
        let row = matrix.row(0);
        assert_eq!(row.nibbles[0], levels[0] | (levels[16] << 4));
        let mut out = vec![0.0; 64];
        matrix.dequantize_row(0, &mut out);
        for (i, &v) in out.iter().enumerate() {
            let b = i / 32;
            let expected = (f32::from(levels[i]) - 8.0) * scales[b] + zeros[b];
            assert!((v - expected).abs() < 1e-6, "{i}: {v} vs {expected}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            Q4Matrix::from_levels(&[0; 16], &[1.0], &[0.0], 1, 16).unwrap_err(),
            DecodeError::Columns(16)
        );
        assert_eq!(
            Q4Matrix::from_levels(&[16; 32], &[1.0], &[0.0], 1, 32).unwrap_err(),
            DecodeError::Level(16)
        );
        assert!(matches!(
            Q4Matrix::from_levels(&[0; 32], &[1.0, 2.0], &[0.0], 1, 32),
            Err(DecodeError::Length { .. })
        ));
        assert!(matches!(Q8Matrix::new(vec![0; 32], vec![], 1, 32), Err(DecodeError::Length { .. })));
    }
}
