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
//! Q5_K, per group and super-block (1472 bytes, 1408 in the file): Q4_K's layout for the
//! scales, mins and low 4 bits, then per sub-block j 32 bytes whose byte `4c + i` holds the
//! fifth bits of column c's weights in chunk k at bit 2k (weight v+i) and 2k+1 (weight v+4+i).
//!
//! Q6_K, per group and super-block (1824 bytes, 1680 in the file): `d[8]` f32,
//! `scales[16 groups of 16 values][8 columns]` i8, the same scales as `[8 pairs][8 columns][2]`
//! for the offset correction, the low 4 bits of each chunk k (v = 8k) laid out as Q4_K's chunks,
//! then per pair of chunks 32 bytes whose byte `4c + i` holds the high 2 bits of weights v+i
//! and v+4+i of column c (chunk 2m in bits 0..4, chunk 2m+1 in bits 4..8). Weights are stored
//! as in the file, 0..63 standing for -32..31.
//!
//! Q8_0, per group and block of 32 values (288 bytes, 272 in the file): `d[8]` f32, then for
//! each chunk k (4 values, v = 4k) 32 bytes where bytes `4c..4c+4` hold weights v..v+4 of
//! column c. Widening the f16 scales once here takes a conversion out of the inner loop.
//!
//! Q3_K, per group and super-block (1312 bytes, 880 in the file): Q6_K's `d[8]`, scales and scale
//! pairs (the 6-bit scales less 32), then each weight's unsigned 3-bit value u = low bits + 4 x
//! high bit, standing for u - 4, as Q4_K's nibbles (chunk k, v = 8k: byte `4c + i` holds weight
//! v+i in its low and v+4+i in its high nibble): unpacking is two operations a vector.
//!
//! Q2_K, per group and super-block (832 bytes, 672 in the file): `d[8]` f32, `dmin[8]` f32,
//! `scales[16 groups of 16 values][8 columns]` u8, the mins as `[8 pairs][8 columns][2]` u8
//! (Q6_K's scale pairs), then per group g of 16 values 32 bytes whose byte `4c + i` holds, at
//! bits 2t..2t+2, weight 16g + 4t + i of column c.
//!
//! IQ4_XS, per group and super-block (1120 bytes, 1088 in the file): `d[8]` f32,
//! `scales[8 sub-blocks of 32][8 columns]` i8 (the 6-bit scale less 32), then the level indices
//! laid out as Q4_K's nibbles (chunk k of sub-block j: byte `4c + i` holds weight v+i's index in
//! its low nibble and v+4+i's in its high nibble, v = 32j + 8k).
//!
//! Q4_0 and Q5_0, per group and block of 32 values (160 and 192 bytes, 144 and 176 in the file):
//! `d[8]` f32, the low 4 bits of the unsigned levels (0..15 or 0..31, standing for q - 8 or
//! q - 16) laid out as Q4_K's nibbles (chunk k, v = 8k: byte `4c + i` holds weight v+i in its low
//! and v+4+i in its high nibble), then for Q5_0 32 bytes of fifth bits as Q5_K's (byte `4c + i`,
//! bit 2k for weight v+i, 2k+1 for v+4+i).
//!
//! Wide Q4_K (the faster-weights load option, `widen`), per group and super-block (2240 bytes,
//! 1.84x Q4_K's layout): Q4_K's `d`, `dmin`, scales and mins, then each weight in a byte of its
//! own: for each sub-block j and chunk k 64 bytes, the low nibbles of Q4_K's 32 bytes and then
//! their high nibbles. The kernel loads what Q4_K's unpacks (an `and`, a shift and an `and`
//! per 64 weights), so its integer sums, and the results, are the same bit for bit.
//!
//! Types whose blocks are exactly blocks of a type with a layout are packed in that layout:
//! IQ4_NL is 32 signed levels (at most 8 bits) and one f16 scale, a Q8_0 block. The integer dot
//! products of the re-encoded blocks are the same sums that ggml's `ggml_vec_dot_iq4_nl_q8_0`
//! takes, so the numbers do not change; the weights take 1.9x the memory.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use crate::quant::GgmlType;
use crate::quant::blocks::{
    QK, QK_K, f16_at, iq4_xs, iq4_xs_scale, q2_k, q3_k, q3_k_scales, q4_k, q5_k, q6_k, q8_0, scale_min_k4,
};
use crate::quant::vec_dot::levels_q8_0;

/// Columns interleaved in one group.
pub const COLS: usize = 8;
pub const Q4_K_GROUP_BLOCK: usize = 32 + 32 + 64 + 64 + 1024;

pub const Q5_K_GROUP_BLOCK: usize = Q4_K_GROUP_BLOCK + 256;

/// Wide Q4_K: Q4_K's 192 bytes of scales, then a byte per weight.
pub const Q4_K_WIDE_GROUP_BLOCK: usize = q4k_layout::QS + 2048;

pub const Q6_K_GROUP_BLOCK: usize = 32 + 128 + 128 + 1024 + 512;

pub const Q8_0_GROUP_BLOCK: usize = 32 + 256;

pub const Q2_K_GROUP_BLOCK: usize = 32 + 32 + 128 + 128 + 512;

pub const Q3_K_GROUP_BLOCK: usize = 32 + 128 + 128 + 1024;

/// Q3_K: Q6_K's d, scales and scale pairs, then the 3-bit values as Q4_K's nibbles.
pub mod q3k_layout {
    pub const D: usize = 0;
    pub const SCALES: usize = 32;
    pub const SCALE_PAIRS: usize = 160;
    pub const QS: usize = 288;
}

pub const Q4_0_GROUP_BLOCK: usize = 32 + 128;

pub const Q5_0_GROUP_BLOCK: usize = Q4_0_GROUP_BLOCK + 32;

/// Q4_0 and Q5_0 (the fifth bits after Q4_0's fields).
pub mod q4_0_layout {
    pub const D: usize = 0;
    pub const QS: usize = 32;
    pub const QH: usize = 160;
}

pub const IQ4_XS_GROUP_BLOCK: usize = 32 + 64 + 1024;

pub mod q2k_layout {
    pub const D: usize = 0;
    pub const DMIN: usize = 32;
    pub const SCALES: usize = 64;
    pub const MIN_PAIRS: usize = 192;
    pub const QS: usize = 320;
}

pub mod iq4xs_layout {
    pub const D: usize = 0;
    pub const SCALES: usize = 32;
    pub const QS: usize = 96;
}

pub mod q8_0_layout {
    pub const D: usize = 0;
    pub const QS: usize = 32;
}

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
    /// Q5_K only: the fifth bits.
    pub const QH: usize = 1216;
}

/// Weights of a matrix in the interleaved layout, for its first `n_groups * COLS` rows.
pub struct Packed {
    /// The layout (`layout_of` the matrix's type).
    pub ty: GgmlType,
    /// Q4_K only: a byte per weight (`widen`).
    pub wide: bool,
    pub n_groups: usize,
    group_bytes: usize,
    data: PackedBytes,
}

/// Where packed weights live: anonymous memory (huge pages where the OS offers them: a fresh
/// 4 KiB page costs a fault and a clear, and gigabytes of them dominate startup), or a region
/// of a mapped file shared by all the matrices packed into it (`cpu::pack_cache`).
pub enum PackedBytes {
    Anonymous(memmap2::MmapMut),
    Heap(Vec<u8>),
    Shared(Arc<memmap2::Mmap>, Range<usize>),
}

impl PackedBytes {
    /// `len` zero bytes of anonymous memory.
    fn zeroed(len: usize) -> PackedBytes {
        if len == 0 {
            return PackedBytes::Heap(Vec::new());
        }
        match memmap2::MmapMut::map_anon(len) {
            Ok(m) => {
                #[cfg(target_os = "linux")]
                let _ = m.advise(memmap2::Advice::HugePage);
                PackedBytes::Anonymous(m)
            }
            Err(_) => PackedBytes::Heap(vec![0; len]),
        }
    }

    /// The bytes of memory `zeroed` made, to fill.
    fn fresh_mut(&mut self) -> &mut [u8] {
        match self {
            PackedBytes::Anonymous(m) => &mut m[..],
            PackedBytes::Heap(v) => &mut v[..],
            PackedBytes::Shared(..) => unreachable!("zeroed memory is not shared"),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            PackedBytes::Anonymous(m) => m,
            PackedBytes::Heap(v) => v,
            PackedBytes::Shared(map, range) => &map[range.clone()],
        }
    }
}

impl Packed {
    /// The packed form of a `ty` matrix of `n_out` rows of `n_in` values held in `data` (of
    /// `packed_len` bytes, filled by `pack_into`).
    pub fn new(ty: GgmlType, n_in: usize, n_out: usize, data: PackedBytes) -> Packed {
        let (n_groups, group_bytes) = shape(ty, n_in, n_out);
        assert_eq!(data.bytes().len(), n_groups * group_bytes, "{ty}: packed bytes of the wrong size");
        Packed { ty: layout_of(ty).expect("shape checked it"), wide: false, n_groups, group_bytes, data }
    }

    /// Drops this matrix's pages of a cache file from memory (whole pages inside its region),
    /// once another copy has taken its place; anonymous memory is freed when dropped instead.
    pub fn release_pages(&self) {
        #[cfg(unix)]
        if let PackedBytes::Shared(map, range) = &self.data {
            let page = 4096;
            let (start, end) = (range.start.div_ceil(page) * page, range.end / page * page);
            if end > start {
                // SAFETY: the map is private and read-only, and dllm replaces a cache file by
                // renaming a new one over it (this mapping keeps the old file), so dropped pages
                // read back with the same contents if they are ever touched again.
                let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
            }
        }
    }

    /// This Q4_K matrix with each weight in a byte (the wide layout of the module comment), in
    /// anonymous memory; None for the other layouts.
    pub fn widen(&self) -> Option<Packed> {
        if self.ty != GgmlType::Q4_K || self.wide {
            return None;
        }
        let blocks = self.group_bytes / Q4_K_GROUP_BLOCK;
        let group_bytes = blocks * Q4_K_WIDE_GROUP_BLOCK;
        let mut data = PackedBytes::zeroed(self.n_groups * group_bytes);
        let dst = data.fresh_mut();
        let src = self.bytes();
        dst.par_chunks_mut(Q4_K_WIDE_GROUP_BLOCK).zip(src.par_chunks(Q4_K_GROUP_BLOCK)).for_each(|(wide, packed)| {
            let qs = q4k_layout::QS;
            wide[..qs].copy_from_slice(&packed[..qs]);
            for (out, chunk) in wide[qs..].chunks_exact_mut(64).zip(packed[qs..].chunks_exact(32)) {
                for (i, &b) in chunk.iter().enumerate() {
                    out[i] = b & 0x0F;
                    out[32 + i] = b >> 4;
                }
            }
        });
        Some(Packed { ty: self.ty, wide: true, n_groups: self.n_groups, group_bytes, data })
    }

    /// All the packed bytes, group after group.
    pub fn bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// The bytes of the adjacent groups `groups` (all their super-blocks), one after the other.
    pub fn groups(&self, groups: Range<usize>) -> &[u8] {
        &self.data.bytes()[groups.start * self.group_bytes..groups.end * self.group_bytes]
    }
}

/// The interleaved layout a `ty` matrix is packed in: its own, or that of the type whose blocks
/// re-encode its blocks exactly (see the module comment).
pub fn layout_of(ty: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    match ty {
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_0 | IQ4_XS | Q4_0 | Q5_0 => Some(ty),
        IQ4_NL => Some(Q8_0),
        _ => None,
    }
}

/// (whole groups, bytes per group) of a packed `ty` matrix.
fn shape(ty: GgmlType, n_in: usize, n_out: usize) -> (usize, usize) {
    let group_block = match layout_of(ty) {
        Some(GgmlType::Q4_K) => Q4_K_GROUP_BLOCK,
        Some(GgmlType::Q5_K) => Q5_K_GROUP_BLOCK,
        Some(GgmlType::Q6_K) => Q6_K_GROUP_BLOCK,
        Some(GgmlType::Q8_0) => Q8_0_GROUP_BLOCK,
        Some(GgmlType::Q2_K) => Q2_K_GROUP_BLOCK,
        Some(GgmlType::IQ4_XS) => IQ4_XS_GROUP_BLOCK,
        Some(GgmlType::Q3_K) => Q3_K_GROUP_BLOCK,
        Some(GgmlType::Q4_0) => Q4_0_GROUP_BLOCK,
        Some(GgmlType::Q5_0) => Q5_0_GROUP_BLOCK,
        _ => panic!("no interleaved layout for {ty}"),
    };
    // A re-encoded type has its layout's block size.
    (n_out / COLS, n_in / ty.block_size() * group_block)
}

/// Bytes of the packed form of a `ty` matrix of `n_out` rows of `n_in` values.
pub fn packed_len(ty: GgmlType, n_in: usize, n_out: usize) -> usize {
    let (n_groups, group_bytes) = shape(ty, n_in, n_out);
    n_groups * group_bytes
}

/// Whether `ty` has an interleaved layout (and packed kernels).
pub fn has_layout(ty: GgmlType) -> bool {
    layout_of(ty).is_some()
}

/// Rows packed per slice: `done(rows)` is called after each slice, so that the caller can
/// release the source pages of those rows before the next slice is read (peak memory stays
/// near one copy of the weights).
const SLICE_GROUPS: usize = 512;

/// Packs one group: (the group's rows as in the file, blocks per row, row bytes, destination).
type PackGroup = fn(&[u8], usize, usize, &mut [u8]);

/// Interleaves a matrix of `n_out` rows of `n_in` values of a type with a layout (`data` as
/// in the file) into anonymous memory, reporting progress to `done` after each slice of rows.
pub fn pack(ty: GgmlType, data: &[u8], n_in: usize, n_out: usize, done: impl FnMut(Range<usize>)) -> Packed {
    let mut bytes = PackedBytes::zeroed(packed_len(ty, n_in, n_out));
    pack_into(ty, data, n_in, n_out, bytes.fresh_mut(), done);
    Packed::new(ty, n_in, n_out, bytes)
}

/// `pack` into `dst` (`packed_len` bytes); rows past the last whole group are left to the
/// unpacked kernels.
pub fn pack_into(
    ty: GgmlType,
    data: &[u8],
    n_in: usize,
    n_out: usize,
    dst: &mut [u8],
    mut done: impl FnMut(Range<usize>),
) {
    let pack_group: PackGroup = match ty {
        GgmlType::Q4_K => pack_group_q4_k,
        GgmlType::Q5_K => pack_group_q5_k,
        GgmlType::Q6_K => pack_group_q6_k,
        GgmlType::Q8_0 => pack_group_q8_0,
        GgmlType::Q2_K => pack_group_q2_k,
        GgmlType::IQ4_XS => pack_group_iq4_xs,
        GgmlType::Q4_0 => |src, nb, rb, dst| pack_group_q4_0_like(GgmlType::Q4_0, src, nb, rb, dst),
        GgmlType::Q5_0 => |src, nb, rb, dst| pack_group_q4_0_like(GgmlType::Q5_0, src, nb, rb, dst),
        GgmlType::IQ4_NL => {
            |src, nb, rb, dst| pack_group_q8_0(&reencoded(src, rb, GgmlType::IQ4_NL), nb, nb * q8_0::SIZE, dst)
        }
        GgmlType::Q3_K => pack_group_q3_k,
        _ => panic!("no interleaved layout for {ty}"),
    };
    let nb = n_in / ty.block_size();
    let (_, group_bytes) = shape(ty, n_in, n_out);
    let row_bytes = data.len() / n_out;
    assert_eq!(dst.len(), packed_len(ty, n_in, n_out), "{ty}: destination of the wrong size");
    for (s, slice) in dst.chunks_mut(SLICE_GROUPS * group_bytes).enumerate() {
        let first = s * SLICE_GROUPS;
        slice.par_chunks_mut(group_bytes).enumerate().for_each(|(i, dst)| {
            let g = first + i;
            pack_group(&data[g * COLS * row_bytes..(g + 1) * COLS * row_bytes], nb, row_bytes, dst);
        });
        done(first * COLS..(first * COLS + slice.len() / group_bytes * COLS));
    }
}

/// A group's `COLS` rows (`row_bytes` each) of `ty`, every block re-encoded as the Q8_0 block of
/// its levels, rows one after the other.
fn reencoded(src: &[u8], row_bytes: usize, ty: GgmlType) -> Vec<u8> {
    src[..COLS * row_bytes]
        .chunks_exact(ty.type_size())
        .flat_map(|b| {
            let (d, levels) = levels_q8_0(ty, b);
            let mut out = [0u8; q8_0::SIZE];
            out[q8_0::D..q8_0::D + 2].copy_from_slice(&d.to_le_bytes());
            for (o, v) in out[q8_0::QS..].iter_mut().zip(levels) {
                *o = v as u8;
            }
            out
        })
        .collect()
}

/// Where a Q4_K-like block keeps its fields: (block size, d, dmin, packed scales, nibbles).
type K4Fields = (usize, usize, usize, usize, usize);

/// One group of Q4_K: `src` holds the group's 8 rows as in the file.
fn pack_group_q4_k(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    let fields = (q4_k::SIZE, q4_k::D, q4_k::DMIN, q4_k::SCALES, q4_k::QS);
    for b in 0..nb {
        pack_k4_block(src, b, row_bytes, fields, &mut dst[b * Q4_K_GROUP_BLOCK..(b + 1) * Q4_K_GROUP_BLOCK]);
    }
}

/// One group of Q5_K: Q4_K's fields, then the fifth bits.
fn pack_group_q5_k(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    let fields = (q5_k::SIZE, q5_k::D, q5_k::DMIN, q5_k::SCALES, q5_k::QS);
    for b in 0..nb {
        let dst = &mut dst[b * Q5_K_GROUP_BLOCK..(b + 1) * Q5_K_GROUP_BLOCK];
        pack_k4_block(src, b, row_bytes, fields, dst);
        for c in 0..COLS {
            // Bit j of qh[l] is the fifth bit of value 32j + l.
            let qh = &src[c * row_bytes + b * q5_k::SIZE + q5_k::QH..][..32];
            for j in 0..8 {
                for i in 0..4 {
                    let mut byte = 0u8;
                    for k in 0..4 {
                        let (l0, l1) = (8 * k + i, 8 * k + 4 + i);
                        byte |= ((qh[l0] >> j) & 1) << (2 * k) | ((qh[l1] >> j) & 1) << (2 * k + 1);
                    }
                    dst[q4k_layout::QH + 32 * j + 4 * c + i] = byte;
                }
            }
        }
    }
}

/// Super-block `b` of a group's Q4_K-like rows: scales, mins and the low 4 bits, into `dst`.
fn pack_k4_block(src: &[u8], b: usize, row_bytes: usize, fields: K4Fields, dst: &mut [u8]) {
    let (size, d_off, dmin_off, scales_off, qs_off) = fields;
    for c in 0..COLS {
        let blk = &src[c * row_bytes + b * size..][..size];
        let (d, dmin) = (f16_at(blk, d_off), f16_at(blk, dmin_off));
        dst[q4k_layout::D + 4 * c..][..4].copy_from_slice(&d.to_le_bytes());
        dst[q4k_layout::DMIN + 4 * c..][..4].copy_from_slice(&dmin.to_le_bytes());
        let packed_scales = &blk[scales_off..scales_off + 12];
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, packed_scales);
            dst[q4k_layout::SCALES + 8 * j + c] = sc;
            dst[q4k_layout::MINS + 16 * (j / 2) + 2 * c + j % 2] = m;
        }
        // Sub-blocks 2p and 2p+1 are the low and high nibbles of the same 32 bytes.
        for j in 0..8 {
            let src32 = &blk[qs_off + 32 * (j / 2)..][..32];
            for k in 0..4 {
                let chunk = &mut dst[q4k_layout::QS + 128 * j + 32 * k + 4 * c..][..4];
                for (i, out) in chunk.iter_mut().enumerate() {
                    let (lo, hi) = (src32[8 * k + i], src32[8 * k + 4 + i]);
                    *out = if j % 2 == 0 { (lo & 0x0F) | (hi << 4) } else { (lo >> 4) | (hi & 0xF0) };
                }
            }
        }
    }
}

/// One group of Q6_K: `src` holds the group's 8 rows as in the file.
fn pack_group_q6_k(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use q6k_layout as l;
    for b in 0..nb {
        let dst = &mut dst[b * Q6_K_GROUP_BLOCK..(b + 1) * Q6_K_GROUP_BLOCK];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * q6_k::SIZE..][..q6_k::SIZE];
            dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, q6_k::D).to_le_bytes());
            for s in 0..16 {
                let sc = blk[q6_k::SCALES + s];
                dst[l::SCALES + 8 * s + c] = sc;
                dst[l::SCALE_PAIRS + 16 * (s / 2) + 2 * c + s % 2] = sc;
            }
            // Chunk k holds values 8k..8k+8: weight 8k+i in the low and 8k+4+i in the high
            // half of byte 4c+i; the high bits of chunks 2m and 2m+1 share one vector. Values
            // 16m..16m+16 lie in one run of 32 that the file stores as one nibble half of `ql`
            // and one bit pair of `qh` (as `quant::dequantize` reads them), so four of them at
            // a time are a 32-bit word of each, masked and shifted.
            let word = |off: usize| u32::from_le_bytes(blk[off..off + 4].try_into().expect("4 bytes"));
            for m in 0..16 {
                let (n, part, l0) = (m / 8, (m % 8) / 2, 16 * (m % 2));
                let low = |o: usize| {
                    let w = word(q6_k::QL + 64 * n + 32 * (part & 1) + l0 + o);
                    (if part >= 2 { w >> 4 } else { w }) & 0x0F0F_0F0F
                };
                let high = |o: usize| (word(q6_k::QH + 32 * n + l0 + o) >> (2 * part)) & 0x0303_0303;
                let put = |dst: &mut [u8], at: usize, v: u32| dst[at..at + 4].copy_from_slice(&v.to_le_bytes());
                put(dst, l::LO + 64 * m + 4 * c, low(0) | (low(4) << 4));
                put(dst, l::LO + 64 * m + 32 + 4 * c, low(8) | (low(12) << 4));
                put(dst, l::HI + 32 * m + 4 * c, high(0) | (high(4) << 2) | (high(8) << 4) | (high(12) << 6));
            }
        }
    }
}

/// One group of Q8_0: `src` holds the group's 8 rows as in the file.
fn pack_group_q8_0(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use q8_0_layout as l;
    for b in 0..nb {
        let dst = &mut dst[b * Q8_0_GROUP_BLOCK..(b + 1) * Q8_0_GROUP_BLOCK];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * q8_0::SIZE..][..q8_0::SIZE];
            dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, q8_0::D).to_le_bytes());
            for k in 0..QK / 4 {
                dst[l::QS + 32 * k + 4 * c..][..4].copy_from_slice(&blk[q8_0::QS + 4 * k..][..4]);
            }
        }
    }
}

/// One group of Q2_K: `src` holds the group's 8 rows as in the file.
fn pack_group_q2_k(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use q2k_layout as l;
    for b in 0..nb {
        let dst = &mut dst[b * Q2_K_GROUP_BLOCK..(b + 1) * Q2_K_GROUP_BLOCK];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * q2_k::SIZE..][..q2_k::SIZE];
            dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, q2_k::D).to_le_bytes());
            dst[l::DMIN + 4 * c..][..4].copy_from_slice(&f16_at(blk, q2_k::DMIN).to_le_bytes());
            for g in 0..16 {
                let s = blk[q2_k::SCALES + g];
                dst[l::SCALES + 8 * g + c] = s & 0xF;
                dst[l::MIN_PAIRS + 16 * (g / 2) + 2 * c + g % 2] = s >> 4;
            }
            // Weight i = 128n + 32j + l is bits 2j of byte 32n + l of `qs` (as `dequantize`).
            let weight = |i: usize| (blk[q2_k::QS + 32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            for g in 0..16 {
                for i in 0..4 {
                    let byte = (0..4).fold(0u8, |byte, t| byte | weight(16 * g + 4 * t + i) << (2 * t));
                    dst[l::QS + 32 * g + 4 * c + i] = byte;
                }
            }
        }
    }
}

/// One group of IQ4_XS: `src` holds the group's 8 rows as in the file.
fn pack_group_iq4_xs(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use iq4xs_layout as l;
    for b in 0..nb {
        let dst = &mut dst[b * IQ4_XS_GROUP_BLOCK..(b + 1) * IQ4_XS_GROUP_BLOCK];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * iq4_xs::SIZE..][..iq4_xs::SIZE];
            dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, iq4_xs::D).to_le_bytes());
            for j in 0..QK_K / 32 {
                dst[l::SCALES + 8 * j + c] = iq4_xs_scale(blk, j) as i8 as u8;
                // Sub-block j's 16 bytes: weight p's index is the low nibble of byte p (p < 16)
                // or the high nibble of byte p - 16.
                let qs = &blk[iq4_xs::QS + 16 * j..][..16];
                let index = |p: usize| if p < 16 { qs[p] & 0xF } else { qs[p - 16] >> 4 };
                for k in 0..4 {
                    for i in 0..4 {
                        dst[l::QS + 128 * j + 32 * k + 4 * c + i] = index(8 * k + i) | index(8 * k + 4 + i) << 4;
                    }
                }
            }
        }
    }
}

/// One group of Q4_0 (`ty`) or Q5_0: the levels as unsigned nibbles (and fifth bits), `d` widened.
fn pack_group_q4_0_like(ty: GgmlType, src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use q4_0_layout as l;
    let (group_block, offset) = match ty {
        GgmlType::Q4_0 => (Q4_0_GROUP_BLOCK, 8),
        _ => (Q5_0_GROUP_BLOCK, 16),
    };
    for b in 0..nb {
        let dst = &mut dst[b * group_block..(b + 1) * group_block];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * ty.type_size()..][..ty.type_size()];
            let (d, levels) = levels_q8_0(ty, blk);
            dst[l::D + 4 * c..][..4].copy_from_slice(&d.to_f32().to_le_bytes());
            let q = |j: usize| (levels[j] as i32 + offset) as u8;
            for i in 0..4 {
                let mut fifth = 0u8;
                for k in 0..4 {
                    let (v0, v1) = (q(8 * k + i), q(8 * k + 4 + i));
                    dst[l::QS + 32 * k + 4 * c + i] = (v0 & 0xF) | (v1 & 0xF) << 4;
                    fifth |= (v0 >> 4) << (2 * k) | (v1 >> 4) << (2 * k + 1);
                }
                if ty == GgmlType::Q5_0 {
                    dst[l::QH + 4 * c + i] = fifth;
                }
            }
        }
    }
}

/// One group of Q3_K: `src` holds the group's 8 rows as in the file.
fn pack_group_q3_k(src: &[u8], nb: usize, row_bytes: usize, dst: &mut [u8]) {
    use q3k_layout as l;
    for b in 0..nb {
        let dst = &mut dst[b * Q3_K_GROUP_BLOCK..(b + 1) * Q3_K_GROUP_BLOCK];
        for c in 0..COLS {
            let blk = &src[c * row_bytes + b * q3_k::SIZE..][..q3_k::SIZE];
            dst[l::D + 4 * c..][..4].copy_from_slice(&f16_at(blk, q3_k::D).to_le_bytes());
            for (g, s) in q3_k_scales(&blk[q3_k::SCALES..q3_k::SCALES + 12]).into_iter().enumerate() {
                dst[l::SCALES + 8 * g + c] = s as u8;
                dst[l::SCALE_PAIRS + 16 * (g / 2) + 2 * c + g % 2] = s as u8;
            }
            // Weight i = 128n + 32j + l: bits 2j of byte 32n + l of `qs`, and the high bit
            // 4n + j of hmask[l] (as `dequantize` reads them).
            let low = |i: usize| (blk[q3_k::QS + 32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            let high = |i: usize| (blk[q3_k::HMASK + i % 32] >> (4 * (i / 128) + (i / 32) % 4)) & 1;
            let u = |i: usize| low(i) | high(i) << 2;
            for k in 0..QK_K / 8 {
                for i in 0..4 {
                    dst[l::QS + 32 * k + 4 * c + i] = u(8 * k + i) | u(8 * k + 4 + i) << 4;
                }
            }
        }
    }
}
