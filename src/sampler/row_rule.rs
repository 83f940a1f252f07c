//! How the samplers turn one row of logits into a token and its confidence, described as data
//! so that a backend holding the logits elsewhere (a GPU) can apply the rule there and send back
//! two numbers per row instead of a whole vocabulary. `choose` is the host implementation and
//! the definition: a backend's rule must agree with it (up to float summation order).

use super::DreamAlg;
use super::rows::{
    argmax, categorical, margin, neg_entropy, softmax_in_place, softmax_prob, softmax_prob_f64, top_k_filter,
    top_p_filter,
};

/// The confidence a rule reports for its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowConfidence {
    /// The token's softmax probability.
    Probability,
    /// The difference of the two largest probabilities (Dream's `topk_margin`).
    Margin,
    /// `sum p ln(p + 1e-10)` over the row (Dream's `entropy`).
    NegEntropy,
}

impl RowConfidence {
    pub fn of_dream_alg(alg: DreamAlg) -> RowConfidence {
        match alg {
            DreamAlg::TopkMargin => RowConfidence::Margin,
            DreamAlg::Entropy => RowConfidence::NegEntropy,
            DreamAlg::Origin | DreamAlg::MaskgitPlus | DreamAlg::ConfidenceThreshold => RowConfidence::Probability,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowRule {
    /// LLaDA's generate.py at temperature 0 with low-confidence remasking: the first argmax of
    /// the logits and its softmax probability, in f32 (generate.py) or in f64 (Fast-dLLM's
    /// samplers cast the logits to f64 first).
    LladaGreedy { f64: bool },
    /// Dream's `sample_tokens`: logits divided by the temperature (when above 0), top-p and
    /// top-k filters, softmax; the first argmax at temperature 0, else a draw with one uniform
    /// number; then the alg's confidence.
    Dream { temperature: f32, top_p: Option<f32>, top_k: Option<usize>, confidence: RowConfidence },
}

impl RowRule {
    /// Whether the rule draws one uniform number per row (given in row order).
    pub fn draws(&self) -> bool {
        matches!(self, RowRule::Dream { temperature, .. } if *temperature > 0.0)
    }

    /// The token and confidence for one row of logits; `row` is consumed as scratch and `u` is
    /// the row's uniform number (read only when the rule draws).
    pub fn choose(&self, row: &mut [f32], u: f64, scratch: &mut RuleScratch) -> (usize, f64) {
        match *self {
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
        }
    }
}

/// Work buffers of the Dream filters, kept between rows.
#[derive(Debug, Default)]
pub struct RuleScratch {
    order: Vec<u32>,
    values: Vec<f32>,
}
