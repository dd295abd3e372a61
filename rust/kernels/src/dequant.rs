//! Quantized rows back to f32, and f32 rows to bf16, vectorized: a prefill chunk of more rows
//! than the integer kernels take multiplies a transient bf16 copy of each weight (oneDNN's GEMM),
//! so every forward pass over such a chunk dequantizes the whole model (SmolLM2: 106M weights,
//! 100 ms on one thread in the scalar loop, most of a short prompt's prefill).
//!
//! The vector paths compute exactly what the portable ones do (`scale * q + min` as a product
//! then a sum, no fused multiply-add; bf16 rounded to nearest even), so results do not depend on
//! the instruction set.

use crate::block::{block_levels, Q4Row, Q8Row, BLOCK_LEN, SCALE_RUN};
use crate::element::Bf16;
use crate::isa::Isa;

/// `out[i]` = the bf16 bits of `values[i]` (round to nearest even; a NaN stays a quiet NaN).
pub(crate) fn to_bf16_bits(isa: Isa, values: &[f32], out: &mut [u16]) {
    assert_eq!(values.len(), out.len());
    // SAFETY: every non-portable `Isa` was detected with AVX2; lengths are equal.
    #[cfg(target_arch = "x86_64")]
    let done = if isa == Isa::Portable { 0 } else { unsafe { simd::to_bf16_bits(values, out) } };
    #[cfg(not(target_arch = "x86_64"))]
    let done = {
        let _ = isa;
        0
    };
    for (o, &v) in out[done..].iter_mut().zip(&values[done..]) {
        *o = bf16_bits(v);
    }
}

fn bf16_bits(value: f32) -> u16 {
    Bf16::from_f32(value).0
}

/// A 4- or 5-bit row into `out` (`cols` values).
pub(crate) fn q4_row(isa: Isa, row: Q4Row<'_>, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        // SAFETY: as above; `out` holds one value per weight of the row (checked by the caller).
        unsafe { simd::q4_row(row, out) };
        return;
    }
    let _ = isa;
    let widen = |bits: u16| half::f16::from_bits(bits).to_f32();
    for (b, dest) in out.chunks_exact_mut(BLOCK_LEN).enumerate() {
        let (scale, min) = (widen(row.scales[b]), widen(row.mins[b]));
        for (d, &level) in dest.iter_mut().zip(&block_levels(row, b)) {
            *d = scale * f32::from(level) + min;
        }
    }
}

/// An 8-bit row into `out`.
pub(crate) fn q8_row(isa: Isa, row: Q8Row<'_>, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        // SAFETY: as above.
        unsafe { simd::q8_row(row, out) };
        return;
    }
    let _ = isa;
    for (i, (dest, &level)) in out.iter_mut().zip(row.levels).enumerate() {
        *dest = f32::from(level) * row.scales[i / BLOCK_LEN];
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::{bf16_bits, BLOCK_LEN, SCALE_RUN};
    use crate::block::simd::{fifth_bits, unpack_nibbles};
    use crate::block::{Q4Row, Q8Row};

    /// f32 bits to bf16 bits in the low half of each lane, rounded to nearest even.
    #[target_feature(enable = "avx2")]
    unsafe fn round(v: __m256i) -> __m256i {
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(v), _mm256_set1_epi32(1));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(v, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)))
    }

    /// Converts whole runs of 16; returns how many values it converted.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn to_bf16_bits(values: &[f32], out: &mut [u16]) -> usize {
        let whole = values.len() / 16 * 16;
        for i in (0..whole).step_by(16) {
            let a = _mm256_castps_si256(_mm256_loadu_ps(values.as_ptr().add(i)));
            let b = _mm256_castps_si256(_mm256_loadu_ps(values.as_ptr().add(i + 8)));
            // packus interleaves the two vectors' 128-bit lanes: restore the order.
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(round(a), round(b)));
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), packed);
            // NaN (rare; never in checked weights) takes the portable rule.
            let nan = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(
                _mm256_castsi256_ps(a),
                _mm256_castsi256_ps(b),
            ));
            if nan != 0 {
                for j in i..i + 16 {
                    out[j] = bf16_bits(values[j]);
                }
            }
        }
        whole
    }

    /// A block's 32 unsigned levels to 32 f32 `scale * level + min`.
    #[target_feature(enable = "avx2")]
    unsafe fn store_block(levels: __m256i, scale: __m256, min: __m256, out: *mut f32) {
        let low = _mm256_castsi256_si128(levels);
        let high = _mm256_extracti128_si256::<1>(levels);
        for (k, part) in
            [low, _mm_srli_si128::<8>(low), high, _mm_srli_si128::<8>(high)].into_iter().enumerate()
        {
            let values = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(part));
            _mm256_storeu_ps(out.add(8 * k), _mm256_add_ps(_mm256_mul_ps(scale, values), min));
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn q4_row(row: Q4Row<'_>, out: &mut [f32]) {
        let num_blocks = row.nibbles.len() / 16;
        assert!(out.len() == num_blocks * BLOCK_LEN);
        let mut first = 0;
        while first < num_blocks {
            // The row's scales are padded to whole runs of eight.
            let mut scales = [0.0f32; SCALE_RUN];
            let mut mins = [0.0f32; SCALE_RUN];
            _mm256_storeu_ps(
                scales.as_mut_ptr(),
                _mm256_cvtph_ps(_mm_loadu_si128(row.scales.as_ptr().add(first).cast())),
            );
            _mm256_storeu_ps(
                mins.as_mut_ptr(),
                _mm256_cvtph_ps(_mm_loadu_si128(row.mins.as_ptr().add(first).cast())),
            );
            for lane in 0..(num_blocks - first).min(SCALE_RUN) {
                let b = first + lane;
                let mut levels = unpack_nibbles(row.nibbles.as_ptr().add(b * 16));
                if let Some(&bits) = row.fifth_bits.get(b) {
                    levels = _mm256_or_si256(levels, fifth_bits(bits));
                }
                let (scale, min) = (_mm256_set1_ps(scales[lane]), _mm256_set1_ps(mins[lane]));
                store_block(levels, scale, min, out.as_mut_ptr().add(b * BLOCK_LEN));
            }
            first += SCALE_RUN;
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn q8_row(row: Q8Row<'_>, out: &mut [f32]) {
        assert!(out.len() == row.levels.len() && row.levels.len() == row.scales.len() * BLOCK_LEN);
        for (b, &scale) in row.scales.iter().enumerate() {
            let scale = _mm256_set1_ps(scale);
            for k in 0..4 {
                let bytes = _mm_loadl_epi64(row.levels.as_ptr().add(b * BLOCK_LEN + 8 * k).cast());
                let values = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
                _mm256_storeu_ps(out.as_mut_ptr().add(b * BLOCK_LEN + 8 * k), _mm256_mul_ps(values, scale));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Q4Format;
    use crate::quant::{Q4Matrix, Q8Matrix};

    #[test]
    fn bf16_rounding_is_the_same_on_every_instruction_set() {
        let mut values: Vec<f32> =
            (0..1000).map(|i| ((i as f32) * 0.731).sin() * 10f32.powi(i % 9 - 4)).collect();
        values.extend([0.0, -0.0, f32::MAX, f32::MIN_POSITIVE, 1.0 + f32::EPSILON, f32::INFINITY, f32::NAN]);
        // Exact ties: halfway between two bf16 values, both parities.
        values.extend([f32::from_bits(0x3f80_8000), f32::from_bits(0x3f81_8000)]);
        let expected: Vec<u16> = values.iter().map(|&v| bf16_bits(v)).collect();
        assert_eq!(expected[expected.len() - 2..], [0x3f80, 0x3f82]);
        for isa in Isa::available() {
            let mut out = vec![0u16; values.len()];
            to_bf16_bits(isa, &values, &mut out);
            assert_eq!(out, expected, "{isa:?}");
        }
    }

    #[test]
    fn rows_dequantize_alike_on_every_instruction_set() {
        let cols = 320; // ten blocks: a whole run of eight and a partial one
        let mut bytes = Vec::new();
        for b in 0..cols / 32 {
            bytes.extend_from_slice(&half::f16::from_f32(0.01 + b as f32 * 0.003).to_bits().to_le_bytes());
            bytes.extend_from_slice(&half::f16::from_f32(-0.2 + b as f32 * 0.01).to_bits().to_le_bytes());
            bytes.extend_from_slice(&(0x9e37_79b9u32.rotate_left(b as u32)).to_le_bytes());
            bytes.extend((0..16).map(|j| (j * 37 + b * 11) as u8));
        }
        let q5 = Q4Matrix::from_gguf(&[(Q4Format::FiveBitWithMin, &bytes, 1)], cols).unwrap();
        let q4_bytes: Vec<u8> = bytes
            .chunks_exact(24)
            .flat_map(|block| block[..4].iter().chain(&block[8..]).copied().collect::<Vec<_>>())
            .collect();
        let q4 = Q4Matrix::from_gguf(&[(Q4Format::WithMin, &q4_bytes, 1)], cols).unwrap();
        let levels: Vec<i8> = (0..cols).map(|i| (i * 53 % 256) as u8 as i8).collect();
        let q8 = Q8Matrix::new(levels, (0..cols / 32).map(|b| 0.5 + b as f32).collect(), 1, cols).unwrap();
        for isa in Isa::available() {
            for matrix in [&q4, &q5] {
                let (mut want, mut got) = (vec![0.0; cols], vec![0.0; cols]);
                q4_row(Isa::Portable, matrix.row(0), &mut want);
                q4_row(isa, matrix.row(0), &mut got);
                assert_eq!(got, want, "{isa:?}");
            }
            let (mut want, mut got) = (vec![0.0; cols], vec![0.0; cols]);
            q8_row(Isa::Portable, q8.row(0), &mut want);
            q8_row(isa, q8.row(0), &mut got);
            assert_eq!(got, want, "{isa:?}");
            assert_eq!((want[1], want[3]), (53.0 * 0.5, -97.0 * 0.5)); // levels 53 and 159 as i8
        }
    }
}
