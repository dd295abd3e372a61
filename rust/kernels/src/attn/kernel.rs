//! The decode attention loop, its checks and its split over threads.

use std::thread;

use crate::element::Element;
use crate::isa::Isa;

/// Below this many (key, query head) products a call stays on the calling thread: spawning
/// threads costs more than it saves.
const MIN_PRODUCTS_PER_THREAD: usize = 1 << 15;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttnError {
    #[error("attention shape: {0}")]
    Shape(String),
    #[error("request {request}: sequence length {seq_len} outside 1..={table_width}")]
    SeqLen { request: usize, seq_len: usize, table_width: usize },
    #[error("request {request}: slot {slot} outside the cache's {num_slots} rows")]
    Slot { request: usize, slot: u32, num_slots: usize },
}

/// Head counts and sizes; the cache holds `num_slots` rows of `num_kv_heads * head_dim`.
#[derive(Clone, Copy, Debug)]
pub struct DecodeShape {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub num_slots: usize,
}

/// For each request `b` with `seq_lens[b]` keys at slots `slot_table[b * table_width + s]`:
/// `out[b, h] = softmax(scale * q[b, h] . k[s]) @ v[s]` over its keys (the last `window` ones
/// when a window is set), query head `h` reading KV head `h / (num_heads / num_kv_heads)`.
/// `queries` and `out` are `[B, num_heads, head_dim]`, the caches `[num_slots, num_kv_heads,
/// head_dim]`, all row-major.
#[allow(clippy::too_many_arguments)]
pub fn decode_attention<T: Element>(
    shape: DecodeShape,
    queries: &[f32],
    k_cache: &[T],
    v_cache: &[T],
    slot_table: &[u32],
    seq_lens: &[u32],
    scale: f32,
    window: Option<usize>,
    out: &mut [f32],
    num_threads: usize,
) -> Result<(), AttnError> {
    let Some((job, num_products)) =
        Job::checked(shape, queries, k_cache, v_cache, slot_table, seq_lens, scale, window, out.len())?
    else {
        return Ok(());
    };
    let item_len = job.group * shape.head_dim;
    let num_items = out.len() / item_len;
    let num_threads = num_threads.clamp(1, num_items).min(num_products / MIN_PRODUCTS_PER_THREAD).max(1);
    if num_threads == 1 {
        job.items(0, out);
        return Ok(());
    }
    let items_per_thread = num_items.div_ceil(num_threads);
    thread::scope(|scope| {
        for (index, chunk) in out.chunks_mut(items_per_thread * item_len).enumerate() {
            let job = &job;
            scope.spawn(move || job.items(index * items_per_thread, chunk));
        }
    });
    Ok(())
}

/// `decode_attention` with the work handed out by the caller (its own thread pool): after the
/// checks, `split(out, item_len, run)` must call `run(first_item, chunk)` for disjoint chunks
/// of `out` that cover it, each a whole number of items of `item_len` values (an item is one
/// request's query heads that share one KV head), on any threads.
#[allow(clippy::too_many_arguments)]
pub fn decode_attention_split<T: Element>(
    shape: DecodeShape,
    queries: &[f32],
    k_cache: &[T],
    v_cache: &[T],
    slot_table: &[u32],
    seq_lens: &[u32],
    scale: f32,
    window: Option<usize>,
    out: &mut [f32],
    split: impl FnOnce(&mut [f32], usize, &(dyn Fn(usize, &mut [f32]) + Sync)),
) -> Result<(), AttnError> {
    let Some((job, _)) =
        Job::checked(shape, queries, k_cache, v_cache, slot_table, seq_lens, scale, window, out.len())?
    else {
        return Ok(());
    };
    let item_len = job.group * shape.head_dim;
    split(out, item_len, &|first, chunk| {
        assert!(chunk.len() % item_len == 0, "a split chunk holds whole items");
        job.items(first, chunk)
    });
    Ok(())
}

/// One checked call's inputs.
struct Job<'a, T> {
    shape: DecodeShape,
    group: usize,
    table_width: usize,
    queries: &'a [f32],
    k_cache: &'a [T],
    v_cache: &'a [T],
    slot_table: &'a [u32],
    seq_lens: &'a [u32],
    scale: f32,
    window: Option<usize>,
    /// AVX2 + FMA present and `head_dim % 8 == 0`: `simd::attend_item` runs each item.
    simd: bool,
}

impl<'a, T: Element> Job<'a, T> {
    /// Checks a call's arguments; None when there is nothing to do (no requests). Also returns
    /// the number of (key, query head) products, which sizes the thread split.
    #[allow(clippy::too_many_arguments)]
    fn checked(
        shape: DecodeShape,
        queries: &'a [f32],
        k_cache: &'a [T],
        v_cache: &'a [T],
        slot_table: &'a [u32],
        seq_lens: &'a [u32],
        scale: f32,
        window: Option<usize>,
        out_len: usize,
    ) -> Result<Option<(Self, usize)>, AttnError> {
        let DecodeShape { num_heads, num_kv_heads, head_dim, num_slots } = shape;
        if num_kv_heads == 0 || head_dim == 0 || num_heads % num_kv_heads != 0 {
            return Err(AttnError::Shape(format!("{num_heads} query heads over {num_kv_heads} KV heads")));
        }
        let batch = seq_lens.len();
        let row_len = num_kv_heads * head_dim;
        let expect = |what: &str, got: usize, want: usize| {
            if got == want {
                Ok(())
            } else {
                Err(AttnError::Shape(format!("{what} has {got} values, expected {want}")))
            }
        };
        expect("queries", queries.len(), batch * num_heads * head_dim)?;
        expect("out", out_len, batch * num_heads * head_dim)?;
        expect("k_cache", k_cache.len(), num_slots * row_len)?;
        expect("v_cache", v_cache.len(), num_slots * row_len)?;
        if batch == 0 {
            return Ok(None);
        }
        if slot_table.len() % batch != 0 {
            return Err(AttnError::Shape(format!("slot table of {} for {batch} requests", slot_table.len())));
        }
        let table_width = slot_table.len() / batch;
        let mut num_products = 0;
        for (request, &seq_len) in seq_lens.iter().enumerate() {
            let seq_len = seq_len as usize;
            if seq_len == 0 || seq_len > table_width {
                return Err(AttnError::SeqLen { request, seq_len, table_width });
            }
            let slots = &slot_table[request * table_width..request * table_width + seq_len];
            if let Some(&slot) = slots.iter().find(|&&slot| slot as usize >= num_slots) {
                return Err(AttnError::Slot { request, slot, num_slots });
            }
            num_products += seq_len * num_heads;
        }
        let group = num_heads / num_kv_heads;
        let simd = head_dim % 8 == 0 && Isa::detect().has_avx2();
        let job = Job {
            shape,
            group,
            table_width,
            queries,
            k_cache,
            v_cache,
            slot_table,
            seq_lens,
            scale,
            window,
            simd,
        };
        Ok(Some((job, num_products)))
    }
}

impl<T: Element> Job<'_, T> {
    /// Items `first..` (item = request * num_kv_heads + kv_head) into `out`, item by item.
    fn items(&self, first: usize, out: &mut [f32]) {
        let DecodeShape { num_kv_heads, head_dim, .. } = self.shape;
        let mut scores = Vec::new();
        for (offset, item_out) in out.chunks_mut(self.group * head_dim).enumerate() {
            let item = first + offset;
            self.item(item / num_kv_heads, item % num_kv_heads, item_out, &mut scores);
        }
    }

    fn item(&self, request: usize, kv_head: usize, out: &mut [f32], scores: &mut Vec<f32>) {
        let DecodeShape { num_heads, num_kv_heads, head_dim, .. } = self.shape;
        let seq_len = self.seq_lens[request] as usize;
        let first_key = self.window.map_or(0, |window| seq_len.saturating_sub(window));
        let slots =
            &self.slot_table[request * self.table_width + first_key..request * self.table_width + seq_len];
        let num_keys = slots.len();
        let row_start = |slot: u32| (slot as usize * num_kv_heads + kv_head) * head_dim;
        let query_base = (request * num_heads + kv_head * self.group) * head_dim;
        let queries = &self.queries[query_base..query_base + self.group * head_dim];
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            let (k_cache, v_cache) = (self.k_cache.as_ptr(), self.v_cache.as_ptr());
            // SAFETY: `simd` was set only with AVX2 + FMA and head_dim % 8 == 0; every slot was
            // range-checked, so each row holds head_dim elements inside the caches.
            unsafe {
                super::simd::attend_item(
                    queries,
                    head_dim,
                    self.scale,
                    slots,
                    |slot| k_cache.add(row_start(slot)),
                    |slot| v_cache.add(row_start(slot)),
                    scores,
                    out,
                );
            }
            return;
        }
        scores.clear();
        scores.resize(self.group * num_keys, 0.0);
        for (key, &slot) in slots.iter().enumerate() {
            let keys = &self.k_cache[row_start(slot)..row_start(slot) + head_dim];
            for (g, query) in queries.chunks_exact(head_dim).enumerate() {
                scores[g * num_keys + key] = T::dot(query, keys) * self.scale;
            }
        }
        let mut inverse_sums = Vec::with_capacity(self.group);
        for head_scores in scores.chunks_exact_mut(num_keys) {
            let max = head_scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for score in head_scores.iter_mut() {
                *score = (*score - max).exp();
                sum += *score;
            }
            inverse_sums.push(1.0 / sum);
        }
        out.fill(0.0);
        for (key, &slot) in slots.iter().enumerate() {
            let values = &self.v_cache[row_start(slot)..row_start(slot) + head_dim];
            for (g, head_out) in out.chunks_exact_mut(head_dim).enumerate() {
                T::axpy(head_out, scores[g * num_keys + key] * inverse_sums[g], values);
            }
        }
    }
}

/// Writes `rows` (`slots.len()` rows of `row_len` elements) into `cache` at row `slots[i]`:
/// a decode step's new keys or values, before it attends.
pub fn store_rows<T: Copy>(
    cache: &mut [T],
    row_len: usize,
    rows: &[T],
    slots: &[u32],
) -> Result<(), AttnError> {
    if row_len == 0 || cache.len() % row_len != 0 || rows.len() != slots.len() * row_len {
        return Err(AttnError::Shape(format!(
            "{} new values for {} slots of {row_len} (cache of {})",
            rows.len(),
            slots.len(),
            cache.len()
        )));
    }
    let num_slots = cache.len() / row_len;
    if let Some((request, &slot)) = slots.iter().enumerate().find(|(_, &slot)| slot as usize >= num_slots) {
        return Err(AttnError::Slot { request, slot, num_slots });
    }
    for (row, &slot) in rows.chunks_exact(row_len).zip(slots) {
        let start = slot as usize * row_len;
        cache[start..start + row_len].copy_from_slice(row);
    }
    Ok(())
}
