//! Dream's sampler, after `diffusion_generate()` / `_sample()` in Dream's generation_utils.py:
//! timesteps linspace(1, eps, steps + 1); at step i (t = ts[i], s = ts[i+1]) a fraction
//! 1 - s/t of the masked positions is committed (all that remain at the last step). Logits
//! are shifted: position j reads the model's row j-1 (row 0 for position 0).

use super::rows::{argmax, categorical, margin, neg_entropy, softmax_in_place, top_k_filter, top_p_filter};
use super::{Candidate, Denoiser, DreamAlg, SamplerError, keep_confident, top_k_by_confidence};

/// torch.linspace(start, end, n) in f32, as PyTorch's CPU kernel evaluates it: the first half
/// counts up from `start`, the second half down from `end`.
pub fn linspace(start: f32, end: f32, n: usize) -> Vec<f32> {
    if n == 1 {
        return vec![start];
    }
    let step = (end - start) / (n - 1) as f32;
    let half = n / 2;
    (0..n).map(|i| if i < half { start + step * i as f32 } else { end - step * (n - i - 1) as f32 }).collect()
}

pub(super) fn run(d: &mut Denoiser) -> Result<(), SamplerError> {
    let p = d.params;
    let ts = linspace(1.0, p.eps, p.steps + 1);
    let n_vocab = d.n_vocab();
    let shift = d.model.config().shift_logits;
    let mut scratch = RowScratch::new(n_vocab);
    for i in 0..p.steps {
        d.begin_step();
        let (t, s) = (ts[i], ts[i + 1]);
        let last = i == p.steps - 1;
        let masked: Vec<usize> = (0..d.canvas.len()).filter(|&j| d.canvas[j] == d.special.mask).collect();
        let mut committed = Vec::new();
        if !masked.is_empty() {
            // Origin decides which positions to reveal before sampling them.
            let positions: Vec<usize> = if p.alg == DreamAlg::Origin {
                let p_transfer = if last { 1.0 } else { 1.0 - s / t };
                masked.iter().copied().filter(|_| (d.uniform() as f32) < p_transfer).collect()
            } else {
                masked.clone()
            };
            if !positions.is_empty() {
                let rows: Vec<usize> = positions.iter().map(|&j| if shift { j.saturating_sub(1) } else { j }).collect();
                d.forward(&rows)?;
                let candidates = candidates(d, &positions, p.alg, &mut scratch);
                committed = if p.alg == DreamAlg::Origin {
                    candidates
                } else {
                    let n = masked.len();
                    let k = if last { n } else { (n as f32 * (1.0 - s / t)) as usize };
                    choose_positions(d, candidates, k)
                };
            }
        }
        if !d.end_step(&committed) {
            return Ok(());
        }
    }
    Ok(())
}

/// Fast-dLLM's `alg="confidence_threshold"`: no timestep schedule; step i may commit
/// `q = gen_length / steps` tokens plus the carry `r` of those rejected at the step before:
/// the `q + r` most confident masked positions are candidates, the first is committed, every
/// other one only if its probability reaches the threshold, and the rejected ones carry over.
/// Rejections at the last scheduled step extend the schedule with `q = 0` (only the carry),
/// so decoding always ends with no mask left.
pub(super) fn run_quota(d: &mut Denoiser) -> Result<(), SamplerError> {
    let p = d.params;
    // PyTorch compares the f32 confidences with the threshold cast to f32.
    let threshold = p.threshold.expect("validated: the quota sampler has a threshold") as f32 as f64;
    let n_vocab = d.n_vocab();
    let shift = d.model.config().shift_logits;
    let mut scratch = RowScratch::new(n_vocab);
    let (mut quota, mut carry) = (p.gen_length / p.steps, 0);
    let mut i = 0;
    while d.canvas[d.prompt_len..].contains(&d.special.mask) {
        d.begin_step();
        let masked: Vec<usize> = (d.prompt_len..d.canvas.len()).filter(|&j| d.canvas[j] == d.special.mask).collect();
        let rows: Vec<usize> = masked.iter().map(|&j| if shift { j.saturating_sub(1) } else { j }).collect();
        d.forward(&rows)?;
        let candidates = candidates(d, &masked, p.alg, &mut scratch);
        let (committed, rejected) = keep_confident(candidates, quota + carry, threshold);
        carry = rejected;
        if i + 1 >= p.steps {
            quota = 0;
        }
        i += 1;
        if !d.end_step(&committed) {
            return Ok(());
        }
    }
    Ok(())
}

/// Work buffers for reading logit rows, allocated once per generation.
pub(super) struct RowScratch {
    pub(super) row: Vec<f32>,
    filters: (Vec<u32>, Vec<f32>),
}

impl RowScratch {
    pub(super) fn new(n_vocab: usize) -> RowScratch {
        RowScratch { row: vec![0f32; n_vocab], filters: (Vec::new(), Vec::new()) }
    }
}

/// The candidate of each of `positions`, whose logits are the rows of `d.logits` in order.
pub(super) fn candidates(d: &mut Denoiser, positions: &[usize], alg: DreamAlg, s: &mut RowScratch) -> Vec<Candidate> {
    let n_vocab = s.row.len();
    let mut out = Vec::with_capacity(positions.len());
    for (r, &pos) in positions.iter().enumerate() {
        s.row.copy_from_slice(&d.logits[r * n_vocab..(r + 1) * n_vocab]);
        let (confidence, x0) = sample_token(d, &mut s.row, &mut s.filters, alg);
        out.push((pos, x0 as u32, confidence as f64));
    }
    out
}

/// `sample_tokens`: temperature, top-p, top-k, softmax; then the token (argmax at temperature
/// 0, else a draw) and the alg's confidence. `logits` is consumed as scratch.
fn sample_token(
    d: &mut Denoiser,
    logits: &mut [f32],
    scratch: &mut (Vec<u32>, Vec<f32>),
    alg: DreamAlg,
) -> (f32, usize) {
    let p = d.params;
    if p.temperature > 0.0 {
        for v in logits.iter_mut() {
            *v /= p.temperature;
        }
    }
    if let Some(top_p) = p.top_p
        && top_p < 1.0
    {
        top_p_filter(logits, top_p, &mut scratch.0);
    }
    if let Some(k) = p.top_k {
        top_k_filter(logits, k, &mut scratch.1);
    }
    softmax_in_place(logits);
    let probs = logits;
    let x0 = if p.temperature > 0.0 { categorical(probs, d.uniform()) } else { argmax(probs) };
    let confidence = match alg {
        DreamAlg::TopkMargin => margin(probs),
        DreamAlg::Entropy => neg_entropy(probs),
        DreamAlg::Origin | DreamAlg::MaskgitPlus | DreamAlg::ConfidenceThreshold => probs[x0],
    };
    (confidence, x0)
}

/// The `k` positions to commit: the most confident (alg_temp 0), or drawn without replacement
/// with probabilities softmax(confidence / alg_temp).
fn choose_positions(d: &mut Denoiser, candidates: Vec<Candidate>, k: usize) -> Vec<Candidate> {
    if k == 0 {
        return Vec::new();
    }
    let alg_temp = d.params.alg_temp;
    if alg_temp == 0.0 {
        return top_k_by_confidence(candidates, k);
    }
    let mut weights: Vec<f32> = candidates.iter().map(|c| c.2 as f32 / alg_temp).collect();
    softmax_in_place(&mut weights);
    let mut chosen = Vec::with_capacity(k);
    for _ in 0..k.min(candidates.len()) {
        let i = categorical(&weights, d.uniform());
        weights[i] = 0.0;
        chosen.push(candidates[i]);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::linspace;

    #[test]
    fn linspace_ends_exactly() {
        let ts = linspace(1.0, 1e-3, 17);
        assert_eq!(ts.len(), 17);
        assert_eq!(ts[0], 1.0);
        assert_eq!(ts[16], 1e-3);
        assert!(ts.windows(2).all(|w| w[0] > w[1]));
    }
}
