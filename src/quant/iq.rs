//! The i-quants' super-blocks unpacked: the grid entries their indices name, with the signs
//! applied, and their integer scales. ggml's `dequantize_row_iq*` (ggml-quants.c) and
//! `ggml_vec_dot_iq*_q8_K_generic` (ggml-cpu/quants.c) both read a block this way; dllm's
//! dequantization and integer dot products (`quant::dequant`, `quant::vec_dot`) take it from here,
//! so that the bit fiddling of each layout is written once.

use super::blocks::*;
pub use super::iq_grids::KVALUES_IQ4NL;
use super::iq_grids::*;

/// One super-block of 256 weights of IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS or IQ3_S.
pub struct IqBlock {
    /// The super-block scale.
    pub d: f32,
    /// The weights as signed grid values (the value of weight i is a multiple of `q[i]`).
    pub q: [i8; QK_K],
    /// The odd integer multiplier of each group of 16 weights (`2s + 1` of its stored scale `s`;
    /// types with one scale per 32 repeat it).
    pub ls: [u8; QK_K / 16],
    /// IQ1 only: the sign (+1 or -1) of the `IQ1S_DELTA` shift of each group of 8 weights.
    pub delta: [i8; QK_K / 8],
}

/// IQ1's shift of every weight, `IQ1S_DELTA` (= `IQ1M_DELTA`) in ggml-common.h.
pub const IQ1_DELTA: f32 = 0.125;

/// Byte `j` of grid entry `e`.
#[inline(always)]
fn byte(e: u64, j: usize) -> u8 {
    (e >> (8 * j)) as u8
}

impl IqBlock {
    fn new(d: f32) -> IqBlock {
        IqBlock { d, q: [0; QK_K], ls: [0; QK_K / 16], delta: [0; QK_K / 8] }
    }

    /// Writes the 8 weights of group `g` (weights 8g..8g+8) from a u64 grid entry and a sign mask
    /// (bit j set: weight j is negative).
    #[inline(always)]
    fn put8(&mut self, g: usize, entry: u64, signs: u8) {
        for j in 0..8 {
            let v = byte(entry, j) as i8;
            self.q[8 * g + j] = if signs & (1 << j) != 0 { -v } else { v };
        }
    }

    /// `put8` for two u32 grid entries of 4 weights each.
    #[inline(always)]
    fn put4x2(&mut self, g: usize, lo: u32, hi: u32, signs: u8) {
        self.put8(g, lo as u64 | (hi as u64) << 32, signs);
    }

    /// Sets the multiplier of each group of 16 from the 4-bit scales packed two to a byte.
    fn set_ls16(&mut self, scales: &[u8]) {
        for i in 0..QK_K / 16 {
            let s = (scales[i / 2] >> (4 * (i % 2))) & 0xf;
            self.ls[i] = 2 * s + 1;
        }
    }

    /// Sets the multiplier of weights 32i..32i+32 from a stored 4-bit scale.
    fn set_ls32(&mut self, i: usize, s: u32) {
        let ls = (2 * s + 1) as u8;
        self.ls[2 * i] = ls;
        self.ls[2 * i + 1] = ls;
    }
}

/// IQ2_XXS: per 32 weights, two u32: four 8-bit grid indices, then four 7-bit sign indices and
/// a 4-bit scale.
pub fn iq2_xxs(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq2_xxs::D));
    for ib in 0..QK_K / 32 {
        let (idx, meta) = (u32_at(b, iq2_xxs::QS + 8 * ib), u32_at(b, iq2_xxs::QS + 8 * ib + 4));
        u.set_ls32(ib, meta >> 28);
        for l in 0..4 {
            let signs = KSIGNS_IQ2XS[((meta >> (7 * l)) & 127) as usize];
            u.put8(4 * ib + l, IQ2XXS_GRID[byte(idx as u64, l) as usize], signs);
        }
    }
    u
}

/// IQ2_XS: per 8 weights a u16 of a 9-bit grid index and a 7-bit sign index; a 4-bit scale per 16.
pub fn iq2_xs(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq2_xs::D));
    for g in 0..QK_K / 8 {
        let q = u16_at(b, iq2_xs::QS + 2 * g);
        u.put8(g, IQ2XS_GRID[(q & 511) as usize], KSIGNS_IQ2XS[(q >> 9) as usize]);
    }
    u.set_ls16(&b[iq2_xs::SCALES..iq2_xs::SCALES + 8]);
    u
}

/// IQ2_S: per 8 weights a 10-bit grid index (8 bits in `qs`, 2 in `qh`) and a byte of signs.
pub fn iq2_s(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq2_s::D));
    for ib in 0..QK_K / 32 {
        let qh = b[iq2_s::QH + ib] as usize;
        for l in 0..4 {
            let index = b[iq2_s::QS + 4 * ib + l] as usize | ((qh << (8 - 2 * l)) & 0x300);
            u.put8(4 * ib + l, IQ2S_GRID[index], b[iq2_s::SIGNS + 4 * ib + l]);
        }
    }
    u.set_ls16(&b[iq2_s::SCALES..iq2_s::SCALES + 8]);
    u
}

/// IQ3_XXS: per 4 weights an 8-bit index of a u32 grid entry; per 32 weights a u32 of four
/// 7-bit sign indices and a 4-bit scale.
pub fn iq3_xxs(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq3_xxs::D));
    for ib in 0..QK_K / 32 {
        let meta = u32_at(b, iq3_xxs::SCALES_AND_SIGNS + 4 * ib);
        u.set_ls32(ib, meta >> 28);
        let qs = &b[iq3_xxs::QS + 8 * ib..][..8];
        for l in 0..4 {
            let signs = KSIGNS_IQ2XS[((meta >> (7 * l)) & 127) as usize];
            u.put4x2(4 * ib + l, IQ3XXS_GRID[qs[2 * l] as usize], IQ3XXS_GRID[qs[2 * l + 1] as usize], signs);
        }
    }
    u
}

/// IQ3_S: per 4 weights a 9-bit index of a u32 grid entry (8 bits in `qs`, one in `qh`), a
/// byte of signs per 8, a 4-bit scale per 32 (multiplier `1 + 2s`).
pub fn iq3_s(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq3_s::D));
    for ib in 0..QK_K / 32 {
        let qh = b[iq3_s::QH + ib] as usize;
        let qs = &b[iq3_s::QS + 8 * ib..][..8];
        for l in 0..4 {
            let lo = IQ3S_GRID[qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256)];
            let hi = IQ3S_GRID[qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256)];
            u.put4x2(4 * ib + l, lo, hi, b[iq3_s::SIGNS + 4 * ib + l]);
        }
        u.set_ls32(ib, ((b[iq3_s::SCALES + ib / 2] >> (4 * (ib % 2))) & 0xf) as u32);
    }
    u
}

/// IQ1_S: per 8 weights an 11-bit index of an int8 grid entry (8 bits in `qs`, 3 in `qh`); per
/// 32 weights a u16 `qh` with those high bits, a 3-bit scale and the delta's sign.
pub fn iq1_s(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(f16_at(b, iq1_s::D));
    for ib in 0..QK_K / 32 {
        let qh = u16_at(b, iq1_s::QH + 2 * ib) as usize;
        for l in 0..4 {
            let index = b[iq1_s::QS + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
            u.put8(4 * ib + l, IQ1S_GRID[index], 0);
            u.delta[4 * ib + l] = if qh & 0x8000 != 0 { -1 } else { 1 };
        }
        u.set_ls32(ib, ((qh >> 12) & 7) as u32);
    }
    u
}

/// IQ1_M: IQ1_S's grid, with the index's high bits and the delta's sign per 8 weights in a
/// nibble of `qh`, and a 3-bit scale per 16 weights.
pub fn iq1_m(b: &[u8]) -> IqBlock {
    let mut u = IqBlock::new(iq1_m_d(b));
    for ib in 0..QK_K / 32 {
        for l in 0..4 {
            let nibble = (b[iq1_m::QH + 2 * ib + l / 2] >> (4 * (l % 2))) as usize & 0xf;
            let index = b[iq1_m::QS + 4 * ib + l] as usize | ((nibble & 7) << 8);
            u.put8(4 * ib + l, IQ1S_GRID[index], 0);
            u.delta[4 * ib + l] = if nibble & 8 != 0 { -1 } else { 1 };
        }
        let sc = u16_at(b, iq1_m::SCALES + 2 * (ib / 2));
        for half in 0..2 {
            u.ls[2 * ib + half] = (2 * ((sc >> (6 * (ib % 2) + 3 * half)) & 7) + 1) as u8;
        }
    }
    u
}

/// The unpacked super-block of an i-quant with a grid (`None` for the other types).
pub fn unpack(ty: super::GgmlType, b: &[u8]) -> Option<IqBlock> {
    use super::GgmlType::*;
    Some(match ty {
        IQ2_XXS => iq2_xxs(b),
        IQ2_XS => iq2_xs(b),
        IQ2_S => iq2_s(b),
        IQ3_XXS => iq3_xxs(b),
        IQ3_S => iq3_s(b),
        IQ1_S => iq1_s(b),
        IQ1_M => iq1_m(b),
        _ => return None,
    })
}

/// The 32 signed levels of an IQ4_NL block (also each 32-weight group of IQ4_XS): nibble j of
/// `qs` (16 bytes) indexes `KVALUES_IQ4NL`, low nibbles for weights 0..16, high for 16..32.
#[inline]
pub fn iq4_levels(qs: &[u8]) -> [i8; 32] {
    let mut out = [0i8; 32];
    for j in 0..16 {
        out[j] = KVALUES_IQ4NL[(qs[j] & 0xf) as usize];
        out[j + 16] = KVALUES_IQ4NL[(qs[j] >> 4) as usize];
    }
    out
}
