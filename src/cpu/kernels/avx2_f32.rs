//! AVX2 + FMA forms of `cpu::kernels::vec_f32`. Safety contract of each `unsafe fn`: the CPU has AVX2
//! and FMA, and the shapes were checked by the safe wrapper (equal lengths, rows inside their
//! matrix).

use std::arch::x86_64::*;

use super::scalar_f32::Rows;

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
pub(super) fn hsum(v: __m256) -> f32 {
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

/// `e^x` for 8 lanes, Cephes' single-precision method: x = n ln2 + r with |r| <= ln2 / 2, e^r
/// by a degree-7 polynomial, times 2^n. Relative error within 2e-7 (about 2 ulp) of the
/// correctly rounded value over [-87.3, 88.3]; inputs outside it are clamped to it (below,
/// e^x is under f32's normal range and contributes nothing next to a softmax maximum's 1;
/// above, SiLU's `x / (1 + e^-x)` of x < -88.3 is 0 to within 1e-36 either way).
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.336_55)), _mm256_set1_ps(88.3));
    let n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)), _MM_FROUND_TO_NEAREST_INT);
    // r = x - n ln2, with ln2 split in two so that n * ln2_hi is exact.
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    // Cephes' coefficients (its 5.0000001201e-1 is 0.5 in f32).
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let e_r = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0)));
    // 2^n from the exponent bits (-126 <= n <= 127 here, so the result is a normal number).
    let two_n =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    _mm256_mul_ps(e_r, two_n)
}

/// `cpu::max_f32`: eight running maxima, then the largest of them.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn max(x: &[f32]) -> f32 {
    let whole = x.len() / 8 * 8;
    // SAFETY: every load reads 8 floats below `whole` <= len.
    unsafe {
        let mut max8 = _mm256_set1_ps(f32::NEG_INFINITY);
        for i in (0..whole).step_by(8) {
            max8 = _mm256_max_ps(max8, _mm256_loadu_ps(x.as_ptr().add(i)));
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), max8);
        x[whole..].iter().chain(&lanes).fold(f32::NEG_INFINITY, |m, &v| m.max(v))
    }
}

/// `cpu::sum_exp_f32`: `exp8` on 8 lanes with eight running sums, then the scalar
/// tail with libm's expf.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn sum_exp(x: &[f32], max: f32) -> f32 {
    let whole = x.len() / 8 * 8;
    // SAFETY: every load reads 8 floats below `whole` <= len.
    unsafe {
        let m = _mm256_set1_ps(max);
        let mut sum8 = _mm256_setzero_ps();
        for i in (0..whole).step_by(8) {
            sum8 = _mm256_add_ps(sum8, exp8(_mm256_sub_ps(_mm256_loadu_ps(x.as_ptr().add(i)), m)));
        }
        x[whole..].iter().fold(hsum(sum8), |s, &v| s + (v - max).exp())
    }
}

/// `cpu::softmax_scaled`: scale and maximum, then e^(x - max) and its sum, then the division,
/// 8 lanes at a time (libm's expf, one call per score, was the costliest part of attention).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn softmax_scaled(scores: &mut [f32], scale: f32) {
    let n = scores.len();
    let whole = n / 8 * 8;
    let p = scores.as_mut_ptr();
    // SAFETY: every load and store covers 8 floats below `whole` <= n.
    unsafe {
        let s = _mm256_set1_ps(scale);
        let mut max8 = _mm256_set1_ps(f32::NEG_INFINITY);
        for i in (0..whole).step_by(8) {
            let v = _mm256_mul_ps(_mm256_loadu_ps(p.add(i)), s);
            _mm256_storeu_ps(p.add(i), v);
            max8 = _mm256_max_ps(max8, v);
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), max8);
        let mut max = lanes.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        for v in &mut scores[whole..] {
            *v *= scale;
            max = max.max(*v);
        }
        let m = _mm256_set1_ps(max);
        let mut sum8 = _mm256_setzero_ps();
        for i in (0..whole).step_by(8) {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), m));
            _mm256_storeu_ps(p.add(i), e);
            sum8 = _mm256_add_ps(sum8, e);
        }
        let mut sum = hsum(sum8);
        for v in &mut scores[whole..] {
            *v = (*v - max).exp();
            sum += *v;
        }
        let total = _mm256_set1_ps(sum);
        for i in (0..whole).step_by(8) {
            _mm256_storeu_ps(p.add(i), _mm256_div_ps(_mm256_loadu_ps(p.add(i)), total));
        }
        for v in &mut scores[whole..] {
            *v /= sum;
        }
    }
}

/// `dot_rows` for T queries at once (`vec_f32::dot_rows_tile_f32`): each key row is loaded once
/// for all of them (the queries stay in L1). Every (query, key) product is `dot`'s chain (two
/// accumulators over 16-value steps), so the values are the same. Rows whose width is not a
/// multiple of 16 take `dot_rows` per query.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_rows_tile<const T: usize>(queries: Rows, rows: Rows, out: &mut [f32]) {
    let (n, count) = (rows.width, rows.count);
    // SAFETY: as for `dot_rows`: every load reads 8 floats inside a query or key row.
    unsafe {
        if n % 16 != 0 {
            for (t, o) in out.chunks_exact_mut(count).enumerate() {
                dot_rows(queries.row(t), rows, o);
            }
            return;
        }
        let q: [*const f32; T] = std::array::from_fn(|t| queries.row(t).as_ptr());
        for j in 0..count {
            let r = rows.row(j).as_ptr();
            let mut acc0 = [_mm256_setzero_ps(); T];
            let mut acc1 = [_mm256_setzero_ps(); T];
            let mut i = 0;
            while i < n {
                let (k0, k1) = (_mm256_loadu_ps(r.add(i)), _mm256_loadu_ps(r.add(i + 8)));
                for t in 0..T {
                    acc0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(q[t].add(i)), k0, acc0[t]);
                    acc1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(q[t].add(i + 8)), k1, acc1[t]);
                }
                i += 16;
            }
            for t in 0..T {
                out[t * count + j] = hsum(_mm256_add_ps(acc0[t], acc1[t]));
            }
        }
    }
}

/// `weighted_rows` for T outputs at once (`vec_f32::weighted_rows_tile_f32`), 16 columns of each
/// in registers: each value row is loaded once for all of them, and every output is the same
/// chain of multiply-adds in row order (the last `width % 16` columns go through
/// `weighted_rows`, which fuses the same ones as it always does).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn weighted_rows_tile<const T: usize>(weights: &[f32], rows: Rows, out: &mut [f32]) {
    let (width, count) = (rows.width, rows.count);
    let base = rows.data.as_ptr();
    let mut i = 0;
    // SAFETY: every load reads 8 floats of a row inside the matrix (i + 16 <= width), every
    // store 8 floats of one of the T outputs (each `width` long).
    unsafe {
        while i + 16 <= width {
            let mut acc: [[__m256; 2]; T] = std::array::from_fn(|t| {
                std::array::from_fn(|v| _mm256_loadu_ps(out.as_ptr().add(t * width + i + 8 * v)))
            });
            for j in 0..count {
                let row = base.add(j * rows.stride + rows.offset + i);
                let (x0, x1) = (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)));
                for (t, [a0, a1]) in acc.iter_mut().enumerate() {
                    let w = _mm256_set1_ps(*weights.get_unchecked(t * count + j));
                    *a0 = _mm256_fmadd_ps(w, x0, *a0);
                    *a1 = _mm256_fmadd_ps(w, x1, *a1);
                }
            }
            for (t, a) in acc.iter().enumerate() {
                for (v, a) in a.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(t * width + i + 8 * v), *a);
                }
            }
            i += 16;
        }
        if i < width {
            let rest = Rows { data: rows.data, stride: rows.stride, offset: rows.offset + i, width: width - i, count };
            for t in 0..T {
                weighted_rows(&weights[t * count..(t + 1) * count], rest, &mut out[t * width + i..(t + 1) * width]);
            }
        }
    }
}

/// `cpu::swiglu_f32`: `gate * up / (1 + e^-gate)` with `exp8`, 8 lanes at a time.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn swiglu(gate: &mut [f32], up: &[f32]) {
    let whole = gate.len() / 8 * 8;
    let (g, u) = (gate.as_mut_ptr(), up.as_ptr());
    // SAFETY: every load and store covers 8 floats below `whole` <= len (the caller checked
    // that `up` is as long as `gate`).
    unsafe {
        let one = _mm256_set1_ps(1.0);
        for i in (0..whole).step_by(8) {
            let x = _mm256_loadu_ps(g.add(i));
            let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
            let silu = _mm256_div_ps(x, _mm256_add_ps(one, e));
            _mm256_storeu_ps(g.add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(u.add(i))));
        }
    }
    super::scalar_f32::swiglu_scalar(&mut gate[whole..], &up[whole..]);
}
