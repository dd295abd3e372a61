//! Integer dot products of weight rows against int8 activation rows: per block of 32 an exact
//! integer sum, scaled once in f32. x86-64 has two vector versions picked at run time (wheels
//! target a generic x86-64): AVX-512 VNNI's `vpdpbusd` (32 byte products in one instruction)
//! and AVX2's `vpmaddubsw` + `vpmaddwd`; elsewhere a portable loop. A weight row's blocks are
//! unpacked once for up to `MAX_GROUP` activation rows, which is what makes small batches
//! cheaper per row than batch 1.

use super::act::QuantizedRow;
use crate::block::{block_levels, padded_blocks, Q4Row, Q8Row, BLOCK_BYTES, BLOCK_LEN};
use crate::isa::Isa;

/// Calls the const-generic kernel `$module::$kernel::<N>` for the group's size.
macro_rules! by_group {
    ($module:ident :: $kernel:ident, $w:expr, $xs:expr, $out:expr) => {
        match $xs.len() {
            1 => $module::$kernel::<1>($w, $xs, $out),
            2 => $module::$kernel::<2>($w, $xs, $out),
            3 => $module::$kernel::<3>($w, $xs, $out),
            4 => $module::$kernel::<4>($w, $xs, $out),
            5 => $module::$kernel::<5>($w, $xs, $out),
            6 => $module::$kernel::<6>($w, $xs, $out),
            7 => $module::$kernel::<7>($w, $xs, $out),
            _ => $module::$kernel::<8>($w, $xs, $out),
        }
    };
}

/// Runs `xs` in groups of up to `MAX_GROUP` rows through the kernel of `isa` (the portable one
/// where the vector ones are missing). Unsafe: the caller checked every length, and `isa` came
/// from `Isa::detect` / `Isa::available`.
macro_rules! by_isa {
    ($isa:expr, $w:expr, $xs:expr, $out:expr, $vm:ident :: $vnni:ident, $am:ident :: $avx2:ident, $portable:path) => {
        for (xs, out) in $xs.chunks(MAX_GROUP).zip($out.chunks_mut(MAX_GROUP)) {
            match $isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512Vnni => by_group!($vm::$vnni, $w, xs, out),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => by_group!($am::$avx2, $w, xs, out),
                _ => $portable($w, xs, out),
            }
        }
    };
}

/// Activation rows sharing one pass over a weight row.
pub const MAX_GROUP: usize = 8;

/// `out[i] = w . xs[i]` for a 4- or 5-bit weight row; every row has `w`'s length.
pub fn q4_dots(isa: Isa, w: Q4Row<'_>, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    let num_blocks = w.nibbles.len() / BLOCK_BYTES;
    let stride = padded_blocks(num_blocks);
    assert!(w.scales.len() == stride && w.mins.len() == stride && out.len() == xs.len());
    assert!(w.fifth_bits.is_empty() || w.fifth_bits.len() == num_blocks);
    for x in xs {
        assert!(x.levels.len() == num_blocks * BLOCK_LEN && x.scales.len() == stride);
        assert!(x.scaled_sums.len() == stride);
    }
    // SAFETY: the lengths were checked above; the kernels' instruction sets were detected.
    unsafe {
        if w.fifth_bits.is_empty() {
            by_isa!(isa, w, xs, out, simd::q4_vnni, simd::q4_avx2, q4_portable)
        } else {
            by_isa!(isa, w, xs, out, simd::q5_vnni, simd::q5_avx2, q4_portable)
        }
    }
}

/// `out[i] = w . xs[i]` for an 8-bit weight row.
pub fn q8_dots(isa: Isa, w: Q8Row<'_>, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    let num_blocks = w.scales.len();
    assert!(w.levels.len() == num_blocks * BLOCK_LEN && out.len() == xs.len());
    for x in xs {
        assert!(x.levels.len() == num_blocks * BLOCK_LEN && x.scales.len() >= num_blocks);
    }
    // SAFETY: as in `q4_dots`.
    unsafe { by_isa!(isa, w, xs, out, simd::q8_vnni, simd::q8_avx2, q8_portable) }
}

fn q4_portable(w: Q4Row<'_>, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    let widen = |bits: u16| half::f16::from_bits(bits).to_f32();
    for (x, out) in xs.iter().zip(out.iter_mut()) {
        let mut total = 0.0f32;
        for b in 0..w.nibbles.len() / BLOCK_BYTES {
            let acts = &x.levels[b * BLOCK_LEN..(b + 1) * BLOCK_LEN];
            let sum: i32 =
                block_levels(w, b).iter().zip(acts).map(|(&q, &a)| i32::from(q) * i32::from(a)).sum();
            total += sum as f32 * (widen(w.scales[b]) * x.scales[b]) + widen(w.mins[b]) * x.scaled_sums[b];
        }
        *out = total;
    }
}

fn q8_portable(w: Q8Row<'_>, xs: &[QuantizedRow<'_>], out: &mut [f32]) {
    for (x, out) in xs.iter().zip(out.iter_mut()) {
        let mut total = 0.0f32;
        for b in 0..w.scales.len() {
            let range = b * BLOCK_LEN..(b + 1) * BLOCK_LEN;
            let sum: i32 = w.levels[range.clone()]
                .iter()
                .zip(&x.levels[range])
                .map(|(&a, &c)| i32::from(a) * i32::from(c))
                .sum();
            total += sum as f32 * (w.scales[b] * x.scales[b]);
        }
        *out = total;
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    use crate::block::simd::{fifth_bits, unpack_nibbles};
    use crate::block::{Q4Row, Q8Row, BLOCK_BYTES, BLOCK_LEN};
    use crate::quant::QuantizedRow;
    use crate::simd::{horizontal_sum, products_avx2, products_vnni};

    /// Block `$b` of the 8-bit row `w` against every activation row of `xs`, into `acc`: signed x
    /// signed through the unsigned x signed instructions (|w| times x with w's sign).
    macro_rules! q8_block {
        ($products:ident; $w:ident, $xs:ident; $b:ident => $acc:ident) => {
            for i in 0..N {
                let x = $xs.get_unchecked(i);
                let weights = _mm256_loadu_si256($w.levels.as_ptr().add($b * BLOCK_LEN).cast());
                let acts = _mm256_loadu_si256(x.levels.as_ptr().add($b * BLOCK_LEN).cast());
                let (unsigned, signed) =
                    (_mm256_sign_epi8(weights, weights), _mm256_sign_epi8(acts, weights));
                let scale = _mm256_set1_ps($w.scales.get_unchecked($b) * x.scales.get_unchecked($b));
                $acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps($products(unsigned, signed)), scale, $acc[i]);
            }
        };
    }

    /// The 8-bit kernels: `$products` turns (unsigned bytes, signed bytes) into eight i32 sums.
    /// Two accumulators per activation row (even and odd blocks) halve the FMA latency chain.
    macro_rules! q8_kernel {
        ($name:ident, $features:literal, $products:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const N: usize>(
                w: Q8Row<'_>,
                xs: &[QuantizedRow<'_>],
                out: &mut [f32],
            ) {
                let num_blocks = w.scales.len();
                let mut even = [_mm256_setzero_ps(); N];
                let mut odd = [_mm256_setzero_ps(); N];
                let mut b = 0;
                while b + 1 < num_blocks {
                    q8_block!($products; w, xs; b => even);
                    b += 1;
                    q8_block!($products; w, xs; b => odd);
                    b += 1;
                }
                if b < num_blocks {
                    q8_block!($products; w, xs; b => even);
                }
                for i in 0..N {
                    *out.get_unchecked_mut(i) = horizontal_sum(_mm256_add_ps(even[i], odd[i]));
                }
            }
        };
    }

    /// A 5-bit block's levels: its nibbles plus 16 where bit i of `bits` is set (weight i).
    #[target_feature(enable = "avx2")]
    unsafe fn add_fifth_avx2(nibbles: __m256i, bits: u32) -> __m256i {
        _mm256_or_si256(nibbles, fifth_bits(bits))
    }

    /// As `add_fifth_avx2`, in one masked add (AVX-512BW's byte masks).
    #[allow(clippy::incompatible_msrv)]
    #[target_feature(enable = "avx2,avx512bw,avx512vl")]
    unsafe fn add_fifth_avx512(nibbles: __m256i, bits: u32) -> __m256i {
        _mm256_mask_add_epi8(nibbles, bits, nibbles, _mm256_set1_epi8(16))
    }

    /// Block `first + lane` of the 4- or 5-bit row `w` against every activation row of `xs`,
    /// into `acc`: the block's scale products are lane `lane` of `block_scales`.
    macro_rules! q4_block {
        (
            $products:ident, $five:literal, $add_fifth:ident;
            $w:ident, $xs:ident, $block_scales:ident; $first:ident, $lane:expr => $acc:ident
        ) => {{
            let lane = $lane;
            let mut weights = unpack_nibbles($w.nibbles.as_ptr().add(($first + lane) * BLOCK_BYTES));
            if $five {
                weights = $add_fifth(weights, *$w.fifth_bits.get_unchecked($first + lane));
            }
            let index = _mm256_set1_epi32(lane as i32);
            for i in 0..N {
                let x = $xs.get_unchecked(i);
                let acts = _mm256_loadu_si256(x.levels.as_ptr().add(($first + lane) * BLOCK_LEN).cast());
                let scale = _mm256_permutevar8x32_ps($block_scales[i], index);
                let sums = _mm256_cvtepi32_ps($products(weights, acts));
                $acc[i] = _mm256_fmadd_ps(sums, scale, $acc[i]);
            }
        }};
    }

    /// The 4-bit kernels (and, with `$five`, the 5-bit ones): blocks in runs of eight, whose fp16
    /// scales and minimums widen in one instruction each; a block's scale product is then
    /// broadcast from its lane.
    macro_rules! q4_kernel {
        ($name:ident, $features:literal, $products:ident, $five:literal, $add_fifth:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const N: usize>(
                w: Q4Row<'_>,
                xs: &[QuantizedRow<'_>],
                out: &mut [f32],
            ) {
                let num_blocks = w.nibbles.len() / BLOCK_BYTES;
                let mut even = [_mm256_setzero_ps(); N];
                let mut odd = [_mm256_setzero_ps(); N];
                let mut minimums = [_mm256_setzero_ps(); N];
                let mut first = 0;
                while first < num_blocks {
                    let count = (num_blocks - first).min(8);
                    // Eight scales and minimums, and the activations' (all zero-padded past the
                    // row's last block, so a short run loads whole vectors too).
                    let w_scales = _mm256_cvtph_ps(_mm_loadu_si128(w.scales.as_ptr().add(first).cast()));
                    let w_mins = _mm256_cvtph_ps(_mm_loadu_si128(w.mins.as_ptr().add(first).cast()));
                    let mut block_scales = [_mm256_setzero_ps(); N];
                    for i in 0..N {
                        let x = xs.get_unchecked(i);
                        let x_scales = _mm256_loadu_ps(x.scales.as_ptr().add(first));
                        let x_sums = _mm256_loadu_ps(x.scaled_sums.as_ptr().add(first));
                        block_scales[i] = _mm256_mul_ps(w_scales, x_scales);
                        minimums[i] = _mm256_fmadd_ps(w_mins, x_sums, minimums[i]);
                    }
                    if count == 8 {
                        // Unrolled: the even and odd accumulators alternate without a branch.
                        for pair in 0..4 {
                            let lane = 2 * pair;
                            q4_block!($products, $five, $add_fifth; w, xs, block_scales; first, lane => even);
                            let lane = 2 * pair + 1;
                            q4_block!($products, $five, $add_fifth; w, xs, block_scales; first, lane => odd);
                        }
                    } else {
                        for lane in 0..count {
                            q4_block!($products, $five, $add_fifth; w, xs, block_scales; first, lane => even);
                        }
                    }
                    first += count;
                }
                for i in 0..N {
                    let total = _mm256_add_ps(_mm256_add_ps(even[i], odd[i]), minimums[i]);
                    *out.get_unchecked_mut(i) = horizontal_sum(total);
                }
            }
        };
    }

    q4_kernel!(q4_vnni, "avx2,fma,f16c,avx512vnni,avx512vl", products_vnni, false, add_fifth_avx2);
    q4_kernel!(q4_avx2, "avx2,fma,f16c", products_avx2, false, add_fifth_avx2);
    q4_kernel!(q5_vnni, "avx2,fma,f16c,avx512vnni,avx512vl,avx512bw", products_vnni, true, add_fifth_avx512);
    q4_kernel!(q5_avx2, "avx2,fma,f16c", products_avx2, true, add_fifth_avx2);
    q8_kernel!(q8_vnni, "avx2,fma,avx512vnni,avx512vl", products_vnni);
    q8_kernel!(q8_avx2, "avx2,fma", products_avx2);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{Q4Matrix, Q8Matrix, QuantizedRows};

    fn activations(num_rows: usize, cols: usize, seed: f32) -> QuantizedRows {
        let values: Vec<f32> = (0..num_rows * cols).map(|i| ((i as f32) * 0.37 + seed).sin() * 3.0).collect();
        let mut rows = QuantizedRows::new();
        rows.quantize(&values, cols).unwrap();
        rows
    }

    /// f64 reference over the dequantized weight and activation rows.
    fn reference(weight: &[f32], x: &[f32]) -> f64 {
        weight.iter().zip(x).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum()
    }

    #[test]
    fn q4_kernels_agree_with_the_reference_for_every_group_size() {
        // 4,160 columns: two segments of widened scales.
        for (rows, cols) in [(3, 96), (2, 4160)] {
            check_q4(rows, cols);
        }
    }

    fn check_q4(rows: usize, cols: usize) {
        let levels: Vec<u8> = (0..rows * cols).map(|i| ((i * 11 + 3) % 16) as u8).collect();
        let scales: Vec<f32> = (0..rows * cols / 32).map(|b| 0.01 + b as f32 * 0.002).collect();
        let zeros: Vec<f32> = (0..rows * cols / 32).map(|b| (b as f32 - 4.0) * 0.01).collect();
        let matrix = Q4Matrix::from_levels(&levels, &scales, &zeros, rows, cols).unwrap();
        check_against_the_dequantized_rows(&matrix);
    }

    /// Every instruction set and group size of `q4_dots` against f64 math on the dequantized
    /// weight rows and activations.
    fn check_against_the_dequantized_rows(matrix: &Q4Matrix) {
        let (rows, cols) = (matrix.rows(), matrix.cols());
        for num_inputs in 1..=9 {
            let acts = activations(num_inputs, cols, num_inputs as f32);
            let xs: Vec<_> = (0..num_inputs).map(|i| acts.row(i)).collect();
            for r in 0..rows {
                let mut weight = vec![0.0; cols];
                matrix.dequantize_row(r, &mut weight);
                assert!(weight.iter().any(|&v| v != 0.0));
                for isa in Isa::available() {
                    let mut out = vec![0.0; num_inputs];
                    q4_dots(isa, matrix.row(r), &xs, &mut out);
                    for (i, &got) in out.iter().enumerate() {
                        let want = reference(&weight, &acts.dequantized_row(i));
                        assert!(
                            (f64::from(got) - want).abs() < 1e-4 * want.abs().max(1.0),
                            "{isa:?} {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn q5_kernels_agree_with_the_reference_for_every_group_size() {
        use crate::block::Q4Format;
        // Random Q5_1 and Q5_0 blocks (finite fp16 scales), 3 rows of 320 columns.
        let (rows, cols) = (3, 320);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        };
        for format in [Q4Format::FiveBitWithMin, Q4Format::FiveBitSymmetric] {
            let mut bytes: Vec<u8> = (0..rows * cols / 32 * format.block_bytes()).map(|_| next()).collect();
            for (b, block) in bytes.chunks_exact_mut(format.block_bytes()).enumerate() {
                block[0..2].copy_from_slice(
                    &half::f16::from_f32(0.01 + (b % 5) as f32 * 0.003).to_bits().to_le_bytes(),
                );
                if format == Q4Format::FiveBitWithMin {
                    block[2..4].copy_from_slice(
                        &half::f16::from_f32(-0.1 + (b % 3) as f32 * 0.05).to_bits().to_le_bytes(),
                    );
                }
            }
            let matrix = Q4Matrix::from_gguf(&[(format, &bytes, rows)], cols).unwrap();
            check_against_the_dequantized_rows(&matrix);
        }
    }

    #[test]
    fn q5_blocks_read_their_fifth_bits() {
        use crate::block::Q4Format;
        // Q5_0: d = 1, fifth bits on for weights 0 and 31 only, nibbles all zero:
        // weight 0 = 16 - 16 = 0, weights 1..30 = -16, weight 31 = 0.
        let mut block = vec![0u8; 22];
        block[0..2].copy_from_slice(&half::f16::from_f32(1.0).to_bits().to_le_bytes());
        block[2..6].copy_from_slice(&(1u32 | 1 << 31).to_le_bytes());
        let matrix = Q4Matrix::from_gguf(&[(Q4Format::FiveBitSymmetric, &block, 1)], 32).unwrap();
        let mut out = vec![0.0; 32];
        matrix.dequantize_row(0, &mut out);
        assert_eq!((out[0], out[1], out[30], out[31]), (0.0, -16.0, -16.0, 0.0));
        assert!(Q4Matrix::from_gguf(
            &[(Q4Format::FiveBitSymmetric, &block, 1), (Q4Format::Symmetric, &block[..18], 1)],
            32
        )
        .is_err());
    }

    #[test]
    fn q8_kernels_agree_with_the_reference_including_minus_128() {
        let (rows, cols) = (2, 64);
        let levels: Vec<i8> =
            (0..rows * cols).map(|i| if i % 13 == 0 { -128 } else { ((i * 37) % 255) as i8 }).collect();
        let scales: Vec<f32> = (0..rows * cols / 32).map(|b| 0.02 + b as f32 * 0.001).collect();
        let matrix = Q8Matrix::new(levels.clone(), scales.clone(), rows, cols).unwrap();
        let acts = activations(5, cols, 0.5);
        let xs: Vec<_> = (0..5).map(|i| acts.row(i)).collect();
        for r in 0..rows {
            let weight: Vec<f32> =
                (0..cols).map(|c| f32::from(levels[r * cols + c]) * scales[(r * cols + c) / 32]).collect();
            for isa in Isa::available() {
                let mut out = vec![0.0; 5];
                q8_dots(isa, matrix.row(r), &xs, &mut out);
                for (i, &got) in out.iter().enumerate() {
                    let want = reference(&weight, &acts.dequantized_row(i));
                    assert!(
                        (f64::from(got) - want).abs() < 1e-4 * want.abs().max(1.0),
                        "{isa:?} {got} vs {want}"
                    );
                }
            }
        }
    }
}
