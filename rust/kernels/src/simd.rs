//! The x86-64 vector pieces several kernels share (each caller checked the instruction set).

use std::arch::x86_64::*;

/// Sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn horizontal_sum(v: __m256) -> f32 {
    let halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
    _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps::<1>(pairs, pairs)))
}

/// Eight i32 partial sums of 32 unsigned x signed byte products (lane k: bytes 4k..4k + 3),
/// AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn products_avx2(unsigned: __m256i, signed: __m256i) -> __m256i {
    // |u * s| <= 255 * 127 per product, two per i16 lane: no saturation for u <= 128.
    _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned, signed), _mm256_set1_epi16(1))
}

// The workspace's MSRV predates these intrinsics' stabilization (1.89); the build toolchain
// has them, and `Isa::detect` gates their use at run time.
#[allow(clippy::incompatible_msrv)]
#[target_feature(enable = "avx2,avx512vnni,avx512vl")]
pub(crate) unsafe fn products_vnni(unsigned: __m256i, signed: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), unsigned, signed)
}

/// `exp(x)` for x <= 0 (shifted scores, SiLU's `-|x|`), eight lanes: x = n ln2 + r with
/// |r| <= ln2 / 2, a degree-6 polynomial for e^r, and 2^n built in the exponent bits. Relative
/// error ~2e-7; below -87.3 the result is clamped to e^-87.3 (~1e-38), i.e. a zero weight in
/// practice.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn exp_non_positive(x: __m256) -> __m256 {
    let x = _mm256_max_ps(x, _mm256_set1_ps(-87.336_55));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    // ln 2 in two parts, so r keeps its low bits.
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let r2 = _mm256_mul_ps(r, r);
    let e_r = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0));
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
    _mm256_mul_ps(e_r, _mm256_castsi256_ps(bits))
}
