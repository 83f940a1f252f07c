//! Reductions over one row of logits (a full vocabulary), written to follow PyTorch's
//! definitions in the official samplers: first index on ties, f32 softmax.

use crate::cpu::{active_isa, max_f32, sum_exp_f32};

/// Index of the largest value; the first one on ties (torch.argmax). The maximum is found with
/// SIMD, then its first position.
pub fn argmax(row: &[f32]) -> usize {
    let max = max_f32(active_isa(), row);
    row.iter().position(|&v| v == max).unwrap_or(0)
}

/// softmax(row)[i], in f32; the denominator with SIMD (`cpu::sum_exp_f32`).
pub fn softmax_prob(row: &[f32], i: usize) -> f32 {
    let isa = active_isa();
    let max = max_f32(isa, row);
    (row[i] - max).exp() / sum_exp_f32(isa, row, max)
}

/// softmax(row)[i], in f64 from the f32 logits.
pub fn softmax_prob_f64(row: &[f32], i: usize) -> f64 {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    (row[i] as f64 - max).exp() / sum
}

/// Replaces logits by their softmax probabilities, in f32.
pub fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0f32;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// Dream's `top_p_logits`: keeps the most likely tokens whose cumulative probability first
/// exceeds `top_p` (at least one), setting the others to f32::MIN. `order` is scratch space.
pub fn top_p_filter(row: &mut [f32], top_p: f32, order: &mut Vec<u32>) {
    // The probabilities are those of `softmax_in_place` (same max, same sum, same order),
    // computed where they are needed instead of into a copy of the row.
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let sum: f32 = row.iter().map(|&v| (v - max).exp()).sum();
    order.clear();
    order.extend(0..row.len() as u32);
    // Stable sort, descending by logit: equal logits keep index order, like torch.sort.
    order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]));
    let mut cum = 0f32;
    let mut remove_from = order.len();
    for (rank, &i) in order.iter().enumerate() {
        cum += (row[i as usize] - max).exp() / sum;
        // Removed: tokens after the first whose cumulative probability exceeds top_p.
        if cum > top_p {
            remove_from = rank + 1;
            break;
        }
    }
    for &i in &order[remove_from..] {
        row[i as usize] = f32::MIN;
    }
}

/// Dream's `top_k_logits`: logits below the k-th largest become f32::MIN (ties are kept).
pub fn top_k_filter(row: &mut [f32], k: usize, scratch: &mut Vec<f32>) {
    if k >= row.len() {
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(row);
    let (_, kth, _) = scratch.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    let kth = *kth;
    for v in row.iter_mut() {
        if *v < kth {
            *v = f32::MIN;
        }
    }
}

/// The two largest probabilities' difference (Dream's `topk_margin`).
pub fn margin(probs: &[f32]) -> f32 {
    let (mut p1, mut p2) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &p in probs {
        if p > p1 {
            p2 = p1;
            p1 = p;
        } else if p > p2 {
            p2 = p;
        }
    }
    p1 - p2
}

/// Negative entropy `sum p ln(p + 1e-10)` (Dream's `entropy`: higher is more confident).
pub fn neg_entropy(probs: &[f32]) -> f32 {
    probs.iter().map(|&p| p * (p + 1e-10).ln()).sum()
}

/// Draws an index with probability proportional to `weights` given `u` uniform in [0, 1).
pub fn categorical(weights: &[f32], u: f64) -> usize {
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let mut target = u * total;
    let mut last_nonzero = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            last_nonzero = i;
            if target < w as f64 {
                return i;
            }
            target -= w as f64;
        }
    }
    last_nonzero
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }

    #[test]
    fn top_p_keeps_the_first_token_past_the_threshold() {
        // probabilities ~ [0.64, 0.24, 0.09, 0.03]
        let mut row = [3.0, 2.0, 1.0, 0.0];
        top_p_filter(&mut row, 0.7, &mut Vec::new());
        assert_eq!(row, [3.0, 2.0, f32::MIN, f32::MIN]);
        let mut row = [3.0, 2.0, 1.0, 0.0];
        top_p_filter(&mut row, 0.5, &mut Vec::new());
        assert_eq!(row, [3.0, f32::MIN, f32::MIN, f32::MIN]);
    }

    #[test]
    fn top_k_keeps_ties() {
        let mut row = [1.0, 5.0, 3.0, 3.0, 0.0];
        top_k_filter(&mut row, 2, &mut Vec::new());
        assert_eq!(row, [f32::MIN, 5.0, 3.0, 3.0, f32::MIN]);
    }

    #[test]
    fn margin_and_entropy() {
        assert!((margin(&[0.1, 0.6, 0.3]) - 0.3).abs() < 1e-6);
        assert!(neg_entropy(&[1.0, 0.0]) > neg_entropy(&[0.5, 0.5]));
    }

    #[test]
    fn categorical_follows_weights() {
        assert_eq!(categorical(&[0.0, 1.0, 3.0], 0.0), 1);
        assert_eq!(categorical(&[0.0, 1.0, 3.0], 0.3), 2);
        assert_eq!(categorical(&[0.0, 1.0, 0.0], 0.999), 1);
    }
}
