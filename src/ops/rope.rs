//! Rotary position embeddings in both pairings the models use.

use rayon::prelude::*;

use crate::model::RopeStyle;

/// cos/sin of every (position, frequency) pair, computed the way PyTorch's rotary modules do
/// (f32 inverse frequencies `1 / base^(2i/d)`, f32 angles), so that logits match the goldens.
#[derive(Default)]
pub struct RopeTable {
    dims: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    /// Makes the table cover positions `0..n_pos` (reusing its storage).
    pub fn prepare(&mut self, n_pos: usize, dims: usize, base: f32) {
        let half = dims / 2;
        if self.dims == dims && self.cos.len() >= n_pos * half {
            return;
        }
        self.dims = dims;
        self.cos.clear();
        self.sin.clear();
        let inv_freq: Vec<f32> = (0..half).map(|i| 1.0 / base.powf((2 * i) as f32 / dims as f32)).collect();
        for p in 0..n_pos {
            for f in &inv_freq {
                let angle = p as f32 * f;
                self.cos.push(angle.cos());
                self.sin.push(angle.sin());
            }
        }
    }

    /// The table as `[position][dims / 2]` cos and sin values (for backends that upload it).
    pub fn cos_sin(&self) -> (&[f32], &[f32]) {
        (&self.cos, &self.sin)
    }

    /// Rotates the first `dims` values of every head of every row of `x`
    /// (`[n_rows, n_heads * head_dim]`, row r at position `positions[r]`).
    pub fn apply(&self, x: &mut [f32], positions: &[usize], head_dim: usize, style: RopeStyle) {
        let half = self.dims / 2;
        let row_len = x.len() / positions.len();
        x.par_chunks_exact_mut(row_len).zip(positions).for_each(|(row, &p)| {
            let (cos, sin) = (&self.cos[p * half..(p + 1) * half], &self.sin[p * half..(p + 1) * half]);
            for head in row.chunks_exact_mut(head_dim) {
                for i in 0..half {
                    let (a, b) = match style {
                        RopeStyle::Adjacent => (2 * i, 2 * i + 1),
                        RopeStyle::Halves => (i, i + half),
                    };
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * cos[i] - x1 * sin[i];
                    head[b] = x0 * sin[i] + x1 * cos[i];
                }
            }
        });
    }
}
