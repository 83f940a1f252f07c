//! Scalar dot products of one quantized weight row with 8-bit quantized activations, after
//! ggml's `ggml_vec_dot_*_q8_*` generic kernels: integer sums inside each block, one float
//! multiply per block. These are the reference the SIMD GEMM kernels are tested against.

use super::blocks::*;
use super::q8::{BlockQ8_0, BlockQ8K};

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
    use super::super::q8::{quantize_q8_0, quantize_q8_k};
    use super::*;
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
        let w = random_blocks(n / ty.block_size(), ty.type_size(), f16_fields, ty.id() as u64);
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919 % 211) as f32 - 105.0) / 50.0).collect();
        let mut wf = vec![0.0; n];
        dequantize(ty, &w, &mut wf).unwrap();
        let (got, xq): (f32, Vec<f32>) = if ty == GgmlType::Q8_0 {
            let mut a = vec![BlockQ8_0::default(); n / 32];
            quantize_q8_0(&x, &mut a);
            (dot_q8_0(&w, &a), a.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f32 * b.d)).collect())
        } else {
            let mut a = vec![BlockQ8K::default(); n / 256];
            quantize_q8_k(&x, &mut a);
            let dot = match ty {
                GgmlType::Q4_K => dot_q4_k(&w, &a),
                GgmlType::Q5_K => dot_q5_k(&w, &a),
                _ => dot_q6_k(&w, &a),
            };
            (dot, a.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f32 * b.d)).collect())
        };
        let expected: f64 = wf.iter().zip(&xq).map(|(a, b)| *a as f64 * *b as f64).sum();
        let scale: f64 = wf.iter().zip(&xq).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
        assert!(((got as f64) - expected).abs() <= 1e-5 * scale, "{ty}: {got} vs {expected}");
    }

    #[test]
    fn integer_dots_equal_dequantized_dots() {
        check(GgmlType::Q8_0, &[q8_0::D]);
        check(GgmlType::Q4_K, &[q4_k::D, q4_k::DMIN]);
        check(GgmlType::Q5_K, &[q5_k::D, q5_k::DMIN]);
        check(GgmlType::Q6_K, &[q6_k::D]);
    }
}
