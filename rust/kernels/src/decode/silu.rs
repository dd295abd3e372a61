//! SiLU between the step's gate/up and down matmuls, vectorized (one exp per intermediate value
//! shows in a profile).

use crate::isa::Isa;

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

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use crate::simd::exp_non_positive;

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
