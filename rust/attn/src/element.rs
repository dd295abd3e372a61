//! KV cache element types: f32, and bf16 held as its bit pattern (what numpy can carry).

/// A bf16 value as its 16 bits (the top half of an f32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Round-to-nearest-even from f32 (NaN stays NaN).
    pub fn from_f32(value: f32) -> Self {
        let bits = value.to_bits();
        if value.is_nan() {
            return Self(((bits >> 16) | 0x40) as u16);
        }
        let rounding = 0x7fff + ((bits >> 16) & 1);
        Self((bits.wrapping_add(rounding) >> 16) as u16)
    }
}

pub trait KvElement: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;

    /// `sum_i query[i] * row[i]`; `query.len() == row.len()`.
    fn dot(query: &[f32], row: &[Self]) -> f32 {
        query.iter().zip(row).map(|(q, r)| q * r.to_f32()).sum()
    }

    /// `acc[i] += weight * row[i]`.
    fn axpy(acc: &mut [f32], weight: f32, row: &[Self]) {
        for (a, r) in acc.iter_mut().zip(row) {
            *a += weight * r.to_f32();
        }
    }
}

impl KvElement for f32 {
    fn to_f32(self) -> f32 {
        self
    }
}

impl KvElement for Bf16 {
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    fn dot(query: &[f32], row: &[Self]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        {
            if row.len() % 8 == 0 && crate::kernel::has_avx2_fma() {
                // SAFETY: AVX2 and FMA are present; lengths are equal multiples of 8.
                return unsafe { simd::dot_bf16(query, row) };
            }
        }
        query.iter().zip(row).map(|(q, r)| q * r.to_f32()).sum()
    }

    fn axpy(acc: &mut [f32], weight: f32, row: &[Self]) {
        #[cfg(target_arch = "x86_64")]
        {
            if row.len() % 8 == 0 && crate::kernel::has_avx2_fma() {
                // SAFETY: as in `dot`.
                unsafe { simd::axpy_bf16(acc, weight, row) };
                return;
            }
        }
        for (a, r) in acc.iter_mut().zip(row) {
            *a += weight * r.to_f32();
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use super::Bf16;

    /// Eight bf16 at `ptr` widened to f32 (a bf16 is the top half of an f32).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load8(ptr: *const Bf16) -> __m256 {
        let halves = _mm_loadu_si128(ptr as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_bf16(query: &[f32], row: &[Bf16]) -> f32 {
        debug_assert!(query.len() == row.len() && row.len() % 8 == 0);
        let mut acc = _mm256_setzero_ps();
        for i in (0..row.len()).step_by(8) {
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(query.as_ptr().add(i)), load8(row.as_ptr().add(i)), acc);
        }
        let halves = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
        _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)))
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy_bf16(acc: &mut [f32], weight: f32, row: &[Bf16]) {
        debug_assert!(acc.len() == row.len() && row.len() % 8 == 0);
        let w = _mm256_set1_ps(weight);
        for i in (0..row.len()).step_by(8) {
            let out = acc.as_mut_ptr().add(i);
            _mm256_storeu_ps(out, _mm256_fmadd_ps(w, load8(row.as_ptr().add(i)), _mm256_loadu_ps(out)));
        }
    }
}
