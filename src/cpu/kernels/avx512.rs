//! 512-bit kernels of the AVX-512 VNNI path for the packed Q4_K, Q5_K, Q6_K and Q8_0 groups
//! (`cpu::kernels::repack` layout), against up to `PACKED_ROW_GROUP` activation rows.
//!
//! Why a second form of the same products: on a CPU with full-width AVX-512 (Zen 5, Intel server
//! chips) a zmm `vpdpbusd` does twice the multiply-adds of a ymm one in the same time, and the
//! 256-bit kernels are bound by instruction count (a byte broadcast, a `vpmaddubsw` and a
//! `vpaddw` per 32 multiply-adds and row), not by the multiply-adds.
//!
//! The sixteen-column form (`gemm_*_x16`) takes two adjacent groups at once, so that lane c of
//! a zmm is column c of sixteen: 32 packed bytes of each group make one zmm of low nibbles
//! (weights v..v+4 of each column) and one of high nibbles (v+4..v+8), and each meets one
//! 32-bit activation broadcast that `vpdpbusd` reads from memory itself (an embedded
//! broadcast: one instruction per 64 multiply-adds and row). The scaling of the sums takes as
//! few multiplies as it can: a Q4_K column's low- and high-nibble sums of a sub-block each fit
//! in i16, so they share one lane as an i16 pair and one `vpdpwssd` scales both (one per eight
//! `vpdpbusd`). Q6_K's sums need more bits and take one `vpmulld` per four `vpdpbusd`.
//!
//! What bounds these kernels, measured on Zen 5 (`vpdpbusd` two a cycle on two of the four
//! vector pipes, which `vpmulld`, `vpdpwssd` and float multiplies share; two vector load slots
//! a cycle, a broadcast taking one and a 256- or 512-bit load two): a broadcast per
//! `vpdpbusd` fills the load slots by itself, so the weights' loads are what the sixteen-column
//! kernels wait for. Q4_K's main kernel (`gemm_q4_k_x32`) therefore takes four groups: two zmm
//! of weights (columns 0..16 and 16..32) meet each broadcast, loaded into a register once for
//! both, which leaves the multiply pipes as the limit. It runs `QUAD_ROWS` (6) rows: their sums
//! before and after scaling take 24 registers, too many to keep the nibble sums apart for the
//! i16-pair trick, so each sub-block's sums are scaled with one `vpmulld` per eight `vpdpbusd`
//! (the same count). The same form for Q6_K measured no faster (its weight unpacking fills the
//! other two pipes), so Q6_K keeps the sixteen-column kernel.
//!
//! Q5_K's kernel is Q4_K's with the fifth bits added; its sums outgrow i16, so they are scaled
//! with one `vpmulld` per eight `vpdpbusd`. Q8_0's weights are bytes already: its kernel only
//! flips their sign bit to meet `vpdpbusd`'s unsigned operand.
//!
//! A lone group (an odd count; no supported model has one) takes the 256-bit kernels.
//!
//! These kernels compute the same integers as the 256-bit ones and end each super-block with
//! the lane-wise zmm form of the same float operations (`avx2::K4Finish`,
//! `avx2::finish_q6_k_block`), so all give bit-identical results (tested).
//!
//! Safety contract of every `unsafe fn` here: the CPU supports AVX2, FMA, AVX-512 F, BW, VL and
//! VNNI (checked by `Isa::Avx512Vnni.is_available()` before dispatch), each group of `pair` (two)
//! or `quad` (four) holds whole packed blocks, and every activation row holds one block per
//! packed block. `ahead` may be any bytes: it is only prefetched.

use std::arch::x86_64::*;

use super::avx2::load;
use super::prefetch::SpreadPrefetch;
use super::repack::{
    Q4_K_GROUP_BLOCK, Q5_K_GROUP_BLOCK, Q6_K_GROUP_BLOCK, Q8_0_GROUP_BLOCK, q4k_layout, q6k_layout, q8_0_layout,
};
use crate::quant::q8::{BlockQ8_0, BlockQ8K};

/// `lo` in lanes 0..8, `hi` in lanes 8..16.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn halves(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The 32 bytes at `p` (the first group's) and at `q` (the second's) as one zmm.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn load_pair(p: *const u8, q: *const u8) -> __m512i {
    // SAFETY: 32 readable bytes at each (the caller's layout).
    unsafe { halves(load(p), load(q)) }
}

/// Eight bytes at `p` and eight at `q` (one per column of each group), as sixteen i32.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn pair_bytes_epi32(p: *const u8, q: *const u8, signed: bool) -> __m512i {
    // SAFETY: 8 readable bytes at each (the caller's layout).
    let b = unsafe { _mm_unpacklo_epi64(_mm_loadl_epi64(p as *const __m128i), _mm_loadl_epi64(q as *const __m128i)) };
    if signed { _mm512_cvtepi8_epi32(b) } else { _mm512_cvtepu8_epi32(b) }
}

/// Sixteen bytes at `p` and sixteen at `q` (a pair per column of each group), as 32 i16.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn pair_bytes_epi16(p: *const u8, q: *const u8, signed: bool) -> __m512i {
    // SAFETY: 16 readable bytes at each (the caller's layout).
    let b = unsafe { _mm256_loadu2_m128i(q as *const __m128i, p as *const __m128i) };
    if signed { _mm512_cvtepi8_epi16(b) } else { _mm512_cvtepu8_epi16(b) }
}

/// The eight f32 at `p` and the eight at `q`.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn load_pair_ps(p: *const u8, q: *const u8) -> __m512 {
    // SAFETY: 32 readable bytes at each (the caller's layout).
    _mm512_castsi512_ps(unsafe { load_pair(p, q) })
}

/// The four activation bytes at `y` as one i32 (which `vpdpbusd` broadcasts from memory).
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn activations4(y: *const i8) -> __m512i {
    // SAFETY: 4 readable bytes at `y` (the caller's contract).
    _mm512_set1_epi32(unsafe { (y as *const i32).read_unaligned() })
}

/// The column sums of each row, C zmm of sixteen (W = 16 C floats).
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn rows_out<const R: usize, const C: usize, const W: usize>(sum: [[__m512; C]; R]) -> [[f32; W]; R] {
    assert_eq!(W, 16 * C, "{C} zmm of columns are {} floats", 16 * C);
    let mut out = [[0f32; W]; R];
    for r in 0..R {
        for (c, s) in sum[r].iter().enumerate() {
            // SAFETY: `out[r]` holds 16 C floats.
            unsafe { _mm512_storeu_ps(out[r].as_mut_ptr().add(16 * c), *s) };
        }
    }
    out
}

/// Two adjacent interleaved Q4_K groups (`pair`: the first group's bytes, then the second's)
/// against R activation rows: `out[r][c] = dot(column c of the sixteen, a[r])`.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q4_k_x16<const R: usize>(pair: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 16]; R] {
    use q4k_layout as l;
    let second = pair.len() / 2;
    // SAFETY: the module's contract: every offset below lies within a packed block of each
    // group and every activation index within a row.
    unsafe {
        let m4 = _mm512_set1_epi8(0x0F);
        let mut sum = [[_mm512_setzero_ps(); 1]; R];
        let ahead = SpreadPrefetch::new(ahead, pair.len() / 2 / Q4_K_GROUP_BLOCK * 8);
        for (b, blk) in pair[..second].chunks_exact(Q4_K_GROUP_BLOCK).enumerate() {
            let (p, q) = (blk.as_ptr(), blk.as_ptr().add(second));
            let mut acc = [[_mm512_setzero_si512(); 1]; R];
            for j in 0..8 {
                ahead.at(8 * b + j);
                // Each column's scale in both i16 halves of its lane.
                let s = pair_bytes_epi32(p.add(l::SCALES + 8 * j), q.add(l::SCALES + 8 * j), false);
                let scales = _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
                let mut low = [_mm512_setzero_si512(); R];
                let mut high = [_mm512_setzero_si512(); R];
                for k in 0..4 {
                    let at = l::QS + 128 * j + 32 * k;
                    let z = load_pair(p.add(at), q.add(at));
                    let (w_low, w_high) = (_mm512_and_si512(z, m4), _mm512_and_si512(_mm512_srli_epi16(z, 4), m4));
                    let v = 32 * j + 8 * k;
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(v);
                        low[r] = _mm512_dpbusd_epi32(low[r], w_low, activations4(y));
                        high[r] = _mm512_dpbusd_epi32(high[r], w_high, activations4(y.add(4)));
                    }
                }
                for r in 0..R {
                    // Each sum has 16 products of at most 15 x 128, so it fits in i16 (30720):
                    // the low-nibble sum in the lane's low half, the high-nibble sum above it.
                    let both = _mm512_mask_blend_epi16(0xAAAA_AAAA, low[r], _mm512_slli_epi32(high[r], 16));
                    acc[r][0] = _mm512_dpwssd_epi32(acc[r][0], both, scales);
                }
            }
            k4_finish(&mut sum, acc, [(p, q)], a, b);
        }
        rows_out(sum)
    }
}

/// The end of a packed Q4_K or Q5_K super-block `b` for the integer sums `acc` of R rows and C
/// zmm of columns (zmm c: the pair of groups whose block `b` starts at `groups[c]`):
/// `avx2::K4Finish::add`, lane-wise on sixteen columns (the same float operations), each
/// activation sum broadcast once for all C.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn k4_finish<const R: usize, const C: usize>(
    sum: &mut [[__m512; C]; R],
    acc: [[__m512i; C]; R],
    groups: [(*const u8, *const u8); C],
    a: &[&[BlockQ8K]; R],
    b: usize,
) {
    use q4k_layout as l;
    // SAFETY: the module's contract: `groups` start packed blocks, `b` is a block of each row.
    unsafe {
        // Loops rather than `map` closures, which do not take this function's target
        // features and so were calls per block.
        let (mut d, mut dmin) = ([_mm512_setzero_ps(); C], [_mm512_setzero_ps(); C]);
        let mut pair_mins = [[_mm512_setzero_si512(); 4]; C];
        for (c, &(p, q)) in groups.iter().enumerate() {
            d[c] = load_pair_ps(p.add(l::D), q.add(l::D));
            dmin[c] = load_pair_ps(p.add(l::DMIN), q.add(l::DMIN));
            for (m, pair) in pair_mins[c].iter_mut().enumerate() {
                *pair = pair_bytes_epi16(p.add(l::MINS + 16 * m), q.add(l::MINS + 16 * m), false);
            }
        }
        for r in 0..R {
            let y = a[r].get_unchecked(b);
            let mut mins = [_mm512_setzero_si512(); C];
            for m in 0..4 {
                let sub_sums = _mm512_set1_epi32(y.sub_sum_pair(m));
                for (mins, pair_mins) in mins.iter_mut().zip(&pair_mins) {
                    *mins = _mm512_dpwssd_epi32(*mins, pair_mins[m], sub_sums);
                }
            }
            let da = _mm512_set1_ps(y.d);
            for c in 0..C {
                let t = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][c]), d[c]);
                let t = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins[c]), dmin[c], t);
                sum[r][c] = _mm512_fmadd_ps(t, da, sum[r][c]);
            }
        }
    }
}

/// Four adjacent interleaved Q4_K groups (`quad`: their bytes one after the other) against R
/// activation rows: `out[r][c] = dot(column c of the 32, a[r])`. Two zmm of weights (columns
/// 0..16 and 16..32) meet each activation broadcast, so one broadcast feeds two `vpdpbusd`.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q4_k_x32<const R: usize>(quad: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 32]; R] {
    use q4k_layout as l;
    let stride = quad.len() / 4;
    // SAFETY: the module's contract: every offset below lies within a packed block of each
    // group and every activation index within a row.
    unsafe {
        let m4 = _mm512_set1_epi8(0x0F);
        let mut sum = [[_mm512_setzero_ps(); 2]; R];
        let ahead = SpreadPrefetch::new(ahead, quad.len() / 4 / Q4_K_GROUP_BLOCK * 8);
        for (b, blk) in quad[..stride].chunks_exact(Q4_K_GROUP_BLOCK).enumerate() {
            let g: [*const u8; 4] = std::array::from_fn(|i| blk.as_ptr().add(i * stride));
            let mut acc = [[_mm512_setzero_si512(); 2]; R];
            for j in 0..8 {
                ahead.at(8 * b + j);
                let mut both = [[_mm512_setzero_si512(); 2]; R];
                for k in 0..4 {
                    let at = l::QS + 128 * j + 32 * k;
                    let z = [load_pair(g[0].add(at), g[1].add(at)), load_pair(g[2].add(at), g[3].add(at))];
                    let w_low = z.map(|z| _mm512_and_si512(z, m4));
                    let w_high = z.map(|z| _mm512_and_si512(_mm512_srli_epi16(z, 4), m4));
                    let v = 32 * j + 8 * k;
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(v);
                        let (y_low, y_high) = (activations4(y), activations4(y.add(4)));
                        for c in 0..2 {
                            both[r][c] = _mm512_dpbusd_epi32(both[r][c], w_low[c], y_low);
                            both[r][c] = _mm512_dpbusd_epi32(both[r][c], w_high[c], y_high);
                        }
                    }
                }
                for c in 0..2 {
                    let at = l::SCALES + 8 * j;
                    let scales = pair_bytes_epi32(g[2 * c].add(at), g[2 * c + 1].add(at), false);
                    for r in 0..R {
                        acc[r][c] = _mm512_add_epi32(acc[r][c], _mm512_mullo_epi32(both[r][c], scales));
                    }
                }
            }
            k4_finish(&mut sum, acc, [(g[0], g[1]), (g[2], g[3])], a, b);
        }
        rows_out(sum)
    }
}

/// Two adjacent interleaved Q5_K groups against R activation rows: the Q4_K kernel with each
/// weight's fifth bit added. Values reach 31, so a sub-block's nibble sums (16 products of at
/// most 31 x 127 each) no longer fit in i16: their i32 sum is scaled with one `vpmulld`.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q5_k_x16<const R: usize>(pair: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 16]; R] {
    use q4k_layout as l;
    let second = pair.len() / 2;
    // SAFETY: as for `gemm_q4_k_x16`.
    unsafe {
        let (m4, one) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(1));
        let mut sum = [[_mm512_setzero_ps(); 1]; R];
        let ahead = SpreadPrefetch::new(ahead, pair.len() / 2 / Q5_K_GROUP_BLOCK * 8);
        for (b, blk) in pair[..second].chunks_exact(Q5_K_GROUP_BLOCK).enumerate() {
            let (p, q) = (blk.as_ptr(), blk.as_ptr().add(second));
            let mut acc = [[_mm512_setzero_si512(); 1]; R];
            for j in 0..8 {
                ahead.at(8 * b + j);
                let scales = pair_bytes_epi32(p.add(l::SCALES + 8 * j), q.add(l::SCALES + 8 * j), false);
                let h = load_pair(p.add(l::QH + 32 * j), q.add(l::QH + 32 * j));
                let fifth = |bit: usize| {
                    let b = _mm512_and_si512(_mm512_srl_epi16(h, _mm_cvtsi32_si128(bit as i32)), one);
                    _mm512_slli_epi16(b, 4)
                };
                let mut both = [_mm512_setzero_si512(); R];
                for k in 0..4 {
                    let at = l::QS + 128 * j + 32 * k;
                    let z = load_pair(p.add(at), q.add(at));
                    let w_low = _mm512_or_si512(_mm512_and_si512(z, m4), fifth(2 * k));
                    let w_high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(z, 4), m4), fifth(2 * k + 1));
                    let v = 32 * j + 8 * k;
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(v);
                        both[r] = _mm512_dpbusd_epi32(both[r], w_low, activations4(y));
                        both[r] = _mm512_dpbusd_epi32(both[r], w_high, activations4(y.add(4)));
                    }
                }
                for r in 0..R {
                    acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_mullo_epi32(both[r], scales));
                }
            }
            k4_finish(&mut sum, acc, [(p, q)], a, b);
        }
        rows_out(sum)
    }
}

/// Two adjacent interleaved Q6_K groups against R activation rows (as `gemm_q4_k_x16`). The
/// weights are used as stored (0..63, standing for -32..31); the +32 offset comes out of each
/// scale group's sums before they are scaled (`BlockQ8K::q6_k_offsets`, broadcast from
/// memory), which gives the integers the 256-bit kernels get by removing it once per block.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q6_k_x16<const R: usize>(pair: &[u8], a: &[&[BlockQ8K]; R], ahead: &[u8]) -> [[f32; 16]; R] {
    use q6k_layout as l;
    let second = pair.len() / 2;
    // SAFETY: as for `gemm_q4_k_x16`.
    unsafe {
        let (m4, m3) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(3));
        let mut sum = [[_mm512_setzero_ps(); 1]; R];
        let ahead = SpreadPrefetch::new(ahead, pair.len() / 2 / Q6_K_GROUP_BLOCK * 16);
        for (b, blk) in pair[..second].chunks_exact(Q6_K_GROUP_BLOCK).enumerate() {
            let (p, q) = (blk.as_ptr(), blk.as_ptr().add(second));
            let mut acc = [_mm512_setzero_si512(); R];
            for g in 0..16 {
                ahead.at(16 * b + g);
                let scales = pair_bytes_epi32(p.add(l::SCALES + 8 * g), q.add(l::SCALES + 8 * g), true);
                let high = load_pair(p.add(l::HI + 32 * g), q.add(l::HI + 32 * g));
                // At most 16 x 63 x 128 per column and scale group: no overflow in i32.
                let mut part = [_mm512_setzero_si512(); R];
                for t in 0..2 {
                    let k = 2 * g + t;
                    let low = load_pair(p.add(l::LO + 32 * k), q.add(l::LO + 32 * k));
                    let h = _mm512_srl_epi16(high, _mm_cvtsi32_si128(4 * t as i32));
                    let w_low =
                        _mm512_or_si512(_mm512_and_si512(low, m4), _mm512_slli_epi16(_mm512_and_si512(h, m3), 4));
                    let w_high = _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi16(low, 4), m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), m3), 4),
                    );
                    for r in 0..R {
                        let y = a[r].get_unchecked(b).qs.as_ptr().add(8 * k);
                        part[r] = _mm512_dpbusd_epi32(part[r], w_low, activations4(y));
                        part[r] = _mm512_dpbusd_epi32(part[r], w_high, activations4(y.add(4)));
                    }
                }
                for r in 0..R {
                    // (q + 32) . a - 32 * sum(a) = q . a over the group's 16 values, at most
                    // 16 x 32 x 128 in magnitude: scaled (|s| <= 128) and summed over a block's
                    // 16 groups, under 2^27.
                    let offset = _mm512_set1_epi32(*a[r].get_unchecked(b).q6_k_offsets.get_unchecked(g));
                    acc[r] = _mm512_add_epi32(acc[r], _mm512_mullo_epi32(_mm512_sub_epi32(part[r], offset), scales));
                }
            }
            // `finish_q6_k_block`'s float operations, lane-wise on sixteen columns.
            let d = load_pair_ps(p.add(l::D), q.add(l::D));
            for r in 0..R {
                let y = a[r].get_unchecked(b);
                sum[r][0] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_mul_ps(d, _mm512_set1_ps(y.d)), sum[r][0]);
            }
        }
        rows_out(sum)
    }
}

/// Two adjacent interleaved Q8_0 groups against R activation rows (as `gemm_q4_k_x16`). The
/// signed weights become unsigned bytes for `vpdpbusd` by flipping their sign bit (w + 128);
/// each row's accumulator starts at -128 times its block's activation sum, which takes the
/// offset's products back out, so the integer sums are exactly those of the 256-bit kernel.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q8_0_x16<const R: usize>(pair: &[u8], a: &[&[BlockQ8_0]; R], ahead: &[u8]) -> [[f32; 16]; R] {
    use q8_0_layout as l;
    let second = pair.len() / 2;
    // SAFETY: as for `gemm_q4_k_x16`.
    unsafe {
        let sign = _mm512_set1_epi8(-128);
        let mut sum = [[_mm512_setzero_ps(); 1]; R];
        let ahead = SpreadPrefetch::new(ahead, pair.len() / 2 / Q8_0_GROUP_BLOCK * 8);
        for (b, blk) in pair[..second].chunks_exact(Q8_0_GROUP_BLOCK).enumerate() {
            let (p, q) = (blk.as_ptr(), blk.as_ptr().add(second));
            let mut acc: [__m512i; R] = std::array::from_fn(|r| _mm512_set1_epi32(-128 * a[r].get_unchecked(b).sum));
            for k in 0..8 {
                ahead.at(8 * b + k);
                let at = l::QS + 32 * k;
                let w = _mm512_xor_si512(load_pair(p.add(at), q.add(at)), sign);
                for r in 0..R {
                    let y = a[r].get_unchecked(b).qs.as_ptr().add(4 * k);
                    acc[r] = _mm512_dpbusd_epi32(acc[r], w, activations4(y));
                }
            }
            // As `avx2::gemm_q8_0_x8`'s end of a block, lane-wise.
            let d = load_pair_ps(p.add(l::D), q.add(l::D));
            for r in 0..R {
                let da = _mm512_mul_ps(d, _mm512_set1_ps(a[r].get_unchecked(b).d));
                sum[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), da, sum[r][0]);
            }
        }
        rows_out(sum)
    }
}
