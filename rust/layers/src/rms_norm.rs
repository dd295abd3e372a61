//! RMSNorm with the rounding of the reference implementations: the row's mean square in high
//! precision, `x * rsqrt(mean + eps)` in f32 rounded to the element type, then times the weight
//! (one more rounding for bf16), as `weight * normed.to(dtype)` computes it.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NormError {
    #[error("rms_norm shape: {0}")]
    Shape(String),
}

/// A row element: f32, or bf16 carried as its bit pattern.
pub trait NormElement: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    /// Round-to-nearest-even from f32 (identity for f32).
    fn from_f32(value: f32) -> Self;
}

impl NormElement for f32 {
    fn to_f32(self) -> f32 {
        self
    }

    fn from_f32(value: f32) -> Self {
        value
    }
}

/// bf16 as its 16 bits (the top half of an f32), as numpy carries it (int16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16Bits(pub u16);

impl NormElement for Bf16Bits {
    fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    fn from_f32(value: f32) -> Self {
        let bits = value.to_bits();
        if value.is_nan() {
            return Self(((bits >> 16) | 0x40) as u16);
        }
        let rounding = 0x7fff + ((bits >> 16) & 1);
        Self((bits.wrapping_add(rounding) >> 16) as u16)
    }
}

/// `out[r] = weight * round(x[r] * rsqrt(mean(x[r]^2) + eps))` for each row of `width`
/// elements; `x` and `out` hold the same number of whole rows.
pub fn rms_norm<T: NormElement>(x: &[T], weight: &[T], eps: f32, out: &mut [T]) -> Result<(), NormError> {
    let width = weight.len();
    if width == 0 || x.len() % width != 0 || out.len() != x.len() {
        return Err(NormError::Shape(format!(
            "{} inputs, {} outputs for rows of {width}",
            x.len(),
            out.len()
        )));
    }
    for (row, out_row) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        // f64 sum: the result does not depend on a summation order (torch's is blocked).
        let sum: f64 = row.iter().map(|v| f64::from(v.to_f32()) * f64::from(v.to_f32())).sum();
        let inverse = 1.0 / ((sum / width as f64) as f32 + eps).sqrt();
        for ((o, v), w) in out_row.iter_mut().zip(row).zip(weight) {
            let normed = T::from_f32(v.to_f32() * inverse);
            *o = T::from_f32(w.to_f32() * normed.to_f32());
        }
    }
    Ok(())
}
