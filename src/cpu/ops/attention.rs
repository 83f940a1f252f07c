//! Bidirectional (non-causal) multi-head attention with grouped K/V heads.

use rayon::prelude::*;

use super::column_blocks::par_column_blocks;
use super::matmul::grow;
use crate::cpu::kernels::{QUERY_TILE, Rows, active_isa, dot_rows_tile_f32, softmax_scaled, weighted_rows_tile_f32};

/// Shapes of one attention call.
#[derive(Clone, Copy)]
pub struct AttentionShape {
    /// Query rows.
    pub n_rows: usize,
    /// Key/value rows (the whole canvas; more than `n_rows` when only a window of it runs).
    pub n_keys: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
}

#[derive(Default)]
pub struct AttentionScratch {
    /// A tile of query rows' scores per head.
    scores: Vec<f32>,
    /// A tile of query rows' outputs per head, before they go to their rows of `out`.
    tiles: Vec<f32>,
}

/// `out = softmax(q k^T / sqrt(d)) v` per head, every query attending to every key. `q` and
/// `out` are `[n_rows, n_head * head_dim]`; `k` and `v` are `[n_keys, n_head_kv * head_dim]`;
/// query head h reads K/V head `h / (n_head / n_head_kv)`.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, out: &mut [f32], scratch: &mut AttentionScratch) {
    let AttentionShape { n_rows, n_keys, n_head, n_head_kv, head_dim: hd } = s;
    let group = n_head / n_head_kv;
    let (q_stride, kv_stride) = (n_head * hd, n_head_kv * hd);
    let scale = 1.0 / (hd as f32).sqrt();
    let isa = active_isa();
    grow(&mut scratch.scores, n_head * QUERY_TILE * n_keys);
    grow(&mut scratch.tiles, n_head * QUERY_TILE * hd);
    // Head h writes columns h * hd.. of every output row: disjoint blocks, one per task.
    let heads_out = par_column_blocks(out, n_rows, q_stride, n_head * hd, hd);
    scratch.scores[..n_head * QUERY_TILE * n_keys]
        .par_chunks_mut(QUERY_TILE * n_keys)
        .zip(scratch.tiles[..n_head * QUERY_TILE * hd].par_chunks_mut(QUERY_TILE * hd))
        .zip(heads_out)
        .enumerate()
        .for_each(|(h, ((scores, tile_out), mut head_out))| {
            let kvh = h / group;
            // Head kvh of every key and value row.
            let head_rows = |data| Rows { data, stride: kv_stride, offset: kvh * hd, width: hd, count: n_keys };
            for first in (0..n_rows).step_by(QUERY_TILE) {
                let tile = QUERY_TILE.min(n_rows - first);
                let queries =
                    Rows { data: q, stride: q_stride, offset: first * q_stride + h * hd, width: hd, count: tile };
                let scores = &mut scores[..tile * n_keys];
                dot_rows_tile_f32(isa, queries, head_rows(k), scores);
                for row in scores.chunks_exact_mut(n_keys) {
                    softmax_scaled(isa, row, scale);
                }
                let o = &mut tile_out[..tile * hd];
                o.fill(0.0);
                weighted_rows_tile_f32(isa, scores, head_rows(v), o);
                for (i, row) in o.chunks_exact(hd).enumerate() {
                    head_out.row_mut(first + i).copy_from_slice(row);
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// softmax(q k^T / sqrt(d)) v in f64, one query and head at a time.
    fn naive(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape) -> Vec<f32> {
        let (hd, group) = (s.head_dim, s.n_head / s.n_head_kv);
        let (q_stride, kv_stride) = (s.n_head * hd, s.n_head_kv * hd);
        let mut out = vec![0f32; s.n_rows * q_stride];
        for r in 0..s.n_rows {
            for h in 0..s.n_head {
                let kvh = h / group;
                let qr = &q[r * q_stride + h * hd..][..hd];
                let scores: Vec<f64> = (0..s.n_keys)
                    .map(|j| {
                        let kr = &k[j * kv_stride + kvh * hd..][..hd];
                        qr.iter().zip(kr).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                let total: f64 = e.iter().sum();
                for i in 0..hd {
                    let o: f64 = (0..s.n_keys).map(|j| e[j] / total * v[j * kv_stride + kvh * hd + i] as f64).sum();
                    out[r * q_stride + h * hd + i] = o as f32;
                }
            }
        }
        out
    }

    #[test]
    fn matches_naive_attention_with_and_without_grouped_heads() {
        // (rows, keys, heads, K/V heads, head dim): LLaDA-like, Dream-like grouping, a window
        // of rows against a longer canvas, and rows that leave a ragged query tile.
        for (n_rows, n_keys, n_head, n_head_kv, head_dim) in [(7, 7, 4, 4, 32), (9, 9, 6, 2, 16), (3, 11, 4, 1, 64)] {
            let s = AttentionShape { n_rows, n_keys, n_head, n_head_kv, head_dim };
            let value = |i: usize, m: usize| ((i * m % 97) as f32 - 48.0) / 40.0;
            let q: Vec<f32> = (0..n_rows * n_head * head_dim).map(|i| value(i, 31)).collect();
            let k: Vec<f32> = (0..n_keys * n_head_kv * head_dim).map(|i| value(i, 17)).collect();
            let v: Vec<f32> = (0..n_keys * n_head_kv * head_dim).map(|i| value(i, 23)).collect();
            let mut got = vec![0f32; q.len()];
            attention(&q, &k, &v, s, &mut got, &mut AttentionScratch::default());
            for (i, (a, b)) in got.iter().zip(naive(&q, &k, &v, s)).enumerate() {
                // f32 dot products of up to 64 terms and a softmax: a few ulps of values near 1.
                assert!(
                    (a - b).abs() <= 1e-5,
                    "shape {n_rows}x{n_keys}x{n_head}/{n_head_kv}x{head_dim}, value {i}: {a} vs {b}"
                );
            }
        }
    }
}
