//! What the matmul runs, whatever the format: one weight row's dot products against a group of
//! int8 activation rows, and one row dequantized.

use std::sync::Arc;

use super::act::QuantizedRow;
use super::dot::{q4_dots, q8_dots};
use super::kdot::kquant_dots;
use super::kquant::KQuantMatrix;
use super::q4::Q4Matrix;
use super::q8::Q8Matrix;
use crate::dequant::{q4_row, q8_row};
use crate::isa::Isa;

/// A matrix the matmul can run: one row's dot products against a group of activation rows.
pub trait QuantizedWeight: Send + Sync {
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    /// Bytes held (weights and scales).
    fn num_bytes(&self) -> usize;
    fn row_dots(&self, isa: Isa, row: usize, xs: &[QuantizedRow<'_>], out: &mut [f32]);
    /// Row `row` as f32 into `out` (`cols` values), with the kernels of `isa`.
    fn dequantize_row(&self, isa: Isa, row: usize, out: &mut [f32]);
}

/// A matrix shared by the model's layers and the fused step (no second copy).
pub type SharedWeight = Arc<dyn QuantizedWeight>;

impl QuantizedWeight for Q4Matrix {
    fn rows(&self) -> usize {
        Q4Matrix::rows(self)
    }
    fn cols(&self) -> usize {
        Q4Matrix::cols(self)
    }
    fn num_bytes(&self) -> usize {
        Q4Matrix::num_bytes(self)
    }
    fn row_dots(&self, isa: Isa, row: usize, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
        q4_dots(isa, self.row(row), xs, out);
    }
    fn dequantize_row(&self, isa: Isa, row: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols());
        q4_row(isa, self.row(row), out);
    }
}

impl QuantizedWeight for Q8Matrix {
    fn rows(&self) -> usize {
        Q8Matrix::rows(self)
    }
    fn cols(&self) -> usize {
        Q8Matrix::cols(self)
    }
    fn num_bytes(&self) -> usize {
        self.levels().len() + 4 * self.scales().len()
    }
    fn row_dots(&self, isa: Isa, row: usize, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
        q8_dots(isa, self.row(row), xs, out);
    }
    fn dequantize_row(&self, isa: Isa, row: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols());
        q8_row(isa, self.row(row), out);
    }
}

impl QuantizedWeight for KQuantMatrix {
    fn rows(&self) -> usize {
        KQuantMatrix::rows(self)
    }
    fn cols(&self) -> usize {
        KQuantMatrix::cols(self)
    }
    fn num_bytes(&self) -> usize {
        KQuantMatrix::num_bytes(self)
    }
    fn row_dots(&self, isa: Isa, row: usize, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
        kquant_dots(isa, self.kind(), self.row(row), xs, out);
    }
    fn dequantize_row(&self, _isa: Isa, row: usize, out: &mut [f32]) {
        KQuantMatrix::dequantize_row(self, row, out);
    }
}
