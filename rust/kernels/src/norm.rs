//! RMSNorm with the rounding of the reference implementations: the row's mean square in high
//! precision, `x * rsqrt(mean + eps)` in f32 rounded to the element type, then times the weight
//! (one more rounding for bf16), as `weight * normed.to(dtype)` computes it. For f32 rows this
//! is `weight * (x * inverse)`, which the decode step's norms compute too.

use crate::element::Element;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NormError {
    #[error("rms_norm shape: {0}")]
    Shape(String),
}

/// `out[r] = weight * round(x[r] * rsqrt(mean(x[r]^2) + eps))` for each row of `width`
/// elements; `x` and `out` hold the same number of whole rows.
pub fn rms_norm<T: Element>(x: &[T], weight: &[T], eps: f32, out: &mut [T]) -> Result<(), NormError> {
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
