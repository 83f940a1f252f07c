//! The router of a mixture-of-experts FFN on the host, in f32, as llama.cpp's `build_moe_ffn`
//! with softmax gating computes it: softmax over every expert's logit, the `n_expert_used` most
//! probable experts (ties to the lower index, as a stable descending sort gives), their
//! probabilities as weights, divided by their sum for RND1 (the sum clamped below at 2^-14 as
//! llama.cpp does) and scaled by `expert_weights_scale` when it is neither 0 nor 1.
//!
//! The chosen (row, expert) pairs are then laid out grouped by expert ("gathered order"): each
//! expert's rows are one contiguous range, so that one product per expert covers all of them
//! and the experts' products can run side by side. The CPU backend routes with this; the CUDA
//! backend computes the same on the device (kernels/moe.cu).

use std::ops::Range;

use crate::model::MoeConfig;

/// llama.cpp's clamp of the kept weights' sum, 2^-14 (the smallest normal f16).
const MIN_WEIGHT_SUM: f32 = 1.0 / 16384.0;

/// One layer's routing of `n` rows to `k` experts each.
#[derive(Default)]
pub struct Routes {
    k: usize,
    /// Expert e's rows are gathered positions `groups[e]`.
    groups: Vec<Range<usize>>,
    /// The canvas row at each gathered position.
    gathered: Vec<usize>,
    /// Row r's `s`-th choice (most probable first) at `r * k + s`: its gathered position and
    /// its weight.
    slot_position: Vec<usize>,
    slot_weight: Vec<f32>,
    /// Reused per plan: one row's probabilities and expert order, each slot's expert.
    probs: Vec<f32>,
    order: Vec<usize>,
    slot_expert: Vec<usize>,
}

impl Routes {
    /// Routes `n_rows` rows whose router logits are `logits` (`[n_rows, n_expert]`).
    pub fn plan(&mut self, logits: &[f32], n_rows: usize, m: &MoeConfig) {
        let k = m.n_expert_used;
        self.k = k;
        self.slot_expert.clear();
        self.slot_weight.clear();
        for row in logits.chunks_exact(m.n_expert).take(n_rows) {
            softmax(row, &mut self.probs);
            self.order.clear();
            self.order.extend(0..m.n_expert);
            // Stable: equal probabilities keep the lower index first.
            let probs = &self.probs;
            self.order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
            let chosen = &self.order[..k];
            let sum: f32 = chosen.iter().map(|&e| probs[e]).sum();
            for &e in chosen {
                let mut w = probs[e];
                if m.normalize_weights {
                    w /= sum.max(MIN_WEIGHT_SUM);
                }
                if m.weights_scale != 0.0 && m.weights_scale != 1.0 {
                    w *= m.weights_scale;
                }
                self.slot_expert.push(e);
                self.slot_weight.push(w);
            }
        }
        // A counting sort by expert, stable in row order: each expert's count, then its range
        // from where the previous one ends, grown as its slots are placed.
        self.groups.clear();
        self.groups.resize(m.n_expert, 0..0);
        for &e in &self.slot_expert {
            self.groups[e].end += 1;
        }
        let mut start = 0;
        for g in &mut self.groups {
            let count = g.end;
            *g = start..start;
            start += count;
        }
        self.gathered.clear();
        self.gathered.resize(self.slot_expert.len(), 0);
        self.slot_position.clear();
        for (slot, &e) in self.slot_expert.iter().enumerate() {
            let p = self.groups[e].end;
            self.groups[e].end += 1;
            self.gathered[p] = slot / k;
            self.slot_position.push(p);
        }
    }

    /// The rows routed.
    pub fn rows(&self) -> usize {
        self.slot_position.len() / self.k.max(1)
    }

    /// Rows times experts per row: the gathered rows.
    pub fn len(&self) -> usize {
        self.gathered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.gathered.is_empty()
    }

    /// Each expert's gathered positions, in expert order (empty when no row chose it).
    pub fn groups(&self) -> &[Range<usize>] {
        &self.groups
    }

    /// The canvas row at each gathered position.
    pub fn gathered(&self) -> &[usize] {
        &self.gathered
    }

    /// Row r's `s`-th choice at `r * k + s`: (its gathered position, its weight).
    pub fn slots(&self) -> impl Iterator<Item = (usize, f32)> + '_ {
        self.slot_position.iter().copied().zip(self.slot_weight.iter().copied())
    }

    /// `dst`'s row p = `src`'s row at gathered position p, rows of `width` values.
    pub fn gather(&self, src: &[f32], width: usize, dst: &mut [f32]) {
        for (&r, out) in self.gathered.iter().zip(dst.chunks_exact_mut(width)) {
            out.copy_from_slice(&src[r * width..(r + 1) * width]);
        }
    }

    /// `dst`'s row r = the sum over r's experts, most probable first, of the expert's weight
    /// times its output (`src`, in gathered order). llama.cpp multiplies each expert's output by
    /// its weight and then adds the experts slot by slot; so does this, in f32.
    pub fn combine(&self, src: &[f32], width: usize, dst: &mut [f32]) {
        let slots = self.slot_position.chunks_exact(self.k).zip(self.slot_weight.chunks_exact(self.k));
        for ((positions, weights), out) in slots.zip(dst.chunks_exact_mut(width)) {
            for (s, (&p, &w)) in positions.iter().zip(weights).enumerate() {
                let y = &src[p * width..(p + 1) * width];
                if s == 0 {
                    for (o, v) in out.iter_mut().zip(y) {
                        *o = v * w;
                    }
                } else {
                    for (o, v) in out.iter_mut().zip(y) {
                        *o += v * w;
                    }
                }
            }
        }
    }
}

/// `softmax(x)` into `out`, as ggml's `soft_max`: the exponentials of `x - max` in f32, their
/// sum in f64, each scaled by the sum's inverse.
fn softmax(x: &[f32], out: &mut Vec<f32>) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    out.clear();
    out.extend(x.iter().map(|&v| (v - max).exp()));
    let sum: f64 = out.iter().map(|&v| v as f64).sum();
    let scale = (1.0 / sum) as f32;
    for v in out.iter_mut() {
        *v *= scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(normalize: bool) -> MoeConfig {
        MoeConfig { n_expert: 4, n_expert_used: 2, n_ff_exp: 8, normalize_weights: normalize, weights_scale: 0.0 }
    }

    #[test]
    fn the_two_most_probable_experts_take_each_row_grouped_by_expert() {
        let logits = [0.0, 3.0, 1.0, 2.0, /* row 1 */ 5.0, 0.0, 0.0, 4.0];
        let mut routes = Routes::default();
        routes.plan(&logits, 2, &config(false));
        // Row 0 -> experts 1, 3; row 1 -> experts 0, 3. Gathered: e0 [1], e1 [0], e3 [0, 1].
        assert_eq!(routes.groups(), [0..1, 1..2, 2..2, 2..4]);
        assert_eq!(routes.gathered, [1, 0, 0, 1]);
        let e = |x: f32| x.exp();
        let z0 = e(0.0) + e(3.0) + e(1.0) + e(2.0);
        // Row 0's first choice is expert 1 (position 1) with weight p(3.0).
        assert_eq!(routes.slot_position[..2], [1, 2]);
        assert!((routes.slot_weight[0] - e(3.0) / z0).abs() < 1e-6);
        assert_eq!(routes.slot_position[2..], [0, 3]);
    }

    #[test]
    fn ties_go_to_the_lower_expert_and_normalized_weights_sum_to_one() {
        let mut routes = Routes::default();
        routes.plan(&[1.0, 2.0, 2.0, 2.0], 1, &config(true));
        assert_eq!(routes.groups(), [0..0, 0..1, 1..2, 2..2]);
        let total = routes.slot_weight[0] + routes.slot_weight[1];
        assert!((total - 1.0).abs() < 1e-6);
    }

    #[test]
    fn gather_and_combine_are_the_weighted_sum_of_each_rows_experts() {
        let logits = [0.0, 3.0, 1.0, 2.0, /* row 1 */ 5.0, 0.0, 0.0, 4.0];
        let mut routes = Routes::default();
        routes.plan(&logits, 2, &config(false));
        let x = [10.0, 20.0];
        let mut picked = [0.0; 4];
        routes.gather(&x, 1, &mut picked);
        assert_eq!(picked, [20.0, 10.0, 10.0, 20.0]);
        // Each expert e adds e + 1 to its input.
        let outputs: Vec<f32> = routes
            .groups()
            .iter()
            .enumerate()
            .flat_map(|(e, g)| g.clone().map(move |p| (e, p)))
            .map(|(e, p)| picked[p] + (e + 1) as f32)
            .collect();
        let mut combined = [0.0; 2];
        routes.combine(&outputs, 1, &mut combined);
        let w = &routes.slot_weight;
        // Slot by slot, most probable first: the same f32 operations in the same order.
        assert_eq!(combined, [w[0] * 12.0 + w[1] * 14.0, w[2] * 21.0 + w[3] * 24.0]);
    }
}
