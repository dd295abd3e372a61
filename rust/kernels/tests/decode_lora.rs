//! LoRA adapters in the decode step of a tiny random model: loading checks, unknown ids refused
//! before anything is written, base rows bit for bit as in a step without adapters, an adapter's
//! row as when its request runs alone, and every adapted matmul changing the output.

use std::sync::Arc;

use sglr_kernels::decode::{
    DecodeModel, LayerLora, LayerWeights, LoraPair, ModelShape, RotaryTables, StepBatch, BASE_ADAPTER,
};
use sglr_kernels::error::DecodeError;
use sglr_kernels::quant::{Q4Matrix, SharedWeight};

const SHAPE: ModelShape = ModelShape {
    hidden_size: 32,
    num_heads: 2,
    num_kv_heads: 1,
    head_dim: 16,
    intermediate_size: 64,
    rms_norm_eps: 1e-6,
    attention_scale: 0.25,
};
const QKV_ROWS: usize = 32 + 2 * 16;
const NUM_LAYERS: usize = 2;
const NUM_SLOTS: usize = 16;

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn matrix(rows: usize, cols: usize, seed: u64) -> SharedWeight {
    let levels: Vec<u8> = values(rows * cols, seed).iter().map(|v| ((v + 1.0) * 7.99) as u8).collect();
    let scales = vec![0.05; rows * cols / 32];
    let zeros = vec![0.0; rows * cols / 32];
    Arc::new(Q4Matrix::from_levels(&levels, &scales, &zeros, rows, cols).unwrap())
}

fn model() -> DecodeModel {
    let (h, inter) = (SHAPE.hidden_size, SHAPE.intermediate_size);
    let layers = (0..NUM_LAYERS as u64)
        .map(|i| LayerWeights {
            input_norm: vec![1.0; h],
            qkv: matrix(QKV_ROWS, h, 10 * i + 1),
            qkv_bias: None,
            o: matrix(h, 32, 10 * i + 2),
            post_norm: vec![1.0; h],
            gate_up: matrix(2 * inter, h, 10 * i + 3),
            down: matrix(h, inter, 10 * i + 4),
            sliding_window: None,
            head_norms: None,
        })
        .collect();
    let half = SHAPE.head_dim / 2;
    let angles: Vec<f32> =
        (0..NUM_SLOTS * half).map(|i| (i / half) as f32 * 0.1 * (i % half + 1) as f32).collect();
    let rotary = RotaryTables {
        cos: angles.iter().map(|a| a.cos()).collect(),
        sin: angles.iter().map(|a| a.sin()).collect(),
    };
    DecodeModel::new(SHAPE, layers, vec![1.0; h], None, rotary).unwrap()
}

fn pair(rank: usize, in_features: usize, out_features: usize, seed: u64) -> LoraPair {
    let expand: Vec<f32> = values(out_features * rank, seed + 1).iter().map(|v| v * 0.5).collect();
    LoraPair::new(rank, in_features, out_features, values(rank * in_features, seed), &expand).unwrap()
}

/// An adapter of every matmul of every layer, or of only `which` (0 q/k/v, 1 o, 2 gate/up, 3
/// down).
fn adapter(rank: usize, seed: u64, which: Option<usize>) -> Vec<LayerLora> {
    let (h, inter) = (SHAPE.hidden_size, SHAPE.intermediate_size);
    let on = |i: usize| which.is_none_or(|w| w == i);
    (0..NUM_LAYERS as u64)
        .map(|l| LayerLora {
            qkv: on(0).then(|| pair(rank, h, QKV_ROWS, seed + 10 * l)),
            o: on(1).then(|| pair(rank, 32, h, seed + 10 * l + 2)),
            gate_up: on(2).then(|| pair(rank, h, 2 * inter, seed + 10 * l + 4)),
            down: on(3).then(|| pair(rank, inter, h, seed + 10 * l + 6)),
        })
        .collect()
}

/// Requests `requests` (of 0..4) at position 3 over slots `r * 4 .. r * 4 + 4` (the first three
/// holding random K/V): the step's outputs and K cache.
struct Run {
    out: Vec<f32>,
    k: Vec<f32>,
}

fn run(model: &DecodeModel, requests: &[usize], adapter_ids: &[u32]) -> Result<Run, DecodeError> {
    let n = requests.len();
    let kv_len = NUM_LAYERS * NUM_SLOTS * 16;
    let (mut k, mut v) = (values(kv_len, 100), values(kv_len, 101));
    let all_hidden = values(4 * SHAPE.hidden_size, 50);
    let mut hidden: Vec<f32> =
        requests.iter().flat_map(|&r| all_hidden[r * 32..(r + 1) * 32].iter().copied()).collect();
    let table: Vec<u32> = requests.iter().flat_map(|&r| (0..4).map(move |s| (r * 4 + s) as u32)).collect();
    let positions = vec![3; n];
    let seq_lens = vec![4; n];
    let out_slots: Vec<u32> = requests.iter().map(|&r| (r * 4 + 3) as u32).collect();
    let batch = StepBatch {
        positions: &positions,
        slot_table: &table,
        seq_lens: &seq_lens,
        out_slots: &out_slots,
        adapter_ids,
    };
    let mut out = vec![0.0; n * model.output_width()];
    model.step(&mut hidden, batch, &mut k, &mut v, &mut out)?;
    Ok(Run { out, k })
}

#[test]
fn loading_checks_ids_layers_and_shapes() {
    let mut model = model();
    assert_eq!(model.add_adapter(BASE_ADAPTER, adapter(4, 1, None)), Err(DecodeError::AdapterTaken(0)));
    let one_layer: Vec<LayerLora> = adapter(4, 1, None).into_iter().take(1).collect();
    assert!(matches!(model.add_adapter(3, one_layer), Err(DecodeError::Length { .. })));
    let mut wrong = adapter(4, 1, None);
    wrong[1].down = Some(pair(4, 32, 32, 9));
    assert!(matches!(model.add_adapter(3, wrong), Err(DecodeError::Shape(m)) if m.contains("layer 1 down")));
    model.add_adapter(3, adapter(4, 1, None)).unwrap();
    assert_eq!(model.add_adapter(3, adapter(2, 2, None)), Err(DecodeError::AdapterTaken(3)));
    model.add_adapter(7, adapter(2, 2, Some(1))).unwrap();
    assert_eq!(model.adapter_ids(), vec![3, 7]);
    model.remove_adapter(3).unwrap();
    assert_eq!(model.remove_adapter(3), Err(DecodeError::UnknownAdapter(3)));
    assert_eq!(model.adapter_ids(), vec![7]);
}

#[test]
fn unknown_ids_and_bad_lengths_are_refused_before_writing() {
    let mut model = model();
    model.add_adapter(5, adapter(4, 1, None)).unwrap();
    let kv_len = NUM_LAYERS * NUM_SLOTS * 16;
    for (ids, want) in [(&[5, 6][..], "not loaded"), (&[5][..], "adapter_ids")] {
        let (mut k, mut v) = (values(kv_len, 100), values(kv_len, 101));
        let mut hidden = vec![0.5; 64];
        let batch = StepBatch {
            positions: &[3, 3],
            slot_table: &[0, 1, 2, 3, 4, 5, 6, 7],
            seq_lens: &[4, 4],
            out_slots: &[3, 7],
            adapter_ids: ids,
        };
        let error = model.step(&mut hidden, batch, &mut k, &mut v, &mut [0.0; 64]).unwrap_err();
        assert!(error.to_string().contains(want), "{error}");
        assert_eq!((k, v), (values(kv_len, 100), values(kv_len, 101)));
        assert_eq!(hidden, vec![0.5; 64]);
    }
}

#[test]
fn base_rows_are_exact_and_adapter_rows_are_their_own() {
    let mut model = model();
    let base = run(&model, &[0, 1, 2, 3], &[]).unwrap();
    model.add_adapter(4, adapter(8, 1, None)).unwrap();
    model.add_adapter(9, adapter(3, 2, Some(2))).unwrap();
    let ids = [4, BASE_ADAPTER, 9, 4];
    let mixed = run(&model, &[0, 1, 2, 3], &ids).unwrap();
    assert_eq!(run(&model, &[0, 1, 2, 3], &[0; 4]).unwrap().out, base.out, "all-base ids");
    let width = model.output_width();
    for (request, &id) in ids.iter().enumerate() {
        let row = &mixed.out[request * width..(request + 1) * width];
        let base_row = &base.out[request * width..(request + 1) * width];
        if id == BASE_ADAPTER {
            assert_eq!(row, base_row, "base request {request}");
        } else {
            assert_ne!(row, base_row, "request {request} of adapter {id}");
        }
        assert_eq!(row, &run(&model, &[request], &[id]).unwrap().out[..], "request {request} alone");
    }
    // Layer 0's new keys: the base request's as without adapters, adapter 4's (q/k/v deltas) not.
    let kv = |run: &Run, request: usize| run.k[(request * 4 + 3) * 16..(request * 4 + 4) * 16].to_vec();
    assert_eq!(kv(&mixed, 1), kv(&base, 1));
    assert_ne!(kv(&mixed, 0), kv(&base, 0));
    assert_eq!(kv(&mixed, 2), kv(&base, 2), "adapter 9 adapts gate/up only");
}

#[test]
fn each_adapted_matmul_changes_the_output() {
    let mut model = model();
    let base = run(&model, &[0], &[]).unwrap().out;
    for which in 0..4 {
        model.add_adapter(which as u32 + 1, adapter(4, 3, Some(which))).unwrap();
        let out = run(&model, &[0], &[which as u32 + 1]).unwrap().out;
        let change = out.iter().zip(&base).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(change > 1e-3, "matmul {which}: {change}");
    }
}
