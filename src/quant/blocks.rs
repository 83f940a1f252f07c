//! Byte layouts of the ggml quantized blocks, the single description that the dequantizer,
//! the SIMD kernels and the CUDA kernels all read. Offsets are in bytes from the start of a
//! block; all multi-byte fields are little-endian. Names mirror ggml (`QK_K`, `qs`, `qh`, ...)
//! so that cross-checking against ggml-common.h is direct.

/// Values in a super-block of the K-quants.
pub const QK_K: usize = 256;
/// Values in a block of the legacy quants (Q4_0 ... Q8_0).
pub const QK: usize = 32;

pub mod q4_0 {
    pub const D: usize = 0; // f16 scale
    pub const QS: usize = 2; // 16 bytes: low nibbles are values 0..16, high nibbles 16..32
    pub const SIZE: usize = 18;
}

pub mod q4_1 {
    pub const D: usize = 0; // f16 scale
    pub const M: usize = 2; // f16 minimum
    pub const QS: usize = 4; // 16 bytes of nibbles
    pub const SIZE: usize = 20;
}

pub mod q5_0 {
    pub const D: usize = 0; // f16 scale
    pub const QH: usize = 2; // u32: fifth bit of each of the 32 values
    pub const QS: usize = 6; // 16 bytes of nibbles
    pub const SIZE: usize = 22;
}

pub mod q5_1 {
    pub const D: usize = 0;
    pub const M: usize = 2;
    pub const QH: usize = 4;
    pub const QS: usize = 8;
    pub const SIZE: usize = 24;
}

pub mod q8_0 {
    pub const D: usize = 0; // f16 scale
    pub const QS: usize = 2; // 32 x i8
    pub const SIZE: usize = 34;
}

pub mod q2_k {
    pub const SCALES: usize = 0; // 16 bytes: low nibble scale, high nibble min, per 16 values
    pub const QS: usize = 16; // 64 bytes of 2-bit values
    pub const D: usize = 80; // f16 super-block scale of the scales
    pub const DMIN: usize = 82; // f16 super-block scale of the mins
    pub const SIZE: usize = 84;
}

pub mod q3_k {
    pub const HMASK: usize = 0; // 32 bytes: high bit of each value
    pub const QS: usize = 32; // 64 bytes: low 2 bits
    pub const SCALES: usize = 96; // 12 bytes: 16 packed 6-bit scales
    pub const D: usize = 108; // f16
    pub const SIZE: usize = 110;
}

pub mod q4_k {
    pub const D: usize = 0; // f16 super-block scale of the scales
    pub const DMIN: usize = 2; // f16 super-block scale of the mins
    pub const SCALES: usize = 4; // 12 bytes: 8 packed 6-bit (scale, min) pairs
    pub const QS: usize = 16; // 128 bytes: 4-bit values, 64 per 32 bytes (low then high nibbles)
    pub const SIZE: usize = 144;
}

pub mod q5_k {
    pub const D: usize = 0;
    pub const DMIN: usize = 2;
    pub const SCALES: usize = 4; // 12 bytes, packed as in Q4_K
    pub const QH: usize = 16; // 32 bytes: fifth bits
    pub const QS: usize = 48; // 128 bytes: low 4 bits
    pub const SIZE: usize = 176;
}

pub mod q6_k {
    pub const QL: usize = 0; // 128 bytes: low 4 bits
    pub const QH: usize = 128; // 64 bytes: high 2 bits
    pub const SCALES: usize = 192; // 16 x i8 scales, one per 16 values
    pub const D: usize = 208; // f16
    pub const SIZE: usize = 210;
}

// The i-quants (ggml-common.h). Every one but IQ1_M starts with its f16 super-block scale `d`.

pub mod iq2_xxs {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 32 x u16: per 32 values, 4 grid indices (bytes) then 4x7 sign bits and a 4-bit scale
    pub const SIZE: usize = 66;
}

pub mod iq2_xs {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 32 x u16: 9-bit grid index, 7 sign bits
    pub const SCALES: usize = 66; // 8 bytes: two 4-bit scales per 32 values
    pub const SIZE: usize = 74;
}

pub mod iq2_s {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 32 bytes of grid index low bits, then 32 bytes of signs
    pub const SIGNS: usize = 34;
    pub const QH: usize = 66; // 8 bytes: 2 high index bits per group of 8
    pub const SCALES: usize = 74; // 8 bytes: two 4-bit scales per 32 values
    pub const SIZE: usize = 82;
}

pub mod iq3_xxs {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 64 grid indices, then 8 x u32 of 4x7 sign bits and a 4-bit scale
    pub const SCALES_AND_SIGNS: usize = 66;
    pub const SIZE: usize = 98;
}

pub mod iq3_s {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 64 grid index low bytes
    pub const QH: usize = 66; // 8 bytes: the ninth index bits
    pub const SIGNS: usize = 74; // 32 bytes
    pub const SCALES: usize = 106; // 4 bytes: two 4-bit scales per 64 values
    pub const SIZE: usize = 110;
}

pub mod iq1_s {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 32 grid index low bytes
    pub const QH: usize = 34; // 8 x u16: 3 high index bits per group of 8, a 3-bit scale, the delta's sign
    pub const SIZE: usize = 50;
}

pub mod iq1_m {
    pub const QS: usize = 0; // 32 grid index low bytes
    pub const QH: usize = 32; // 16 bytes: 3 high index bits and the delta's sign per group of 8
    pub const SCALES: usize = 48; // 4 x u16: 3-bit scales, and the f16 `d` in their top nibbles
    pub const SIZE: usize = 56;
}

pub mod iq4_nl {
    pub const D: usize = 0;
    pub const QS: usize = 2; // 16 bytes of nibbles indexing `KVALUES_IQ4NL` (low: 0..16, high: 16..32)
    pub const SIZE: usize = 18;
}

pub mod iq4_xs {
    pub const D: usize = 0;
    pub const SCALES_H: usize = 2; // u16: the high 2 bits of the 8 6-bit scales
    pub const SCALES_L: usize = 4; // 4 bytes: their low 4 bits
    pub const QS: usize = 8; // 128 bytes of nibbles, 16 bytes per 32 values as in IQ4_NL
    pub const SIZE: usize = 136;
}

/// The little-endian u16 at `off`.
#[inline]
pub fn u16_at(block: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([block[off], block[off + 1]])
}

/// The little-endian u32 at `off`.
#[inline]
pub fn u32_at(block: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([block[off], block[off + 1], block[off + 2], block[off + 3]])
}

/// IQ1_M's f16 super-block scale, spread over the top nibbles of its four u16 scales.
#[inline]
pub fn iq1_m_d(block: &[u8]) -> f32 {
    let sc = |i: usize| u16_at(block, iq1_m::SCALES + 2 * i);
    let bits = (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000);
    half::f16::from_bits(bits).to_f32()
}

/// The 6-bit scale (0..64, stored offset by 32) of group `ib` (0..8) of an IQ4_XS block.
#[inline]
pub fn iq4_xs_scale(block: &[u8], ib: usize) -> i32 {
    let lo = (block[iq4_xs::SCALES_L + ib / 2] >> (4 * (ib % 2))) & 0xf;
    let hi = (u16_at(block, iq4_xs::SCALES_H) >> (2 * ib)) & 3;
    (lo as i32 | (hi as i32) << 4) - 32
}

/// Reads the little-endian f16 at `off` as f32.
#[inline]
pub fn f16_at(block: &[u8], off: usize) -> f32 {
    half::f16::from_le_bytes([block[off], block[off + 1]]).to_f32()
}

/// The (scale, min) pair `j` (0..8) of the 12-byte packed 6-bit scales of Q4_K and Q5_K
/// (ggml's `get_scale_min_k4`).
#[inline]
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// The 16 signed 6-bit scales of a Q3_K block, unpacked from its 12 bytes (offset by -32).
#[inline]
pub fn q3_k_scales(packed: &[u8]) -> [i8; 16] {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let word = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().unwrap());
    let (a0, a1, tmp) = (word(0), word(1), word(2));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut out = [0i8; 16];
    for (i, w) in aux.iter().enumerate() {
        for (b, byte) in w.to_le_bytes().iter().enumerate() {
            out[4 * i + b] = (*byte as i8).wrapping_sub(32);
        }
    }
    out
}
