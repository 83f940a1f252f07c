//! Activation quantization to 8 bits, as ggml does before its integer dot products: Q8_K
//! (256 values, f32 scale, 16-value sums) for the K-quants and Q8_0 (32 values, f16 scale) for
//! Q8_0 weights. Matching ggml here is what makes our quantized logits agree with llama.cpp's.

use super::blocks::{QK, QK_K};

/// ggml's `block_q8_K`.
#[derive(Clone, Copy)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    /// Sums of each 16 consecutive `qs`.
    pub bsums: [i16; QK_K / 16],
    /// Sums of each 32 consecutive `qs` (a Q4_K/Q5_K sub-block; at most 32 x 127 in
    /// magnitude), which the mins meet: kept so that a kernel broadcasts a pair of them straight
    /// from memory instead of adding and shuffling `bsums` for every column group.
    pub sub_sums: [i16; QK_K / 32],
    /// 32 times each of `bsums`: what Q6_K's storage offset (its weights are kept as `q + 32`)
    /// adds to a 16-value dot product, which the 512-bit Q6_K kernel subtracts from each scale
    /// group's sums with one broadcast from memory before it scales them (instead of eight
    /// i16-pair products per row and block, which take the units its dot products need).
    pub q6_k_offsets: [i32; QK_K / 16],
}

impl BlockQ8K {
    /// Sub-block sums 2p (low half) and 2p+1 (high half) as one 32-bit i16 pair.
    #[inline(always)]
    pub fn sub_sum_pair(&self, p: usize) -> i32 {
        let (lo, hi) = (self.sub_sums[2 * p], self.sub_sums[2 * p + 1]);
        (lo as u16 as u32 | (hi as u16 as u32) << 16) as i32
    }
}

impl Default for BlockQ8K {
    fn default() -> Self {
        BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; QK_K / 16],
            sub_sums: [0; QK_K / 32],
            q6_k_offsets: [0; QK_K / 16],
        }
    }
}

/// ggml's `block_q8_0`, with its f16 scale already widened, and the sum of its values (as
/// `block_q8_1` keeps it): kernels that offset signed weights into unsigned bytes for
/// `vpdpbusd` take the offset's share back out with it.
#[derive(Clone, Copy, Default)]
pub struct BlockQ8_0 {
    pub d: f32,
    pub qs: [i8; QK],
    pub sum: i32,
}

/// ggml's `nearest_int`: round half to even, valid for |x| < 2^22. Adding 1.5 * 2^23 makes the
/// FPU round the sum to an integer (to nearest, ties to even) and leaves that integer in the
/// low mantissa bits. `f32::round_ties_even` gives the same numbers, but without SSE4.1 at
/// compile time it is a libm call per value (6% of a step); this vectorizes.
#[inline]
fn nearest_int(x: f32) -> i32 {
    let shifted = x + 12_582_912.0;
    (shifted.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// `quantize_row_q8_K_ref`: the scale maps the value of largest magnitude to -127. Portable
/// code, always inlined: `cpu::kernels::quantize_q8_k` compiles it for the SIMD paths (the
/// baseline x86-64 target has SSE2 only), which gives the same numbers bit for bit (tested).
#[inline(always)]
pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        // ggml keeps the first value of the largest magnitude (its sign sets the scale's);
        // found in two passes that vectorize: the magnitude, then the first value that has it
        // (`first_of_magnitude`).
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 {
            *y = BlockQ8K::default();
            continue;
        }
        let max = first_of_magnitude(xb, amax);
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, group) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = group.iter().map(|&q| q as i16).sum();
        }
        for (s, halves) in y.sub_sums.iter_mut().zip(y.bsums.chunks_exact(2)) {
            *s = halves[0] + halves[1];
        }
        for (o, &s) in y.q6_k_offsets.iter_mut().zip(&y.bsums) {
            *o = 32 * s as i32;
        }
        y.d = 1.0 / iscale;
    }
}

/// ggml's `block_q8_1` (for Q4_1 and Q5_1 weights), its f16 fields widened: the scale, and the
/// scale times the sum of the values (rounded to f16, as stored), which meets the weights' minimum.
#[derive(Clone, Copy, Default)]
pub struct BlockQ8_1 {
    pub d: f32,
    pub s: f32,
    pub qs: [i8; QK],
}

/// ggml's x86 `quantize_row_q8_1`: `quantize_q8_0`'s values and scale, and `s` = f16(d x sum)
/// with the unrounded `d`.
#[inline(always)]
pub fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let d = quantize_32(xb, &mut y.qs);
        y.d = half::f16::from_f32(d).to_f32();
        let sum: i32 = y.qs.iter().map(|&q| q as i32).sum();
        y.s = half::f16::from_f32(d * sum as f32).to_f32();
    }
}

/// The first value of `x` whose magnitude is `amax` (`amax` if none is). A search that stops at
/// the first hit does not vectorize, and scanning half a block value by value took most of the
/// quantization's time; chunks of 16 are tested without branches, then the chunk that holds the
/// value is searched.
#[inline(always)]
fn first_of_magnitude(x: &[f32], amax: f32) -> f32 {
    for chunk in x.chunks(16) {
        if chunk.iter().fold(false, |hit, v| hit | (v.abs() == amax)) {
            return chunk.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        }
    }
    amax
}

/// ggml's x86 `quantize_row_q8_0` (the AVX form: scale 127/amax, round half to even); portable
/// and always inlined, as `quantize_q8_k`.
#[inline(always)]
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let d = quantize_32(xb, &mut y.qs);
        y.d = half::f16::from_f32(d).to_f32();
        y.sum = y.qs.iter().map(|&q| q as i32).sum();
    }
}

/// One block of 32 values as ggml's x86 Q8_0 and Q8_1 quantizers write it: `qs` = round half
/// to even of `v x 127 / amax`; returns the unrounded scale `amax / 127`.
#[inline(always)]
fn quantize_32(xb: &[f32], qs: &mut [i8; QK]) -> f32 {
    let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    for (q, &v) in qs.iter_mut().zip(xb) {
        *q = nearest_int(v * id) as i8;
    }
    amax / 127.0
}

/// Four blocks of random activations for the quantizers' tests: with ties of the largest
/// magnitude in both signs and both orders (ggml keeps the first), and an all-zero block.
#[cfg(test)]
pub(crate) fn awkward_activations(rng: &mut impl rand::Rng, case: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..4 * QK_K).map(|_| rng.random_range(-3.0f32..3.0)).collect();
    let (a, b) = (rng.random_range(0..QK_K), rng.random_range(0..QK_K));
    let sign = if case.is_multiple_of(2) { 1.0 } else { -1.0 };
    (x[a], x[b]) = (4.0 * sign, -4.0 * sign);
    x[2 * QK_K..3 * QK_K].fill(0.0);
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even_like_the_standard_library() {
        // Every quarter step over the range the quantizers use, so every tie is covered, plus
        // values just beside the ties.
        for i in -(200 * 4)..=(200 * 4) {
            let x = i as f32 / 4.0;
            for v in [x, x.next_up(), x.next_down()] {
                assert_eq!(nearest_int(v), v.round_ties_even() as i32, "{v}");
            }
        }
    }

    /// The original loop of `quantize_row_q8_K_ref`: the first value whose magnitude is
    /// strictly the largest so far.
    fn first_of_largest_magnitude(xb: &[f32]) -> f32 {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        max
    }

    #[test]
    fn q8_k_keeps_ggmls_first_maximum() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for case in 0..64 {
            let x = awkward_activations(&mut rng, case);
            let mut blocks = vec![BlockQ8K::default(); 4];
            quantize_q8_k(&x, &mut blocks);
            for (y, xb) in blocks.iter().zip(x.chunks_exact(QK_K)) {
                let max = first_of_largest_magnitude(xb);
                let want = if max == 0.0 { 0.0 } else { 1.0 / (-127.0 / max) };
                assert_eq!(y.d, want, "case {case}");
            }
        }
    }

    #[test]
    fn q8_k_round_trips_within_half_a_step() {
        let x: Vec<f32> = (0..512).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
        let mut q = vec![BlockQ8K::default(); 2];
        quantize_q8_k(&x, &mut q);
        for (b, xb) in q.iter().zip(x.chunks_exact(QK_K)) {
            for (qi, v) in b.qs.iter().zip(xb) {
                assert!((*qi as f32 * b.d - v).abs() <= b.d.abs() * 0.5 + 1e-6);
            }
            assert_eq!(b.bsums[3], b.qs[48..64].iter().map(|&v| v as i16).sum::<i16>());
            assert_eq!(b.sub_sums[5], b.qs[160..192].iter().map(|&v| v as i16).sum::<i16>());
            assert_eq!(b.q6_k_offsets[3], 32 * b.qs[48..64].iter().map(|&v| v as i32).sum::<i32>());
            let pair = b.sub_sum_pair(2);
            assert_eq!((pair as i16, (pair >> 16) as i16), (b.sub_sums[4], b.sub_sums[5]));
        }
    }
}
