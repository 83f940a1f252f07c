//! RND1's sampler, after `diffusion_sample()` in RadicalNumerics/RND1 `rnd/sampling.py` (what
//! its `generate()` runs): the answer's positions (all but the last, which holds the pad token)
//! are maskable. Each step predicts every maskable position from the model's shifted logits
//! (position j reads row j-1) under the row rule (`RowRule::Rnd1`: temperature, top-k, top-p,
//! then the argmax at temperature 0 or a draw, and the entropy of the filtered distribution);
//! at step s = steps-1 down to 1 the `trunc(masked x s / steps)` maskable positions of highest
//! entropy stay masked and every other one is committed; the last step commits all that remain.
//! The run ends early once nothing is maskable (the reference then runs no more passes).
//!
//! What differs from the reference, and why: ties in entropy keep the lower position masked
//! (torch.topk leaves their order to the implementation); with top-k or top-p on, the reference's
//! entropy is NaN (0 x -inf for the filtered tokens) and its choice arbitrary, so dllm takes the
//! entropy over the kept tokens; its random draws come from dllm's seeded generator, not torch's.

use super::{Denoiser, SamplerError};
use crate::backend::RowRule;
use crate::forward::Pass;

pub(super) fn run(d: &mut Denoiser, steps: usize) -> Result<(), SamplerError> {
    let p = d.params;
    let rule = RowRule::Rnd1 { temperature: p.temperature, top_k: p.top_k, top_p: p.top_p };
    let shift = d.model.config().shift_logits;
    // A separate mark, as the reference keeps: a committed token equal to the mask id is not
    // masked again.
    let mut maskable: Vec<bool> =
        d.canvas.iter().enumerate().map(|(j, &t)| j >= d.prompt_len && t == d.special.mask).collect();
    let total = maskable.iter().filter(|&&m| m).count();
    for i in 0..steps {
        let positions: Vec<usize> = (0..maskable.len()).filter(|&j| maskable[j]).collect();
        if positions.is_empty() {
            break;
        }
        d.begin_step();
        let rows: Vec<usize> = positions.iter().map(|&j| if shift { j.saturating_sub(1) } else { j }).collect();
        let mut candidates = d.choose_rows(&Pass::Full, &positions, &rows, rule)?;
        let step = steps - 1 - i;
        if step > 0 {
            // torch: an int64 count times a Python float is a float32 product, truncated.
            let keep = (total as f32 * (step as f64 / steps as f64) as f32) as usize;
            // Highest entropy first, ties to the lower position; those stay masked.
            candidates.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
            candidates.drain(..keep.min(candidates.len()));
            candidates.sort_by_key(|c| c.0);
        }
        for c in &candidates {
            maskable[c.0] = false;
        }
        if !d.end_step(&candidates) {
            return Ok(());
        }
    }
    Ok(())
}
