//! 512-bit kernels of the AVX-512 VNNI path for the packed Q4_K and Q6_K groups (the types of a
//! Q4_K_M file; `cpu::repack` layout), against up to `PACKED_ROW_GROUP` activation rows.
//!
//! Why a second form of the same products: on a CPU with full-width AVX-512 (Zen 5, Intel server
//! chips) a zmm `vpdpbusd` does twice the multiply-adds of a ymm one in the same time, and the
//! 256-bit kernels are bound by instruction count (a byte broadcast, a `vpmaddubsw` and a
//! `vpaddw` per 32 multiply-adds and row), not by the multiply-adds. Here each row costs one
//! 64-bit broadcast and one zmm `vpdpbusd` per 64 multiply-adds.
//!
//! Each 32-byte chunk of the packed layout holds, for each of the eight columns, weights v..v+4
//! in the low nibbles and v+4..v+8 in the high nibbles. The two nibble halves are interleaved
//! into one zmm (lane 2c: column c's weights v..v+4, lane 2c+1: v+4..v+8), so that one
//! activation qword (values v..v+8) broadcast to every lane pair meets the right weights. The
//! integer sums of each Q4_K sub-block fit in i16 and are scaled with one `vpdpwssd`; those of a
//! Q6_K scale group need more bits and take `vpmulld` (a `vpdpwssd` per chunk measured no
//! faster). At the end of a super-block the two lanes of each column are added and the rest is
//! the 256-bit kernels' own finish (`avx2::K4Finish`, `avx2::finish_q6_k_block`), so both
//! forms give the same integers and the same float operations.
//!
//! Safety contract of every `unsafe fn` here: the CPU supports AVX2, FMA, AVX-512 F, BW, VL and
//! VNNI (checked by `Isa::Avx512Vnni.is_available()` before dispatch), `group` holds whole
//! packed blocks, and every activation row holds one block per packed block.

use std::arch::x86_64::*;

use super::avx2::{K4Finish, finish_q6_k_block, load, rows_out};
use super::int8_dot::Avx512VnniDot;
use super::repack::{Q4_K_GROUP_BLOCK, Q6_K_GROUP_BLOCK, q4k_layout, q6k_layout};
use crate::quant::q8::BlockQ8K;

/// Interleaves the eight 32-bit lanes of `a` and `b`: lane 2c of the result is lane c of `a`,
/// lane 2c+1 lane c of `b`. One `vpermt2d`, written as asm because LLVM otherwise rewrites the
/// permute as an interleave of seven shuffle, extend and insert instructions, which made the
/// kernels shuffle-bound.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn pair_lanes(a: __m256i, b: __m256i) -> __m512i {
    let index = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    // The index reads only lanes 0..8 of each operand, so their undefined upper halves are
    // never used.
    let (mut table, second) = (_mm512_castsi256_si512(a), _mm512_castsi256_si512(b));
    // SAFETY: a register-only instruction of AVX-512 F, which this function's features include.
    unsafe {
        std::arch::asm!(
            "vpermt2d {table}, {index}, {second}",
            table = inout(zmm_reg) table,
            index = in(zmm_reg) index,
            second = in(zmm_reg) second,
            options(pure, nomem, nostack),
        )
    };
    table
}

/// The eight 8-bit scales at `p` as i32, each repeated for the two lanes of its column.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn pair_scales(p: *const u8, signed: bool) -> __m512i {
    // SAFETY: 8 readable bytes at `p` (the caller's layout).
    let s8 = unsafe { _mm_loadl_epi64(p as *const __m128i) };
    let twice = _mm_unpacklo_epi8(s8, s8);
    if signed { _mm512_cvtepi8_epi32(twice) } else { _mm512_cvtepu8_epi32(twice) }
}

/// Activation values v..v+8 of `y`, broadcast to every lane pair.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn pair_activations(y: *const i8) -> __m512i {
    // SAFETY: 8 readable bytes at `y` (the caller's contract).
    _mm512_set1_epi64(unsafe { (y as *const i64).read_unaligned() })
}

/// Column c's total in lane c: the sum of lanes 2c and 2c+1 (exact, in i32).
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn fold_pairs(acc: __m512i) -> __m256i {
    let both = _mm512_add_epi32(acc, _mm512_shuffle_epi32(acc, _MM_PERM_CDAB));
    _mm512_cvtepi64_epi32(both)
}

/// Eight interleaved Q4_K columns against R activation rows: `out[r][c] = dot(column c, a[r])`.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q4_k_x8<const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R]) -> [[f32; 8]; R] {
    use q4k_layout as l;
    // SAFETY: the module's contract: every offset below lies within a packed block and every
    // activation index within a row.
    unsafe {
        let m4 = _mm512_set1_epi8(0x0F);
        let mut sum = [_mm256_setzero_ps(); R];
        for (b, blk) in group.chunks_exact(Q4_K_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm512_setzero_si512(); R];
            for j in 0..8 {
                let scales = pair_scales(p.add(l::SCALES + 8 * j), false);
                // Each lane sums 16 products of at most 15 x 128, so it fits in i16 (30720) and
                // `vpdpwssd` against the scale (high word zero) multiplies and adds it exactly.
                let mut sub = [_mm512_setzero_si512(); R];
                for k in 0..4 {
                    let q = load(p.add(l::QS + 128 * j + 32 * k));
                    let w = _mm512_and_si512(pair_lanes(q, _mm256_srli_epi16(q, 4)), m4);
                    let v = 32 * j + 8 * k;
                    for r in 0..R {
                        let y = pair_activations(a[r].get_unchecked(b).qs.as_ptr().add(v));
                        sub[r] = _mm512_dpbusd_epi32(sub[r], w, y);
                    }
                }
                for r in 0..R {
                    acc[r] = _mm512_dpwssd_epi32(acc[r], sub[r], scales);
                }
            }
            let finish = K4Finish::load(p);
            for r in 0..R {
                sum[r] = finish.add::<Avx512VnniDot>(sum[r], fold_pairs(acc[r]), a[r].get_unchecked(b));
            }
        }
        rows_out(sum)
    }
}

/// Eight interleaved Q6_K columns against R activation rows. The weights are used as stored
/// (0..63, standing for -32..31); the +32 offset is removed once per block with the activation
/// sums, as in the 256-bit kernel.
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
pub unsafe fn gemm_q6_k_x8<const R: usize>(group: &[u8], a: &[&[BlockQ8K]; R]) -> [[f32; 8]; R] {
    use q6k_layout as l;
    // SAFETY: as for `gemm_q4_k_x8`.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m3 = _mm256_set1_epi8(3);
        let mut sum = [_mm256_setzero_ps(); R];
        for (b, blk) in group.chunks_exact(Q6_K_GROUP_BLOCK).enumerate() {
            let p = blk.as_ptr();
            let mut acc = [_mm512_setzero_si512(); R];
            for g in 0..16 {
                let scales = pair_scales(p.add(l::SCALES + 8 * g), true);
                let high = load(p.add(l::HI + 32 * g));
                // At most 16 x 63 x 128 per column and scale group: no overflow in i32.
                let mut part = [_mm512_setzero_si512(); R];
                for t in 0..2 {
                    let k = 2 * g + t;
                    let low = load(p.add(l::LO + 32 * k));
                    let h = _mm256_srl_epi16(high, _mm_cvtsi32_si128(4 * t as i32));
                    let lo = _mm256_or_si256(_mm256_and_si256(low, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
                    let hi = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(low, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4),
                    );
                    let w = pair_lanes(lo, hi);
                    for r in 0..R {
                        let y = pair_activations(a[r].get_unchecked(b).qs.as_ptr().add(8 * k));
                        part[r] = _mm512_dpbusd_epi32(part[r], w, y);
                    }
                }
                for r in 0..R {
                    acc[r] = _mm512_add_epi32(acc[r], _mm512_mullo_epi32(part[r], scales));
                }
            }
            for r in 0..R {
                sum[r] = finish_q6_k_block::<Avx512VnniDot>(sum[r], fold_pairs(acc[r]), p, a[r].get_unchecked(b));
            }
        }
        rows_out(sum)
    }
}
