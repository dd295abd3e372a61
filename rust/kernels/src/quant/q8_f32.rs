//! An 8-bit row times f32 activations as they are: `sum_b scale_b * sum_i level_i * x_i`, an
//! AVX2+FMA version and a portable one. Both accumulate each block in f32 and scale it once, as
//! the format is defined.

use crate::block::BLOCK_LEN;
use crate::isa::Isa;

/// `(levels, scales, x) -> dot`; lengths are checked by the caller (`levels.len() == x.len() ==
/// scales.len() * BLOCK_LEN`).
pub(crate) type DotFn = fn(&[i8], &[f32], &[f32]) -> f32;

pub(crate) fn select(isa: Isa) -> DotFn {
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() {
        return dot_avx2;
    }
    let _ = isa;
    dot_portable
}

pub(crate) fn dot_portable(levels: &[i8], scales: &[f32], x: &[f32]) -> f32 {
    let mut total = 0.0f32;
    for ((levels, x), &scale) in levels.chunks_exact(BLOCK_LEN).zip(x.chunks_exact(BLOCK_LEN)).zip(scales) {
        // Eight lanes, as the vector version sums them, so both round alike.
        let mut lanes = [0.0f32; 8];
        for (levels, x) in levels.chunks_exact(8).zip(x.chunks_exact(8)) {
            for lane in 0..8 {
                lanes[lane] += f32::from(levels[lane]) * x[lane];
            }
        }
        total += scale * lanes.iter().sum::<f32>();
    }
    total
}

#[cfg(target_arch = "x86_64")]
fn dot_avx2(levels: &[i8], scales: &[f32], x: &[f32]) -> f32 {
    assert!(levels.len() == x.len() && levels.len() == scales.len() * BLOCK_LEN);
    // SAFETY: `select` returns this function only when AVX2 and FMA are present, and the
    // lengths were just checked, so every load below stays inside the slices.
    unsafe { dot_avx2_unchecked(levels, scales, x) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2_unchecked(levels: &[i8], scales: &[f32], x: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let mut total = _mm256_setzero_ps();
    for (block, &scale) in scales.iter().enumerate() {
        let level_ptr = levels.as_ptr().add(block * BLOCK_LEN);
        let x_ptr = x.as_ptr().add(block * BLOCK_LEN);
        let mut acc = _mm256_setzero_ps();
        for part in 0..BLOCK_LEN / 8 {
            let eight = _mm_loadl_epi64(level_ptr.add(part * 8) as *const __m128i);
            let widened = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
            acc = _mm256_fmadd_ps(widened, _mm256_loadu_ps(x_ptr.add(part * 8)), acc);
        }
        total = _mm256_fmadd_ps(acc, _mm256_set1_ps(scale), total);
    }
    crate::simd::horizontal_sum(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_portable_agree() {
        let levels: Vec<i8> = (0..256).map(|i| ((i * 37 + 11) % 255 - 127) as i8).collect();
        let x: Vec<f32> = (0..256).map(|i| ((i as f32) * 0.37).sin()).collect();
        let scales: Vec<f32> = (0..8).map(|b| 0.01 + b as f32 * 0.003).collect();
        let exact: f64 = levels
            .iter()
            .zip(&x)
            .enumerate()
            .map(|(i, (&l, &v))| f64::from(l) * f64::from(v) * f64::from(scales[i / BLOCK_LEN]))
            .sum();
        let portable = dot_portable(&levels, &scales, &x);
        let selected = select(Isa::detect())(&levels, &scales, &x);
        assert!((f64::from(portable) - exact).abs() < 1e-3, "{portable} vs {exact}");
        assert!((selected - portable).abs() <= 1e-4 * portable.abs().max(1.0), "{selected} vs {portable}");
    }
}
