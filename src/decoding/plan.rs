//! The decoding plan: the settings checked against the model and the prompt, and what they
//! mean as a run: which loop runs (the schedule), how positions are chosen for commitment,
//! how a token is chosen for a position, the cache, the guidance, and how many steps it takes.
//! The engine builds it before a run starts; the front ends show it and compute none of it.

use super::param::{Param, ParamError};
use super::{DreamAlg, GenerateParams, KvCacheMode, Remasking, SpecialTokens};
use crate::model::Family;

/// Which denoising loop runs, and its shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// LLaDA's `generate()`: `blocks` blocks of `block_length`, each committed over
    /// `steps_per_block` steps by a quota of the most confident (or random) positions.
    Blocks { blocks: usize, block_length: usize, steps_per_block: usize },
    /// Dream's `diffusion_generate()`: the timesteps `linspace(1, eps, steps + 1)` over the
    /// whole answer.
    Timesteps { steps: usize, eps: f32 },
    /// Fast-dLLM's block samplers: each block is refreshed by a full pass (filling the cache
    /// when there is one), then stepped until no mask is left: by the `threshold` rule, or
    /// without one by LLaDA's per-step quota over `steps_per_block`.
    CachedBlocks { blocks: usize, block_length: usize, steps_per_block: usize, threshold: Option<f64> },
    /// Fast-dLLM's Dream quota sampler (`alg = confidence_threshold`): `gen_length / steps`
    /// positions a step are candidates, the first and those reaching `threshold` committed.
    Quota { steps: usize, per_step: usize, threshold: f64 },
    /// RND1's `diffusion_sample()`: at step s of `steps` (counting down), all but the
    /// `masked x s / steps` highest-entropy maskable positions are committed.
    Entropy { steps: usize },
}

/// How the positions a step commits are chosen among the masked ones.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Commit {
    /// LLaDA: the most confident (`LowConfidence`) or random ones.
    Llada(Remasking),
    /// Dream: by the alg's confidence, drawn at `alg_temp` when above 0.
    Dream { alg: DreamAlg, alg_temp: f32 },
    /// RND1: every maskable position but the highest-entropy ones the schedule keeps masked.
    KeepHighEntropy,
}

/// How a position's token is chosen from its logits.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TokenChoice {
    /// 0: the most likely token; above 0, a draw (LLaDA: Gumbel noise; Dream: categorical).
    pub temperature: f32,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    /// LLaDA: end-of-sequence is never predicted.
    pub logits_eos_inf: bool,
    /// LLaDA: positions predicting end-of-text or end-of-turn have no confidence.
    pub confidence_eos_eot_inf: bool,
}

/// A run's plan. Built only by `GenerateParams::plan`, so holding one means the settings are
/// valid for the model and the prompt.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DecodingPlan {
    pub family: Family,
    pub prompt_len: usize,
    pub gen_length: usize,
    pub schedule: Schedule,
    pub commit: Commit,
    pub token: TokenChoice,
    pub cache: KvCacheMode,
    /// LLaDA's classifier-free guidance scale, when on.
    pub guidance: Option<f32>,
    pub seed: u64,
    pub early_stop: bool,
    /// The planned steps: the run's steps (an early stop can end it sooner) when `fixed_steps`,
    /// else the most it can take (threshold decoding takes a data-dependent number).
    pub max_steps: usize,
    pub fixed_steps: bool,
    #[serde(skip)]
    params: GenerateParams,
}

impl DecodingPlan {
    /// The settings it was built from (what the sampler loops read).
    pub fn params(&self) -> &GenerateParams {
        &self.params
    }

    /// The canvas the run starts from: the prompt, then a mask for each generated position;
    /// for RND1 the last of them is the pad token instead (`diffusion_sample` reserves it for
    /// an end-of-sequence token and fills it with `pad_token_id`, 0 when there is none).
    pub fn initial_canvas(&self, prompt: &[u32], special: &SpecialTokens) -> Vec<u32> {
        let mut canvas: Vec<u32> =
            prompt.iter().copied().chain(std::iter::repeat_n(special.mask, self.gen_length)).collect();
        if matches!(self.schedule, Schedule::Entropy { .. })
            && let Some(last) = canvas.last_mut()
        {
            *last = special.pad.unwrap_or(0);
        }
        canvas
    }
}

impl GenerateParams {
    /// Checks the settings for a model of `family` with a context of `context` tokens and a
    /// prompt of `prompt_len`, and plans the run. An error names the setting to change.
    pub fn plan(&self, family: Family, prompt_len: usize, context: usize) -> Result<DecodingPlan, ParamError> {
        let err = |param: Param, reason: String| Err(ParamError::new(param, reason));
        if self.gen_length == 0 {
            return err(Param::GenLength, "must be at least 1".into());
        }
        if self.steps == 0 {
            return err(Param::Steps, "must be at least 1".into());
        }
        if prompt_len.checked_add(self.gen_length).is_none_or(|len| len > context) {
            return err(
                Param::GenLength,
                format!(
                    "the prompt ({prompt_len} tokens) plus the generated length ({}) exceeds the model's context of {context} tokens; shorten the prompt or the answer",
                    self.gen_length
                ),
            );
        }
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return err(Param::Temperature, format!("must be 0 or more, not {}", self.temperature));
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return err(Param::TopP, format!("must be in (0, 1], not {p}"));
        }
        if self.top_k == Some(0) {
            return err(Param::TopK, "must be at least 1".into());
        }
        if let Some(t) = self.threshold
            && !(t > 0.0 && t <= 1.0)
        {
            return err(Param::Threshold, format!("must be in (0, 1], not {t}"));
        }
        if self.cache != KvCacheMode::None && self.cfg_scale > 0.0 {
            return err(
                Param::CfgScale,
                "classifier-free guidance cannot run with a K/V cache; set it to 0 or the cache to none".into(),
            );
        }
        let token = TokenChoice {
            temperature: self.temperature,
            top_p: self.top_p.filter(|_| family != Family::Llada),
            top_k: self.top_k.filter(|_| family != Family::Llada),
            logits_eos_inf: self.logits_eos_inf && family == Family::Llada,
            confidence_eos_eot_inf: self.confidence_eos_eot_inf && family == Family::Llada,
        };
        let (schedule, commit, guidance) = match family {
            Family::Llada => {
                if self.block_length == 0 || !self.gen_length.is_multiple_of(self.block_length) {
                    return err(
                        Param::BlockLength,
                        format!(
                            "{} must divide the generated length {} (LLaDA generates in equal blocks)",
                            self.block_length, self.gen_length
                        ),
                    );
                }
                let blocks = self.gen_length / self.block_length;
                if !self.steps.is_multiple_of(blocks) {
                    return err(
                        Param::Steps,
                        format!(
                            "{} must be a multiple of the number of blocks ({blocks} = {} / {}), so each block gets the same number of steps",
                            self.steps, self.gen_length, self.block_length
                        ),
                    );
                }
                if !(self.cfg_scale >= 0.0 && self.cfg_scale.is_finite()) {
                    return err(Param::CfgScale, format!("must be 0 or more, not {}", self.cfg_scale));
                }
                let (block_length, steps_per_block) = (self.block_length, self.steps / blocks);
                let schedule = if self.threshold.is_some() || self.cache != KvCacheMode::None {
                    Schedule::CachedBlocks { blocks, block_length, steps_per_block, threshold: self.threshold }
                } else {
                    Schedule::Blocks { blocks, block_length, steps_per_block }
                };
                let guidance = (self.cfg_scale > 0.0).then_some(self.cfg_scale);
                (schedule, Commit::Llada(self.remasking), guidance)
            }
            Family::Dream => {
                let quota_sampler = self.alg == DreamAlg::ConfidenceThreshold;
                if quota_sampler && self.threshold.is_none() {
                    return err(Param::Threshold, "alg confidence_threshold needs a threshold".into());
                }
                if quota_sampler && !self.gen_length.is_multiple_of(self.steps) {
                    return err(
                        Param::Steps,
                        format!(
                            "alg confidence_threshold commits generated length / steps tokens per step: {} must divide the generated length ({})",
                            self.steps, self.gen_length
                        ),
                    );
                }
                if self.cache != KvCacheMode::None && (quota_sampler || self.threshold.is_none()) {
                    return err(
                        Param::Cache,
                        "Dream's K/V cache runs with the block sampler: set a threshold and a block length, and an alg other than confidence_threshold".into(),
                    );
                }
                if !(self.eps > 0.0 && self.eps < 1.0) {
                    return err(Param::Eps, format!("must be in (0, 1), not {}", self.eps));
                }
                if !(self.alg_temp >= 0.0 && self.alg_temp.is_finite()) {
                    return err(Param::AlgTemp, format!("must be 0 or more, not {}", self.alg_temp));
                }
                let schedule = match self.threshold {
                    Some(threshold) if quota_sampler => {
                        Schedule::Quota { steps: self.steps, per_step: self.gen_length / self.steps, threshold }
                    }
                    Some(threshold) => {
                        if self.block_length < 2 || !self.gen_length.is_multiple_of(self.block_length) {
                            return err(
                                Param::BlockLength,
                                format!(
                                    "{} must be at least 2 and divide the generated length {} (Dream's threshold sampler works in equal blocks)",
                                    self.block_length, self.gen_length
                                ),
                            );
                        }
                        let blocks = self.gen_length / self.block_length;
                        Schedule::CachedBlocks {
                            blocks,
                            block_length: self.block_length,
                            steps_per_block: (self.steps / blocks).max(1),
                            threshold: Some(threshold),
                        }
                    }
                    None => Schedule::Timesteps { steps: self.steps, eps: self.eps },
                };
                (schedule, Commit::Dream { alg: self.alg, alg_temp: self.alg_temp }, None)
            }
            Family::Rnd1 => {
                if self.gen_length < 2 {
                    return err(
                        Param::GenLength,
                        "must be at least 2 for RND1 (its sampler keeps the last position for the end of the sequence)"
                            .into(),
                    );
                }
                if self.threshold.is_some() || self.cache != KvCacheMode::None {
                    let param = if self.threshold.is_some() { Param::Threshold } else { Param::Cache };
                    return err(param, "RND1's sampler has no threshold decoding or K/V cache".into());
                }
                (Schedule::Entropy { steps: self.steps }, Commit::KeepHighEntropy, None)
            }
        };
        let max_steps = match &schedule {
            Schedule::Blocks { .. } | Schedule::Timesteps { .. } | Schedule::Entropy { .. } => self.steps,
            Schedule::CachedBlocks { blocks, steps_per_block, threshold, .. } => {
                // A cached block (and each of Dream's) runs one step after its refresh even
                // with nothing left to commit (`decoding::blocks`).
                let one_more = usize::from(self.cache != KvCacheMode::None || family == Family::Dream);
                match threshold {
                    // Every step commits at least one position.
                    Some(_) => self.gen_length + blocks * one_more,
                    None => blocks * (*steps_per_block).max(1 + one_more),
                }
            }
            // Rejections at the last scheduled step extend it; every step commits one at least.
            Schedule::Quota { steps, .. } => self.gen_length.max(*steps),
        };
        // RND1's run ends sooner when no maskable position is left.
        let fixed_steps = matches!(schedule, Schedule::Blocks { .. } | Schedule::Timesteps { .. })
            || matches!(schedule, Schedule::CachedBlocks { threshold: None, .. });
        Ok(DecodingPlan {
            family,
            prompt_len,
            gen_length: self.gen_length,
            schedule,
            commit,
            token,
            cache: self.cache,
            guidance,
            seed: self.seed,
            early_stop: self.early_stop,
            max_steps,
            fixed_steps,
            params: self.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #23.5: a library caller's absurd length is a setting error; `prompt_len + gen_length`
    /// used to wrap (release) or overflow (debug) inside the check.
    #[test]
    fn an_absurd_generated_length_is_refused_without_overflow() {
        for family in [Family::Llada, Family::Dream, Family::Rnd1] {
            let params = GenerateParams { gen_length: usize::MAX, ..GenerateParams::defaults_for(family) };
            let err = params.plan(family, 10, 4096).unwrap_err();
            assert!(err.to_string().contains("context"), "{err}");
        }
    }
}
