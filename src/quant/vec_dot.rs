//! Scalar dot products of one quantized weight row with 8-bit quantized activations, after
//! ggml's `ggml_vec_dot_*_q8_*` generic kernels: integer sums inside each block, one float
//! multiply per block. These are the reference the SIMD GEMM kernels are tested against.

use super::blocks::*;
use super::iq::{self, IqBlock, iq4_levels};
use super::q8::{BlockQ8_0, BlockQ8_1, BlockQ8K};
use super::types::GgmlType;

/// A weight row of `ty` x Q8_0 activations (Q4_0, Q5_0, Q8_0, IQ4_NL).
pub fn dot_with_q8_0(ty: GgmlType, w: &[u8], a: &[BlockQ8_0]) -> f32 {
    if ty == GgmlType::Q8_0 {
        return dot_q8_0(w, a);
    }
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(ty.type_size()).zip(a) {
        let (d, v) = levels_q8_0(ty, b);
        let isum: i32 = v.iter().zip(&y.qs).map(|(&q, &a)| q as i32 * a as i32).sum();
        sum += isum as f32 * (d.to_f32() * y.d);
    }
    sum
}

/// A Q4_0, Q5_0 or IQ4_NL block as its f16 scale and 32 signed levels (the weights are
/// `d x level`; Q8_0's are its bytes).
pub fn levels_q8_0(ty: GgmlType, b: &[u8]) -> (half::f16, [i8; QK]) {
    let d = |at: usize| half::f16::from_le_bytes([b[at], b[at + 1]]);
    match ty {
        GgmlType::Q4_0 => {
            let mut v = [0i8; QK];
            for j in 0..QK / 2 {
                let q = b[q4_0::QS + j];
                (v[j], v[j + QK / 2]) = ((q & 0xF) as i8 - 8, (q >> 4) as i8 - 8);
            }
            (d(q4_0::D), v)
        }
        GgmlType::Q5_0 => (d(q5_0::D), q5_levels(b, q5_0::QH, q5_0::QS).map(|q| q as i8 - 16)),
        GgmlType::IQ4_NL => (d(iq4_nl::D), iq4_levels(&b[iq4_nl::QS..iq4_nl::QS + 16])),
        _ => panic!("{ty} weights do not take Q8_0 activations"),
    }
}

/// A weight row of `ty` x Q8_1 activations (Q4_1, Q5_1): ggml's `(d_w d_a) sum + m_w s_a` per block.
pub fn dot_with_q8_1(ty: GgmlType, w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (size, d_at, m_at) = match ty {
        GgmlType::Q4_1 => (q4_1::SIZE, q4_1::D, q4_1::M),
        GgmlType::Q5_1 => (q5_1::SIZE, q5_1::D, q5_1::M),
        _ => panic!("{ty} weights do not take Q8_1 activations"),
    };
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(size).zip(a) {
        let v = match ty {
            GgmlType::Q4_1 => {
                let mut v = [0u8; QK];
                for j in 0..QK / 2 {
                    (v[j], v[j + QK / 2]) = (b[q4_1::QS + j] & 0xF, b[q4_1::QS + j] >> 4);
                }
                v
            }
            _ => q5_levels(b, q5_1::QH, q5_1::QS),
        };
        let isum: i32 = v.iter().zip(&y.qs).map(|(&q, &a)| q as i32 * a as i32).sum();
        sum += (f16_at(b, d_at) * y.d) * isum as f32 + f16_at(b, m_at) * y.s;
    }
    sum
}

/// The 32 unsigned 5-bit levels of a Q5_0/Q5_1 block (nibbles at `qs`, fifth bits in the u32 at `qh`).
fn q5_levels(b: &[u8], qh_at: usize, qs_at: usize) -> [u8; QK] {
    let qh = u32_at(b, qh_at);
    let mut v = [0u8; QK];
    for j in 0..QK / 2 {
        let q = b[qs_at + j];
        v[j] = (q & 0xF) | ((((qh >> j) << 4) & 0x10) as u8);
        v[j + QK / 2] = (q >> 4) | (((qh >> (j + 12)) & 0x10) as u8);
    }
    v
}

/// A weight row of `ty` x Q8_K activations (the K-quants and the 256-value i-quants).
pub fn dot_with_q8_k(ty: GgmlType, w: &[u8], a: &[BlockQ8K]) -> f32 {
    match ty {
        GgmlType::Q2_K => dot_q2_k(w, a),
        GgmlType::Q3_K => dot_q3_k(w, a),
        GgmlType::Q4_K => dot_q4_k(w, a),
        GgmlType::Q5_K => dot_q5_k(w, a),
        GgmlType::Q6_K => dot_q6_k(w, a),
        GgmlType::IQ4_XS => dot_iq4_xs(w, a),
        GgmlType::IQ1_S
        | GgmlType::IQ1_M
        | GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S => dot_iq(ty, w, a),
        _ => panic!("{ty} weights do not take Q8_K activations"),
    }
}

/// Q2_K x Q8_K: `d_a (d sum_16 sc sum q a - dmin sum_16 m bsum)`.
pub fn dot_q2_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(q2_k::SIZE).zip(a) {
        let sc = &b[q2_k::SCALES..q2_k::SCALES + 16];
        let summs: i32 = y.bsums.iter().zip(sc).map(|(&s, &c)| s as i32 * (c >> 4) as i32).sum();
        let mut isum = 0i32;
        for (g, &c) in sc.iter().enumerate() {
            // Group g: 16 values at shift 2 (g / 2 % 4) of bytes 32 (g / 8) + 16 (g % 2) ...
            let (n, shift, half) = (g / 8, 2 * ((g / 2) % 4), g % 2);
            let q = &b[q2_k::QS + 32 * n + 16 * half..][..16];
            let part: i32 =
                q.iter().zip(&y.qs[16 * g..16 * g + 16]).map(|(&q, &a)| ((q >> shift) & 3) as i32 * a as i32).sum();
            isum += (c & 0xF) as i32 * part;
        }
        let dall = y.d * f16_at(b, q2_k::D);
        let dmin = y.d * f16_at(b, q2_k::DMIN);
        sum += dall * isum as f32 - dmin * summs as f32;
    }
    sum
}

/// Q3_K x Q8_K: `d d_a sum_16 (sc - 32) sum q a`, q = low 2 bits - 4 unless the high bit is set.
pub fn dot_q3_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(q3_k::SIZE).zip(a) {
        let scales = q3_k_scales(&b[q3_k::SCALES..q3_k::SCALES + 12]);
        let hm = &b[q3_k::HMASK..q3_k::HMASK + 32];
        let mut isum = 0i32;
        for (g, &sc) in scales.iter().enumerate() {
            let (n, j, half) = (g / 8, (g / 2) % 4, g % 2);
            let (shift, m) = (2 * j, 1u8 << (4 * n + j));
            let mut part = 0i32;
            for l in 16 * half..16 * half + 16 {
                let low = ((b[q3_k::QS + 32 * n + l] >> shift) & 3) as i32;
                let q = low - if hm[l] & m != 0 { 0 } else { 4 };
                part += q * y.qs[16 * g + l - 16 * half] as i32;
            }
            isum += sc as i32 * part;
        }
        sum += f16_at(b, q3_k::D) * y.d * isum as f32;
    }
    sum
}

/// IQ4_XS x Q8_K: per 32 values `d d_a (ls - 32) sum k[q] a`.
pub fn dot_iq4_xs(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(iq4_xs::SIZE).zip(a) {
        let d4d8 = f16_at(b, iq4_xs::D) * y.d;
        for ib in 0..QK_K / 32 {
            let v = iq4_levels(&b[iq4_xs::QS + 16 * ib..][..16]);
            let isum: i32 = v.iter().zip(&y.qs[32 * ib..32 * ib + 32]).map(|(&q, &a)| q as i32 * a as i32).sum();
            sum += d4d8 * iq4_xs_scale(b, ib) as f32 * isum as f32;
        }
    }
    sum
}

/// The grid i-quants x Q8_K: `d d_a c sum_16 ls sum q a` (c = 1/8 for IQ2, 1/4 for IQ3_XXS, 1
/// for IQ3_S), and for IQ1 also `+ 1/8 sum_8 ls delta sum a` (the shift of every weight).
fn dot_iq(ty: GgmlType, w: &[u8], a: &[BlockQ8K]) -> f32 {
    let scale = match ty {
        GgmlType::IQ2_XXS | GgmlType::IQ2_XS | GgmlType::IQ2_S => 0.125,
        GgmlType::IQ3_XXS => 0.25,
        _ => 1.0,
    };
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(ty.type_size()).zip(a) {
        let u: IqBlock = iq::unpack(ty, b).expect("a grid i-quant");
        let mut isum = 0i32;
        let mut shift = 0i32;
        for (g, &ls) in u.ls.iter().enumerate() {
            let part: i32 = u.q[16 * g..16 * g + 16]
                .iter()
                .zip(&y.qs[16 * g..16 * g + 16])
                .map(|(&q, &a)| q as i32 * a as i32)
                .sum();
            isum += ls as i32 * part;
            for h in 0..2 {
                let sum8: i32 = y.qs[16 * g + 8 * h..][..8].iter().map(|&a| a as i32).sum();
                shift += ls as i32 * u.delta[2 * g + h] as i32 * sum8;
            }
        }
        let d = u.d * y.d;
        sum += match ty {
            GgmlType::IQ1_S | GgmlType::IQ1_M => d * (isum as f32 + iq::IQ1_DELTA * shift as f32),
            _ => d * isum as f32,
        };
    }
    scale * sum
}

/// Q8_0 weights x Q8_0 activations.
pub fn dot_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(q8_0::SIZE).zip(a) {
        let qs = &b[q8_0::QS..q8_0::QS + QK];
        let isum: i32 = qs.iter().zip(&y.qs).map(|(&q, &v)| (q as i8) as i32 * v as i32).sum();
        sum += isum as f32 * (f16_at(b, q8_0::D) * y.d);
    }
    sum
}

/// Where a Q4_K-like block keeps its fields: (block size, d, dmin, packed scales).
type K4Layout = (usize, usize, usize, usize);

/// The block dot shared by Q4_K and Q5_K (same scales, mins and layout of sub-block pairs);
/// `value(block, j, l)` gives weight l (0..32) of sub-blocks 2j and 2j+1, unsigned.
fn dot_k4_like(
    w: &[u8],
    a: &[BlockQ8K],
    (size, d_off, dmin_off, scales_off): K4Layout,
    value: impl Fn(&[u8], usize, usize) -> (i32, i32),
) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(size).zip(a) {
        let scales = &b[scales_off..scales_off + 12];
        let (mut isum, mut imin) = (0i32, 0i32);
        for j in 0..QK_K / 64 {
            let (sc1, m1) = scale_min_k4(2 * j, scales);
            let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let (v1, v2) = value(b, j, l);
                lo += v1 * y.qs[64 * j + l] as i32;
                hi += v2 * y.qs[64 * j + 32 + l] as i32;
            }
            isum += sc1 as i32 * lo + sc2 as i32 * hi;
            imin += m1 as i32 * (y.bsums[4 * j] as i32 + y.bsums[4 * j + 1] as i32);
            imin += m2 as i32 * (y.bsums[4 * j + 2] as i32 + y.bsums[4 * j + 3] as i32);
        }
        sum += f16_at(b, d_off) * y.d * isum as f32 - f16_at(b, dmin_off) * y.d * imin as f32;
    }
    sum
}

/// Q4_K weights x Q8_K activations.
pub fn dot_q4_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_k4_like(w, a, (q4_k::SIZE, q4_k::D, q4_k::DMIN, q4_k::SCALES), |b, j, l| {
        let q = b[q4_k::QS + 32 * j + l];
        ((q & 0xF) as i32, (q >> 4) as i32)
    })
}

/// Q5_K weights x Q8_K activations.
pub fn dot_q5_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    dot_k4_like(w, a, (q5_k::SIZE, q5_k::D, q5_k::DMIN, q5_k::SCALES), |b, j, l| {
        let (q, h) = (b[q5_k::QS + 32 * j + l], b[q5_k::QH + l]);
        // Bit 2j of qh is the fifth bit of the low-nibble weight, bit 2j+1 of the high one.
        let fifth = |bit: usize| if h & (1 << bit) != 0 { 16 } else { 0 };
        ((q & 0xF) as i32 + fifth(2 * j), (q >> 4) as i32 + fifth(2 * j + 1))
    })
}

/// Q6_K weights x Q8_K activations.
pub fn dot_q6_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (b, y) in w.chunks_exact(q6_k::SIZE).zip(a) {
        let mut isum = 0i32;
        for n in 0..QK_K / 128 {
            let ql = &b[q6_k::QL + 64 * n..q6_k::QL + 64 * n + 64];
            let qh = &b[q6_k::QH + 32 * n..q6_k::QH + 32 * n + 32];
            let sc = &b[q6_k::SCALES + 8 * n..q6_k::SCALES + 8 * n + 8];
            let yq = &y.qs[128 * n..128 * n + 128];
            // Four groups of 32 values; each group has two 16-value scales.
            let mut part = [0i32; 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                part[is] += q1 * yq[l] as i32;
                part[is + 2] += q2 * yq[l + 32] as i32;
                part[is + 4] += q3 * yq[l + 64] as i32;
                part[is + 6] += q4 * yq[l + 96] as i32;
            }
            isum += part.iter().zip(sc).map(|(p, &s)| p * (s as i8) as i32).sum::<i32>();
        }
        sum += f16_at(b, q6_k::D) * y.d * isum as f32;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::super::q8::{quantize_q8_0, quantize_q8_1, quantize_q8_k};
    use super::*;
    use crate::quant::Activations;
    use crate::quant::{GgmlType, dequantize};

    /// A weight row of random bytes with sane f16 scales at the given offsets.
    fn random_blocks(n_blocks: usize, size: usize, f16_fields: &[usize], seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u8
        };
        let mut w: Vec<u8> = (0..n_blocks * size).map(|_| next()).collect();
        for b in 0..n_blocks {
            for &off in f16_fields {
                let v = half::f16::from_f32(0.001 + (next() as f32) / 5000.0).to_le_bytes();
                w[b * size + off..b * size + off + 2].copy_from_slice(&v);
            }
        }
        w
    }

    /// The integer dot must equal the f32 dot of the dequantized weights with the dequantized
    /// activations, up to f32 rounding of the sums.
    fn check(ty: GgmlType, f16_fields: &[usize]) {
        let n = 512;
        let mut w = random_blocks(n / ty.block_size(), ty.type_size(), f16_fields, ty.id() as u64);
        if ty == GgmlType::IQ1_M {
            // Its scale d is the top nibble of each of its four u16 scales: 0x1c00 (0.0039).
            for b in w.chunks_exact_mut(iq1_m::SIZE) {
                for (i, nibble) in [0u16, 0, 0xc, 0x1].iter().enumerate() {
                    let at = iq1_m::SCALES + 2 * i;
                    let v = (u16_at(b, at) & 0x0fff) | nibble << 12;
                    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919 % 211) as f32 - 105.0) / 50.0).collect();
        let mut wf = vec![0.0; n];
        dequantize(ty, &w, &mut wf).unwrap();
        let (got, xq): (f32, Vec<f32>) = match ty.activations().unwrap() {
            Activations::Q8_0 => {
                let mut a = vec![BlockQ8_0::default(); n / 32];
                quantize_q8_0(&x, &mut a);
                (dot_with_q8_0(ty, &w, &a), a.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f32 * b.d)).collect())
            }
            Activations::Q8_1 => {
                let mut a = vec![BlockQ8_1::default(); n / 32];
                quantize_q8_1(&x, &mut a);
                // s carries the block sum (rounded to f16): the dequantized activations are d x q.
                (dot_with_q8_1(ty, &w, &a), a.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f32 * b.d)).collect())
            }
            _ => {
                let mut a = vec![BlockQ8K::default(); n / 256];
                quantize_q8_k(&x, &mut a);
                (dot_with_q8_k(ty, &w, &a), a.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f32 * b.d)).collect())
            }
        };
        let expected: f64 = wf.iter().zip(&xq).map(|(a, b)| *a as f64 * *b as f64).sum();
        let scale: f64 = wf.iter().zip(&xq).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
        // Q8_1's `s` is f16(d_unrounded x sum) where the values use f16(d): a relative error of
        // up to 2^-11 on the minimum's share.
        let tolerance = if ty.activations() == Some(Activations::Q8_1) { 2e-3 } else { 1e-5 };
        assert!(((got as f64) - expected).abs() <= tolerance * scale, "{ty}: {got} vs {expected}");
    }

    #[test]
    fn integer_dots_equal_dequantized_dots() {
        check(GgmlType::Q8_0, &[q8_0::D]);
        check(GgmlType::Q4_K, &[q4_k::D, q4_k::DMIN]);
        check(GgmlType::Q5_K, &[q5_k::D, q5_k::DMIN]);
        check(GgmlType::Q6_K, &[q6_k::D]);
        check(GgmlType::Q4_0, &[q4_0::D]);
        check(GgmlType::Q5_0, &[q5_0::D]);
        check(GgmlType::IQ4_NL, &[iq4_nl::D]);
        check(GgmlType::Q4_1, &[q4_1::D, q4_1::M]);
        check(GgmlType::Q5_1, &[q5_1::D, q5_1::M]);
        check(GgmlType::Q2_K, &[q2_k::D, q2_k::DMIN]);
        check(GgmlType::Q3_K, &[q3_k::D]);
        check(GgmlType::IQ4_XS, &[iq4_xs::D]);
        for ty in
            [GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S]
        {
            check(ty, &[0]);
        }
        check(GgmlType::IQ1_M, &[]);
    }
}
