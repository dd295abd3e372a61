//! The step's elementwise work between matmuls, vectorized where it shows in a profile: SiLU
//! (one exp per intermediate value) and the int8 quantization of a block (a max, a scale, a
//! rounding). Portable versions round the same way (ties to even), so results do not depend on
//! the instruction set.

use crate::dot::Isa;

/// `out[i] = silu(gate[i]) * up[i]`.
pub(crate) fn silu_mul(isa: Isa, gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(gate.len() == out.len() && up.len() == out.len());
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        // SAFETY: every non-portable `Isa` was detected with AVX2 and FMA; lengths are equal.
        unsafe { simd::silu_mul(gate, up, out) };
        return;
    }
    let _ = isa;
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + (-g).exp()) * u;
    }
}

/// Quantizes one block of 32 values: levels in -127..=127 with `value ~= step * level`;
/// returns `(step, sum of levels)`.
pub(crate) fn quantize_block(isa: Isa, block: &[f32], levels: &mut [i8]) -> (f32, i32) {
    assert!(block.len() == 32 && levels.len() == 32);
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Portable {
        // SAFETY: as above; both slices hold 32 values.
        return unsafe { simd::quantize_block(block, levels) };
    }
    let _ = isa;
    let max_abs = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let step = max_abs / 127.0;
    let inverse = if step > 0.0 { 1.0 / step } else { 0.0 };
    let mut sum = 0;
    for (level, &value) in levels.iter_mut().zip(block) {
        // |value * inverse| <= 127 up to rounding; the clamp keeps it a valid level.
        let q = (value * inverse).round_ties_even().clamp(-127.0, 127.0) as i8;
        *level = q;
        sum += i32::from(q);
    }
    (step, sum)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use sglr_attn::exp_non_positive_avx2 as exp_non_positive;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
        let whole = gate.len() / 8 * 8;
        let sign = _mm256_set1_ps(-0.0);
        let one = _mm256_set1_ps(1.0);
        for i in (0..whole).step_by(8) {
            let g = _mm256_loadu_ps(gate.as_ptr().add(i));
            // sigmoid(g) from e = exp(-|g|) <= 1 (no overflow): 1 / (1 + e) for g >= 0,
            // e / (1 + e) below.
            let e = exp_non_positive(_mm256_or_ps(g, sign));
            let inverse = _mm256_div_ps(one, _mm256_add_ps(one, e));
            let negative = _mm256_cmp_ps::<_CMP_LT_OQ>(g, _mm256_setzero_ps());
            let sigmoid = _mm256_blendv_ps(inverse, _mm256_mul_ps(e, inverse), negative);
            let value = _mm256_mul_ps(_mm256_mul_ps(g, sigmoid), _mm256_loadu_ps(up.as_ptr().add(i)));
            _mm256_storeu_ps(out.as_mut_ptr().add(i), value);
        }
        for i in whole..gate.len() {
            out[i] = gate[i] / (1.0 + (-gate[i]).exp()) * up[i];
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn quantize_block(block: &[f32], levels: &mut [i8]) -> (f32, i32) {
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let values: [__m256; 4] = std::array::from_fn(|i| _mm256_loadu_ps(block.as_ptr().add(8 * i)));
        let mut max = _mm256_and_ps(values[0], magnitude);
        for v in &values[1..] {
            max = _mm256_max_ps(max, _mm256_and_ps(*v, magnitude));
        }
        let halves = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps::<1>(max));
        let pairs = _mm_max_ps(halves, _mm_movehl_ps(halves, halves));
        let max_abs = _mm_cvtss_f32(_mm_max_ss(pairs, _mm_shuffle_ps::<1>(pairs, pairs)));
        let step = max_abs / 127.0;
        let inverse = _mm256_set1_ps(if step > 0.0 { 1.0 / step } else { 0.0 });
        // Round to nearest even, then saturate to i8 (|level| <= 127 already).
        let ints: [__m256i; 4] =
            std::array::from_fn(|i| _mm256_cvtps_epi32(_mm256_mul_ps(values[i], inverse)));
        let sum = _mm256_add_epi32(_mm256_add_epi32(ints[0], ints[1]), _mm256_add_epi32(ints[2], ints[3]));
        let packed =
            _mm256_packs_epi16(_mm256_packs_epi32(ints[0], ints[1]), _mm256_packs_epi32(ints[2], ints[3]));
        // The packs interleave 128-bit lanes: put the four groups of four back in order.
        let ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(levels.as_mut_ptr().cast(), ordered);
        let halves = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256::<1>(sum));
        let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32::<0b01_00_11_10>(halves));
        let total = _mm_cvtsi128_si32(_mm_add_epi32(pairs, _mm_shuffle_epi32::<0b00_00_00_01>(pairs)));
        (step, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instruction_set_quantizes_alike() {
        for seed in 0..50 {
            let block: Vec<f32> =
                (0..32).map(|i| ((i * 7 + seed) as f32 * 0.37).sin() * (seed as f32 + 0.5)).collect();
            let results: Vec<_> = Isa::available()
                .into_iter()
                .map(|isa| {
                    let mut levels = [0i8; 32];
                    let (step, sum) = quantize_block(isa, &block, &mut levels);
                    (step, sum, levels)
                })
                .collect();
            assert!(results.windows(2).all(|w| w[0] == w[1]), "seed {seed}: {results:?}");
            let (step, sum, levels) = results[0];
            assert_eq!(sum, levels.iter().map(|&q| i32::from(q)).sum::<i32>());
            for (&v, &q) in block.iter().zip(&levels) {
                assert!((v - step * f32::from(q)).abs() <= step * 0.5 + 1e-6);
            }
        }
    }

    #[test]
    fn silu_matches_its_formula_on_both_signs() {
        let gate: Vec<f32> = (-50..50).map(|i| i as f32 * 0.4).collect();
        let up: Vec<f32> = (0..100).map(|i| 1.0 + i as f32 * 0.01).collect();
        for isa in Isa::available() {
            let mut out = vec![0.0; 100];
            silu_mul(isa, &gate, &up, &mut out);
            for ((&o, &g), &u) in out.iter().zip(&gate).zip(&up) {
                let want = f64::from(g) / (1.0 + (-f64::from(g)).exp()) * f64::from(u);
                assert!(
                    (f64::from(o) - want).abs() <= 1e-6 * want.abs().max(1.0),
                    "{isa:?} {g}: {o} vs {want}"
                );
            }
        }
    }
}
