//! LLaDA's sampler, after `generate()` in ML-GSAI/LLaDA generate.py: the answer is split into
//! blocks filled left to right; each block gets steps/num_blocks steps, and step i of a block
//! commits `base (+1 for the first masks % steps steps)` of its masked positions, those of
//! highest confidence.

use super::rows::{argmax, softmax_prob, softmax_prob_f64};
use super::{Candidate, Denoiser, GenerateParams, Remasking, RowRule, SamplerError, top_k_by_confidence};
use crate::forward::Pass;

pub(super) fn run(
    d: &mut Denoiser,
    blocks: usize,
    block_length: usize,
    steps_per_block: usize,
) -> Result<(), SamplerError> {
    let p = d.params;
    let mut uncond = (Vec::new(), Vec::new());
    for b in 0..blocks {
        let start = d.prompt_len + b * block_length;
        let end = start + block_length;
        let n_masked = d.canvas[start..end].iter().filter(|&&t| t == d.special.mask).count();
        let (base, extra) = (n_masked / steps_per_block, n_masked % steps_per_block);
        for i in 0..steps_per_block {
            d.begin_step();
            let k = base + usize::from(i < extra);
            // Only masked positions of the current block can be chosen (all others have
            // confidence -inf in the official code), so only their logits are computed.
            let rows: Vec<usize> = (start..end).filter(|&j| d.canvas[j] == d.special.mask).collect();
            let mut committed = Vec::new();
            if k > 0 && !rows.is_empty() {
                let candidates = match greedy_rule(p, Precision::F32) {
                    Some(rule) if p.cfg_scale == 0.0 => d.choose_rows(&Pass::Full, &rows, &rows, rule)?,
                    _ => candidates_from_logits(d, &rows, &mut uncond)?,
                };
                committed = top_k_by_confidence(candidates, k);
            }
            if !d.end_step(&committed) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The candidates of `rows` from logits on the host, with classifier-free guidance when asked
/// (`uncond` keeps the unconditional canvas and its logits between steps).
fn candidates_from_logits(
    d: &mut Denoiser,
    rows: &[usize],
    uncond: &mut (Vec<u32>, Vec<f32>),
) -> Result<Vec<Candidate>, SamplerError> {
    let p = d.params;
    d.forward(rows)?;
    if p.cfg_scale > 0.0 {
        // The unconditional canvas: the prompt masked out.
        let (canvas, logits) = uncond;
        canvas.clone_from(&d.canvas);
        canvas[..d.prompt_len].fill(d.special.mask);
        d.forward_into(canvas, rows, logits)?;
        for (c, u) in d.logits.iter_mut().zip(logits.iter()) {
            *c = u + (p.cfg_scale + 1.0) * (*c - u);
        }
    }
    choose_each(d, rows, Precision::F32)
}

/// `choose` for each of `positions`, whose logits are the rows of `d.logits` in order (each
/// copied out, since `choose` writes to it and draws from `d`).
pub(super) fn choose_each(
    d: &mut Denoiser,
    positions: &[usize],
    precision: Precision,
) -> Result<Vec<Candidate>, SamplerError> {
    let n_vocab = d.n_vocab();
    let mut row = std::mem::take(&mut d.row);
    row.resize(n_vocab, 0.0);
    let mut candidates = Vec::with_capacity(positions.len());
    for (r, &pos) in positions.iter().enumerate() {
        row.copy_from_slice(&d.logits[r * n_vocab..(r + 1) * n_vocab]);
        candidates.push(choose(d, &mut row, pos, precision));
    }
    d.row = row;
    d.check_finite(&candidates)?;
    Ok(candidates)
}

/// The float type of the softmax behind a confidence: the official generate.py takes it of
/// the f32 logits, Fast-dLLM's samplers of the logits cast to f64.
#[derive(Clone, Copy)]
pub(super) enum Precision {
    F32,
    F64,
}

/// `choose` as a row rule, for the settings where it needs nothing but the row itself:
/// temperature 0 (no per-entry noise), low-confidence remasking, no EOS/EOT masking.
pub(super) fn greedy_rule(p: &GenerateParams, precision: Precision) -> Option<RowRule> {
    let plain = p.temperature == 0.0
        && p.remasking == Remasking::LowConfidence
        && !p.logits_eos_inf
        && !p.confidence_eos_eot_inf;
    plain.then_some(RowRule::LladaGreedy { f64: matches!(precision, Precision::F64) })
}

/// The token and confidence for one masked position, from its logits.
pub(super) fn choose(d: &mut Denoiser, logits: &mut [f32], pos: usize, precision: Precision) -> Candidate {
    let p = d.params;
    if p.logits_eos_inf
        && let Some(eos) = d.special.eos
    {
        logits[eos as usize] = f32::NEG_INFINITY;
    }
    let x0 = if p.temperature == 0.0 {
        argmax(logits)
    } else {
        // add_gumbel_noise: exp(logits) / (-ln u)^temperature, in f64.
        let t = p.temperature as f64;
        let mut best = (0, f64::NEG_INFINITY);
        for (i, &l) in logits.iter().enumerate() {
            let noise = (-d.uniform().ln()).powf(t);
            let v = (l as f64).exp() / noise;
            if v > best.1 {
                best = (i, v);
            }
        }
        best.0
    };
    // The official line `logits_with_noise[:, :, EOS] = logits[:, :, EOT] = -inf` runs after
    // x0 is chosen; of its two writes only the one to `logits` (EOT) reaches the confidence.
    if p.confidence_eos_eot_inf
        && let Some(eot) = d.special.eot
    {
        logits[eot as usize] = f32::NEG_INFINITY;
    }
    let confidence = match (p.remasking, precision) {
        (Remasking::LowConfidence, Precision::F32) => softmax_prob(logits, x0) as f64,
        (Remasking::LowConfidence, Precision::F64) => softmax_prob_f64(logits, x0),
        (Remasking::Random, _) => d.uniform(),
    };
    (pos, x0 as u32, confidence)
}
