//! 256-bit x86 kernels: one quantized weight row, or one packed group of eight columns
//! (`cpu::kernels::repack`), against up to `R` activation rows at once, so that each unpacked weight
//! vector is reused R times. Integer sums use `vpmaddubsw` (unsigned weights x signed
//! activations, pairs summed to i16) and a widening multiply-add against the sub-block scale
//! (pairs summed to i32); each super-block ends with one float multiply-add per row.
//!
//! The row kernels run on AVX2. The packed kernels are generic over `Int8Dot` and compiled
//! for AVX2, AVX-VNNI and AVX-512 VNNI by `packed_entry_points!`.
//!
//! Safety contract of every `unsafe fn` here: the CPU supports AVX2 and FMA (checked by
//! `Isa::Avx2.is_available()` before dispatch), `w` holds whole blocks of the weight type,
//! and every activation row holds one block per weight block.

use super::prefetch::SpreadPrefetch;
use std::arch::x86_64::*;

use super::int8_dot::{Avx2Dot, Avx512VnniDot, AvxVnniDot, Int8Dot};
use crate::quant::blocks::{f16_at, q4_k, q5_k, q6_k, q8_0, scale_min_k4};
use crate::quant::q8::{BlockQ8_0, BlockQ8K};

#[target_feature(enable = "avx2,fma")]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn load(p: *const u8) -> __m256i {
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// The 8 scales and the 8 mins of a Q4_K/Q5_K block, the mins repeated per 16-value sum.
#[inline(always)]
fn k4_scales(packed: &[u8]) -> ([i16; 8], [i16; 16]) {
    let mut sc = [0i16; 8];
    let mut mins = [0i16; 16];
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, packed);
        sc[j] = s as i16;
        mins[2 * j] = m as i16;
        mins[2 * j + 1] = m as i16;
    }
    (sc, mins)
}

/// Ends a super-block: `sum += d * cvt(acc) - dmin * cvt(bsums . mins)`.
#[target_feature(enable = "avx2,fma")]
unsafe fn finish_block_with_mins(
    sum: __m256,
    acc: __m256i,
    y: &BlockQ8K,
    mins16: __m256i,
    d: f32,
    dmin: f32,
) -> __m256 {
    unsafe {
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let m = _mm256_madd_epi16(bsums, mins16);
        let sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(d * y.d), sum);
        _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin * y.d), sum)
    }
}

/// The i16 products of one chunk: four weights of each column (`lo`, unsigned) with activations
/// `y[0..4]`, and four more (`hi`) with `y[4..8]`, pairs summed (the nibble kernels' step).
/// Safety: the module's contract; `y` points at eight readable activations.
#[inline(always)]
unsafe fn chunk_products(lo: __m256i, hi: __m256i, y: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let a_lo = _mm256_set1_epi32((y as *const i32).read_unaligned());
        let a_hi = _mm256_set1_epi32((y.add(4) as *const i32).read_unaligned());
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi))
    }
}

/// `sum over the 16 groups g of v[g][c] x bsum[g]` per column c, `v` the columns' per-group
/// bytes laid out as `[8 pairs][8 columns][2]` at `pairs` (signed scales or unsigned mins):
/// 32-bit element `pair` of the activation sums holds those of groups 2 pair and 2 pair + 1,
/// the i16 pair that column c's byte pair multiplies.
/// Safety: the module's contract, with `O`'s instruction set; `pairs` holds the 128 bytes.
#[inline(always)]
unsafe fn pair_scaled_sums<O: Int8Dot>(pairs: *const u8, signed: bool, y: &BlockQ8K) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let mut out = _mm256_setzero_si256();
        for pair in 0..8 {
            let bytes = _mm_loadu_si128(pairs.add(16 * pair) as *const __m128i);
            let v = if signed { _mm256_cvtepi8_epi16(bytes) } else { _mm256_cvtepu8_epi16(bytes) };
            out = O::dot_i16(out, v, _mm256_permutevar8x32_epi32(bsums, _mm256_set1_epi32(pair as i32)));
        }
        out
    }
}

/// Where a Q4_K-like block keeps its fields: (block size, d, dmin, packed scales).
type K4Layout = (usize, usize, usize, usize);

/// The loop shared by the Q4_K and Q5_K row kernels (the same scales, mins and sub-block
/// pairs); `unpack(block, j)` gives the weights of sub-blocks 2j and 2j+1 as unsigned bytes.
#[inline(always)]
unsafe fn dot_k4_like<const R: usize>(
    w: &[u8],
    a: &[&[BlockQ8K]; R],
    (size, d_off, dmin_off, scales_off): K4Layout,
    unpack: impl Fn(&[u8], usize) -> (__m256i, __m256i),
) -> [f32; R] {
    unsafe {
        let mut sum = [_mm256_setzero_ps(); R];
        for (b, blk) in w.chunks_exact(size).enumerate() {
            let (sc, mins) = k4_scales(&blk[scales_off..scales_off + 12]);
            let mins16 = _mm256_loadu_si256(mins.as_ptr() as *const __m256i);
            let mut acc = [_mm256_setzero_si256(); R];
            for j in 0..4 {
                let (lo, hi) = unpack(blk, j);
                let (s_lo, s_hi) = (_mm256_set1_epi16(sc[2 * j]), _mm256_set1_epi16(sc[2 * j + 1]));
                for r in 0..R {
                    let y = a[r].get_unchecked(b).qs.as_ptr() as *const u8;
                    let p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(y.add(64 * j))), s_lo);
                    let p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(y.add(64 * j + 32))), s_hi);
                    acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(p_lo, p_hi));
                }
            }
            let (d, dmin) = (f16_at(blk, d_off), f16_at(blk, dmin_off));
            for r in 0..R {
                sum[r] = finish_block_with_mins(sum[r], acc[r], a[r].get_unchecked(b), mins16, d, dmin);
            }
        }
        let mut out = [0f32; R];
        for r in 0..R {
            out[r] = hsum(sum[r]);
        }
        out
    }
}

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_q4_k<const R: usize>(w: &[u8], a: &[&[BlockQ8K]; R]) -> [f32; R] {
    let m4 = _mm256_set1_epi8(0x0F);
    let layout = (q4_k::SIZE, q4_k::D, q4_k::DMIN, q4_k::SCALES);
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        dot_k4_like(w, a, layout, |blk, j| {
            let q = load(blk.as_ptr().add(q4_k::QS + 32 * j));
            (_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4))
        })
    }
}

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_q5_k<const R: usize>(w: &[u8], a: &[&[BlockQ8K]; R]) -> [f32; R] {
    let (m4, one) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1));
    let layout = (q5_k::SIZE, q5_k::D, q5_k::DMIN, q5_k::SCALES);
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        dot_k4_like(w, a, layout, |blk, j| {
            let q = load(blk.as_ptr().add(q5_k::QS + 32 * j));
            let qh = load(blk.as_ptr().add(q5_k::QH));
            // Bit 2j of each qh byte is the fifth bit of the low-nibble values, bit 2j+1 of
            // the high-nibble values.
            let h_lo = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32)), one);
            let h_hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j as i32 + 1)), one);
            let lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h_lo, 4));
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(h_hi, 4));
            (lo, hi)
        })
    }
}

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_q6_k<const R: usize>(w: &[u8], a: &[&[BlockQ8K]; R]) -> [f32; R] {
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m3 = _mm256_set1_epi8(3);
        let mut sum = [_mm256_setzero_ps(); R];
        for (b, blk) in w.chunks_exact(q6_k::SIZE).enumerate() {
            let sc = &blk[q6_k::SCALES..q6_k::SCALES + 16];
            let scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr() as *const __m128i));
            let mut acc = [_mm256_setzero_si256(); R];
            for n in 0..2 {
                let ql0 = load(blk.as_ptr().add(q6_k::QL + 64 * n));
                let ql1 = load(blk.as_ptr().add(q6_k::QL + 64 * n + 32));
                let qh = load(blk.as_ptr().add(q6_k::QH + 32 * n));
                let high = |shift: i32| {
                    let h = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), m3);
                    _mm256_slli_epi16(h, 4)
                };
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), high(0)),
                    _mm256_or_si256(_mm256_and_si256(ql1, m4), high(2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), high(4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), high(6)),
                ];
                // Values 0..16 of each group of 32 use one scale, 16..32 the next.
                let s = |g: usize| {
                    let lo = _mm_set1_epi16((sc[8 * n + 2 * g] as i8) as i16);
                    let hi = _mm_set1_epi16((sc[8 * n + 2 * g + 1] as i8) as i16);
                    _mm256_set_m128i(hi, lo)
                };
                let sv = [s(0), s(1), s(2), s(3)];
                for r in 0..R {
                    let y = (a[r].get_unchecked(b).qs.as_ptr() as *const u8).add(128 * n);
                    for g in 0..4 {
                        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], load(y.add(32 * g))), sv[g]);
                        acc[r] = _mm256_add_epi32(acc[r], p);
                    }
                }
            }
            let d = f16_at(blk, q6_k::D);
            for r in 0..R {
                // The values are stored +32: subtract 32 * sum(scale * activation sums).
                let y = a[r].get_unchecked(b);
                let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
                let offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16), 5);
                let acc = _mm256_sub_epi32(acc[r], offset);
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(d * y.d), sum[r]);
            }
        }
        let mut out = [0f32; R];
        for r in 0..R {
            out[r] = hsum(sum[r]);
        }
        out
    }
}

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_q8_0<const R: usize>(w: &[u8], a: &[&[BlockQ8_0]; R]) -> [f32; R] {
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut sum = [_mm256_setzero_ps(); R];
        for (b, blk) in w.chunks_exact(q8_0::SIZE).enumerate() {
            let wq = load(blk.as_ptr().add(q8_0::QS));
            // Signed x signed via |w| x (a with w's sign).
            let aw = _mm256_sign_epi8(wq, wq);
            let d = f16_at(blk, q8_0::D);
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                let sy = _mm256_sign_epi8(load(y.qs.as_ptr() as *const u8), wq);
                let p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sy), ones);
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * y.d), sum[r]);
            }
        }
        let mut out = [0f32; R];
        for r in 0..R {
            out[r] = hsum(sum[r]);
        }
        out
    }
}

/// Eight interleaved Q4_K columns (`cpu::kernels::repack` layout, one group) against R activation rows:
/// `out[r][c] = dot(column c, a[r])`. Within a sub-block the byte products of four chunks are
/// summed in i16 (at most 8 x 2 x 15 x 127 = 30480, no overflow) before one `O::dot_i16` applies
/// the eight columns' scales.
#[inline(always)]
unsafe fn gemm_q4_k_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q4_K_GROUP_BLOCK, q4k_layout as l};
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        gemm_k4_like_x8::<O, R>(group, a, ahead, Q4_K_GROUP_BLOCK, 4, |p, j, k| {
            let q = load(p.add(l::QS + 128 * j + 32 * k));
            (_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4))
        })
    }
}

/// Eight wide Q4_K columns (`repack::Packed::widen`: a byte per weight) against R activation
/// rows: Q4_K's kernel with the weights loaded rather than unpacked.
#[inline(always)]
unsafe fn gemm_q4_k_wide_x8<O: Int8Dot, const R: usize>(
    group: &[u8],
    a: &[&[BlockQ8K]; R],
    ahead: &[u8],
) -> [[f32; 8]; R] {
    use super::repack::{Q4_K_WIDE_GROUP_BLOCK, q4k_layout as l};
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        gemm_k4_like_x8::<O, R>(group, a, ahead, Q4_K_WIDE_GROUP_BLOCK, 4, |p, j, k| {
            let q = p.add(l::QS + 256 * j + 64 * k);
            (load(q), load(q.add(32)))
        })
    }
}

/// Eight interleaved Q5_K columns against R activation rows: Q4_K's kernel with the fifth bit
/// added to each nibble. Values reach 31, so the i16 sums take two chunks (2 x 2 x 2 x 31 x
/// 127 = 31496) rather than four.
#[inline(always)]
unsafe fn gemm_q5_k_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q5_K_GROUP_BLOCK, q4k_layout as l};
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let (m4, one) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1));
        gemm_k4_like_x8::<O, R>(group, a, ahead, Q5_K_GROUP_BLOCK, 2, |p, j, k| {
            let q = load(p.add(l::QS + 128 * j + 32 * k));
            let h = load(p.add(l::QH + 32 * j));
            let fifth = |bit: usize| {
                let b = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(bit as i32)), one);
                _mm256_slli_epi16(b, 4)
            };
            let lo = _mm256_or_si256(_mm256_and_si256(q, m4), fifth(2 * k));
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), fifth(2 * k + 1));
            (lo, hi)
        })
    }
}

/// The loop shared by the packed Q4_K and Q5_K kernels: `unpack(block, j, k)` gives chunk k of
/// sub-block j as unsigned bytes (weights v+i, then v+4+i, of each column), and the i16 sums
/// are widened every `chunks_per_i16` chunks.
#[inline(always)]
unsafe fn gemm_k4_like_x8<O: Int8Dot, const R: usize>(
    group: &[u8],
    a: &[&[BlockQ8K]; R],
    ahead: &[u8],
    block_bytes: usize,
    chunks_per_i16: usize,
    unpack: impl Fn(*const u8, usize, usize) -> (__m256i, __m256i),
) -> [[f32; 8]; R] {
    use super::repack::q4k_layout as l;
    unsafe {
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / block_bytes * 8);
        for (b, blk) in group.chunks_exact(block_bytes).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for j in 0..8 {
                ahead.at(8 * b + j);
                let s8 = _mm_loadl_epi64(p.add(l::SCALES + 8 * j) as *const __m128i);
                let scales = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s8, s8));
                let mut acc16 = [_mm256_setzero_si256(); R];
                for k in 0..4 {
                    let (lo, hi) = unpack(p, j, k);
                    let v = 32 * j + 8 * k;
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(v);
                        let s = chunk_products(lo, hi, y as *const u8);
                        acc16[r] = _mm256_add_epi16(acc16[r], s);
                    }
                    if (k + 1) % chunks_per_i16 == 0 {
                        for r in 0..R {
                            acc[r] = O::dot_i16(acc[r], acc16[r], scales);
                            acc16[r] = _mm256_setzero_si256();
                        }
                    }
                }
            }
            let finish = K4Finish::load(p);
            for r in 0..R {
                sum[r] = finish.add::<O>(sum[r], acc[r], a[r].get_unchecked(b));
            }
        }
        rows_out(sum)
    }
}

/// The end of a packed Q4_K/Q5_K super-block: the columns' scales and mins, loaded once. The
/// 512-bit kernels (`cpu::kernels::avx512`) do the same float operations lane-wise.
struct K4Finish {
    d: __m256,
    dmin: __m256,
    /// Column c's mins of sub-blocks 2p and 2p+1, as i16 pairs.
    pair_mins: [__m256i; 4],
}

impl K4Finish {
    /// Safety: the module's contract; `p` is the start of a packed block.
    #[inline(always)]
    unsafe fn load(p: *const u8) -> K4Finish {
        use super::repack::q4k_layout as l;
        // SAFETY: the fields lie within the packed block (the caller's contract).
        unsafe {
            K4Finish {
                d: _mm256_loadu_ps(p.add(l::D) as *const f32),
                dmin: _mm256_loadu_ps(p.add(l::DMIN) as *const f32),
                pair_mins: std::array::from_fn(|p2| {
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(l::MINS + 16 * p2) as *const __m128i))
                }),
            }
        }
    }

    /// `sum + da * (d * acc - dmin * (mins . activation sums))` for one activation row's block
    /// `y`, `acc` the block's scaled integer sums per column.
    /// Safety: the module's contract, with `O`'s instruction set.
    #[inline(always)]
    unsafe fn add<O: Int8Dot>(&self, sum: __m256, acc: __m256i, y: &BlockQ8K) -> __m256 {
        // SAFETY: the caller's contract.
        unsafe {
            let mut mins = _mm256_setzero_si256();
            for (p, m) in self.pair_mins.iter().enumerate() {
                mins = O::dot_i16(mins, *m, _mm256_set1_epi32(y.sub_sum_pair(p)));
            }
            // (d * acc - dmin * mins) * da: three multiplies where d * da and dmin * da take
            // four (the 512-bit kernels are bound by their multiply unit).
            let t = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), self.d);
            let t = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), self.dmin, t);
            _mm256_fmadd_ps(t, _mm256_set1_ps(y.d), sum)
        }
    }
}

/// The eight column sums of each row, as the kernels return them.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn rows_out<const R: usize>(sum: [__m256; R]) -> [[f32; 8]; R] {
    let mut out = [[0f32; 8]; R];
    for r in 0..R {
        // SAFETY: `out[r]` holds eight floats.
        unsafe { _mm256_storeu_ps(out[r].as_mut_ptr(), sum[r]) };
    }
    out
}

/// Eight interleaved Q6_K columns (`cpu::kernels::repack` layout, one group) against R activation rows.
/// Each chunk's two byte products (at most 2 x 2 x 63 x 127 = 32004) are summed in i16, then
/// scaled; the +32 storage offset is removed once per block with the activation sums.
#[inline(always)]
unsafe fn gemm_q6_k_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q6_K_GROUP_BLOCK, q6k_layout as l};
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m3 = _mm256_set1_epi8(3);
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / Q6_K_GROUP_BLOCK * 16);
        for (b, blk) in group.chunks_exact(Q6_K_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for g in 0..16 {
                ahead.at(16 * b + g);
                let s8 = _mm_loadl_epi64(p.add(l::SCALES + 8 * g) as *const __m128i);
                let scales = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));
                let high = load(p.add(l::HI + 32 * g));
                for t in 0..2 {
                    let k = 2 * g + t;
                    let low = load(p.add(l::LO + 32 * k));
                    let h = _mm256_srl_epi16(high, _mm_cvtsi32_si128(4 * t as i32));
                    let lo = _mm256_or_si256(_mm256_and_si256(low, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
                    let hi = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(low, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4),
                    );
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(8 * k);
                        let s = chunk_products(lo, hi, y as *const u8);
                        acc[r] = O::dot_i16(acc[r], s, scales);
                    }
                }
            }
            for r in 0..R {
                sum[r] = finish_q6_k_block::<O>(sum[r], acc[r], p, a[r].get_unchecked(b));
            }
        }
        rows_out(sum)
    }
}

/// The end of a packed Q6_K super-block at `p` for one activation row's block `y` (the 512-bit
/// kernels do the same lane-wise): removes the +32 storage offset from the scaled integer sums
/// `acc` with the activation sums, then `sum + d * da * acc`.
/// Safety: the module's contract, with `O`'s instruction set; `p` is the start of a packed block.
#[inline(always)]
unsafe fn finish_q6_k_block<O: Int8Dot>(sum: __m256, acc: __m256i, p: *const u8, y: &BlockQ8K) -> __m256 {
    use super::repack::q6k_layout as l;
    // SAFETY: the caller's contract; Q3_K's layout keeps these fields where Q6_K's does.
    unsafe { finish_offset_block::<O, 5>(sum, acc, p.add(l::SCALE_PAIRS), p.add(l::D), y) }
}

/// The end of a packed super-block whose unsigned weights stand for `u - 2^SHIFT` (Q6_K: 32,
/// Q3_K: 4): `scale_pairs` are the columns' signed 16-value scales as `[8 pairs][8 columns][2]`,
/// `d` their eight f32 scales.
/// Safety: the module's contract, with `O`'s instruction set; the pointers are the block's fields.
#[inline(always)]
unsafe fn finish_offset_block<O: Int8Dot, const SHIFT: i32>(
    sum: __m256,
    acc: __m256i,
    scale_pairs: *const u8,
    d: *const u8,
    y: &BlockQ8K,
) -> __m256 {
    // SAFETY: the caller's contract.
    unsafe {
        let offset = pair_scaled_sums::<O>(scale_pairs, true, y);
        let acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(offset, SHIFT));
        let d = _mm256_loadu_ps(d as *const f32);
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(d, _mm256_set1_ps(y.d)), sum)
    }
}

/// Eight interleaved Q8_0 columns (`cpu::kernels::repack` layout, one group) against R activation rows.
/// Signed x signed products go through `O::dot_u8i8` as |w| x (a with w's sign) (pair sums at
/// most 2 x 128 x 127, within i16 as that step requires).
#[inline(always)]
unsafe fn gemm_q8_0_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8_0]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q8_0_GROUP_BLOCK, q8_0_layout as l};
    unsafe {
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / Q8_0_GROUP_BLOCK * 8);
        for (b, blk) in group.chunks_exact(Q8_0_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for k in 0..8 {
                ahead.at(8 * b + k);
                let w = load(p.add(l::QS + 32 * k));
                let abs_w = _mm256_sign_epi8(w, w);
                for r in 0..R {
                    let y = a[r].get_unchecked(b).qs.as_ptr().add(4 * k);
                    let a4 = _mm256_set1_epi32((y as *const i32).read_unaligned());
                    acc[r] = O::dot_u8i8(acc[r], abs_w, _mm256_sign_epi8(a4, w));
                }
            }
            let d = _mm256_loadu_ps(p.add(l::D) as *const f32);
            for r in 0..R {
                let da = _mm256_mul_ps(d, _mm256_set1_ps(a[r].get_unchecked(b).d));
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]), da, sum[r]);
            }
        }
        rows_out(sum)
    }
}

/// Eight interleaved Q3_K columns (`cpu::kernels::repack` layout, one group) against R activation
/// rows. The unsigned 3-bit values are nibbles (Q4_K's unpacking); a group of 16 is two chunks,
/// whose byte products (at most 2 x 2 x 2 x 7 x 127 = 7112) are summed in i16, then scaled by the
/// signed 6-bit scales; the -4 storage offset comes out once per block with the activation sums,
/// as Q6_K's -32 does.
#[inline(always)]
unsafe fn gemm_q3_k_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q3_K_GROUP_BLOCK, q3k_layout as l};
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / Q3_K_GROUP_BLOCK * 16);
        for (b, blk) in group.chunks_exact(Q3_K_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for g in 0..16 {
                ahead.at(16 * b + g);
                let s8 = _mm_loadl_epi64(p.add(l::SCALES + 8 * g) as *const __m128i);
                let scales = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));
                let mut acc16 = [_mm256_setzero_si256(); R];
                for t in 0..2 {
                    let k = 2 * g + t;
                    let q = load(p.add(l::QS + 32 * k));
                    let (lo, hi) = (_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(8 * k);
                        let s = chunk_products(lo, hi, y as *const u8);
                        acc16[r] = _mm256_add_epi16(acc16[r], s);
                    }
                }
                for r in 0..R {
                    acc[r] = O::dot_i16(acc[r], acc16[r], scales);
                }
            }
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                sum[r] = finish_offset_block::<O, 2>(sum[r], acc[r], p.add(l::SCALE_PAIRS), p.add(l::D), y);
            }
        }
        rows_out(sum)
    }
}

/// Eight interleaved Q2_K columns (`cpu::kernels::repack` layout, one group) against R activation
/// rows. A group of 16 weights is one vector (2 bits each); its four chunks' byte products (at
/// most 4 x 2 x 3 x 128 = 3072) are summed in i16, then scaled; the mins meet the activation
/// sums once per block, as Q6_K's offset does.
#[inline(always)]
unsafe fn gemm_q2_k_x8<O: Int8Dot, const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
    use super::repack::{Q2_K_GROUP_BLOCK, q2k_layout as l};
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let m2 = _mm256_set1_epi8(3);
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / Q2_K_GROUP_BLOCK * 16);
        for (b, blk) in group.chunks_exact(Q2_K_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for g in 0..16 {
                ahead.at(16 * b + g);
                let s8 = _mm_loadl_epi64(p.add(l::SCALES + 8 * g) as *const __m128i);
                let scales = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s8, s8));
                let q = load(p.add(l::QS + 32 * g));
                let mut acc16 = [_mm256_setzero_si256(); R];
                for t in 0..4 {
                    let w = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * t as i32)), m2);
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(16 * g + 4 * t);
                        let a4 = _mm256_set1_epi32((y as *const i32).read_unaligned());
                        acc16[r] = _mm256_add_epi16(acc16[r], _mm256_maddubs_epi16(w, a4));
                    }
                }
                for r in 0..R {
                    acc[r] = O::dot_i16(acc[r], acc16[r], scales);
                }
            }
            let d = _mm256_loadu_ps(p.add(l::D) as *const f32);
            let dmin = _mm256_loadu_ps(p.add(l::DMIN) as *const f32);
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                let mins = pair_scaled_sums::<O>(p.add(l::MIN_PAIRS), false, y);
                let t = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r]), d);
                let t = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), dmin, t);
                sum[r] = _mm256_fmadd_ps(t, _mm256_set1_ps(y.d), sum[r]);
            }
        }
        rows_out(sum)
    }
}

/// Eight interleaved IQ4_XS columns (`cpu::kernels::repack` layout, one group) against R
/// activation rows. The level indices look their signed levels up in `KVALUES_IQ4NL` (one
/// `vpshufb`); signed x signed products are |w| x (a with w's sign) in `vpmaddubsw` (pair sums
/// at most 2 x 127 x 127, within i16), each chunk's pairs then multiplied by its column's
/// sub-block scale and summed into i32 by one `O::dot_i16`.
#[inline(always)]
unsafe fn gemm_iq4_xs_x8<O: Int8Dot, const R: usize>(
    group: &[u8],
    a: &[&[BlockQ8K]; R],
    ahead: &[u8],
) -> [[f32; 8]; R] {
    use super::repack::{IQ4_XS_GROUP_BLOCK, iq4xs_layout as l};
    use crate::quant::iq::KVALUES_IQ4NL;
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        // Index j's level, in both 128-bit lanes.
        let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i));
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / IQ4_XS_GROUP_BLOCK * 8);
        for (b, blk) in group.chunks_exact(IQ4_XS_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm256_setzero_si256(); R];
            for j in 0..8 {
                ahead.at(8 * b + j);
                // Column c's scale in i16 lanes 2c and 2c+1, as the pair sums lie.
                let s8 = _mm_loadl_epi64(p.add(l::SCALES + 8 * j) as *const __m128i);
                let scales = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));
                for k in 0..4 {
                    let q = load(p.add(l::QS + 128 * j + 32 * k));
                    let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                    let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                    let (abs_lo, abs_hi) = (_mm256_sign_epi8(lo, lo), _mm256_sign_epi8(hi, hi));
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(32 * j + 8 * k);
                        let a_lo = _mm256_set1_epi32((y as *const i32).read_unaligned());
                        let a_hi = _mm256_set1_epi32((y.add(4) as *const i32).read_unaligned());
                        let p_lo = _mm256_maddubs_epi16(abs_lo, _mm256_sign_epi8(a_lo, lo));
                        let p_hi = _mm256_maddubs_epi16(abs_hi, _mm256_sign_epi8(a_hi, hi));
                        acc[r] = O::dot_i16(acc[r], p_lo, scales);
                        acc[r] = O::dot_i16(acc[r], p_hi, scales);
                    }
                }
            }
            let d = _mm256_loadu_ps(p.add(l::D) as *const f32);
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]), _mm256_mul_ps(d, _mm256_set1_ps(y.d)), sum[r]);
            }
        }
        rows_out(sum)
    }
}

/// Eight interleaved Q4_0 (`FIFTH` false) or Q5_0 columns (`cpu::kernels::repack` layout, one
/// group) against R activation rows. The unsigned levels (Q4_K's nibble unpacking, Q5_K's fifth
/// bits) meet the activations in `vpmaddubsw`, summed in i16 over a block for Q4_0 (at most
/// 8 x 2 x 15 x 127 = 30480) and over two chunks for Q5_0 (2 x 2 x 2 x 31 x 127 = 31496); the
/// storage offset (8 or 16) comes out once per block with the activation block's sum, and the
/// block ends with one float multiply-add by `d_w x d_a`, ggml's order for Q4_0 x Q8_0.
#[inline(always)]
unsafe fn gemm_q4_0_like_x8<O: Int8Dot, const R: usize, const FIFTH: bool>(
    group: &[u8],
    a: &[&[BlockQ8_0]; R],
    ahead: &[u8],
) -> [[f32; 8]; R] {
    use super::repack::{Q4_0_GROUP_BLOCK, Q5_0_GROUP_BLOCK, q4_0_layout as l};
    let (block_bytes, offset) = if FIFTH { (Q5_0_GROUP_BLOCK, 16) } else { (Q4_0_GROUP_BLOCK, 8) };
    // SAFETY: as for this function (see the module's contract).
    unsafe {
        let (m4, one8, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1), _mm256_set1_epi16(1));
        let mut sum = [_mm256_setzero_ps(); R];
        let ahead = SpreadPrefetch::new(ahead, group.len() / block_bytes);
        for (b, blk) in group.chunks_exact(block_bytes).enumerate() {
            ahead.at(b);
            let p = blk.as_ptr();
            let h = if FIFTH { load(p.add(l::QH)) } else { _mm256_setzero_si256() };
            let mut acc = [_mm256_setzero_si256(); R];
            let mut acc16 = [_mm256_setzero_si256(); R];
            for k in 0..4 {
                let q = load(p.add(l::QS + 32 * k));
                let (mut lo, mut hi) = (_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                if FIFTH {
                    let fifth = |bit: usize| {
                        let b = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(bit as i32)), one8);
                        _mm256_slli_epi16(b, 4)
                    };
                    lo = _mm256_or_si256(lo, fifth(2 * k));
                    hi = _mm256_or_si256(hi, fifth(2 * k + 1));
                }
                for r in 0..R {
                    let y = a[r].get_unchecked(b).qs.as_ptr().add(8 * k);
                    let s = chunk_products(lo, hi, y as *const u8);
                    acc16[r] = _mm256_add_epi16(acc16[r], s);
                }
                if !FIFTH && k < 3 || FIFTH && k % 2 == 0 {
                    continue;
                }
                for r in 0..R {
                    acc[r] = O::dot_i16(acc[r], acc16[r], ones);
                    acc16[r] = _mm256_setzero_si256();
                }
            }
            let d = _mm256_loadu_ps(p.add(l::D) as *const f32);
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                let isum = _mm256_sub_epi32(acc[r], _mm256_set1_epi32(offset * y.sum));
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(y.d)), sum[r]);
            }
        }
        rows_out(sum)
    }
}

/// The packed kernels compiled for one instruction set: `$features` enabled, `$dot` for the
/// integer multiply-accumulates. Safety contract as for the module, with `$features` in place
/// of AVX2 and FMA.
macro_rules! packed_entry_points {
    ($name:ident, $features:literal, $dot:ty) => {
        pub mod $name {
            use super::*;

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q4_k_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q4_k_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q4_k_wide_x8<const R: usize>(
                g: &[u8],
                a: &[&[BlockQ8K]; R],
                ahead: &[u8],
            ) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q4_k_wide_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q5_k_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q5_k_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q6_k_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q6_k_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q8_0_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8_0]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q8_0_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q4_0_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8_0]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q4_0_like_x8::<$dot, R, false>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q5_0_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8_0]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q4_0_like_x8::<$dot, R, true>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q3_k_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q3_k_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_q2_k_x8<const R: usize>(g: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_q2_k_x8::<$dot, R>(g, a, ahead) }
            }

            #[target_feature(enable = $features)]
            pub unsafe fn gemm_iq4_xs_x8<const R: usize>(
                g: &[u8],
                a: &[&[BlockQ8K]; R],
                ahead: &[u8],
            ) -> [[f32; 8]; R] {
                // SAFETY: this function's contract.
                unsafe { super::gemm_iq4_xs_x8::<$dot, R>(g, a, ahead) }
            }
        }
    };
}

packed_entry_points!(packed_avx2, "avx2,fma", Avx2Dot);
packed_entry_points!(packed_avx_vnni, "avx2,fma,avxvnni", AvxVnniDot);
packed_entry_points!(packed_avx512_vnni, "avx2,fma,avx512f,avx512vl,avx512vnni", Avx512VnniDot);
