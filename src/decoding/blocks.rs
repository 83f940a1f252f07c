//! Fast-dLLM's block samplers (NVlabs/Fast-dLLM `llada/generate.py` with a threshold or a
//! cache, and Dream's `generation_utils_block.py`): the answer is filled block by block, and
//! a block is done when it has no mask left, so the number of steps is data dependent.
//!
//! Each block starts with a refresh step, a full pass over the canvas (which fills the K/V
//! cache when one is used). LLaDA applies its commit rule there; Dream commits exactly the
//! block's first position. The following steps run the window the cache mode asks for: the
//! whole canvas (no cache, exact), the block and everything after it (prefix cache), or the
//! block alone (dual cache); their masked block positions are committed by the threshold rule
//! (or, for LLaDA without a threshold, by generate.py's per-step quota).

use super::dream;
use super::llada::{Precision, choose_each, greedy_rule};
use super::{Candidate, Denoiser, DreamAlg, KvCacheMode, SamplerError, keep_confident};
use crate::forward::Pass;
use crate::model::Family;

/// How the masked positions of a block are committed at one step.
#[derive(Clone, Copy)]
enum Rule {
    /// Commit the `k` most confident (LLaDA without a threshold).
    Quota(usize),
    /// Commit all that reach the threshold, and at least the most confident.
    Threshold(f64),
    /// Commit this position with its most likely token (Dream's refresh step).
    Position(usize),
}

/// The blocks (`blocks` of `block_length`), each stepped until no mask is left: by the
/// `threshold` rule, or without one by LLaDA's quota over `steps_per_block` (at least one).
pub(super) fn run(
    d: &mut Denoiser,
    blocks: usize,
    block_length: usize,
    steps_per_block: usize,
    threshold: Option<f64>,
) -> Result<(), SamplerError> {
    let p = d.params;
    let family = d.model.config().family;
    let len = d.canvas.len();
    let threshold = threshold.map(|t| match family {
        // LLaDA compares f64 probabilities with the Python float; Dream compares f32
        // probabilities, with the threshold cast to f32.
        Family::Llada => t,
        Family::Dream => t as f32 as f64,
        Family::Rnd1 => unreachable!("RND1's plan has no block sampler"),
    });
    // Upstream checks for a finished block after each cached step, not before it, so a
    // cached sampler always runs one step after the refresh, even one with nothing to commit.
    // generate() without a cache checks before.
    let always_one_more = p.cache != KvCacheMode::None || family == Family::Dream;
    for b in 0..blocks {
        let start = d.prompt_len + b * block_length;
        let end = start + block_length;
        let n_masked = d.canvas[start..end].iter().filter(|&&t| t == d.special.mask).count();
        let (base, extra) = (n_masked / steps_per_block, n_masked % steps_per_block);
        let quota = |i: usize| if i < steps_per_block { base + usize::from(i < extra) } else { 0 };
        let rule = |i: usize| match threshold {
            Some(t) => Rule::Threshold(t),
            None => Rule::Quota(quota(i)),
        };
        let refresh = if p.cache == KvCacheMode::None { Pass::Full } else { Pass::FillCache };
        let first_rule = if family == Family::Dream { Rule::Position(start) } else { rule(0) };
        if !step(d, &refresh, start..end, first_rule)? {
            return Ok(());
        }
        let window = match p.cache {
            KvCacheMode::None => Pass::Full,
            KvCacheMode::Prefix => Pass::Window(start..len),
            KvCacheMode::Dual => Pass::Window(start..end),
        };
        let mut i = 1;
        let mut must_run = always_one_more;
        while must_run || d.canvas[start..end].contains(&d.special.mask) {
            must_run = false;
            if !step(d, &window, start..end, rule(i))? {
                return Ok(());
            }
            i += 1;
        }
    }
    Ok(())
}

/// One step: a pass, then the rule over the block's masked positions. Returns false to stop.
fn step(d: &mut Denoiser, pass: &Pass, block: std::ops::Range<usize>, rule: Rule) -> Result<bool, SamplerError> {
    d.begin_step();
    let config = d.model.config();
    let (shift, family) = (config.shift_logits, config.family);
    let window = pass.window(d.canvas.len());
    let positions: Vec<usize> = match rule {
        Rule::Position(pos) => vec![pos],
        _ => block.filter(|&j| d.canvas[j] == d.special.mask).collect(),
    };
    // Dream reads position j's logits from row j - 1; inside a window, the window's first
    // position takes its own row (it is never masked there).
    let rows: Vec<usize> = positions.iter().map(|&j| if shift && j > window.start { j - 1 } else { j }).collect();
    let candidates: Vec<Candidate> = match (family, greedy_rule(d.params, Precision::F64)) {
        // Dream's block sampler rates positions by probability, as upstream's confidence_threshold.
        (Family::Dream, _) => {
            d.choose_rows(pass, &positions, &rows, dream::rule(d.params, DreamAlg::ConfidenceThreshold))?
        }
        (Family::Llada, Some(greedy)) => d.choose_rows(pass, &positions, &rows, greedy)?,
        (Family::Llada, None) => {
            d.forward_pass(pass, &rows)?;
            choose_each(d, &positions, Precision::F64)?
        }
        (Family::Rnd1, _) => unreachable!("RND1's plan has no block sampler"),
    };
    let committed = match rule {
        Rule::Position(_) => candidates,
        Rule::Quota(k) => keep_confident(candidates, k, f64::NEG_INFINITY).0,
        Rule::Threshold(t) => {
            let k = candidates.len();
            keep_confident(candidates, k, t).0
        }
    };
    d.check_progress(!positions.is_empty(), &committed)?;
    Ok(d.end_step(&committed))
}
