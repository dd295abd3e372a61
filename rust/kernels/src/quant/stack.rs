//! A matrix whose rows come from several matrices stacked one above the other: a fused q/k/v or
//! gate/up projection whose checkpoint parts are stored in different formats (a Q4_K_M file keeps
//! some `v` projections as Q6_K beside Q4_K queries and keys).

use super::act::QuantizedRow;
use super::weight::{QuantizedWeight, SharedWeight};
use crate::error::DecodeError;
use crate::isa::Isa;

pub struct RowStack {
    parts: Vec<SharedWeight>,
    /// `first_rows[i]`: the stack's row of part i's row 0; ascending, starting at 0.
    first_rows: Vec<usize>,
    rows: usize,
    cols: usize,
}

impl RowStack {
    pub fn new(parts: Vec<SharedWeight>) -> Result<Self, DecodeError> {
        let cols = parts.first().map_or(0, |p| p.cols());
        if let Some(bad) = parts.iter().find(|p| p.cols() != cols) {
            return Err(DecodeError::Shape(format!("stacked parts of {} and {cols} columns", bad.cols())));
        }
        let mut first_rows = Vec::with_capacity(parts.len());
        let mut rows = 0;
        for part in &parts {
            first_rows.push(rows);
            rows += part.rows();
        }
        let stack = Self { parts, first_rows, rows, cols };
        stack.check_invariants();
        Ok(stack)
    }

    /// The part holding `row`, and the row's index in it.
    fn locate(&self, row: usize) -> (&dyn QuantizedWeight, usize) {
        let index = self.first_rows.partition_point(|&first| first <= row) - 1;
        (self.parts[index].as_ref(), row - self.first_rows[index])
    }

    pub fn check_invariants(&self) {
        assert_eq!(self.parts.len(), self.first_rows.len());
        let mut expected = 0;
        for (part, &first) in self.parts.iter().zip(&self.first_rows) {
            assert_eq!(first, expected, "parts are contiguous");
            assert_eq!(part.cols(), self.cols);
            expected += part.rows();
        }
        assert_eq!(expected, self.rows);
    }
}

impl QuantizedWeight for RowStack {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    fn num_bytes(&self) -> usize {
        self.parts.iter().map(|p| p.num_bytes()).sum()
    }
    fn row_dots(&self, isa: Isa, row: usize, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
        let (part, row) = self.locate(row);
        part.row_dots(isa, row, xs, out);
    }
    fn dequantize_row(&self, isa: Isa, row: usize, out: &mut [f32]) {
        let (part, row) = self.locate(row);
        part.dequantize_row(isa, row, out);
    }
}
