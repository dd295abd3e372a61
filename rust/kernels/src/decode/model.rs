//! The decode step: every layer of a pre-norm decoder (RMSNorm, fused q/k/v, optional per-head
//! q/k RMSNorm, rotary, KV write, attention, o, residual, RMSNorm, fused gate/up, SiLU, down,
//! residual), the final norm and an 8-bit head, in one call. The residual stream stays f32; each matmul input is quantized to
//! int8 per block of 32 once and shared by all of that matmul's rows.

use rayon::prelude::*;

use super::silu::silu_mul;
use crate::attn::{decode_attention_split, store_rows, AttnError, DecodeShape};
use crate::element::Element;
use crate::error::{check_len, DecodeError};
use crate::gemm::matmul;
use crate::isa::Isa;
use crate::norm::rms_norm;
use crate::quant::{QuantizedRows, SharedWeight};

#[derive(Clone, Copy, Debug)]
pub struct ModelShape {
    pub hidden_size: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub rms_norm_eps: f32,
    pub attention_scale: f32,
}

impl ModelShape {
    fn q_size(&self) -> usize {
        self.num_heads * self.head_dim
    }

    fn kv_size(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }
}

pub struct LayerWeights {
    pub input_norm: Vec<f32>,
    pub qkv: SharedWeight,
    pub qkv_bias: Option<Vec<f32>>,
    pub o: SharedWeight,
    pub post_norm: Vec<f32>,
    /// Gate rows, then up rows.
    pub gate_up: SharedWeight,
    pub down: SharedWeight,
    pub sliding_window: Option<usize>,
    /// RMSNorm weights applied to every q head and every k head before rotary (Qwen3).
    pub head_norms: Option<HeadNorms>,
}

/// One weight per head dimension, shared by all heads of its kind.
pub struct HeadNorms {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub eps: f32,
}

/// Rotary tables: `cos[p * head_dim / 2 + i]`, `sin[...]` for position p, frequency i.
pub struct RotaryTables {
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
}

/// One decode step's requests: request b is at `positions[b]` (its new token), attends to the
/// slots `slot_table[b * W .. b * W + seq_lens[b]]` and writes its K/V at `out_slots[b]`.
#[derive(Clone, Copy, Debug)]
pub struct StepBatch<'a> {
    pub positions: &'a [u32],
    pub slot_table: &'a [u32],
    pub seq_lens: &'a [u32],
    pub out_slots: &'a [u32],
}

pub struct DecodeModel {
    shape: ModelShape,
    layers: Vec<LayerWeights>,
    final_norm: Vec<f32>,
    head: Option<SharedWeight>,
    rotary: RotaryTables,
    isa: Isa,
}

impl DecodeModel {
    pub fn new(
        shape: ModelShape,
        layers: Vec<LayerWeights>,
        final_norm: Vec<f32>,
        head: Option<SharedWeight>,
        rotary: RotaryTables,
    ) -> Result<Self, DecodeError> {
        let ModelShape { hidden_size, head_dim, num_heads, num_kv_heads, intermediate_size, .. } = shape;
        if num_kv_heads == 0 || num_heads % num_kv_heads != 0 || head_dim % 2 != 0 || layers.is_empty() {
            return Err(DecodeError::Shape(format!(
                "{num_heads} heads over {num_kv_heads} KV heads of {head_dim}, {} layers",
                layers.len()
            )));
        }
        let qkv_rows = shape.q_size() + 2 * shape.kv_size();
        let expect = |what: String, got: (usize, usize), want: (usize, usize)| {
            if got == want {
                Ok(())
            } else {
                Err(DecodeError::Shape(format!("{what} is {got:?}, expected {want:?}")))
            }
        };
        for (i, layer) in layers.iter().enumerate() {
            expect(format!("layer {i} qkv"), dims(&layer.qkv), (qkv_rows, hidden_size))?;
            expect(format!("layer {i} o"), dims(&layer.o), (hidden_size, shape.q_size()))?;
            expect(format!("layer {i} gate_up"), dims(&layer.gate_up), (2 * intermediate_size, hidden_size))?;
            expect(format!("layer {i} down"), dims(&layer.down), (hidden_size, intermediate_size))?;
            check_len(&format!("layer {i} input norm"), layer.input_norm.len(), hidden_size)?;
            check_len(&format!("layer {i} post-attention norm"), layer.post_norm.len(), hidden_size)?;
            if let Some(bias) = &layer.qkv_bias {
                check_len(&format!("layer {i} qkv bias"), bias.len(), qkv_rows)?;
            }
            if let Some(norms) = &layer.head_norms {
                check_len(&format!("layer {i} q norm"), norms.q.len(), head_dim)?;
                check_len(&format!("layer {i} k norm"), norms.k.len(), head_dim)?;
            }
        }
        check_len("final norm", final_norm.len(), hidden_size)?;
        if let Some(head) = &head {
            check_len("head columns", head.cols(), hidden_size)?;
        }
        if rotary.cos.len() != rotary.sin.len() || rotary.cos.len() % (head_dim / 2) != 0 {
            return Err(DecodeError::Shape("rotary tables of unequal or partial rows".into()));
        }
        Ok(Self { shape, layers, final_norm, head, rotary, isa: Isa::detect() })
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Values per request in `step`'s output: the vocabulary with a head, else the hidden size
    /// (the final-normalized hidden state, for the caller's head).
    pub fn output_width(&self) -> usize {
        self.head.as_ref().map_or(self.shape.hidden_size, |head| head.rows())
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Limits the kernels to `isa` (at most what `detect` found), for tests and benchmarks.
    pub fn set_isa(&mut self, isa: Isa) {
        if Isa::available().contains(&isa) {
            self.isa = isa;
        }
    }

    /// Runs the step on the current rayon pool. `hidden` holds the requests' token embeddings
    /// (`B x hidden_size`) and is used as the residual stream; `k_cache`, `v_cache` hold every
    /// layer's `[num_slots, num_kv_heads, head_dim]` rows back to back; `out` gets
    /// `B x output_width()` values. All checks run before anything is written.
    pub fn step<T: Element>(
        &self,
        hidden: &mut [f32],
        batch: StepBatch<'_>,
        k_cache: &mut [T],
        v_cache: &mut [T],
        out: &mut [f32],
    ) -> Result<(), DecodeError> {
        let shape = self.shape;
        let num_requests = batch.positions.len();
        let num_slots = self.check_step(hidden, batch, k_cache, v_cache, out)?;
        if num_requests == 0 {
            return Ok(());
        }
        let (q_size, kv_size) = (shape.q_size(), shape.kv_size());
        let layer_len = num_slots * kv_size;
        let mut normed = vec![0.0f32; hidden.len()];
        let mut quantized = QuantizedRows::new();
        let mut scratch = Vec::new();
        let mut qkv = vec![0.0f32; num_requests * (q_size + 2 * kv_size)];
        let mut queries = vec![0.0f32; num_requests * q_size];
        let mut attended = vec![0.0f32; num_requests * q_size];
        let mut projected = vec![0.0f32; hidden.len()];
        let mut gate_up = vec![0.0f32; num_requests * 2 * shape.intermediate_size];
        let mut activated = vec![0.0f32; num_requests * shape.intermediate_size];
        let mut new_keys = vec![T::from_f32(0.0); num_requests * kv_size];
        let mut new_values = vec![T::from_f32(0.0); num_requests * kv_size];
        let mut heads = vec![0.0f32; q_size];
        for (index, layer) in self.layers.iter().enumerate() {
            let k_layer = &mut k_cache[index * layer_len..(index + 1) * layer_len];
            let v_layer = &mut v_cache[index * layer_len..(index + 1) * layer_len];
            rms_norm(hidden, &layer.input_norm, shape.rms_norm_eps, &mut normed)?;
            quantized.quantize(&normed, shape.hidden_size)?;
            matmul(self.isa, layer.qkv.as_ref(), &quantized, &mut qkv, &mut scratch)?;
            for (b, row) in qkv.chunks_exact_mut(q_size + 2 * kv_size).enumerate() {
                if let Some(bias) = &layer.qkv_bias {
                    row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                }
                if let Some(norms) = &layer.head_norms {
                    normalize_heads(&mut row[..q_size], &norms.q, norms.eps, &mut heads)?;
                    normalize_heads(&mut row[q_size..q_size + kv_size], &norms.k, norms.eps, &mut heads)?;
                }
                self.rotate(&mut row[..q_size + kv_size], batch.positions[b] as usize);
                queries[b * q_size..(b + 1) * q_size].copy_from_slice(&row[..q_size]);
                let (keys, values) = row[q_size..].split_at(kv_size);
                for (dest, &v) in new_keys[b * kv_size..(b + 1) * kv_size].iter_mut().zip(keys) {
                    *dest = T::from_f32(v);
                }
                for (dest, &v) in new_values[b * kv_size..(b + 1) * kv_size].iter_mut().zip(values) {
                    *dest = T::from_f32(v);
                }
            }
            store_rows(k_layer, kv_size, &new_keys, batch.out_slots)?;
            store_rows(v_layer, kv_size, &new_values, batch.out_slots)?;
            self.attend(layer, batch, &queries, k_layer, v_layer, num_slots, &mut attended)?;
            quantized.quantize(&attended, q_size)?;
            matmul(self.isa, layer.o.as_ref(), &quantized, &mut projected, &mut scratch)?;
            hidden.iter_mut().zip(&projected).for_each(|(h, p)| *h += p);
            rms_norm(hidden, &layer.post_norm, shape.rms_norm_eps, &mut normed)?;
            quantized.quantize(&normed, shape.hidden_size)?;
            matmul(self.isa, layer.gate_up.as_ref(), &quantized, &mut gate_up, &mut scratch)?;
            let size = shape.intermediate_size;
            for (row, act) in gate_up.chunks_exact(2 * size).zip(activated.chunks_exact_mut(size)) {
                let (gate, up) = row.split_at(size);
                silu_mul(self.isa, gate, up, act);
            }
            quantized.quantize(&activated, size)?;
            matmul(self.isa, layer.down.as_ref(), &quantized, &mut projected, &mut scratch)?;
            hidden.iter_mut().zip(&projected).for_each(|(h, p)| *h += p);
        }
        match &self.head {
            Some(head) => {
                rms_norm(hidden, &self.final_norm, shape.rms_norm_eps, &mut normed)?;
                quantized.quantize(&normed, shape.hidden_size)?;
                matmul(self.isa, head.as_ref(), &quantized, out, &mut scratch)
            }
            None => Ok(rms_norm(hidden, &self.final_norm, shape.rms_norm_eps, out)?),
        }
    }

    /// Validates a step's arguments; returns the KV slots per layer.
    fn check_step<T>(
        &self,
        hidden: &[f32],
        batch: StepBatch<'_>,
        k_cache: &[T],
        v_cache: &[T],
        out: &[f32],
    ) -> Result<usize, DecodeError> {
        let shape = self.shape;
        let num_requests = batch.positions.len();
        check_len("hidden", hidden.len(), num_requests * shape.hidden_size)?;
        check_len("seq_lens", batch.seq_lens.len(), num_requests)?;
        check_len("out_slots", batch.out_slots.len(), num_requests)?;
        check_len("out", out.len(), num_requests * self.output_width())?;
        let per_slot = self.layers.len() * shape.kv_size();
        if k_cache.len() != v_cache.len() || k_cache.len() % per_slot != 0 {
            return Err(DecodeError::Shape(format!(
                "KV caches of {} and {} values for {} layers of {} per slot",
                k_cache.len(),
                v_cache.len(),
                self.layers.len(),
                shape.kv_size()
            )));
        }
        let num_slots = k_cache.len() / per_slot;
        let num_positions = self.rotary.cos.len() / (shape.head_dim / 2);
        if let Some(&position) = batch.positions.iter().find(|&&p| p as usize >= num_positions) {
            return Err(DecodeError::Position { position: position as usize, num_positions });
        }
        if num_requests == 0 {
            return Ok(num_slots);
        }
        if batch.slot_table.len() % num_requests != 0 {
            return Err(DecodeError::Shape(format!(
                "slot table of {} for {num_requests} requests",
                batch.slot_table.len()
            )));
        }
        let width = batch.slot_table.len() / num_requests;
        for (request, (&seq_len, &slot)) in batch.seq_lens.iter().zip(batch.out_slots).enumerate() {
            let seq_len = seq_len as usize;
            if seq_len == 0 || seq_len > width {
                return Err(AttnError::SeqLen { request, seq_len, table_width: width }.into());
            }
            let used = &batch.slot_table[request * width..request * width + seq_len];
            if let Some(&bad) = used.iter().chain(std::iter::once(&slot)).find(|&&s| s as usize >= num_slots)
            {
                return Err(AttnError::Slot { request, slot: bad, num_slots }.into());
            }
        }
        Ok(num_slots)
    }

    /// Rotate-half rotary embedding of the q and k heads (`row` = q heads then k heads).
    fn rotate(&self, row: &mut [f32], position: usize) {
        let half = self.shape.head_dim / 2;
        let cos = &self.rotary.cos[position * half..(position + 1) * half];
        let sin = &self.rotary.sin[position * half..(position + 1) * half];
        for head in row.chunks_exact_mut(self.shape.head_dim) {
            let (first, second) = head.split_at_mut(half);
            for i in 0..half {
                let (x1, x2) = (first[i], second[i]);
                first[i] = x1 * cos[i] - x2 * sin[i];
                second[i] = x2 * cos[i] + x1 * sin[i];
            }
        }
    }

    /// Attention for every request; the (request, KV head) items split over the pool's threads.
    #[allow(clippy::too_many_arguments)]
    fn attend<T: Element>(
        &self,
        layer: &LayerWeights,
        batch: StepBatch<'_>,
        queries: &[f32],
        k_layer: &[T],
        v_layer: &[T],
        num_slots: usize,
        out: &mut [f32],
    ) -> Result<(), DecodeError> {
        let shape = self.shape;
        let decode_shape = DecodeShape {
            num_heads: shape.num_heads,
            num_kv_heads: shape.num_kv_heads,
            head_dim: shape.head_dim,
            num_slots,
        };
        decode_attention_split(
            decode_shape,
            queries,
            k_layer,
            v_layer,
            batch.slot_table,
            batch.seq_lens,
            shape.attention_scale,
            layer.sliding_window,
            out,
            |out, item_len, run| {
                let num_items = out.len() / item_len;
                let per_task = num_items.div_ceil(rayon::current_num_threads()).max(1);
                out.par_chunks_mut(per_task * item_len)
                    .enumerate()
                    .for_each(|(task, chunk)| run(task * per_task, chunk));
            },
        )?;
        Ok(())
    }
}

/// RMSNorm of each `weight.len()`-wide head of `row`, in place (`scratch` holds a copy).
fn normalize_heads(
    row: &mut [f32],
    weight: &[f32],
    eps: f32,
    scratch: &mut [f32],
) -> Result<(), DecodeError> {
    let copy = &mut scratch[..row.len()];
    copy.copy_from_slice(row);
    Ok(rms_norm(copy, weight, eps, row)?)
}

fn dims(matrix: &SharedWeight) -> (usize, usize) {
    (matrix.rows(), matrix.cols())
}
