//! Keys and values of every layer kept from a full forward pass, so that a later pass can run
//! only a window of the canvas (Fast-dLLM's prefix and dual caches).
//!
//! Keys are kept after RoPE. The reference keeps them before RoPE and rotates every key at its
//! absolute position on each call; rotation is a fixed function of (key, position), so rotating
//! once at fill time gives the same numbers and saves the work.

use std::ops::Range;

use super::ModelError;

#[derive(Default)]
pub struct KvCache {
    /// Canvas length of the pass that filled the cache; 0 when empty.
    len: usize,
    kv_dim: usize,
    /// Per layer, `[len, kv_dim]` row-major.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl KvCache {
    /// Starts a fill for a canvas of `len` positions (the storage is reused).
    pub fn begin_fill(&mut self, n_layer: usize, len: usize, kv_dim: usize) {
        self.len = len;
        self.kv_dim = kv_dim;
        self.keys.resize_with(n_layer, Vec::new);
        self.values.resize_with(n_layer, Vec::new);
    }

    pub fn store(&mut self, layer: usize, keys: &[f32], values: &[f32]) {
        let n = self.len * self.kv_dim;
        self.keys[layer].clear();
        self.keys[layer].extend_from_slice(&keys[..n]);
        self.values[layer].clear();
        self.values[layer].extend_from_slice(&values[..n]);
    }

    /// Checks that the cache was filled from a canvas of `len` positions.
    pub fn check(&self, len: usize) -> Result<(), ModelError> {
        if self.len != len {
            return Err(ModelError::CacheMismatch { cached: self.len, canvas: len });
        }
        Ok(())
    }

    /// Writes into `keys`/`values` (`[len, kv_dim]`) the layer's cached rows outside `window`
    /// and the fresh rows `fresh_keys`/`fresh_values` (`[window.len(), kv_dim]`) inside it.
    pub fn assemble(
        &self,
        layer: usize,
        window: &Range<usize>,
        fresh: (&[f32], &[f32]),
        keys: &mut [f32],
        values: &mut [f32],
    ) {
        let d = self.kv_dim;
        let (lo, hi) = (window.start * d, window.end * d);
        for (out, cached, fresh) in [(keys, &self.keys[layer], fresh.0), (values, &self.values[layer], fresh.1)] {
            out[..lo].copy_from_slice(&cached[..lo]);
            out[lo..hi].copy_from_slice(&fresh[..hi - lo]);
            out[hi..self.len * d].copy_from_slice(&cached[hi..self.len * d]);
        }
    }
}
