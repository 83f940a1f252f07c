//! How the samplers turn one row of logits into a token and its confidence, described as data
//! so that a backend holding the logits elsewhere (a GPU) can apply the rule there and send back
//! two numbers per row instead of a whole vocabulary. `decoding::choose_row` is the host
//! implementation and the definition: a backend's rule must agree with it (up to float
//! summation order).

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
    /// RND1's `forward_scores`: logits divided by max(temperature, 1e-8), top-k then top-p
    /// filters, log-softmax; the first argmax at temperature 0, else a draw with one uniform
    /// number; the confidence is the entropy `-sum p ln p` of the filtered distribution.
    Rnd1 { temperature: f32, top_k: Option<usize>, top_p: Option<f32> },
}

impl RowRule {
    /// Whether the rule draws one uniform number per row (given in row order).
    pub fn draws(&self) -> bool {
        match self {
            RowRule::LladaGreedy { .. } => false,
            RowRule::Dream { temperature, .. } | RowRule::Rnd1 { temperature, .. } => *temperature > 0.0,
        }
    }
}
