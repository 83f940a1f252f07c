//! RMSNorm: `x / sqrt(mean(x^2) + eps) * w`, per row. The sum of squares is accumulated in
//! f64, as ggml does, which keeps our activations closest to llama.cpp's.

use rayon::prelude::*;

/// Normalizes each row of `x` (`[n_rows, w.len()]`) into `out`, rows in parallel (each row's
/// sums in one fixed order whatever the threads: the same numbers on every run).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    x.par_chunks_exact(d).zip(out.par_chunks_exact_mut(d)).for_each(|(xr, or)| {
        let ms = (sum_of_squares(xr) / d as f64) as f32;
        let scale = 1.0 / (ms + eps).sqrt();
        for ((o, v), g) in or.iter_mut().zip(xr).zip(w) {
            *o = v * scale * g;
        }
    });
}

/// Lanes of the sum of squares: partial sums side by side, which the compiler keeps in vector
/// registers (one running f64 sum is a chain of dependent adds, 4 cycles a value).
const LANES: usize = 8;

/// `sum(v * v)` over `x`, each square rounded to f32 and summed in f64 (ggml's order of
/// precision), in `LANES` partial sums added at the end: within f64 rounding of the one-sum
/// order, far below the f32 result's half ulp.
fn sum_of_squares(x: &[f32]) -> f64 {
    let mut lanes = [0f64; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l += (v * v) as f64;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| (v * v) as f64).sum();
    lanes.iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_sums_match_one_running_sum_to_the_f32_result() {
        // Lengths with and without a tail past the lanes; values over many magnitudes.
        for d in [4096, 3584, 37, 5] {
            let x: Vec<f32> =
                (0..3 * d).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 10f32.powi(i as i32 % 5 - 2)).collect();
            let w: Vec<f32> = (0..d).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
            let mut got = vec![0f32; x.len()];
            rms_norm(&x, &w, 1e-5, &mut got);
            for (r, xr) in x.chunks_exact(d).enumerate() {
                let one_sum = (xr.iter().map(|&v| (v * v) as f64).sum::<f64>() / d as f64) as f32;
                let scale = 1.0 / (one_sum + 1e-5).sqrt();
                for (i, (&v, &g)) in xr.iter().zip(&w).enumerate() {
                    let want = v * scale * g;
                    let (a, b) = (got[r * d + i], want);
                    // The f64 sums differ in their last bits at most; after the cast to f32
                    // they are equal or one f32 step apart.
                    assert!((a - b).abs() <= b.abs() * f32::EPSILON, "d {d} row {r} value {i}: {a} vs {b}");
                }
            }
        }
    }
}
