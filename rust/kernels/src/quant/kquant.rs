//! GGUF's K-quant matrices (Q4_K, Q5_K, Q6_K), kept byte for byte as the file stores them (the
//! super-block layouts: `crate::block`): no conversion at load, the file's 4.5 / 5.5 / 6.56 bits
//! per weight in memory, and the scales' products exact in f32 (a 6-bit integer times an fp16
//! value).

use crate::block::{read_f16, unpack, KQuant, Unpacked, BLOCK_LEN, SUPER_LEN};
use crate::error::{check_len, DecodeError};

/// A `rows x cols` matrix of K-quant super-blocks (`cols` a multiple of 256).
#[derive(Debug)]
pub struct KQuantMatrix {
    kind: KQuant,
    bytes: Vec<u8>,
    rows: usize,
    cols: usize,
}

impl KQuantMatrix {
    /// From the file's bytes (`rows * cols / 256` super-blocks, row by row). Rejects a non-finite
    /// fp16 super-block scale, which would turn every output of its row into NaN.
    pub fn new(kind: KQuant, bytes: Vec<u8>, rows: usize, cols: usize) -> Result<Self, DecodeError> {
        if cols == 0 || cols % SUPER_LEN != 0 {
            return Err(DecodeError::SuperColumns { kind: kind.name(), cols });
        }
        check_len(
            &format!("{} bytes", kind.name()),
            bytes.len(),
            rows * cols / SUPER_LEN * kind.super_bytes(),
        )?;
        for (index, block) in bytes.chunks_exact(kind.super_bytes()).enumerate() {
            let scales = match kind {
                KQuant::Q4K | KQuant::Q5K => [read_f16(block, 0), read_f16(block, 2)],
                KQuant::Q6K => [read_f16(block, 208), 0.0],
            };
            if !scales.iter().all(|s| s.is_finite()) {
                return Err(DecodeError::Scale { kind: kind.name(), row: index / (cols / SUPER_LEN) });
            }
        }
        Ok(Self { kind, bytes, rows, cols })
    }

    pub fn kind(&self) -> KQuant {
        self.kind
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn num_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Row `index`'s super-blocks.
    pub fn row(&self, index: usize) -> &[u8] {
        let len = self.cols / SUPER_LEN * self.kind.super_bytes();
        &self.bytes[index * len..(index + 1) * len]
    }

    /// Row `index` as f32 into `out` (`cols` values).
    pub fn dequantize_row(&self, index: usize, out: &mut [f32]) {
        let mut unpacked = Unpacked::default();
        for (dest, block) in
            out.chunks_exact_mut(SUPER_LEN).zip(self.row(index).chunks_exact(self.kind.super_bytes()))
        {
            unpack(self.kind, block, &mut unpacked);
            for (i, d) in dest.iter_mut().enumerate() {
                *d = unpacked.scales[i / 16] * f32::from(unpacked.levels[i]) + unpacked.mins[i / BLOCK_LEN];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;

    #[test]
    fn rejects_bad_shapes_and_scales() {
        assert!(matches!(
            KQuantMatrix::new(KQuant::Q4K, vec![0; 144], 1, 128),
            Err(DecodeError::SuperColumns { .. })
        ));
        assert!(matches!(
            KQuantMatrix::new(KQuant::Q6K, vec![0; 209], 1, 256),
            Err(DecodeError::Length { .. })
        ));
        let mut bytes = vec![0u8; 210];
        bytes[208..210].copy_from_slice(&f16::NAN.to_bits().to_le_bytes());
        assert_eq!(
            KQuantMatrix::new(KQuant::Q6K, bytes, 1, 256).unwrap_err(),
            DecodeError::Scale { kind: "Q6_K", row: 0 }
        );
        assert_eq!(KQuant::from_name("Q5_K"), Some(KQuant::Q5K));
        assert_eq!(KQuant::from_name("Q8_0"), None);
    }
}
