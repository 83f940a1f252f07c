//! Generation settings: one flat set shared by both samplers, with each model family's
//! official defaults. `param` describes each setting; `plan` checks them and plans a run.

use serde::{Deserialize, Serialize};

use crate::backend::RowConfidence;
use crate::model::Family;

/// LLaDA's remasking strategy: which masked positions to commit at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remasking {
    /// The positions whose predicted token has the highest probability.
    LowConfidence,
    /// Random positions.
    Random,
}

/// Dream's confidence measure (`alg` in diffusion_generate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DreamAlg {
    /// Each masked position is revealed with probability 1 - s/t, independently.
    Origin,
    /// Highest probability of the sampled token.
    MaskgitPlus,
    /// Largest gap between the two most likely tokens.
    TopkMargin,
    /// Lowest entropy of the predicted distribution.
    Entropy,
    /// Fast-dLLM: a quota of steps/gen tokens per step, of which only the most confident and
    /// those whose probability reaches `threshold` are committed; the rest carry over.
    ConfidenceThreshold,
}

impl DreamAlg {
    /// The confidence each alg ranks positions by.
    pub fn confidence(self) -> RowConfidence {
        match self {
            DreamAlg::TopkMargin => RowConfidence::Margin,
            DreamAlg::Entropy => RowConfidence::NegEntropy,
            DreamAlg::Origin | DreamAlg::MaskgitPlus | DreamAlg::ConfidenceThreshold => RowConfidence::Probability,
        }
    }
}

/// Fast-dLLM's K/V caches. Both are approximations: the cached keys and values are those of
/// the block's first step and do not see the tokens committed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheMode {
    /// Every step runs the whole canvas (exact).
    #[default]
    None,
    /// Prompt and finished blocks are cached at each block's first step; later steps run the
    /// current block and everything after it.
    Prefix,
    /// Everything outside the current block is cached; later steps run only the block.
    Dual,
}

impl KvCacheMode {
    pub fn name(self) -> &'static str {
        match self {
            KvCacheMode::None => "none",
            KvCacheMode::Prefix => "prefix",
            KvCacheMode::Dual => "dual",
        }
    }
}

impl std::str::FromStr for KvCacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(KvCacheMode::None),
            "prefix" => Ok(KvCacheMode::Prefix),
            "dual" => Ok(KvCacheMode::Dual),
            _ => Err(format!("unknown cache '{s}' (choose none, prefix or dual)")),
        }
    }
}

impl std::str::FromStr for Remasking {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "low_confidence" => Ok(Remasking::LowConfidence),
            "random" => Ok(Remasking::Random),
            _ => Err(format!("unknown remasking '{s}' (choose low_confidence or random)")),
        }
    }
}

impl std::str::FromStr for DreamAlg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "origin" => Ok(DreamAlg::Origin),
            "maskgit_plus" => Ok(DreamAlg::MaskgitPlus),
            "topk_margin" => Ok(DreamAlg::TopkMargin),
            "entropy" => Ok(DreamAlg::Entropy),
            "confidence_threshold" => Ok(DreamAlg::ConfidenceThreshold),
            _ => Err(format!(
                "unknown alg '{s}' (choose origin, maskgit_plus, topk_margin, entropy or confidence_threshold)"
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GenerateParams {
    /// Number of positions to generate (masks appended to the prompt).
    pub gen_length: usize,
    /// Denoising steps in total (LLaDA: across all blocks).
    pub steps: usize,
    /// LLaDA: the answer is generated in blocks of this many positions, left to right.
    pub block_length: usize,
    /// 0 = greedy; above 0, sampled (LLaDA: Gumbel noise; Dream: categorical sampling).
    pub temperature: f32,
    /// Seed of every random choice, so a run with temperature above 0 can be repeated.
    pub seed: u64,
    /// Stop once end-of-text follows a fully committed answer (same text, fewer steps).
    pub early_stop: bool,
    pub remasking: Remasking,
    /// LLaDA classifier-free guidance; 0 = off.
    pub cfg_scale: f32,
    /// LLaDA: never predict end-of-sequence.
    pub logits_eos_inf: bool,
    /// LLaDA: the official flag of this name (see `decoding::llada`).
    pub confidence_eos_eot_inf: bool,
    pub alg: DreamAlg,
    /// Dream: temperature of the choice of positions (0 = take the most confident).
    pub alg_temp: f32,
    /// Dream: end of the timestep schedule, linspace(1, eps, steps + 1).
    pub eps: f32,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    /// Fast-dLLM threshold decoding: each step commits every eligible masked position whose
    /// confidence reaches this, and at least the most confident one. LLaDA: within the current
    /// block. Dream: selects the block sampler, or with `alg = confidence_threshold` the quota
    /// sampler.
    pub threshold: Option<f64>,
    pub cache: KvCacheMode,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams::defaults_for(Family::Llada)
    }
}

impl GenerateParams {
    /// Each family's official recommendation: LLaDA's README `generate(steps=128,
    /// gen_length=128, block_length=32, temperature=0, cfg_scale=0, remasking='low_confidence')`;
    /// Dream's README `diffusion_generate(max_new_tokens=512, steps=512, temperature=0.2,
    /// top_p=0.95, alg="entropy", alg_temp=0)` with eps 1e-3; RND1's demo_rnd_generation.py
    /// (`--num_steps 256 --max_new_tokens 256 --temperature 0.01 --seed 1234`, no top-k or top-p).
    pub fn defaults_for(family: Family) -> GenerateParams {
        let common = GenerateParams {
            gen_length: 128,
            steps: 128,
            block_length: 32,
            temperature: 0.0,
            seed: 0,
            early_stop: true,
            remasking: Remasking::LowConfidence,
            cfg_scale: 0.0,
            logits_eos_inf: false,
            confidence_eos_eot_inf: false,
            alg: DreamAlg::Entropy,
            alg_temp: 0.0,
            eps: 1e-3,
            top_p: None,
            top_k: None,
            threshold: None,
            cache: KvCacheMode::None,
        };
        match family {
            Family::Llada => common,
            Family::Dream => GenerateParams {
                gen_length: 512,
                steps: 512,
                block_length: 512,
                temperature: 0.2,
                top_p: Some(0.95),
                ..common
            },
            Family::Rnd1 => GenerateParams {
                gen_length: 256,
                steps: 256,
                block_length: 256,
                temperature: 0.01,
                seed: 1234,
                ..common
            },
        }
    }

    /// Shorter than the official defaults, so that a first run on a CPU finishes quickly: the
    /// settings the app starts with for a model of `family` (64 tokens in 64 steps).
    pub fn interactive_for(family: Family) -> GenerateParams {
        let official = GenerateParams::defaults_for(family);
        let block_length = match family {
            Family::Llada => 32,
            Family::Dream | Family::Rnd1 => 64,
        };
        GenerateParams { gen_length: 64, steps: 64, block_length, ..official }
    }
}
