//! Scalar dequantization of every supported ggml type to f32, following ggml's `to_float`
//! operation by operation so that the results are bit-exact (no fused multiply-adds, same
//! evaluation order). This is also the oracle the fast kernels are tested against.

use super::blocks::*;
use super::iq::{self, IQ1_DELTA, IqBlock, iq4_levels};
use super::types::GgmlType;

/// Why a byte slice could not be dequantized.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DequantError {
    #[error(
        "tensor type {0} is not supported by dllm (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS)"
    )]
    Unsupported(GgmlType),
    #[error("{ty}: {bytes} bytes do not hold {values} values")]
    SizeMismatch { ty: GgmlType, bytes: usize, values: usize },
}

/// Dequantizes `src` (whole blocks of `ty`) into `dst`, whose length is the number of values.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), DequantError> {
    if !ty.is_supported() {
        return Err(DequantError::Unsupported(ty));
    }
    let (bs, ts) = (ty.block_size(), ty.type_size());
    if !dst.len().is_multiple_of(bs) || src.len() != dst.len() / bs * ts {
        return Err(DequantError::SizeMismatch { ty, bytes: src.len(), values: dst.len() });
    }
    let block_fn: fn(&[u8], &mut [f32]) = match ty {
        GgmlType::F32 => |b, y| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => |b, y| y[0] = f16_at(b, 0),
        GgmlType::BF16 => |b, y| y[0] = half::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        GgmlType::Q4_0 => block_q4_0,
        GgmlType::Q4_1 => block_q4_1,
        GgmlType::Q5_0 => block_q5_0,
        GgmlType::Q5_1 => block_q5_1,
        GgmlType::Q8_0 => block_q8_0,
        GgmlType::Q2_K => block_q2_k,
        GgmlType::Q3_K => block_q3_k,
        GgmlType::Q4_K => block_q4_k,
        GgmlType::Q5_K => block_q5_k,
        GgmlType::Q6_K => block_q6_k,
        GgmlType::IQ4_NL => block_iq4_nl,
        GgmlType::IQ4_XS => block_iq4_xs,
        GgmlType::IQ2_XXS => |b, y| iq2_block(iq::iq2_xxs(b), 0.25, y),
        GgmlType::IQ2_XS => |b, y| iq2_block(iq::iq2_xs(b), 0.25, y),
        GgmlType::IQ2_S => |b, y| iq2_block(iq::iq2_s(b), 0.25, y),
        GgmlType::IQ3_XXS => |b, y| iq2_block(iq::iq3_xxs(b), 0.5, y),
        GgmlType::IQ3_S => |b, y| iq3_s_block(iq::iq3_s(b), y),
        GgmlType::IQ1_S => |b, y| iq1_block(iq::iq1_s(b), y),
        GgmlType::IQ1_M => |b, y| iq1_block(iq::iq1_m(b), y),
        _ => unreachable!("is_supported() covers exactly the types above"),
    };
    for (b, y) in src.chunks_exact(ts).zip(dst.chunks_exact_mut(bs)) {
        block_fn(b, y);
    }
    Ok(())
}

fn block_q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, q4_0::D);
    for j in 0..QK / 2 {
        let q = b[q4_0::QS + j];
        y[j] = ((q & 0xF) as i32 - 8) as f32 * d;
        y[j + QK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

fn block_q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, q4_1::D), f16_at(b, q4_1::M));
    for j in 0..QK / 2 {
        let q = b[q4_1::QS + j];
        y[j] = (q & 0xF) as f32 * d + m;
        y[j + QK / 2] = (q >> 4) as f32 * d + m;
    }
}

fn block_q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, q5_0::D);
    let qh = u32::from_le_bytes(b[q5_0::QH..q5_0::QH + 4].try_into().unwrap());
    for j in 0..QK / 2 {
        let q = b[q5_0::QS + j] as u32;
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = (((q & 0xF) | h0) as i32 - 16) as f32 * d;
        y[j + QK / 2] = (((q >> 4) | h1) as i32 - 16) as f32 * d;
    }
}

fn block_q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, q5_1::D), f16_at(b, q5_1::M));
    let qh = u32::from_le_bytes(b[q5_1::QH..q5_1::QH + 4].try_into().unwrap());
    for j in 0..QK / 2 {
        let q = b[q5_1::QS + j] as u32;
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = ((q & 0xF) | h0) as f32 * d + m;
        y[j + QK / 2] = ((q >> 4) | h1) as f32 * d + m;
    }
}

fn block_q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, q8_0::D);
    for j in 0..QK {
        y[j] = (b[q8_0::QS + j] as i8) as f32 * d;
    }
}

fn block_q2_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (f16_at(b, q2_k::D), f16_at(b, q2_k::DMIN));
    let scales = &b[q2_k::SCALES..q2_k::SCALES + 16];
    let mut is = 0;
    let mut out = 0;
    for n in 0..QK_K / 128 {
        let q = &b[q2_k::QS + 32 * n..q2_k::QS + 32 * n + 32];
        for shift in [0, 2, 4, 6] {
            for half in 0..2 {
                let sc = scales[is];
                is += 1;
                let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
                for l in 0..16 {
                    y[out] = dl * ((q[16 * half + l] >> shift) & 3) as f32 - ml;
                    out += 1;
                }
            }
        }
    }
}

fn block_q3_k(b: &[u8], y: &mut [f32]) {
    let d_all = f16_at(b, q3_k::D);
    let scales = q3_k_scales(&b[q3_k::SCALES..q3_k::SCALES + 12]);
    let hm = &b[q3_k::HMASK..q3_k::HMASK + 32];
    let mut m = 1u8;
    let mut is = 0;
    let mut out = 0;
    for n in 0..QK_K / 128 {
        let q = &b[q3_k::QS + 32 * n..q3_k::QS + 32 * n + 32];
        for shift in [0, 2, 4, 6] {
            for half in 0..2 {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for l in 0..16 {
                    let i = 16 * half + l;
                    let low = ((q[i] >> shift) & 3) as i8;
                    let high = if hm[i] & m != 0 { 0 } else { 4 };
                    y[out] = dl * (low - high) as f32;
                    out += 1;
                }
            }
            m <<= 1;
        }
    }
}

fn block_q4_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (f16_at(b, q4_k::D), f16_at(b, q4_k::DMIN));
    let scales = &b[q4_k::SCALES..q4_k::SCALES + 12];
    for j in 0..QK_K / 64 {
        let q = &b[q4_k::QS + 32 * j..q4_k::QS + 32 * j + 32];
        let (sc1, m1) = scale_min_k4(2 * j, scales);
        let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
        for l in 0..32 {
            y[64 * j + l] = d1 * (q[l] & 0xF) as f32 - m1;
            y[64 * j + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

fn block_q5_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (f16_at(b, q5_k::D), f16_at(b, q5_k::DMIN));
    let scales = &b[q5_k::SCALES..q5_k::SCALES + 12];
    let qh = &b[q5_k::QH..q5_k::QH + 32];
    for j in 0..QK_K / 64 {
        let ql = &b[q5_k::QS + 32 * j..q5_k::QS + 32 * j + 32];
        let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
        let (sc1, m1) = scale_min_k4(2 * j, scales);
        let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
        let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[64 * j + l] = d1 * ((ql[l] & 0xF) + h1) as f32 - m1;
            y[64 * j + 32 + l] = d2 * ((ql[l] >> 4) + h2) as f32 - m2;
        }
    }
}

fn block_q6_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, q6_k::D);
    for n in 0..QK_K / 128 {
        let ql = &b[q6_k::QL + 64 * n..q6_k::QL + 64 * n + 64];
        let qh = &b[q6_k::QH + 32 * n..q6_k::QH + 32 * n + 32];
        let sc = &b[q6_k::SCALES + 8 * n..q6_k::SCALES + 8 * n + 8];
        let y = &mut y[128 * n..128 * n + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            let s = |k: usize| d * (sc[is + k] as i8) as f32;
            y[l] = s(0) * q1 as f32;
            y[l + 32] = s(2) * q2 as f32;
            y[l + 64] = s(4) * q3 as f32;
            y[l + 96] = s(6) * q4 as f32;
        }
    }
}

/// IQ2_XXS, IQ2_XS, IQ2_S and IQ3_XXS: weight = `d * (0.5 + s) * step * q` for the stored scale
/// `s` of its group (`step` 0.25, or 0.5 for IQ3_XXS), evaluated in ggml's order.
fn iq2_block(u: IqBlock, step: f32, y: &mut [f32]) {
    for (i, y) in y.iter_mut().enumerate() {
        let s = (u.ls[i / 16] - 1) / 2;
        *y = u.d * (0.5 + s as f32) * step * u.q[i] as f32;
    }
}

/// IQ3_S: weight = `d * (1 + 2s) * q`.
fn iq3_s_block(u: IqBlock, y: &mut [f32]) {
    for (i, y) in y.iter_mut().enumerate() {
        *y = u.d * u.ls[i / 16] as f32 * u.q[i] as f32;
    }
}

/// IQ1_S and IQ1_M: weight = `d * (2s + 1) * (q + delta)`, delta = +-`IQ1_DELTA`.
fn iq1_block(u: IqBlock, y: &mut [f32]) {
    for (i, y) in y.iter_mut().enumerate() {
        let dl = u.d * u.ls[i / 16] as f32;
        *y = dl * (u.q[i] as f32 + IQ1_DELTA * u.delta[i / 8] as f32);
    }
}

fn block_iq4_nl(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, iq4_nl::D);
    for (y, v) in y.iter_mut().zip(iq4_levels(&b[iq4_nl::QS..iq4_nl::QS + 16])) {
        *y = d * v as f32;
    }
}

fn block_iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, iq4_xs::D);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let dl = d * iq4_xs_scale(b, ib) as f32;
        for (y, v) in y.iter_mut().zip(iq4_levels(&b[iq4_xs::QS + 16 * ib..][..16])) {
            *y = dl * v as f32;
        }
    }
}
