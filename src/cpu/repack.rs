//! Weight layouts interleaved for the GEMM microkernels, built once at load. Eight output
//! rows ("columns" of the product) are stored together so that one 32-byte vector holds four
//! consecutive weights of each of the eight, and a kernel keeps the eight results in the lanes
//! of one register per activation row. Weights keep their bit width (Q4_K stays 4-bit).
//!
//! Q4_K, per group of 8 columns and per super-block of 256 values (1216 bytes, 1152 in the
//! file): `d[8]` f32, `dmin[8]` f32, `scales[8 sub-blocks][8 columns]` u8,
//! `mins[4 pairs][8 columns][2]` u8, then for each sub-block j and chunk k (8 values,
//! v = 32j + 8k) 32 bytes where byte `4c + i` holds weight v+i of column c in its low nibble
//! and weight v+4+i in its high nibble.
//!
//! Q6_K, per group and super-block (1824 bytes, 1680 in the file): `d[8]` f32,
//! `scales[16 groups of 16 values][8 columns]` i8, the same scales as `[8 pairs][8 columns][2]`
//! for the offset correction, the low 4 bits of each chunk k (v = 8k) laid out as Q4_K's chunks,
//! then per pair of chunks 32 bytes whose byte `4c + i` holds the high 2 bits of weights v+i
//! and v+4+i of column c (chunk 2m in bits 0..4, chunk 2m+1 in bits 4..8). Weights are stored
//! as in the file, 0..63 standing for -32..31.

use rayon::prelude::*;

use crate::quant::blocks::{QK_K, f16_at, q4_k, q6_k, scale_min_k4};

/// Columns interleaved in one group.
pub const COLS: usize = 8;
pub const Q4_K_GROUP_BLOCK: usize = 32 + 32 + 64 + 64 + 1024;

pub const Q6_K_GROUP_BLOCK: usize = 32 + 128 + 128 + 1024 + 512;

pub mod q6k_layout {
    pub const D: usize = 0;
    pub const SCALES: usize = 32;
    pub const SCALE_PAIRS: usize = 160;
    pub const LO: usize = 288;
    pub const HI: usize = 1312;
}

pub mod q4k_layout {
    pub const D: usize = 0;
    pub const DMIN: usize = 32;
    pub const SCALES: usize = 64;
    pub const MINS: usize = 128;
    pub const QS: usize = 192;
}

/// Weights of a matrix in the interleaved layout, for its first `n_groups * COLS` rows.
pub struct Packed {
    pub ty: crate::quant::GgmlType,
    pub n_groups: usize,
    pub blocks_per_row: usize,
    pub data: Vec<u8>,
}

impl Packed {
    /// The bytes of group `g` (all its super-blocks).
    pub fn group(&self, g: usize) -> &[u8] {
        let len = self.data.len() / self.n_groups;
        &self.data[g * len..(g + 1) * len]
    }
}

/// Interleaves a Q4_K matrix of `n_out` rows of `n_in` values (`data` as in the file).
pub fn pack_q4_k(data: &[u8], n_in: usize, n_out: usize) -> Packed {
    let nb = n_in / QK_K;
    let n_groups = n_out / COLS;
    let row_bytes = nb * q4_k::SIZE;
    let group_bytes = nb * Q4_K_GROUP_BLOCK;
    let mut out = vec![0u8; n_groups * group_bytes];
    out.par_chunks_mut(group_bytes).enumerate().for_each(|(g, dst)| {
        for b in 0..nb {
            let dst = &mut dst[b * Q4_K_GROUP_BLOCK..(b + 1) * Q4_K_GROUP_BLOCK];
            for c in 0..COLS {
                let blk = &data[(g * COLS + c) * row_bytes + b * q4_k::SIZE..][..q4_k::SIZE];
                let (d, dmin) = (f16_at(blk, q4_k::D), f16_at(blk, q4_k::DMIN));
                dst[q4k_layout::D + 4 * c..][..4].copy_from_slice(&d.to_le_bytes());
                dst[q4k_layout::DMIN + 4 * c..][..4].copy_from_slice(&dmin.to_le_bytes());
                let packed_scales = &blk[q4_k::SCALES..q4_k::SCALES + 12];
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, packed_scales);
                    dst[q4k_layout::SCALES + 8 * j + c] = sc;
                    dst[q4k_layout::MINS + 16 * (j / 2) + 2 * c + j % 2] = m;
                }
                // Value v of the block: sub-block j = v / 32 sits in qs[32 * (j / 2) ..] as the
                // low (even j) or high (odd j) nibbles.
                let nibble = |v: usize| {
                    let (j, l) = (v / 32, v % 32);
                    let byte = blk[q4_k::QS + 32 * (j / 2) + l];
                    if j % 2 == 0 { byte & 0xF } else { byte >> 4 }
                };
                for j in 0..8 {
                    for k in 0..4 {
                        let v = 32 * j + 8 * k;
                        let chunk = &mut dst[q4k_layout::QS + 128 * j + 32 * k..][..32];
                        for i in 0..4 {
                            chunk[4 * c + i] = nibble(v + i) | (nibble(v + 4 + i) << 4);
                        }
                    }
                }
            }
        }
    });
    Packed { ty: crate::quant::GgmlType::Q4_K, n_groups, blocks_per_row: nb, data: out }
}

/// Interleaves a Q6_K matrix of `n_out` rows of `n_in` values (`data` as in the file).
pub fn pack_q6_k(data: &[u8], n_in: usize, n_out: usize) -> Packed {
    use q6k_layout as l;
    let nb = n_in / QK_K;
    let n_groups = n_out / COLS;
    let row_bytes = nb * q6_k::SIZE;
    let group_bytes = nb * Q6_K_GROUP_BLOCK;
    let mut out = vec![0u8; n_groups * group_bytes];
    out.par_chunks_mut(group_bytes).enumerate().for_each(|(g, dst)| {
        for b in 0..nb {
            let dst = &mut dst[b * Q6_K_GROUP_BLOCK..(b + 1) * Q6_K_GROUP_BLOCK];
            for c in 0..COLS {
                let blk = &data[(g * COLS + c) * row_bytes + b * q6_k::SIZE..][..q6_k::SIZE];
                dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, q6_k::D).to_le_bytes());
                for s in 0..16 {
                    let sc = blk[q6_k::SCALES + s];
                    dst[l::SCALES + 8 * s + c] = sc;
                    dst[l::SCALE_PAIRS + 16 * (s / 2) + 2 * c + s % 2] = sc;
                }
                // Value v: half n, group of 32 within the half, position within the group.
                let value = |v: usize| {
                    let (n, l) = (v / 128, v % 128);
                    let (q, li) = (l / 32, l % 32);
                    let ql = blk[q6_k::QL + 64 * n + 32 * (q % 2) + li];
                    let low = if q < 2 { ql & 0xF } else { ql >> 4 };
                    let high = (blk[q6_k::QH + 32 * n + li] >> (2 * q)) & 3;
                    (low, high)
                };
                for k in 0..32 {
                    for i in 0..4 {
                        let (lo0, hi0) = value(8 * k + i);
                        let (lo1, hi1) = value(8 * k + 4 + i);
                        dst[l::LO + 32 * k + 4 * c + i] = lo0 | (lo1 << 4);
                        dst[l::HI + 32 * (k / 2) + 4 * c + i] |= (hi0 | (hi1 << 2)) << (4 * (k % 2));
                    }
                }
            }
        }
    });
    Packed { ty: crate::quant::GgmlType::Q6_K, n_groups, blocks_per_row: nb, data: out }
}
