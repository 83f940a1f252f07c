//! The router of a mixture-of-experts FFN, on the host in f32, as llama.cpp's `build_moe_ffn`
//! with softmax gating computes it: softmax over every expert's logit, the `n_expert_used` most
//! probable experts (ties to the lower index, as a stable descending sort gives), their
//! probabilities as weights, divided by their sum for RND1 (the sum clamped below at 2^-14 as
//! llama.cpp does) and scaled by `expert_weights_scale` when it is neither 0 nor 1. The rows are
//! then grouped by expert, so that each expert's products run once over all of its rows.

use crate::model::MoeConfig;

/// llama.cpp's clamp of the kept weights' sum, 2^-14 (the smallest normal f16).
const MIN_WEIGHT_SUM: f32 = 1.0 / 16384.0;

/// Each expert's rows and their weights for one layer's pass.
#[derive(Default)]
pub struct Routes {
    /// Per expert: (rows in ascending order, the weight of each).
    experts: Vec<(Vec<usize>, Vec<f32>)>,
    /// One row's probabilities and the order of its experts, reused.
    probs: Vec<f32>,
    order: Vec<usize>,
}

impl Routes {
    /// Routes `n_rows` rows whose router logits are `logits` (`[n_rows, n_expert]`).
    pub fn plan(&mut self, logits: &[f32], n_rows: usize, m: &MoeConfig) {
        self.experts.resize_with(m.n_expert, Default::default);
        for (rows, weights) in &mut self.experts {
            rows.clear();
            weights.clear();
        }
        for (r, row) in logits.chunks_exact(m.n_expert).take(n_rows).enumerate() {
            softmax(row, &mut self.probs);
            self.order.clear();
            self.order.extend(0..m.n_expert);
            // Stable: equal probabilities keep the lower index first.
            let probs = &self.probs;
            self.order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
            let chosen = &self.order[..m.n_expert_used];
            let sum: f32 = chosen.iter().map(|&e| probs[e]).sum();
            for &e in chosen {
                let mut w = probs[e];
                if m.normalize_weights {
                    w /= sum.max(MIN_WEIGHT_SUM);
                }
                if m.weights_scale != 0.0 && m.weights_scale != 1.0 {
                    w *= m.weights_scale;
                }
                self.experts[e].0.push(r);
                self.experts[e].1.push(w);
            }
        }
    }

    /// Expert `e`'s rows and weights (empty when no row chose it).
    pub fn of(&self, e: usize) -> (&[usize], &[f32]) {
        let (rows, weights) = &self.experts[e];
        (rows, weights)
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
    fn the_two_most_probable_experts_take_each_row() {
        let logits = [0.0, 3.0, 1.0, 2.0, /* row 1 */ 5.0, 0.0, 0.0, 4.0];
        let mut routes = Routes::default();
        routes.plan(&logits, 2, &config(false));
        let e = |x: f32| x.exp();
        let z0 = e(0.0) + e(3.0) + e(1.0) + e(2.0);
        let (rows, w) = routes.of(1);
        assert_eq!(rows, [0]);
        assert!((w[0] - e(3.0) / z0).abs() < 1e-6);
        assert_eq!(routes.of(3).0, [0, 1]);
        assert_eq!(routes.of(0).0, [1]);
        assert!(routes.of(2).0.is_empty());
    }

    #[test]
    fn ties_go_to_the_lower_expert_and_normalized_weights_sum_to_one() {
        let mut routes = Routes::default();
        routes.plan(&[1.0, 2.0, 2.0, 2.0], 1, &config(true));
        assert_eq!((routes.of(1).0, routes.of(2).0, routes.of(3).0), (&[0usize][..], &[0usize][..], &[][..]));
        let total = routes.of(1).1[0] + routes.of(2).1[0];
        assert!((total - 1.0).abs() < 1e-6);
    }
}
