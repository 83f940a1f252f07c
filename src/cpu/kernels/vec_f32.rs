//! f32 vector kernels of attention, of the f32/f16 weight products and of the feed-forward
//! block: a dot product, `y += alpha * x`, a softmax and SwiGLU, on the chosen instruction set.
//! The scalar forms here (and in `scalar_f32`) are the reference the SIMD ones are tested
//! against.

use super::Isa;
pub use super::scalar_f32::Rows;
use super::scalar_f32::swiglu_scalar;

/// Whether `isa` runs the AVX-512 forms of the attention kernels (`cpu::kernels::avx512_f32`).
#[cfg(target_arch = "x86_64")]
fn runs_avx512(isa: Isa) -> bool {
    isa == Isa::Avx512Vnni && isa.is_available()
}

/// Whether `isa` runs the AVX2 + FMA forms here (every x86 SIMD path has them; checked, since
/// these safe functions take any `Isa`).
#[cfg(target_arch = "x86_64")]
fn runs_avx2(isa: Isa) -> bool {
    isa.is_x86_simd() && isa.is_available()
}

/// `sum a[i] * b[i]`.
pub fn dot_f32(isa: Isa, a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of unequal lengths");
    match isa {
        // SAFETY: `runs_avx2` checked AVX2 and FMA; the lengths match.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::dot(a, b) },
        _ => dot_scalar(a, b),
    }
}

/// `out[j] = dot(q, rows[j])` for every row (attention's scores).
pub fn dot_rows_f32(isa: Isa, q: &[f32], rows: Rows, out: &mut [f32]) {
    rows.check();
    assert!(q.len() == rows.width && out.len() == rows.count, "dot_rows: mismatched shapes");
    match isa {
        // SAFETY: as for `dot_f32`; the rows were checked to lie inside their matrix.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::dot_rows(q, rows, out) },
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                *o = dot_scalar(q, rows.row(j));
            }
        }
    }
}

/// `out += sum_j weights[j] * rows[j]` (attention's weighted sum of values).
pub fn weighted_rows_f32(isa: Isa, weights: &[f32], rows: Rows, out: &mut [f32]) {
    rows.check();
    assert!(weights.len() == rows.count && out.len() == rows.width, "weighted_rows: mismatched shapes");
    match isa {
        // SAFETY: as for `dot_rows_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::weighted_rows(weights, rows, out) },
        _ => {
            for (j, &w) in weights.iter().enumerate() {
                for (o, x) in out.iter_mut().zip(rows.row(j)) {
                    *o += w * x;
                }
            }
        }
    }
}

/// Calls the tile kernel `$f::<T>` for T = `$tile` (1..=4).
#[cfg(target_arch = "x86_64")]
macro_rules! by_tile {
    ($($f:ident)::+, $tile:expr, $($arg:expr),*) => {
        match $tile {
            1 => $($f)::+::<1>($($arg),*),
            2 => $($f)::+::<2>($($arg),*),
            3 => $($f)::+::<3>($($arg),*),
            _ => $($f)::+::<4>($($arg),*),
        }
    };
}

/// Queries the tile kernels take at once (`dot_rows_tile_f32`, `weighted_rows_tile_f32`). A
/// head's key and value rows (148 x 512 bytes at 148 rows) do not fit in L1, and reading them
/// once per query was what attention's time went to; a tile reads them once per four queries.
pub const QUERY_TILE: usize = 4;

/// `out[t * rows.count + j] = dot(queries[t], rows[j])` for each of the (1..=QUERY_TILE) query
/// rows: `dot_rows_f32` for each query, with the same values.
pub fn dot_rows_tile_f32(isa: Isa, queries: Rows, rows: Rows, out: &mut [f32]) {
    queries.check();
    rows.check();
    let tile = queries.count;
    assert!(
        (1..=QUERY_TILE).contains(&tile) && queries.width == rows.width && out.len() == tile * rows.count,
        "dot_rows_tile: mismatched shapes"
    );
    match isa {
        // SAFETY: as for `dot_rows_f32` (AVX-512 F checked by `runs_avx512`); the queries were
        // checked to lie inside their matrix too.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx512(isa) => unsafe { by_tile!(super::avx512_f32::dot_rows_tile, tile, queries, rows, out) },
        // SAFETY: as for `dot_rows_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { by_tile!(super::avx2_f32::dot_rows_tile, tile, queries, rows, out) },
        _ => {
            for (t, o) in out.chunks_exact_mut(rows.count).enumerate() {
                dot_rows_f32(isa, queries.row(t), rows, o);
            }
        }
    }
}

/// `out[t * w..][..w] += sum_j weights[t * rows.count + j] * rows[j]` (w = rows.width) for each of
/// the (1..=QUERY_TILE) outputs in `out`: `weighted_rows_f32` for each, with the same values.
pub fn weighted_rows_tile_f32(isa: Isa, weights: &[f32], rows: Rows, out: &mut [f32]) {
    rows.check();
    let tile = out.len() / rows.width.max(1);
    assert!(
        (1..=QUERY_TILE).contains(&tile) && out.len() == tile * rows.width && weights.len() == tile * rows.count,
        "weighted_rows_tile: mismatched shapes"
    );
    match isa {
        // SAFETY: as for `weighted_rows_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx512(isa) => unsafe { by_tile!(super::avx512_f32::weighted_rows_tile, tile, weights, rows, out) },
        // SAFETY: as for `weighted_rows_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { by_tile!(super::avx2_f32::weighted_rows_tile, tile, weights, rows, out) },
        _ => {
            for (w, o) in weights.chunks_exact(rows.count).zip(out.chunks_exact_mut(rows.width)) {
                weighted_rows_f32(isa, w, rows, o);
            }
        }
    }
}

/// Eight independent partial sums (vectorizable, and a fixed summation order).
fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The largest value (-inf for an empty slice).
pub fn max_f32(isa: Isa, x: &[f32]) -> f32 {
    match isa {
        // SAFETY: as for `dot_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::max(x) },
        _ => x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)),
    }
}

/// `sum_i e^(x[i] - max)` for `max` at least every value (a softmax's denominator). The SIMD
/// forms use a vector exp within about 2 ulp and sum in another order than the scalar one.
pub fn sum_exp_f32(isa: Isa, x: &[f32], max: f32) -> f32 {
    match isa {
        // SAFETY: as for `dot_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::sum_exp(x, max) },
        _ => x.iter().map(|&v| (v - max).exp()).sum(),
    }
}

/// `scores = softmax(scores * scale)` in place (attention's weights for one query and head).
pub fn softmax_scaled(isa: Isa, scores: &mut [f32], scale: f32) {
    match isa {
        // SAFETY: as for `dot_f32`.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::softmax_scaled(scores, scale) },
        _ => {
            let mut max = f32::NEG_INFINITY;
            for sc in scores.iter_mut() {
                *sc *= scale;
                max = max.max(*sc);
            }
            let mut sum = 0.0;
            for sc in scores.iter_mut() {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            for sc in scores.iter_mut() {
                *sc /= sum;
            }
        }
    }
}

/// `gate = silu(gate) * up = gate / (1 + e^-gate) * up`, elementwise (SwiGLU's product). The
/// SIMD form uses a vector exp within about 2 ulp.
pub fn swiglu_f32(isa: Isa, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu operands of different lengths");
    match isa {
        // SAFETY: as for `dot_f32`; the lengths are checked above.
        #[cfg(target_arch = "x86_64")]
        _ if runs_avx2(isa) => unsafe { super::avx2_f32::swiglu(gate, up) },
        _ => swiglu_scalar(gate, up),
    }
}
