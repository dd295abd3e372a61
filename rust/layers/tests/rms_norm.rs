use proptest::prelude::*;
use sglr_layers::{rms_norm, Bf16Bits, NormElement, NormError};

fn reference(x: &[f64], weight: &[f64], eps: f64) -> Vec<f64> {
    let width = weight.len();
    x.chunks(width)
        .flat_map(|row| {
            let inverse = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / width as f64 + eps).sqrt();
            row.iter().zip(weight).map(move |(v, w)| v * inverse * w).collect::<Vec<_>>()
        })
        .collect()
}

proptest! {
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
