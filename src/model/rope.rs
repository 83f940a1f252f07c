//! Rotary position embeddings in both pairings the models use.

use rayon::prelude::*;

use super::RopeStyle;

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
                // One loop per pairing, over zipped slices without index arithmetic, so that
                // the compiler vectorizes it (the same products and sums, so the same numbers).
                match style {
                    RopeStyle::Adjacent => {
                        for ((pair, &c), &s) in head[..2 * half].chunks_exact_mut(2).zip(cos).zip(sin) {
                            let (x0, x1) = (pair[0], pair[1]);
                            pair[0] = x0 * c - x1 * s;
                            pair[1] = x0 * s + x1 * c;
                        }
                    }
                    RopeStyle::Halves => {
                        let (first, second) = head[..2 * half].split_at_mut(half);
                        for (((a, b), &c), &s) in first.iter_mut().zip(second).zip(cos).zip(sin) {
                            let (x0, x1) = (*a, *b);
                            *a = x0 * c - x1 * s;
                            *b = x0 * s + x1 * c;
                        }
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rotation written out by index, one value pair at a time.
    fn rotate_by_index(table: &RopeTable, x: &mut [f32], positions: &[usize], head_dim: usize, style: RopeStyle) {
        let half = table.dims / 2;
        let row_len = x.len() / positions.len();
        for (row, &p) in x.chunks_exact_mut(row_len).zip(positions) {
            for head in row.chunks_exact_mut(head_dim) {
                for i in 0..half {
                    let (a, b) = match style {
                        RopeStyle::Adjacent => (2 * i, 2 * i + 1),
                        RopeStyle::Halves => (i, i + half),
                    };
                    let (c, s) = (table.cos[p * half + i], table.sin[p * half + i]);
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * c - x1 * s;
                    head[b] = x0 * s + x1 * c;
                }
            }
        }
    }

    #[test]
    fn both_pairings_match_the_rotation_by_index() {
        // A partial rotation (dims < head_dim) too: the values past `dims` stay as they are.
        for (head_dim, dims) in [(128, 128), (64, 32)] {
            let mut table = RopeTable::default();
            table.prepare(40, dims, 10_000.0);
            let positions = [0, 3, 39, 17];
            let x: Vec<f32> =
                (0..positions.len() * 3 * head_dim).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.03).collect();
            for style in [RopeStyle::Adjacent, RopeStyle::Halves] {
                let (mut got, mut want) = (x.clone(), x.clone());
                table.apply(&mut got, &positions, head_dim, style);
                rotate_by_index(&table, &mut want, &positions, head_dim, style);
                assert_eq!(got, want, "{style:?}, head {head_dim}, dims {dims}");
                assert_ne!(got, x, "{style:?} rotated nothing");
            }
        }
    }
}
