use proptest::prelude::*;
use sglr_kernels::block::BLOCK_LEN;
use sglr_kernels::error::DecodeError;
use sglr_kernels::quant::Q8Matrix;

/// A matrix owning copies of `levels` and `scales`.
fn q8(levels: &[i8], scales: &[f32], rows: usize, cols: usize) -> Result<Q8Matrix, DecodeError> {
    Q8Matrix::new(levels.to_vec(), scales.to_vec(), rows, cols)
}

/// A row-major dense reference in f64.
fn reference(levels: &[i8], scales: &[f32], rows: usize, cols: usize, inputs: &[f32]) -> Vec<f64> {
    let num_inputs = inputs.len() / cols;
    let mut out = vec![0.0; num_inputs * rows];
    for i in 0..num_inputs {
        for r in 0..rows {
            out[i * rows + r] = (0..cols)
                .map(|c| {
                    let weight =
                        f64::from(levels[r * cols + c]) * f64::from(scales[(r * cols + c) / BLOCK_LEN]);
                    weight * f64::from(inputs[i * cols + c])
                })
                .sum();
        }
    }
    out
}

fn case() -> impl Strategy<Value = (usize, usize, usize, usize, Vec<i8>, Vec<f32>, Vec<f32>)> {
    (1usize..40, 1usize..5, 1usize..4, 1usize..5).prop_flat_map(|(rows, col_blocks, num_inputs, threads)| {
        let cols = col_blocks * BLOCK_LEN;
        (
            Just(rows),
            Just(cols),
            Just(num_inputs),
            Just(threads),
            proptest::collection::vec(any::<i8>(), rows * cols),
            proptest::collection::vec(0.0f32..0.05, rows * col_blocks),
            proptest::collection::vec(-4.0f32..4.0, num_inputs * cols),
        )
    })
}

proptest! {
    #[test]
    fn matmul_matches_a_dense_reference((rows, cols, num_inputs, threads, levels, scales, inputs) in case()) {
        let matrix = q8(&levels, &scales, rows, cols).unwrap();
        let mut out = vec![f32::NAN; num_inputs * rows];
        matrix.matmul_transposed(&inputs, num_inputs, &mut out, threads).unwrap();
        let expected = reference(&levels, &scales, rows, cols, &inputs);
        for (got, want) in out.iter().zip(&expected) {
            // f32 sums of up to 128 products of magnitude <= 127 * 0.05 * 4.
            prop_assert!((f64::from(*got) - want).abs() <= 1e-3 * (1.0 + want.abs()), "{got} vs {want}");
        }
    }

    #[test]
    fn dequantized_rows_equal_level_times_scale(
        (rows, cols, _n, _t, levels, scales, _x) in case(),
        picks in proptest::collection::vec(any::<u32>(), 0..6),
    ) {
        let matrix = q8(&levels, &scales, rows, cols).unwrap();
        let ids: Vec<u32> = picks.iter().map(|p| p % rows as u32).collect();
        let mut out = vec![f32::NAN; ids.len() * cols];
        matrix.dequantize_rows(&ids, &mut out).unwrap();
        for (k, &id) in ids.iter().enumerate() {
            for c in 0..cols {
                let index = id as usize * cols + c;
                prop_assert_eq!(out[k * cols + c], f32::from(levels[index]) * scales[index / BLOCK_LEN]);
            }
        }
    }
}

#[test]
fn threads_split_rows_without_changing_results() {
    let (rows, cols) = (1000, 64);
    let levels: Vec<i8> = (0..rows * cols).map(|i| ((i * 7919) % 251) as i8).collect();
    let scales: Vec<f32> = (0..rows * cols / BLOCK_LEN).map(|b| 1.0 / (1.0 + b as f32)).collect();
    let inputs: Vec<f32> = (0..3 * cols).map(|i| (i as f32 * 0.1).cos()).collect();
    let matrix = q8(&levels, &scales, rows, cols).unwrap();
    let mut one = vec![0.0; 3 * rows];
    matrix.matmul_transposed(&inputs, 3, &mut one, 1).unwrap();
    for threads in [2, 3, 8] {
        let mut many = vec![0.0; 3 * rows];
        matrix.matmul_transposed(&inputs, 3, &mut many, threads).unwrap();
        assert_eq!(one, many, "{threads} threads");
        let mut single = vec![0.0; rows];
        matrix.matmul_transposed(&inputs[..cols], 1, &mut single, threads).unwrap();
        assert_eq!(&one[..rows], &single[..], "{threads} threads, one input");
    }
}

#[test]
fn bad_shapes_and_ids_are_typed_errors() {
    let levels = vec![1i8; 64];
    let scales = vec![1.0f32; 2];
    assert_eq!(q8(&levels, &scales, 2, 33).unwrap_err(), DecodeError::Columns(33));
    assert_eq!(
        q8(&levels, &scales, 3, 32).unwrap_err(),
        DecodeError::Length { what: "levels".into(), expected: 96, got: 64 }
    );
    let matrix = q8(&levels, &scales, 2, 32).unwrap();
    let mut out = vec![0.0; 32];
    assert_eq!(matrix.dequantize_rows(&[2], &mut out).unwrap_err(), DecodeError::RowId { id: 2, rows: 2 });
    let mut short = vec![0.0; 1];
    assert!(matches!(
        matrix.matmul_transposed(&[0.0; 32], 1, &mut short, 1),
        Err(DecodeError::Length { what, .. }) if what == "out"
    ));
}
