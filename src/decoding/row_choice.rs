//! The host implementation of the row rules (`backend::RowRule`): the definition every
//! backend's own implementation is tested against.

use super::rows::{
    argmax, categorical, margin, neg_entropy, softmax_in_place, softmax_prob, softmax_prob_f64, top_k_filter,
    top_p_filter,
};
use crate::backend::{RowConfidence, RowRule};

/// The token and confidence for one row of logits; `row` is consumed as scratch and `u` is
/// the row's uniform number (read only when the rule draws).
pub fn choose_row(rule: &RowRule, row: &mut [f32], u: f64, scratch: &mut RuleScratch) -> (usize, f64) {
    match *rule {
        RowRule::LladaGreedy { f64: false } => {
            let x0 = argmax(row);
            (x0, softmax_prob(row, x0) as f64)
        }
        RowRule::LladaGreedy { f64: true } => {
            let x0 = argmax(row);
            (x0, softmax_prob_f64(row, x0))
        }
        RowRule::Dream { temperature, top_p, top_k, confidence } => {
            if temperature > 0.0 {
                for v in row.iter_mut() {
                    *v /= temperature;
                }
            }
            if let Some(top_p) = top_p
                && top_p < 1.0
            {
                top_p_filter(row, top_p, &mut scratch.order, &mut scratch.values);
            }
            if let Some(k) = top_k {
                top_k_filter(row, k, &mut scratch.values);
            }
            softmax_in_place(row);
            let probs = row;
            let x0 = if temperature > 0.0 { categorical(probs, u) } else { argmax(probs) };
            let c = match confidence {
                RowConfidence::Margin => margin(probs),
                RowConfidence::NegEntropy => neg_entropy(probs),
                RowConfidence::Probability => probs[x0],
            };
            (x0, c as f64)
        }
        RowRule::Rnd1 { temperature, top_k, top_p } => {
            // sampling.py divides by max(temperature, 1e-8) even when it then takes the argmax.
            let t = temperature.max(1e-8);
            for v in row.iter_mut() {
                *v /= t;
            }
            if let Some(k) = top_k.filter(|&k| k > 0) {
                top_k_filter(row, k, &mut scratch.values);
            }
            if let Some(top_p) = top_p.filter(|&p| p > 0.0 && p < 1.0) {
                top_p_filter(row, top_p, &mut scratch.order, &mut scratch.values);
            }
            softmax_in_place(row);
            let probs = row;
            let x0 = if temperature > 0.0 { categorical(probs, u) } else { argmax(probs) };
            (x0, -neg_entropy_exact(probs) as f64)
        }
    }
}

/// `sum p ln p` over the tokens a filter kept (a removed token's probability is 0).
fn neg_entropy_exact(probs: &[f32]) -> f32 {
    probs.iter().filter(|&&p| p > 0.0).map(|&p| p * p.ln()).sum()
}

/// Work buffers of the Dream filters, kept between rows.
#[derive(Debug, Default)]
pub struct RuleScratch {
    order: Vec<u32>,
    values: Vec<f32>,
}
