use proptest::prelude::*;
use sglr_kernels::element::{Bf16 as Bf16Bits, Element};
use sglr_kernels::norm::{rms_norm, NormError};

fn reference(x: &[f64], weight: &[f64], eps: f64) -> Vec<f64> {
    let width = weight.len();
    x.chunks(width)
        .flat_map(|row| {
            let inverse = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / width as f64 + eps).sqrt();
            row.iter().zip(weight).map(move |(v, w)| v * inverse * w).collect::<Vec<_>>()
        })
        .collect()
}

/// The f32 RMSNorm the decode step computed before it called `rms_norm`: the merged kernel must
/// give the same bits.
fn decode_step_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let width = weight.len();
    for (row, dest) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let sum: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let inverse = 1.0 / ((sum / width as f64) as f32 + eps).sqrt();
        for ((d, &v), &w) in dest.iter_mut().zip(row).zip(weight) {
            *d = w * (v * inverse);
        }
    }
}

proptest! {
    #[test]
    fn f32_rows_are_the_decode_steps_bits(
        width in 1usize..700,
        rows in 1usize..5,
        eps in 1e-7f32..1e-4,
        seed in any::<u64>(),
    ) {
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 20_001) as f32 / 1000.0 - 10.0
        };
        let x: Vec<f32> = (0..width * rows).map(|_| next()).collect();
        let weight: Vec<f32> = (0..width).map(|_| next()).collect();
        let (mut merged, mut former) = (vec![f32::NAN; x.len()], vec![f32::NAN; x.len()]);
        rms_norm(&x, &weight, eps, &mut merged).unwrap();
        decode_step_norm(&x, &weight, eps, &mut former);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&merged), bits(&former));
    }

    #[test]
    fn f32_rows_match_float64(width in 1usize..200, rows in 1usize..5, seed in any::<u64>()) {
        let mut state = seed | 1;
        let mut next = || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; (state % 2000) as f32 / 100.0 - 10.0 };
        let x: Vec<f32> = (0..width * rows).map(|_| next()).collect();
        let weight: Vec<f32> = (0..width).map(|_| next()).collect();
        let mut out = vec![f32::NAN; x.len()];
        rms_norm(&x, &weight, 1e-5, &mut out).unwrap();
        let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let w64: Vec<f64> = weight.iter().map(|&v| f64::from(v)).collect();
        for (got, want) in out.iter().zip(reference(&x64, &w64, 1e-5)) {
            prop_assert!((f64::from(*got) - want).abs() <= 1e-5 * (1.0 + want.abs()), "{got} vs {want}");
        }
    }

    #[test]
    fn bf16_rows_round_twice_like_the_reference(width in 1usize..100, seed in any::<u64>()) {
        let mut state = seed | 1;
        let mut next = || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; (state % 2000) as f32 / 100.0 - 10.0 };
        let x: Vec<Bf16Bits> = (0..width).map(|_| Bf16Bits::from_f32(next())).collect();
        let weight: Vec<Bf16Bits> = (0..width).map(|_| Bf16Bits::from_f32(next())).collect();
        let mut out = vec![Bf16Bits(0); width];
        rms_norm(&x, &weight, 1e-6, &mut out).unwrap();
        let x64: Vec<f64> = x.iter().map(|v| f64::from(v.to_f32())).collect();
        let mean: f64 = x64.iter().map(|v| v * v).sum::<f64>() / width as f64;
        let inverse = 1.0 / ((mean as f32) + 1e-6).sqrt();
        for ((got, v), w) in out.iter().zip(&x).zip(&weight) {
            // The normalized value is rounded to bf16 before the weight multiplies it.
            let normed = Bf16Bits::from_f32(v.to_f32() * inverse).to_f32();
            prop_assert_eq!(*got, Bf16Bits::from_f32(w.to_f32() * normed));
        }
    }
}

#[test]
fn shapes_must_be_whole_rows() {
    let mut out = vec![0.0f32; 6];
    assert!(matches!(rms_norm(&[1.0f32; 6], &[1.0; 4], 1e-5, &mut out), Err(NormError::Shape(_))));
    assert!(matches!(rms_norm(&[1.0f32; 8], &[1.0; 4], 1e-5, &mut out), Err(NormError::Shape(_))));
    assert!(matches!(rms_norm(&[1.0f32; 0], &[], 1e-5, &mut []), Err(NormError::Shape(_))));
    let mut out = vec![0.0f32; 4];
    rms_norm(&[2.0f32; 4], &[3.0; 4], 0.0, &mut out).unwrap();
    assert_eq!(out, vec![3.0; 4]);
}
