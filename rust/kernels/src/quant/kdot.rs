//! Integer dot products of K-quant rows (`kquant.rs`; the layouts in `crate::block`) against int8
//! activation rows. A super-block's eight block scales (and Q4_K / Q5_K's minimums) are decoded
//! once into one vector per super-block and shared by up to `MAX_GROUP` activation rows; the
//! bytes are read as stored.
//! Q4_K / Q5_K levels are unsigned (0..=31) and use the 4-bit kernels' unsigned x signed
//! products plus the minimum times the activations' block sums; Q6_K levels are signed
//! (-32..=31) and use the 8-bit kernels' sign trick, with its two scales per block (one per 16
//! weights) laid over the product's eight lanes (lanes 0-3 sum weights 0-15, lanes 4-7 16-31).

use super::act::QuantizedRow;
/// Activation rows sharing one pass over a super-block (the K-quant kernels keep more state per
/// row than the 4- and 5-bit ones, so their groups stay at four).
const MAX_GROUP: usize = 4;
use crate::block::{unpack, KQuant, Unpacked, BLOCK_LEN, SUPER_BLOCKS, SUPER_LEN};
use crate::isa::Isa;

/// Runs `$call` with the const `$n` bound to the group's size (1..=4).
macro_rules! sized {
    ($len:expr, |$n:ident| $call:expr) => {
        match $len {
            1 => {
                const $n: usize = 1;
                $call
            }
            2 => {
                const $n: usize = 2;
                $call
            }
            3 => {
                const $n: usize = 3;
                $call
            }
            _ => {
                const $n: usize = 4;
                $call
            }
        }
    };
}

/// `out[i] = w . xs[i]` for one K-quant row `w` (its super-blocks' bytes).
pub fn kquant_dots(isa: Isa, kind: KQuant, w: &[u8], xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    let num_supers = w.len() / kind.super_bytes();
    assert!(num_supers * kind.super_bytes() == w.len() && out.len() == xs.len());
    for x in xs {
        assert!(x.levels.len() == num_supers * SUPER_LEN);
        assert!(x.scales.len() == num_supers * SUPER_BLOCKS && x.scaled_sums.len() == x.scales.len());
    }
    for (xs, out) in xs.chunks(MAX_GROUP).zip(out.chunks_mut(MAX_GROUP)) {
        // SAFETY: the lengths were checked above; the instruction set was detected.
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => unsafe {
                sized!(xs.len(), |N| match kind {
                    KQuant::Q4K => simd::k4_vnni::<N, false>(w, xs, out),
                    KQuant::Q5K => simd::k4_vnni::<N, true>(w, xs, out),
                    KQuant::Q6K => simd::q6k_vnni::<N>(w, xs, out),
                })
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe {
                sized!(xs.len(), |N| match kind {
                    KQuant::Q4K => simd::k4_avx2::<N, false>(w, xs, out),
                    KQuant::Q5K => simd::k4_avx2::<N, true>(w, xs, out),
                    KQuant::Q6K => simd::q6k_avx2::<N>(w, xs, out),
                })
            },
            _ => portable(kind, w, xs, out),
        }
    }
}

fn portable(kind: KQuant, w: &[u8], xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    out.fill(0.0);
    let mut unpacked = Unpacked::default();
    for (s, block) in w.chunks_exact(kind.super_bytes()).enumerate() {
        unpack(kind, block, &mut unpacked);
        for (x, total) in xs.iter().zip(out.iter_mut()) {
            for b in 0..SUPER_BLOCKS {
                let slot = s * SUPER_BLOCKS + b;
                let mut halves = [0i32; 2];
                for j in 0..BLOCK_LEN {
                    let level = i32::from(unpacked.levels[b * BLOCK_LEN + j]);
                    halves[j / 16] += level * i32::from(x.levels[slot * BLOCK_LEN + j]);
                }
                let sums =
                    halves[0] as f32 * unpacked.scales[2 * b] + halves[1] as f32 * unpacked.scales[2 * b + 1];
                *total += sums * x.scales[slot] + unpacked.mins[b] * x.scaled_sums[slot];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use crate::block::{BLOCK_LEN, SUPER_BLOCKS};
    use crate::quant::QuantizedRow;
    use crate::simd::{horizontal_sum, products_avx2, products_vnni};

    /// Two consecutive fp16 values (Q4_K's `d`, `dmin`) as f32 lanes 0 and 1.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn read_f16_pair(ptr: *const u8) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128(ptr.cast::<i32>().read_unaligned()))
    }

    /// One fp16 value as f32 lane 0 (reads two bytes only: Q6_K's `d` ends its super-block).
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn read_f16(ptr: *const u8) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(ptr.cast::<u16>().read_unaligned())))
    }

    /// Eight bytes (`low` then `high`, little-endian) as eight f32.
    #[target_feature(enable = "avx2")]
    unsafe fn widen_bytes(low: u32, high: u32) -> __m256 {
        let bytes = _mm_cvtsi64_si128((u64::from(high) << 32 | u64::from(low)) as i64);
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
    }

    /// Q4_K / Q5_K's eight 6-bit scales and minimums (as `k4_scales_mins` reads them) as eight
    /// f32 each, from the 12 packed bytes read as three little-endian words.
    #[target_feature(enable = "avx2")]
    unsafe fn k4_scales_mins_f32(packed: *const u8) -> (__m256, __m256) {
        let word = |i: usize| packed.add(4 * i).cast::<u32>().read_unaligned();
        let (low_scales, low_mins, nibbles) = (word(0), word(1), word(2));
        // Blocks 0-3: the low six bits; blocks 4-7: a nibble from word 2, and the top two bits of
        // words 0 / 1 as bits 4-5 ((b >> 6) << 4 == (b >> 2) & 0x30 byte by byte).
        let scales_0_3 = low_scales & 0x3f3f_3f3f;
        let mins_0_3 = low_mins & 0x3f3f_3f3f;
        let scales_4_7 = (nibbles & 0x0f0f_0f0f) | ((low_scales >> 2) & 0x3030_3030);
        let mins_4_7 = ((nibbles >> 4) & 0x0f0f_0f0f) | ((low_mins >> 2) & 0x3030_3030);
        (widen_bytes(scales_0_3, scales_4_7), widen_bytes(mins_0_3, mins_4_7))
    }

    /// Eight signed bytes as eight f32.
    #[target_feature(enable = "avx2")]
    unsafe fn widen_i8(ptr: *const u8) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(ptr.cast())))
    }

    /// Q4_K (`FIVE` false) and Q5_K (`FIVE` true).
    macro_rules! k4_kernel {
        ($name:ident, $features:literal, $products:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const N: usize, const FIVE: bool>(
                w: &[u8],
                xs: &[QuantizedRow<'_>],
                out: &mut [f32],
            ) {
                let (super_bytes, nibbles_at) = if FIVE { (176, 48) } else { (144, 16) };
                let num_supers = w.len() / super_bytes;
                let low_mask = _mm256_set1_epi8(0x0F);
                let one = _mm256_set1_epi8(1);
                let mut even = [_mm256_setzero_ps(); N];
                let mut odd = [_mm256_setzero_ps(); N];
                let mut minimums = [_mm256_setzero_ps(); N];
                for s in 0..num_supers {
                    let block = w.as_ptr().add(s * super_bytes);
                    let (scales, mins) = k4_scales_mins_f32(block.add(4));
                    let d_dmin = read_f16_pair(block);
                    let d = _mm256_broadcastss_ps(d_dmin);
                    let minus_dmin =
                        _mm256_broadcastss_ps(_mm_sub_ps(_mm_setzero_ps(), _mm_movehdup_ps(d_dmin)));
                    let w_scales = _mm256_mul_ps(d, scales);
                    let w_mins = _mm256_mul_ps(minus_dmin, mins);
                    let first = s * SUPER_BLOCKS;
                    let mut block_scales = [_mm256_setzero_ps(); N];
                    for i in 0..N {
                        let x = xs.get_unchecked(i);
                        block_scales[i] =
                            _mm256_mul_ps(w_scales, _mm256_loadu_ps(x.scales.as_ptr().add(first)));
                        let sums = _mm256_loadu_ps(x.scaled_sums.as_ptr().add(first));
                        minimums[i] = _mm256_fmadd_ps(w_mins, sums, minimums[i]);
                    }
                    let bits =
                        if FIVE { _mm256_loadu_si256(block.add(16).cast()) } else { _mm256_setzero_si256() };
                    for c in 0..4 {
                        let packed = _mm256_loadu_si256(block.add(nibbles_at + 32 * c).cast());
                        let mut low = _mm256_and_si256(packed, low_mask);
                        let mut high = _mm256_and_si256(_mm256_srli_epi16::<4>(packed), low_mask);
                        if FIVE {
                            // Bits 2c and 2c + 1 of each byte to bit 0 (16-bit shifts: each byte's
                            // own bit lands in its bit 0 for shifts below 8), then to bit 4.
                            let shifted = _mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * c as i32));
                            let low_bit = _mm256_and_si256(shifted, one);
                            let high_bit = _mm256_and_si256(_mm256_srli_epi16::<1>(shifted), one);
                            low = _mm256_or_si256(low, _mm256_slli_epi16::<4>(low_bit));
                            high = _mm256_or_si256(high, _mm256_slli_epi16::<4>(high_bit));
                        }
                        let even_lane = _mm256_set1_epi32(2 * c as i32);
                        let odd_lane = _mm256_set1_epi32(2 * c as i32 + 1);
                        for i in 0..N {
                            let x = xs.get_unchecked(i);
                            let acts = x.levels.as_ptr().add((first + 2 * c) * BLOCK_LEN);
                            let sums = _mm256_cvtepi32_ps($products(low, _mm256_loadu_si256(acts.cast())));
                            let scale = _mm256_permutevar8x32_ps(block_scales[i], even_lane);
                            even[i] = _mm256_fmadd_ps(sums, scale, even[i]);
                            let acts = acts.add(BLOCK_LEN);
                            let sums = _mm256_cvtepi32_ps($products(high, _mm256_loadu_si256(acts.cast())));
                            let scale = _mm256_permutevar8x32_ps(block_scales[i], odd_lane);
                            odd[i] = _mm256_fmadd_ps(sums, scale, odd[i]);
                        }
                    }
                }
                for i in 0..N {
                    let total = _mm256_add_ps(_mm256_add_ps(even[i], odd[i]), minimums[i]);
                    *out.get_unchecked_mut(i) = horizontal_sum(total);
                }
            }
        };
    }

    macro_rules! q6k_kernel {
        ($name:ident, $features:literal, $products:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const N: usize>(w: &[u8], xs: &[QuantizedRow<'_>], out: &mut [f32]) {
                let num_supers = w.len() / 210;
                let low_mask = _mm256_set1_epi8(0x0F);
                let three = _mm256_set1_epi8(3);
                let offset = _mm256_set1_epi8(32);
                let mut even = [_mm256_setzero_ps(); N];
                let mut odd = [_mm256_setzero_ps(); N];
                for s in 0..num_supers {
                    let block = w.as_ptr().add(s * 210);
                    let d = _mm256_broadcastss_ps(read_f16(block.add(208)));
                    // Blocks 0-3's scales (two each), then blocks 4-7's.
                    let sub_scales = [
                        _mm256_mul_ps(d, widen_i8(block.add(192))),
                        _mm256_mul_ps(d, widen_i8(block.add(200))),
                    ];
                    for half in 0..2 {
                        let low_bytes = [
                            _mm256_loadu_si256(block.add(64 * half).cast()),
                            _mm256_loadu_si256(block.add(64 * half + 32).cast()),
                        ];
                        let high_bytes = _mm256_loadu_si256(block.add(128 + 32 * half).cast());
                        for m in 0..4 {
                            let nibbles = if m < 2 {
                                _mm256_and_si256(low_bytes[m], low_mask)
                            } else {
                                _mm256_and_si256(_mm256_srli_epi16::<4>(low_bytes[m - 2]), low_mask)
                            };
                            let top = _mm256_and_si256(
                                _mm256_srl_epi16(high_bytes, _mm_cvtsi32_si128(2 * m as i32)),
                                three,
                            );
                            let signed = _mm256_sub_epi8(
                                _mm256_or_si256(nibbles, _mm256_slli_epi16::<4>(top)),
                                offset,
                            );
                            let magnitude = _mm256_sign_epi8(signed, signed);
                            let (a, b) = (2 * m as i32, 2 * m as i32 + 1);
                            let lanes = _mm256_setr_epi32(a, a, a, a, b, b, b, b);
                            let lane_scales = _mm256_permutevar8x32_ps(sub_scales[half], lanes);
                            let slot = s * SUPER_BLOCKS + 4 * half + m;
                            for i in 0..N {
                                let x = xs.get_unchecked(i);
                                let acts = _mm256_loadu_si256(x.levels.as_ptr().add(slot * BLOCK_LEN).cast());
                                let sums =
                                    _mm256_cvtepi32_ps($products(magnitude, _mm256_sign_epi8(acts, signed)));
                                let scale =
                                    _mm256_mul_ps(lane_scales, _mm256_set1_ps(*x.scales.get_unchecked(slot)));
                                if m % 2 == 0 {
                                    even[i] = _mm256_fmadd_ps(sums, scale, even[i]);
                                } else {
                                    odd[i] = _mm256_fmadd_ps(sums, scale, odd[i]);
                                }
                            }
                        }
                    }
                }
                for i in 0..N {
                    *out.get_unchecked_mut(i) = horizontal_sum(_mm256_add_ps(even[i], odd[i]));
                }
            }
        };
    }

    k4_kernel!(k4_vnni, "avx2,fma,f16c,avx512vnni,avx512vl", products_vnni);
    k4_kernel!(k4_avx2, "avx2,fma,f16c", products_avx2);
    q6k_kernel!(q6k_vnni, "avx2,fma,f16c,avx512vnni,avx512vl", products_vnni);
    q6k_kernel!(q6k_avx2, "avx2,fma,f16c", products_avx2);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::quant::{KQuantMatrix, QuantizedRows};

    /// A random matrix of valid super-blocks: random bytes, then finite fp16 super-scales.
    fn random_matrix(kind: KQuant, rows: usize, cols: usize, seed: u64) -> KQuantMatrix {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u8
        };
        let mut bytes: Vec<u8> = (0..rows * cols / SUPER_LEN * kind.super_bytes()).map(|_| next()).collect();
        for (index, block) in bytes.chunks_exact_mut(kind.super_bytes()).enumerate() {
            let scale = half::f16::from_f32(0.001 + (index % 7) as f32 * 0.0005).to_bits().to_le_bytes();
            let min = half::f16::from_f32(0.002 + (index % 5) as f32 * 0.001).to_bits().to_le_bytes();
            match kind {
                KQuant::Q6K => block[208..210].copy_from_slice(&scale),
                _ => {
                    block[0..2].copy_from_slice(&scale);
                    block[2..4].copy_from_slice(&min);
                }
            }
        }
        KQuantMatrix::new(kind, bytes, rows, cols).unwrap()
    }

    fn check(kind: KQuant, rows: usize, cols: usize, num_inputs: usize, seed: u64) {
        let matrix = random_matrix(kind, rows, cols, seed);
        let values: Vec<f32> =
            (0..num_inputs * cols).map(|i| ((i as f32) * 0.37 + seed as f32).sin() * 3.0).collect();
        let mut acts = QuantizedRows::new();
        acts.quantize(&values, cols).unwrap();
        let xs: Vec<_> = (0..num_inputs).map(|i| acts.row(i)).collect();
        for r in 0..rows {
            let mut weight = vec![0.0; cols];
            matrix.dequantize_row(r, &mut weight);
            for isa in Isa::available() {
                let mut out = vec![0.0; num_inputs];
                kquant_dots(isa, kind, matrix.row(r), &xs, &mut out);
                for (i, &got) in out.iter().enumerate() {
                    let x = acts.dequantized_row(i);
                    let want: f64 = weight.iter().zip(&x).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                    let magnitude: f64 = weight.iter().zip(&x).map(|(&a, &b)| f64::from((a * b).abs())).sum();
                    assert!(
                        (f64::from(got) - want).abs() <= 1e-5 * magnitude.max(1e-3),
                        "{kind:?} {isa:?} row {r} input {i}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_kind_and_group_size_agrees_with_the_dequantized_reference() {
        for kind in [KQuant::Q4K, KQuant::Q5K, KQuant::Q6K] {
            for num_inputs in 1..=9 {
                check(kind, 3, 512, num_inputs, num_inputs as u64);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn random_blocks_agree(kind in 0usize..3, supers in 1usize..5, num_inputs in 1usize..6, seed in any::<u64>()) {
            let kind = [KQuant::Q4K, KQuant::Q5K, KQuant::Q6K][kind];
            check(kind, 2, supers * SUPER_LEN, num_inputs, seed);
        }
    }
}
