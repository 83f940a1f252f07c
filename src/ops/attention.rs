//! Bidirectional (non-causal) multi-head attention with grouped K/V heads.

use rayon::prelude::*;

use super::column_blocks::par_column_blocks;
use super::matmul::grow;
use crate::cpu::{QUERY_TILE, Rows, active_isa, dot_rows_tile_f32, softmax_scaled, weighted_rows_tile_f32};

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
