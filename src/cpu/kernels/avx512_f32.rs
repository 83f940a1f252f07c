//! AVX-512 forms of attention's two f32 kernels (`cpu::kernels::vec_f32`: the scores and the weighted
//! sum of values, each for a tile of queries), for the AVX-512 VNNI path. One zmm does what the
//! AVX2 forms' two ymm do, lane for lane: the same multiply-adds on the same elements in the
//! same order, and the horizontal sums fold the upper half onto the lower before the AVX2 tree.
//! So the results are bit-identical to the AVX2 forms' (tested), with half the instructions.
//!
//! Safety contract of each `unsafe fn`: the CPU has AVX2, FMA and AVX-512 F, and the shapes
//! were checked by the safe wrapper (equal lengths, rows inside their matrix).

use std::arch::x86_64::*;

use super::avx2_f32;
use super::scalar_f32::Rows;

/// The AVX2 kernels' two 8-lane accumulators from one 16-lane one: lanes 0..8 and 8..16 added,
/// as `avx2_f32` adds its `acc0` and `acc1`.
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
fn fold_halves(v: __m512) -> __m256 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    _mm256_add_ps(_mm512_castps512_ps256(v), hi)
}

/// `avx2_f32::dot_rows` with one zmm per row where it has two ymm.
#[target_feature(enable = "avx2,fma,avx512f")]
pub unsafe fn dot_rows(q: &[f32], rows: Rows, out: &mut [f32]) {
    const AT_ONCE: usize = 4;
    let n = q.len();
    let whole = n / 16 * 16;
    let mut j = 0;
    // SAFETY: row j is as long as q (the caller's checks); loads stay below `whole` <= n, and
    // the tails go through `avx2_f32::dot`, as in the AVX2 form.
    unsafe {
        while j + AT_ONCE <= out.len() && whole == n {
            let r: [*const f32; AT_ONCE] = std::array::from_fn(|k| rows.row(j + k).as_ptr());
            let mut acc = [_mm512_setzero_ps(); AT_ONCE];
            let mut i = 0;
            while i < whole {
                let qv = _mm512_loadu_ps(q.as_ptr().add(i));
                for k in 0..AT_ONCE {
                    acc[k] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(r[k].add(i)), acc[k]);
                }
                i += 16;
            }
            for k in 0..AT_ONCE {
                out[j + k] = avx2_f32::hsum(fold_halves(acc[k]));
            }
            j += AT_ONCE;
        }
        for (jj, o) in out.iter_mut().enumerate().skip(j) {
            *o = avx2_f32::dot(q, rows.row(jj));
        }
    }
}

/// `dot_rows` for T queries at once (`vec_f32::dot_rows_tile_f32`): each key row is loaded
/// once for all of them. Every (query, key) product is the same chain as in `dot_rows`, so the
/// values are the same. Rows whose width is not a multiple of 16 take `dot_rows` per query.
#[target_feature(enable = "avx2,fma,avx512f")]
pub unsafe fn dot_rows_tile<const T: usize>(queries: Rows, rows: Rows, out: &mut [f32]) {
    const KEYS: usize = 4;
    let (n, count) = (rows.width, rows.count);
    // SAFETY: as for `dot_rows`: every load reads 16 floats inside a query or key row.
    unsafe {
        if n % 16 != 0 {
            for (t, o) in out.chunks_exact_mut(count).enumerate() {
                dot_rows(queries.row(t), rows, o);
            }
            return;
        }
        let q: [*const f32; T] = std::array::from_fn(|t| queries.row(t).as_ptr());
        let mut j = 0;
        while j < count {
            let keys = KEYS.min(count - j);
            let r: [*const f32; KEYS] = std::array::from_fn(|k| rows.row(j + k.min(keys - 1)).as_ptr());
            let mut acc = [[_mm512_setzero_ps(); KEYS]; T];
            let mut i = 0;
            while i < n {
                let kv: [__m512; KEYS] = std::array::from_fn(|k| _mm512_loadu_ps(r[k].add(i)));
                for t in 0..T {
                    let qv = _mm512_loadu_ps(q[t].add(i));
                    for k in 0..KEYS {
                        acc[t][k] = _mm512_fmadd_ps(qv, kv[k], acc[t][k]);
                    }
                }
                i += 16;
            }
            for t in 0..T {
                for k in 0..keys {
                    out[t * count + j + k] = avx2_f32::hsum(fold_halves(acc[t][k]));
                }
            }
            j += keys;
        }
    }
}

/// `weighted_rows` for T outputs at once (`vec_f32::weighted_rows_tile_f32`): each value row is
/// loaded once for all of them; every output is the same chain of multiply-adds in row order.
#[target_feature(enable = "avx2,fma,avx512f")]
pub unsafe fn weighted_rows_tile<const T: usize>(weights: &[f32], rows: Rows, out: &mut [f32]) {
    const VECS: usize = 4;
    let (width, count) = (rows.width, rows.count);
    let base = rows.data.as_ptr();
    let mut i = 0;
    // SAFETY: every load reads 16 floats of a row inside the matrix (i + 16 * VECS <= width),
    // every store 16 floats of one of the T outputs (each `width` long).
    unsafe {
        while i + 16 * VECS <= width {
            let mut acc: [[__m512; VECS]; T] = std::array::from_fn(|t| {
                std::array::from_fn(|v| _mm512_loadu_ps(out.as_ptr().add(t * width + i + 16 * v)))
            });
            for j in 0..count {
                let row = base.add(j * rows.stride + rows.offset + i);
                let x: [__m512; VECS] = std::array::from_fn(|v| _mm512_loadu_ps(row.add(16 * v)));
                for (t, a) in acc.iter_mut().enumerate() {
                    let w = _mm512_set1_ps(*weights.get_unchecked(t * count + j));
                    for (a, x) in a.iter_mut().zip(&x) {
                        *a = _mm512_fmadd_ps(w, *x, *a);
                    }
                }
            }
            for (t, a) in acc.iter().enumerate() {
                for (v, a) in a.iter().enumerate() {
                    _mm512_storeu_ps(out.as_mut_ptr().add(t * width + i + 16 * v), *a);
                }
            }
            i += 16 * VECS;
        }
    }
    if i < width {
        let rest = Rows { data: rows.data, stride: rows.stride, offset: rows.offset + i, width: width - i, count };
        for t in 0..T {
            // SAFETY: the rest of each row lies inside the matrix as the whole row does.
            unsafe {
                avx2_f32::weighted_rows(
                    &weights[t * count..(t + 1) * count],
                    rest,
                    &mut out[t * width + i..(t + 1) * width],
                )
            };
        }
    }
}
