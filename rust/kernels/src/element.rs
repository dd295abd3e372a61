//! Row elements of the KV cache and of RMSNorm rows: f32, and bf16 held as its bit pattern (what
//! numpy can carry in int16), one rounding for every kernel.

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

/// A row element: f32, or bf16 carried as its bit pattern.
pub trait Element: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;

    /// Round-to-nearest-even from f32 (identity for f32).
    fn from_f32(value: f32) -> Self;

    /// Eight elements at `ptr` as f32 lanes.
    ///
    /// # Safety
    /// AVX2 must be present and `ptr` valid for eight elements.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(ptr: *const Self) -> std::arch::x86_64::__m256;

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

impl Element for f32 {
    fn to_f32(self) -> f32 {
        self
    }

    fn from_f32(value: f32) -> Self {
        value
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(ptr: *const Self) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(ptr)
    }
}

impl Element for Bf16 {
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    fn from_f32(value: f32) -> Self {
        Bf16::from_f32(value)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(ptr: *const Self) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // A bf16 is the top half of an f32: widen to 32 bits and shift into place.
        let halves = _mm_loadu_si128(ptr as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(halves)))
    }
}
