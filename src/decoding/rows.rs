//! Reductions over one row of logits (a full vocabulary), written to follow PyTorch's
//! definitions in the official samplers: first index on ties, f32 softmax.

use crate::cpu::kernels::{active_isa, max_f32, sum_exp_f32};

/// Index of the largest value; the first one on ties (torch.argmax). The maximum is found with
/// SIMD, then its first position.
pub fn argmax(row: &[f32]) -> usize {
    let max = max_f32(active_isa(), row);
    row.iter().position(|&v| v == max).unwrap_or(0)
}

/// Whether no value is NaN or infinite, in one pass the compiler vectorizes: sixteen running
/// sums of `v * 0`, which is 0 for a finite value and NaN for a NaN or an infinity.
pub fn all_finite(values: &[f32]) -> bool {
    let mut sums = [0f32; 16];
    let chunks = values.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|v| v * 0.0).sum();
    for chunk in chunks {
        for (s, v) in sums.iter_mut().zip(chunk) {
            *s += v * 0.0;
        }
    }
    (sums.iter().sum::<f32>() + tail).is_finite()
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
/// exceeds `top_p` (at least one), setting the others to f32::MIN. `order` and `values` are
/// scratch space.
///
/// The definition is a stable sort of the whole row, descending (equal logits keep index order,
/// like torch.sort), and an f32 running sum in that order. Sorting 152k logits per row was most
/// of a Dream step's sampling, and on a language model's logits the running sum passes `top_p`
/// within a few dozen tokens, so only the `k` largest logits (and any tied with the k-th) are
/// sorted, k growing sixteenfold until the sum passes inside them (past an eighth of the row,
/// the whole row). They are exactly the first entries of the full sort, so the running sum and
/// the cut are the same numbers.
pub fn top_p_filter(row: &mut [f32], top_p: f32, order: &mut Vec<u32>, values: &mut Vec<f32>) {
    // The probabilities are those of `softmax_in_place` (same max, same sum, same order),
    // computed where they are needed instead of into a copy of the row.
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let sum: f32 = row.iter().map(|&v| (v - max).exp()).sum();
    let mut k = 64;
    loop {
        order.clear();
        if k <= row.len() / 8 {
            // The k-th largest logit, found among the values (contiguous, no indirection).
            values.clear();
            values.extend_from_slice(row);
            let kth = *values.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1;
            order.extend((0..row.len() as u32).filter(|&i| row[i as usize].total_cmp(&kth).is_ge()));
        } else {
            order.extend(0..row.len() as u32);
        }
        order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]));
        let mut cum = 0f32;
        let cut = order.iter().position(|&i| {
            cum += (row[i as usize] - max).exp() / sum;
            // Removed: tokens after the first whose cumulative probability exceeds top_p.
            cum > top_p
        });
        match cut {
            Some(last) => {
                // Kept: the sort's first `last + 1` tokens, i.e. those above the last kept one
                // and those tied with it at or before its index.
                let (at, value) = (order[last] as usize, row[order[last] as usize]);
                for (i, v) in row.iter_mut().enumerate() {
                    let kept = match v.total_cmp(&value) {
                        std::cmp::Ordering::Greater => true,
                        std::cmp::Ordering::Equal => i <= at,
                        std::cmp::Ordering::Less => false,
                    };
                    if !kept {
                        *v = f32::MIN;
                    }
                }
                return;
            }
            // The whole row never passes top_p: nothing is removed.
            None if order.len() == row.len() => return,
            None => k = k.saturating_mul(16),
        }
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
    // A zero probability adds -0.0, which leaves any sum as it is: skipping those (every token
    // a filter removed) gives the same number without a logarithm each.
    probs.iter().filter(|&&p| p != 0.0).map(|&p| p * (p + 1e-10).ln()).sum()
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
        top_p_filter(&mut row, 0.7, &mut Vec::new(), &mut Vec::new());
        assert_eq!(row, [3.0, 2.0, f32::MIN, f32::MIN]);
        let mut row = [3.0, 2.0, 1.0, 0.0];
        top_p_filter(&mut row, 0.5, &mut Vec::new(), &mut Vec::new());
        assert_eq!(row, [3.0, f32::MIN, f32::MIN, f32::MIN]);
    }

    /// The definition: a stable sort of the whole row and the running sum over it.
    fn top_p_by_full_sort(row: &mut [f32], top_p: f32) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let sum: f32 = row.iter().map(|&v| (v - max).exp()).sum();
        let mut order: Vec<u32> = (0..row.len() as u32).collect();
        order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]));
        let mut cum = 0f32;
        let mut remove_from = order.len();
        for (rank, &i) in order.iter().enumerate() {
            cum += (row[i as usize] - max).exp() / sum;
            if cum > top_p {
                remove_from = rank + 1;
                break;
            }
        }
        for &i in &order[remove_from..] {
            row[i as usize] = f32::MIN;
        }
    }

    #[test]
    fn top_p_equals_the_full_sort() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        // Peaked rows (cut in the first few), flat ones (cut past several growths of k, or
        // never), and coarse ones full of ties (the cut inside a run of equal logits).
        for (n, spread, step) in [(152_064, 80.0f32, 0.0f32), (20_000, 1.0, 0.0), (5_000, 4.0, 0.5), (300, 0.0, 0.0)] {
            for top_p in [0.1f32, 0.5, 0.9, 0.95, 0.999_999] {
                let mut row: Vec<f32> = (0..n)
                    .map(|_| {
                        let v = rng.random_range(-spread..=spread);
                        if step > 0.0 { (v / step).round() * step } else { v }
                    })
                    .collect();
                let mut want = row.clone();
                top_p_by_full_sort(&mut want, top_p);
                top_p_filter(&mut row, top_p, &mut Vec::new(), &mut Vec::new());
                assert!(row == want, "n {n} spread {spread} step {step} top_p {top_p}");
            }
        }
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
