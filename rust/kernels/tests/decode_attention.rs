use proptest::prelude::*;
use sglr_kernels::attn::{decode_attention, decode_attention_split, store_rows, AttnError, DecodeShape};
use sglr_kernels::element::{Bf16, Element};

/// Softmax attention in f64 over the same inputs.
#[allow(clippy::too_many_arguments)]
fn reference(
    shape: DecodeShape,
    queries: &[f32],
    k: &[f32],
    v: &[f32],
    table: &[u32],
    seq_lens: &[u32],
    scale: f32,
    window: Option<usize>,
) -> Vec<f64> {
    let DecodeShape { num_heads, num_kv_heads, head_dim, .. } = shape;
    let width = table.len() / seq_lens.len();
    let group = num_heads / num_kv_heads;
    let mut out = vec![0.0; queries.len()];
    for (b, &len) in seq_lens.iter().enumerate() {
        let len = len as usize;
        let first = window.map_or(0, |w| len.saturating_sub(w));
        for h in 0..num_heads {
            let kvh = h / group;
            let q = &queries[(b * num_heads + h) * head_dim..][..head_dim];
            let rows: Vec<usize> = (first..len)
                .map(|s| (table[b * width + s] as usize * num_kv_heads + kvh) * head_dim)
                .collect();
            let scores: Vec<f64> = rows
                .iter()
                .map(|&r| {
                    (0..head_dim).map(|d| f64::from(q[d]) * f64::from(k[r + d])).sum::<f64>()
                        * f64::from(scale)
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..head_dim {
                out[(b * num_heads + h) * head_dim + d] =
                    rows.iter().zip(&weights).map(|(&r, w)| w / total * f64::from(v[r + d])).sum();
            }
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Case {
    shape: DecodeShape,
    queries: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    table: Vec<u32>,
    seq_lens: Vec<u32>,
    window: Option<usize>,
    threads: usize,
}

fn case() -> impl Strategy<Value = Case> {
    // head_dim a multiple of 8 takes the SIMD path where the CPU has AVX2; + 4 the portable one.
    // Queries up to 40 in size make peaked softmaxes (scores far below the max: exp's range).
    // Up to 80 wide: the value pass tiles 32 lanes at a time (whole and partial tiles).
    let sizes = (1usize..4, 1usize..4, 1usize..4, 1usize..11, prop_oneof![Just(0usize), Just(4)]);
    (sizes, 1usize..40, 0usize..3, 1usize..4, prop_oneof![Just(1.0f32), Just(40.0)]).prop_flat_map(
        |((batch, num_kv_heads, group, dim_octets, dim_extra), width, window_kind, threads, query_size)| {
            let head_dim = dim_octets * 8 + dim_extra;
            let num_heads = num_kv_heads * group;
            let num_slots = width * batch + 3;
            let row = num_kv_heads * head_dim;
            (
                proptest::collection::vec(-query_size..query_size, batch * num_heads * head_dim),
                proptest::collection::vec(-1.0f32..1.0, num_slots * row),
                proptest::collection::vec(-1.0f32..1.0, num_slots * row),
                proptest::collection::vec(0u32..num_slots as u32, batch * width),
                proptest::collection::vec(1u32..=width as u32, batch),
                1usize..8,
            )
                .prop_map(move |(queries, k, v, table, seq_lens, w)| Case {
                    shape: DecodeShape { num_heads, num_kv_heads, head_dim, num_slots },
                    queries,
                    k,
                    v,
                    table,
                    seq_lens,
                    window: [None, Some(w), Some(1)][window_kind],
                    threads,
                })
        },
    )
}

fn run<T: Element>(case: &Case, k: &[T], v: &[T]) -> Vec<f32> {
    let mut out = vec![f32::NAN; case.queries.len()];
    decode_attention(
        case.shape,
        &case.queries,
        k,
        v,
        &case.table,
        &case.seq_lens,
        0.3,
        case.window,
        &mut out,
        case.threads,
    )
    .unwrap();
    out
}

proptest! {
    #[test]
    fn f32_cache_matches_reference(case in case()) {
        let out = run(&case, &case.k, &case.v);
        let want = reference(case.shape, &case.queries, &case.k, &case.v, &case.table, &case.seq_lens, 0.3, case.window);
        for (got, want) in out.iter().zip(&want) {
            prop_assert!((f64::from(*got) - want).abs() < 1e-4, "{got} vs {want}");
        }
    }

    #[test]
    fn a_caller_split_gives_the_same_values(case in case(), items_per_chunk in 1usize..4) {
        let whole = run(&case, &case.k, &case.v);
        let mut out = vec![0.0; case.queries.len()];
        decode_attention_split(
            case.shape, &case.queries, &case.k, &case.v, &case.table, &case.seq_lens, 0.3, case.window, &mut out,
            |out, item_len, body| {
                // Chunks in reverse order, as another pool's threads may take them.
                let chunks: Vec<(usize, &mut [f32])> = out.chunks_mut(items_per_chunk * item_len).enumerate().collect();
                for (index, chunk) in chunks.into_iter().rev() {
                    body(index * items_per_chunk, chunk);
                }
            },
        ).unwrap();
        prop_assert_eq!(out, whole);
    }

    #[test]
    fn bf16_cache_matches_reference_over_its_rounded_values(case in case()) {
        let round = |xs: &[f32]| xs.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<_>>();
        let (k16, v16) = (round(&case.k), round(&case.v));
        let widen = |xs: &[Bf16]| xs.iter().map(|b| f32::from_bits(u32::from(b.0) << 16)).collect::<Vec<_>>();
        let out = run(&case, &k16, &v16);
        let want = reference(case.shape, &case.queries, &widen(&k16), &widen(&v16), &case.table, &case.seq_lens, 0.3, case.window);
        for (got, want) in out.iter().zip(&want) {
            prop_assert!((f64::from(*got) - want).abs() < 1e-4, "{got} vs {want}");
        }
    }
}

#[test]
fn bf16_rounds_to_nearest_even() {
    assert_eq!(Bf16::from_f32(1.0).0, 0x3f80);
    assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8000)).0, 0x3f80); // tie -> even
    assert_eq!(Bf16::from_f32(f32::from_bits(0x3f81_8000)).0, 0x3f82); // tie -> even (up)
    assert_eq!(Bf16::from_f32(f32::from_bits(0x3f80_8001)).0, 0x3f81);
    assert!(f32::from_bits(u32::from(Bf16::from_f32(f32::NAN).0) << 16).is_nan());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let shape = DecodeShape { num_heads: 2, num_kv_heads: 1, head_dim: 8, num_slots: 4 };
    let cache = vec![0.0f32; 4 * 8];
    let queries = vec![0.0f32; 16];
    let mut out = vec![0.0f32; 16];
    let call = |table: &[u32], lens: &[u32], out: &mut [f32]| {
        decode_attention(shape, &queries, &cache, &cache, table, lens, 1.0, None, out, 1)
    };
    assert_eq!(call(&[0, 9], &[2], &mut out), Err(AttnError::Slot { request: 0, slot: 9, num_slots: 4 }));
    assert_eq!(
        call(&[0, 1], &[3], &mut out),
        Err(AttnError::SeqLen { request: 0, seq_len: 3, table_width: 2 })
    );
    assert_eq!(
        call(&[0, 1], &[0], &mut out),
        Err(AttnError::SeqLen { request: 0, seq_len: 0, table_width: 2 })
    );
    assert!(matches!(call(&[0, 1], &[1], &mut out[..8]), Err(AttnError::Shape(_))));
    let odd = DecodeShape { num_heads: 3, num_kv_heads: 2, ..shape };
    assert!(matches!(
        decode_attention(odd, &queries, &cache, &cache, &[0], &[1], 1.0, None, &mut out, 1),
        Err(AttnError::Shape(_))
    ));
}

#[test]
fn threads_split_long_batches_without_changing_results() {
    // Large enough (4 x 8 x 2,048 products per head group) for the call to use several threads.
    let shape = DecodeShape { num_heads: 8, num_kv_heads: 2, head_dim: 16, num_slots: 9000 };
    let seq_lens = [2048u32, 1500, 7, 2048];
    let table: Vec<u32> = (0..4 * 2048).map(|i| (i * 7 % 9000) as u32).collect();
    let cache: Vec<f32> = (0..9000 * 32).map(|i| ((i * 31 % 97) as f32 / 97.0) - 0.5).collect();
    let queries: Vec<f32> = (0..4 * 8 * 16).map(|i| ((i * 13 % 29) as f32 / 29.0) - 0.5).collect();
    let mut one = vec![0.0; queries.len()];
    decode_attention(shape, &queries, &cache, &cache, &table, &seq_lens, 0.25, None, &mut one, 1).unwrap();
    for threads in [2, 3, 16] {
        let mut many = vec![0.0; queries.len()];
        decode_attention(shape, &queries, &cache, &cache, &table, &seq_lens, 0.25, None, &mut many, threads)
            .unwrap();
        assert_eq!(one, many, "{threads} threads");
    }
}

#[test]
fn store_rows_writes_each_row_at_its_slot_and_checks_bounds() {
    let mut cache = vec![0.0f32; 5 * 4];
    let rows: Vec<f32> = (1..=8).map(|x| x as f32).collect();
    store_rows(&mut cache, 4, &rows, &[3, 0]).unwrap();
    assert_eq!(&cache[12..16], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(&cache[0..4], &[5.0, 6.0, 7.0, 8.0]);
    assert!(cache[4..12].iter().chain(&cache[16..]).all(|&x| x == 0.0));
    assert_eq!(
        store_rows(&mut cache, 4, &rows, &[1, 5]),
        Err(AttnError::Slot { request: 1, slot: 5, num_slots: 5 })
    );
    assert!(matches!(store_rows(&mut cache, 4, &rows[..7], &[1, 2]), Err(AttnError::Shape(_))));
}
