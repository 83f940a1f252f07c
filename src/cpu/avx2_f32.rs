//! AVX2 + FMA forms of `cpu::vec_f32`. Safety contract of each `unsafe fn`: the CPU has AVX2
//! and FMA, and the shapes were checked by the safe wrapper (equal lengths, rows inside their
//! matrix).

use std::arch::x86_64::*;

use super::vec_f32::Rows;

#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load reads 8 floats inside both slices (i + 16 <= n, i + 8 <= n).
    unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 16 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), acc1);
            i += 16;
        }
        if i + 8 <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            i += 8;
        }
        let mut sum = hsum(_mm256_add_ps(acc0, acc1));
        for j in i..n {
            sum += a[j] * b[j];
        }
        sum
    }
}

/// `cpu::dot_rows_f32`; the rows lie inside their matrix (checked by the caller). Four rows at
/// a time, each summed exactly as `dot` sums it (two accumulators, the same order), so that
/// eight independent multiply-add chains hide the FMA latency that one row's two chains expose.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_rows(q: &[f32], rows: Rows, out: &mut [f32]) {
    const AT_ONCE: usize = 4;
    let n = q.len();
    let whole = n / 16 * 16;
    let mut j = 0;
    // SAFETY: row j is as long as q (the caller's checks); loads stay below `whole` <= n, and
    // the tails go through `dot`.
    unsafe {
        while j + AT_ONCE <= out.len() && whole == n {
            let r: [*const f32; AT_ONCE] = std::array::from_fn(|k| rows.row(j + k).as_ptr());
            let mut acc0 = [_mm256_setzero_ps(); AT_ONCE];
            let mut acc1 = [_mm256_setzero_ps(); AT_ONCE];
            let mut i = 0;
            while i < whole {
                let (q0, q1) = (_mm256_loadu_ps(q.as_ptr().add(i)), _mm256_loadu_ps(q.as_ptr().add(i + 8)));
                for k in 0..AT_ONCE {
                    acc0[k] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(r[k].add(i)), acc0[k]);
                    acc1[k] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(r[k].add(i + 8)), acc1[k]);
                }
                i += 16;
            }
            for k in 0..AT_ONCE {
                out[j + k] = hsum(_mm256_add_ps(acc0[k], acc1[k]));
            }
            j += AT_ONCE;
        }
        for (jj, o) in out.iter_mut().enumerate().skip(j) {
            *o = dot(q, rows.row(jj));
        }
    }
}

/// The sum of the 8 lanes.
#[target_feature(enable = "avx2,fma")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// `cpu::weighted_rows_f32`: the output stays in registers across all rows, 64 floats at a
/// time (eight independent multiply-add chains: one chain was bound by the FMA latency), then
/// 8 at a time. Each output is summed in row order either way.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn weighted_rows(weights: &[f32], rows: Rows, out: &mut [f32]) {
    const VECS: usize = 8;
    let base = rows.data.as_ptr();
    let mut i = 0;
    // SAFETY: every load reads 8 floats of a row inside the matrix (i + 8 * VECS <= width, or
    // i + 8 <= width), every store 8 floats of `out` (as long as a row).
    unsafe {
        while i + 8 * VECS <= rows.width {
            let mut acc: [__m256; VECS] = std::array::from_fn(|v| _mm256_loadu_ps(out.as_ptr().add(i + 8 * v)));
            for (j, &w) in weights.iter().enumerate() {
                let (w, row) = (_mm256_set1_ps(w), base.add(j * rows.stride + rows.offset + i));
                for (v, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(w, _mm256_loadu_ps(row.add(8 * v)), *a);
                }
            }
            for (v, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(i + 8 * v), *a);
            }
            i += 8 * VECS;
        }
        while i + 8 <= rows.width {
            let mut acc = _mm256_loadu_ps(out.as_ptr().add(i));
            for (j, &w) in weights.iter().enumerate() {
                let x = _mm256_loadu_ps(base.add(j * rows.stride + rows.offset + i));
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w), x, acc);
            }
            _mm256_storeu_ps(out.as_mut_ptr().add(i), acc);
            i += 8;
        }
    }
    for (c, o) in out.iter_mut().enumerate().skip(i) {
        for (j, &w) in weights.iter().enumerate() {
            *o += w * rows.data[j * rows.stride + rows.offset + c];
        }
    }
}
