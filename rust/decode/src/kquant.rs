//! GGUF's K-quant matrices (Q4_K, Q5_K, Q6_K), kept byte for byte as the file stores them.
//!
//! A K-quant row is a run of super-blocks of 256 weights. Each super-block is eight blocks of 32,
//! which is exactly one run of eight of the activations' per-32 scales (`SCALE_RUN`), so a
//! super-block's block scales widen into one vector and the per-block integer dot products are
//! those of the 4-bit kernels:
//! - Q4_K (144 bytes): fp16 `d`, fp16 `dmin`, 12 bytes holding eight 6-bit scales and eight
//!   6-bit minimums, 128 bytes of nibbles; weight `d * sc_b * q - dmin * m_b`, q in 0..=15. The
//!   nibbles come in four runs of 32 bytes: the low nibbles are block `2c`, the high ones `2c + 1`.
//! - Q5_K (176 bytes): as Q4_K with a fifth bit per weight (32 bytes of bit planes before the
//!   nibbles: bit `2c` of byte `l` for weight `l` of block `2c`, bit `2c + 1` for block `2c + 1`).
//! - Q6_K (210 bytes): 128 bytes of low nibbles, 64 bytes of 2-bit high parts, sixteen int8
//!   scales (one per 16 weights), fp16 `d`; weight `d * sc_k * (q - 32)`, q in 0..=63.
//!
//! Kept as stored: no conversion at load, the file's 4.5 / 5.5 / 6.56 bits per weight in memory,
//! and the scales' products exact in f32 (a 6-bit integer times an fp16 value).

use half::f16;

use crate::error::{check_len, DecodeError};
use crate::q4::BLOCK_LEN;

/// Weights per super-block.
pub const SUPER_LEN: usize = 256;
/// Blocks of 32 per super-block.
pub(crate) const SUPER_BLOCKS: usize = SUPER_LEN / BLOCK_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KQuant {
    Q4K,
    Q5K,
    Q6K,
}

impl KQuant {
    /// Bytes per super-block.
    pub fn super_bytes(self) -> usize {
        match self {
            Self::Q4K => 144,
            Self::Q5K => 176,
            Self::Q6K => 210,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Q4K => "Q4_K",
            Self::Q5K => "Q5_K",
            Self::Q6K => "Q6_K",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Q4K, Self::Q5K, Self::Q6K].into_iter().find(|kind| kind.name() == name)
    }
}

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

pub(crate) fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Q4_K / Q5_K's eight 6-bit scales and minimums from their 12 packed bytes: blocks 0-3 in the
/// low six bits of bytes 0-3 (scales) and 4-7 (minimums); blocks 4-7 from the nibbles of bytes
/// 8-11 with their top two bits in the top bits of bytes 0-3 (scales) and 4-7 (minimums).
pub(crate) fn k4_scales_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut scales, mut mins) = ([0u8; 8], [0u8; 8]);
    for b in 0..4 {
        scales[b] = packed[b] & 63;
        mins[b] = packed[b + 4] & 63;
        scales[b + 4] = (packed[b + 8] & 15) | ((packed[b] >> 6) << 4);
        mins[b + 4] = (packed[b + 8] >> 4) | ((packed[b + 4] >> 6) << 4);
    }
    (scales, mins)
}

/// A super-block as multiplied: `weight[i] = scales[i / 16] * levels[i] + mins[i / 32]`.
#[derive(Debug)]
pub(crate) struct Unpacked {
    pub levels: [i8; SUPER_LEN],
    pub scales: [f32; SUPER_LEN / 16],
    pub mins: [f32; SUPER_BLOCKS],
}

impl Default for Unpacked {
    fn default() -> Self {
        Self { levels: [0; SUPER_LEN], scales: [0.0; SUPER_LEN / 16], mins: [0.0; SUPER_BLOCKS] }
    }
}

/// The portable reading of one super-block (the reference the vector kernels are tested against).
pub(crate) fn unpack(kind: KQuant, block: &[u8], out: &mut Unpacked) {
    match kind {
        KQuant::Q4K | KQuant::Q5K => {
            let (d, dmin) = (read_f16(block, 0), read_f16(block, 2));
            let (scales, mins) = k4_scales_mins(&block[4..16]);
            let (high_bits, nibbles) = if kind == KQuant::Q5K {
                (Some(&block[16..48]), &block[48..176])
            } else {
                (None, &block[16..144])
            };
            for c in 0..4 {
                for l in 0..BLOCK_LEN {
                    let byte = nibbles[c * BLOCK_LEN + l];
                    let (mut low, mut high) = (byte & 15, byte >> 4);
                    if let Some(bits) = high_bits {
                        low |= ((bits[l] >> (2 * c)) & 1) << 4;
                        high |= ((bits[l] >> (2 * c + 1)) & 1) << 4;
                    }
                    out.levels[2 * c * BLOCK_LEN + l] = low as i8;
                    out.levels[(2 * c + 1) * BLOCK_LEN + l] = high as i8;
                }
            }
            for b in 0..SUPER_BLOCKS {
                let scale = d * f32::from(scales[b]);
                out.scales[2 * b] = scale;
                out.scales[2 * b + 1] = scale;
                out.mins[b] = -dmin * f32::from(mins[b]);
            }
        }
        KQuant::Q6K => {
            let (low, high, scales) = (&block[0..128], &block[128..192], &block[192..208]);
            let d = read_f16(block, 208);
            // Two halves of 128 weights; in each, block m (0..4) takes the low nibbles (m < 2)
            // or high nibbles of low-nibble bytes 32 (m % 2) .. + 32 and bits 2m, 2m + 1 of the
            // half's 32 high-part bytes.
            for half in 0..2 {
                for m in 0..4 {
                    for l in 0..BLOCK_LEN {
                        let byte = low[64 * half + 32 * (m % 2) + l];
                        let nibble = if m < 2 { byte & 15 } else { byte >> 4 };
                        let top = (high[32 * half + l] >> (2 * m)) & 3;
                        out.levels[(4 * half + m) * BLOCK_LEN + l] = (nibble | (top << 4)) as i8 - 32;
                    }
                }
            }
            for (dest, &scale) in out.scales.iter_mut().zip(scales) {
                *dest = d * f32::from(scale as i8);
            }
            out.mins = [0.0; SUPER_BLOCKS];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_bytes_unpack_to_six_bits() {
        // Every 6-bit value in each slot round-trips through the packing described above.
        for value in 0..64u8 {
            for b in 0..8 {
                let mut packed = [0u8; 12];
                let (scale, min) = (value, 63 - value);
                if b < 4 {
                    packed[b] = scale;
                    packed[b + 4] = min;
                } else {
                    packed[b + 4] = (scale & 15) | ((min & 15) << 4);
                    packed[b - 4] |= (scale >> 4) << 6;
                    packed[b] |= (min >> 4) << 6;
                }
                let (scales, mins) = k4_scales_mins(&packed);
                assert_eq!((scales[b], mins[b]), (scale, min), "block {b}");
            }
        }
    }

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
