//! The decode step: every layer of a pre-norm decoder (RMSNorm, fused q/k/v, optional per-head
//! q/k RMSNorm, rotary, KV write, attention, o, residual, RMSNorm, fused gate/up, SiLU, down,
//! residual), the final norm and an 8-bit head, in one call. The residual stream stays f32; each matmul input is quantized to
//! int8 per block of 32 once and shared by all of that matmul's rows. LoRA adapters, loaded by
//! id, add their deltas after each matmul over the rows of the requests that name them.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::lora::{add_lora_deltas, LayerLora, LoraGroup, LoraPair, LoraScratch};
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

/// The adapter id of requests that run the base model alone.
pub const BASE_ADAPTER: u32 = 0;

/// One decode step's requests: request b is at `positions[b]` (its new token), attends to the
/// slots `slot_table[b * W .. b * W + seq_lens[b]]`, writes its K/V at `out_slots[b]` and runs
/// with the LoRA adapter `adapter_ids[b]` (`BASE_ADAPTER`: none; an empty `adapter_ids`: every
/// request runs the base model).
#[derive(Clone, Copy, Debug)]
pub struct StepBatch<'a> {
    pub positions: &'a [u32],
    pub slot_table: &'a [u32],
    pub seq_lens: &'a [u32],
    pub out_slots: &'a [u32],
    pub adapter_ids: &'a [u32],
}

/// A step's adapters: each one's layers and the rows (requests) that use it.
type AdapterRows<'a> = Vec<(&'a [LayerLora], Vec<usize>)>;

pub struct DecodeModel {
    shape: ModelShape,
    layers: Vec<LayerWeights>,
    final_norm: Vec<f32>,
    head: Option<SharedWeight>,
    rotary: RotaryTables,
    isa: Isa,
    /// The loaded LoRA adapters by id, each with one entry per layer.
    adapters: BTreeMap<u32, Vec<LayerLora>>,
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
        Ok(Self { shape, layers, final_norm, head, rotary, isa: Isa::detect(), adapters: BTreeMap::new() })
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

    /// Loads a LoRA adapter as `id` (not `BASE_ADAPTER`, not loaded yet): `layers` holds one
    /// entry per layer, each pair shaped as its matmul (q/k/v: hidden -> q + 2 kv, o: q ->
    /// hidden, gate/up: hidden -> 2 x intermediate, down: intermediate -> hidden).
    pub fn add_adapter(&mut self, id: u32, layers: Vec<LayerLora>) -> Result<(), DecodeError> {
        if id == BASE_ADAPTER || self.adapters.contains_key(&id) {
            return Err(DecodeError::AdapterTaken(id));
        }
        check_len("adapter layers", layers.len(), self.layers.len())?;
        let shape = self.shape;
        let (hidden, q_size, inter) = (shape.hidden_size, shape.q_size(), shape.intermediate_size);
        let qkv_rows = q_size + 2 * shape.kv_size();
        for (index, layer) in layers.iter().enumerate() {
            for (what, pair, want) in [
                ("qkv", &layer.qkv, (hidden, qkv_rows)),
                ("o", &layer.o, (q_size, hidden)),
                ("gate_up", &layer.gate_up, (hidden, 2 * inter)),
                ("down", &layer.down, (inter, hidden)),
            ] {
                if let Some(pair) = pair {
                    let got = (pair.in_features(), pair.out_features());
                    if got != want {
                        return Err(DecodeError::Shape(format!(
                            "adapter {id} layer {index} {what}: {got:?} features, expected {want:?}"
                        )));
                    }
                }
            }
        }
        self.adapters.insert(id, layers);
        Ok(())
    }

    pub fn remove_adapter(&mut self, id: u32) -> Result<(), DecodeError> {
        self.adapters.remove(&id).map(|_| ()).ok_or(DecodeError::UnknownAdapter(id))
    }

    /// The loaded adapters' ids, in increasing order.
    pub fn adapter_ids(&self) -> Vec<u32> {
        self.adapters.keys().copied().collect()
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
        let adapters = self.adapter_rows(batch.adapter_ids);
        let mut lora = LoraScratch::default();
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
            self.add_deltas(&adapters, index, |l| l.qkv.as_ref(), &normed, &mut qkv, &mut lora)?;
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
            self.add_deltas(&adapters, index, |l| l.o.as_ref(), &attended, &mut projected, &mut lora)?;
            hidden.iter_mut().zip(&projected).for_each(|(h, p)| *h += p);
            rms_norm(hidden, &layer.post_norm, shape.rms_norm_eps, &mut normed)?;
            quantized.quantize(&normed, shape.hidden_size)?;
            matmul(self.isa, layer.gate_up.as_ref(), &quantized, &mut gate_up, &mut scratch)?;
            self.add_deltas(&adapters, index, |l| l.gate_up.as_ref(), &normed, &mut gate_up, &mut lora)?;
            let size = shape.intermediate_size;
            for (row, act) in gate_up.chunks_exact(2 * size).zip(activated.chunks_exact_mut(size)) {
                let (gate, up) = row.split_at(size);
                silu_mul(self.isa, gate, up, act);
            }
            quantized.quantize(&activated, size)?;
            matmul(self.isa, layer.down.as_ref(), &quantized, &mut projected, &mut scratch)?;
            self.add_deltas(&adapters, index, |l| l.down.as_ref(), &activated, &mut projected, &mut lora)?;
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

    /// The adapters of a step's requests (checked loaded), each with its rows, by id.
    fn adapter_rows(&self, adapter_ids: &[u32]) -> AdapterRows<'_> {
        let mut rows: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (request, &id) in adapter_ids.iter().enumerate() {
            if id != BASE_ADAPTER {
                rows.entry(id).or_default().push(request);
            }
        }
        rows.into_iter().map(|(id, rows)| (self.adapters[&id].as_slice(), rows)).collect()
    }

    /// Adds the delta of every adapter with a pair on this matmul (`pick`) to its rows of `out`.
    fn add_deltas(
        &self,
        adapters: &AdapterRows<'_>,
        layer: usize,
        pick: impl Fn(&LayerLora) -> Option<&LoraPair>,
        xs: &[f32],
        out: &mut [f32],
        scratch: &mut LoraScratch,
    ) -> Result<(), DecodeError> {
        let groups: Vec<LoraGroup<'_>> = adapters
            .iter()
            .filter_map(|(layers, rows)| pick(&layers[layer]).map(|pair| LoraGroup { pair, rows }))
            .collect();
        add_lora_deltas(self.isa, &groups, xs, out, scratch)
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
        if !batch.adapter_ids.is_empty() {
            check_len("adapter_ids", batch.adapter_ids.len(), num_requests)?;
        }
        if let Some(&id) =
            batch.adapter_ids.iter().find(|&&id| id != BASE_ADAPTER && !self.adapters.contains_key(&id))
        {
            return Err(DecodeError::UnknownAdapter(id));
        }
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
