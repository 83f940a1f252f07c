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
        let v = _mm256_add_ps(acc0, acc1);
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let mut sum = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
        for j in i..n {
            sum += a[j] * b[j];
        }
        sum
    }
}

/// `cpu::dot_rows_f32`; the rows lie inside their matrix (checked by the caller).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_rows(q: &[f32], rows: Rows, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate() {
        // SAFETY: row j is as long as q (the caller's checks).
        *o = unsafe { dot(q, rows.row(j)) };
    }
}

/// `cpu::weighted_rows_f32`: the output stays in registers, 8 floats at a time, across all rows.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn weighted_rows(weights: &[f32], rows: Rows, out: &mut [f32]) {
    let base = rows.data.as_ptr();
    let mut i = 0;
    // SAFETY: every load reads 8 floats of a row inside the matrix (i + 8 <= width), every
    // store 8 floats of `out` (as long as a row).
    unsafe {
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
