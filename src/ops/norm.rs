//! RMSNorm: `x / sqrt(mean(x^2) + eps) * w`, per row. The sum of squares is accumulated in
//! f64, as ggml does, which keeps our activations closest to llama.cpp's.

use rayon::prelude::*;

/// Normalizes each row of `x` (`[n_rows, w.len()]`) into `out`, rows in parallel (each row's
/// sum in order, as one thread would: the same numbers).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    x.par_chunks_exact(d).zip(out.par_chunks_exact_mut(d)).for_each(|(xr, or)| {
        let ms = (xr.iter().map(|&v| (v * v) as f64).sum::<f64>() / d as f64) as f32;
        let scale = 1.0 / (ms + eps).sqrt();
        for ((o, v), g) in or.iter_mut().zip(xr).zip(w) {
            *o = v * scale * g;
        }
    });
}
