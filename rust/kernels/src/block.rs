//! GGUF's block formats as the kernels read them.
//!
//! - Q4_0 / Q4_1 / Q5_0 / Q5_1: rows of blocks of 32 weights, each block `w_i = scale * q_i + min`
//!   with q in 0..=15 (0..=31 with a fifth bit), its 16 bytes holding the low four bits of
//!   weight j in the low nibble of byte j and of weight j + 16 in the high one (so a block
//!   unpacks with one mask and one shift); 5-bit blocks add one u32 whose bit i is weight i's
//!   fifth bit. Scales and minimums are fp16, as GGUF stores them: 20 (24) bytes per 32 weights.
//!   A row as the kernels read it (`Q4Row`) keeps nibbles, fifth bits, scales and minimums apart,
//!   its scales padded with zeros to a multiple of `SCALE_RUN` so kernels load them eight at a
//!   time.
//! - Q8_0: blocks of an fp16 scale and 32 int8 levels; a row (`Q8Row`) holds its levels and its
//!   scales widened to f32.
//! - The K-quants Q4_K, Q5_K, Q6_K: super-blocks of 256 weights, each eight blocks of 32, which
//!   is exactly one run of eight of the activations' per-32 scales (`SCALE_RUN`), so a
//!   super-block's block scales widen into one vector and the per-block integer dot products are
//!   those of the 4-bit kernels:
//!   - Q4_K (144 bytes): fp16 `d`, fp16 `dmin`, 12 bytes holding eight 6-bit scales and eight
//!     6-bit minimums, 128 bytes of nibbles; weight `d * sc_b * q - dmin * m_b`, q in 0..=15.
//!     The nibbles come in four runs of 32 bytes: the low nibbles are block `2c`, the high ones
//!     `2c + 1`.
//!   - Q5_K (176 bytes): as Q4_K with a fifth bit per weight (32 bytes of bit planes before the
//!     nibbles: bit `2c` of byte `l` for weight `l` of block `2c`, bit `2c + 1` for block
//!     `2c + 1`).
//!   - Q6_K (210 bytes): 128 bytes of low nibbles, 64 bytes of 2-bit high parts, sixteen int8
//!     scales (one per 16 weights), fp16 `d`; weight `d * sc_k * (q - 32)`, q in 0..=63.

use half::f16;

/// Weights per scale.
pub const BLOCK_LEN: usize = 32;
pub(crate) const BLOCK_BYTES: usize = BLOCK_LEN / 2;
/// Per-block values (scales, minimums, activation sums) a kernel loads at once.
pub const SCALE_RUN: usize = 8;

/// A row's per-block slots: its blocks rounded up to a whole run.
pub(crate) fn padded_blocks(num_blocks: usize) -> usize {
    num_blocks.div_ceil(SCALE_RUN) * SCALE_RUN
}

/// Block `b` of a row as its 32 levels in weight order (nibbles plus any fifth bits): the portable
/// reading the vector kernels are tested against.
pub(crate) fn block_levels(row: Q4Row<'_>, b: usize) -> [u8; BLOCK_LEN] {
    let packed = &row.nibbles[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let bits = row.fifth_bits.get(b).copied().unwrap_or(0);
    let mut levels = [0u8; BLOCK_LEN];
    for (j, &byte) in packed.iter().enumerate() {
        levels[j] = (byte & 15) | (((bits >> j) & 1) as u8) << 4;
        levels[j + BLOCK_BYTES] = (byte >> 4) | (((bits >> (j + BLOCK_BYTES)) & 1) as u8) << 4;
    }
    levels
}

/// GGUF's 4- and 5-bit block formats of 32 weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q4Format {
    /// Q4_0: fp16 `d`, 16 bytes of nibbles; `w = d (q - 8)`.
    Symmetric,
    /// Q4_1: fp16 `d`, fp16 `m`, 16 bytes; `w = d q + m`.
    WithMin,
    /// Q5_0: fp16 `d`, u32 fifth bits, 16 bytes; `w = d (q - 16)`.
    FiveBitSymmetric,
    /// Q5_1: fp16 `d`, fp16 `m`, u32 fifth bits, 16 bytes; `w = d q + m`.
    FiveBitWithMin,
}

impl Q4Format {
    pub fn block_bytes(self) -> usize {
        match self {
            Self::Symmetric => 18,
            Self::WithMin => 20,
            Self::FiveBitSymmetric => 22,
            Self::FiveBitWithMin => 24,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Symmetric => "Q4_0",
            Self::WithMin => "Q4_1",
            Self::FiveBitSymmetric => "Q5_0",
            Self::FiveBitWithMin => "Q5_1",
        }
    }

    pub fn has_fifth_bit(self) -> bool {
        matches!(self, Self::FiveBitSymmetric | Self::FiveBitWithMin)
    }

    pub(crate) fn has_min(self) -> bool {
        matches!(self, Self::WithMin | Self::FiveBitWithMin)
    }
}

/// One row of 4- or 5-bit blocks, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Q4Row<'a> {
    pub nibbles: &'a [u8],
    /// One per block (5-bit rows), or empty (4-bit rows).
    pub fifth_bits: &'a [u32],
    /// fp16 bits, one per block, zero-padded to a multiple of `SCALE_RUN`.
    pub scales: &'a [u16],
    pub mins: &'a [u16],
}

/// Bytes of a Q8_0 block as stored: an fp16 scale, 32 int8 levels.
pub(crate) const Q8_BLOCK_BYTES: usize = 2 + BLOCK_LEN;

/// One row of 8-bit blocks, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Q8Row<'a> {
    pub levels: &'a [i8],
    pub scales: &'a [f32],
}

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

/// The vector reading of a 4- or 5-bit block.
#[cfg(target_arch = "x86_64")]
pub(crate) mod simd {
    use std::arch::x86_64::*;

    /// A block's 32 nibbles as 32 unsigned bytes in weight order.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn unpack_nibbles(ptr: *const u8) -> __m256i {
        let mask = _mm_set1_epi8(0x0F);
        let raw = _mm_loadu_si128(ptr.cast());
        let low = _mm_and_si128(raw, mask);
        let high = _mm_and_si128(_mm_srli_epi16::<4>(raw), mask);
        _mm256_set_m128i(high, low)
    }

    /// A 5-bit block's fifth bits (bit i: weight i) as 32 bytes of 16 or 0.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn fifth_bits(bits: u32) -> __m256i {
        // Byte i takes byte i / 8 of the word (each 128-bit lane holds a copy), then its bit i % 8.
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3,
                3,
            ),
        );
        let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
        _mm256_and_si256(set, _mm256_set1_epi8(16))
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
}
