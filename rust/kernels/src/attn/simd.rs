//! The AVX2 + FMA path of one (request, KV head) item: the same two passes as the portable loop
//! in `kernel.rs`, with every inner loop vectorized and inlined (no per-key calls or feature
//! checks), two dot-product accumulators, and a vectorized `exp` for the softmax.

use std::arch::x86_64::*;

use crate::element::Element;
use crate::simd::{exp_non_positive, horizontal_sum};

/// `out[g] = softmax(scale * q[g] . k[s]) @ v[s]` over the item's `slots`; `k_rows(slot)` /
/// `v_rows(slot)` point at a slot's head row. `head_dim % 8 == 0`.
///
/// # Safety
/// AVX2 and FMA must be present; every slot's rows must hold `head_dim` elements.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn attend_item<T: Element>(
    queries: &[f32],
    head_dim: usize,
    scale: f32,
    slots: &[u32],
    k_rows: impl Fn(u32) -> *const T,
    v_rows: impl Fn(u32) -> *const T,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let group = queries.len() / head_dim;
    let num_keys = slots.len();
    scores.clear();
    scores.resize(group * num_keys, 0.0);
    // Scores eight keys at a time per query head: eight accumulators, reduced together into
    // one vector and stored once (a store per key would sit in the way of the next rows' loads).
    let whole = num_keys / 8 * 8;
    for g in 0..group {
        let query = queries.as_ptr().add(g * head_dim);
        let head_scores = scores.as_mut_ptr().add(g * num_keys);
        let mut key = 0;
        while key < whole {
            let rows: [*const T; 8] = std::array::from_fn(|j| k_rows(*slots.get_unchecked(key + j)));
            let mut acc = [_mm256_setzero_ps(); 8];
            let mut i = 0;
            while i < head_dim {
                let q = _mm256_loadu_ps(query.add(i));
                for j in 0..8 {
                    acc[j] = _mm256_fmadd_ps(q, T::load8(rows[j].add(i)), acc[j]);
                }
                i += 8;
            }
            let sums = horizontal_sums8(acc);
            _mm256_storeu_ps(head_scores.add(key), _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
            key += 8;
        }
        for (key, &slot) in slots.iter().enumerate().skip(whole) {
            *head_scores.add(key) = dot(query, k_rows(slot), head_dim) * scale;
        }
    }
    let inverse_sums: Vec<f32> = scores
        .chunks_exact_mut(num_keys)
        .map(|head_scores| 1.0 / exp_shifted_in_place(head_scores))
        .collect();
    // Weighted values with the accumulators in registers: 32 output lanes of one query head per
    // pass over the keys. (Accumulating every key into `out` in memory chains each key's
    // stores to the next one's loads, and a value row whose address matches a pending store's
    // low 12 bits then stalls: 2x slower on page-aligned caches.)
    for (g, inverse_sum) in inverse_sums.iter().enumerate() {
        let weights = scores.as_ptr().add(g * num_keys);
        let mut lane = 0;
        while lane < head_dim {
            let width = (head_dim - lane).min(32) / 8;
            let mut acc = [_mm256_setzero_ps(); 4];
            for (key, &slot) in slots.iter().enumerate() {
                let weight = _mm256_set1_ps(*weights.add(key) * inverse_sum);
                let row = v_rows(slot).add(lane);
                for (j, acc) in acc.iter_mut().enumerate().take(width) {
                    *acc = _mm256_fmadd_ps(weight, T::load8(row.add(8 * j)), *acc);
                }
            }
            for (j, acc) in acc.iter().enumerate().take(width) {
                _mm256_storeu_ps(out.as_mut_ptr().add(g * head_dim + lane + 8 * j), *acc);
            }
            lane += 32;
        }
    }
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot<T: Element>(query: *const f32, row: *const T, len: usize) -> f32 {
    // Two accumulators: a single chain of FMAs waits on each one's latency.
    let (mut even, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 16 <= len {
        even = _mm256_fmadd_ps(_mm256_loadu_ps(query.add(i)), T::load8(row.add(i)), even);
        odd = _mm256_fmadd_ps(_mm256_loadu_ps(query.add(i + 8)), T::load8(row.add(i + 8)), odd);
        i += 16;
    }
    if i < len {
        even = _mm256_fmadd_ps(_mm256_loadu_ps(query.add(i)), T::load8(row.add(i)), even);
    }
    horizontal_sum(_mm256_add_ps(even, odd))
}

/// The eight lane sums of eight vectors, as one vector (three rounds of pairwise adds).
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn horizontal_sums8(v: [__m256; 8]) -> __m256 {
    let pairs = [
        _mm256_hadd_ps(v[0], v[1]),
        _mm256_hadd_ps(v[2], v[3]),
        _mm256_hadd_ps(v[4], v[5]),
        _mm256_hadd_ps(v[6], v[7]),
    ];
    // Each 128-bit half of `quads[0]` holds partial sums of v0..v3, of `quads[1]` of v4..v7.
    let quads = [_mm256_hadd_ps(pairs[0], pairs[1]), _mm256_hadd_ps(pairs[2], pairs[3])];
    let low = _mm256_permute2f128_ps::<0x20>(quads[0], quads[1]);
    let high = _mm256_permute2f128_ps::<0x31>(quads[0], quads[1]);
    _mm256_add_ps(low, high)
}

/// `scores[i] = exp(scores[i] - max)`; returns their sum (at least 1: the max maps to 1).
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_in_place(scores: &mut [f32]) -> f32 {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let shift = _mm256_set1_ps(max);
    let mut total = _mm256_setzero_ps();
    let mut chunks = scores.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let e = exp_non_positive(_mm256_sub_ps(_mm256_loadu_ps(chunk.as_ptr()), shift));
        _mm256_storeu_ps(chunk.as_mut_ptr(), e);
        total = _mm256_add_ps(total, e);
    }
    let mut sum = horizontal_sum(total);
    for score in chunks.into_remainder() {
        *score = (*score - max).exp();
        sum += *score;
    }
    sum
}
