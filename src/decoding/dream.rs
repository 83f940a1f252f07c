//! Dream's sampler, after `diffusion_generate()` / `_sample()` in Dream's generation_utils.py:
//! timesteps linspace(1, eps, steps + 1); at step i (t = ts[i], s = ts[i+1]) a fraction
//! 1 - s/t of the masked positions is committed (all that remain at the last step). Logits
//! are shifted: position j reads the model's row j-1 (row 0 for position 0).

use super::rows::{categorical, softmax_in_place};
use super::{
    Candidate, Denoiser, DreamAlg, GenerateParams, RowRule, SamplerError, keep_confident, top_k_by_confidence,
};
use crate::forward::Pass;

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

pub(super) fn run(d: &mut Denoiser, steps: usize, eps: f32) -> Result<(), SamplerError> {
    let p = d.params;
    let ts = linspace(1.0, eps, steps + 1);
    let shift = d.model.config().shift_logits;
    for i in 0..steps {
        d.begin_step();
        let (t, s) = (ts[i], ts[i + 1]);
        let last = i == steps - 1;
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
                let candidates = d.choose_rows(&Pass::Full, &positions, &rows, rule(p, p.alg))?;
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
pub(super) fn run_quota(d: &mut Denoiser, steps: usize, per_step: usize, threshold: f64) -> Result<(), SamplerError> {
    let p = d.params;
    // PyTorch compares the f32 confidences with the threshold cast to f32.
    let threshold = threshold as f32 as f64;
    let shift = d.model.config().shift_logits;
    let (mut quota, mut carry) = (per_step, 0);
    let mut i = 0;
    while d.canvas[d.prompt_len..].contains(&d.special.mask) {
        d.begin_step();
        let masked: Vec<usize> = (d.prompt_len..d.canvas.len()).filter(|&j| d.canvas[j] == d.special.mask).collect();
        let rows: Vec<usize> = masked.iter().map(|&j| if shift { j.saturating_sub(1) } else { j }).collect();
        let candidates = d.choose_rows(&Pass::Full, &masked, &rows, rule(p, p.alg))?;
        let (committed, rejected) = keep_confident(candidates, quota + carry, threshold);
        carry = rejected;
        if i + 1 >= steps {
            quota = 0;
        }
        i += 1;
        d.check_progress(true, &committed)?;
        if !d.end_step(&committed) {
            return Ok(());
        }
    }
    Ok(())
}

/// `sample_tokens` with the settings' temperature and filters and `alg`'s confidence.
pub(super) fn rule(p: &GenerateParams, alg: DreamAlg) -> RowRule {
    RowRule::Dream { temperature: p.temperature, top_p: p.top_p, top_k: p.top_k, confidence: alg.confidence() }
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
