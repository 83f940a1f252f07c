//! The CPU backend's K/V cache: each layer's keys and values from the last pass that filled
//! it, so that a later pass can run only a window of the canvas (Fast-dLLM's prefix and dual
//! caches). Which canvas filled it is `forward::Transformer`'s bookkeeping.
//!
//! Keys are kept after RoPE. The reference keeps them before RoPE and rotates every key at its
//! absolute position on each call; rotation is a fixed function of (key, position), so rotating
//! once at fill time gives the same numbers and saves the work.

use std::ops::Range;

#[derive(Default)]
pub struct KvCache {
    /// Per layer, `[len, kv_dim]` row-major.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl KvCache {
    /// Keeps `keys` and `values` (`[len, kv_dim]`, `n` values each) as layer `layer`'s, of
    /// `n_layer` (the storage is reused).
    pub fn store(&mut self, layer: usize, n_layer: usize, keys: &[f32], values: &[f32]) {
        self.keys.resize_with(n_layer, Vec::new);
        self.values.resize_with(n_layer, Vec::new);
        for (kept, fresh) in [(&mut self.keys[layer], keys), (&mut self.values[layer], values)] {
            kept.clear();
            kept.extend_from_slice(fresh);
        }
    }

    /// Writes into `keys`/`values` (`[len, kv_dim]`) the layer's cached rows outside `window`
    /// and the fresh rows `fresh` (`[window.len(), kv_dim]` each) inside it.
    pub fn assemble(
        &self,
        layer: usize,
        window: &Range<usize>,
        kv_dim: usize,
        fresh: (&[f32], &[f32]),
        keys: &mut [f32],
        values: &mut [f32],
    ) {
        let (lo, hi, end) = (window.start * kv_dim, window.end * kv_dim, keys.len());
        for (out, cached, fresh) in [(keys, &self.keys[layer], fresh.0), (values, &self.values[layer], fresh.1)] {
            out[..lo].copy_from_slice(&cached[..lo]);
            out[lo..hi].copy_from_slice(&fresh[..hi - lo]);
            out[hi..end].copy_from_slice(&cached[hi..end]);
        }
    }
}
