//! The denoising loops: LLaDA's `generate()` and Dream's `diffusion_generate()`, ported step
//! for step from the official code, over any model that implements `forward::Forward`.

mod blocks;
mod dream;
mod llada;
mod param;
mod params;
mod plan;
mod rnd1;
mod row_choice;
pub mod rows;

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::backend::RowRule;
use crate::forward::{Forward, Pass};
use crate::model::ModelError;
pub use param::{Kind, PARAMS, Param, ParamError, ParamSpec, Value};
pub use params::{DreamAlg, GenerateParams, KvCacheMode, Remasking};
pub use plan::{Commit, DecodingPlan, Schedule, TokenChoice};
pub use row_choice::{RuleScratch, choose_row};

thread_local! {
    /// Each thread's work buffers for the row rules' filters, reused across rows and steps.
    static RULE_SCRATCH: std::cell::RefCell<RuleScratch> = std::cell::RefCell::new(RuleScratch::default());
}

/// The token ids the samplers treat specially.
#[derive(Debug, Clone)]
pub struct SpecialTokens {
    pub mask: u32,
    /// End of sequence (LLaDA `<|endoftext|>`, Dream `<|endoftext|>`): the official
    /// `logits_eos_inf` option's token.
    pub eos: Option<u32>,
    /// End of turn (LLaDA `<|eot_id|>`, Dream `<|im_end|>`): with `eos`, the official
    /// `confidence_eos_eot_inf` option's tokens.
    pub eot: Option<u32>,
    /// Every token that ends the answer (`tokenizer::SpecialIds::eog`, ascending): where early
    /// stopping and the answer's text end.
    pub end_of_generation: Arc<[u32]>,
    /// The padding token (RND1's canvas ends with it).
    pub pad: Option<u32>,
}

impl SpecialTokens {
    /// The tokens of a vocabulary whose only end-of-generation tokens are `eos` and `eot`.
    pub fn new(mask: u32, eos: Option<u32>, eot: Option<u32>) -> SpecialTokens {
        let mut end: Vec<u32> = [eos, eot].into_iter().flatten().collect();
        end.sort_unstable();
        end.dedup();
        SpecialTokens { mask, eos, eot, end_of_generation: end.into(), pad: None }
    }

    fn is_end(&self, id: u32) -> bool {
        self.end_of_generation.binary_search(&id).is_ok()
    }
}

/// What one denoising step did, reported as soon as it is done.
#[derive(Debug, Clone)]
pub struct StepInfo<'a> {
    /// 0-based step index.
    pub index: usize,
    /// The whole canvas (prompt and answer) after this step.
    pub canvas: &'a [u32],
    /// Positions committed in this step, with the confidence that chose them.
    pub committed: &'a [(usize, f32)],
    pub forward_ms: f64,
    pub sample_ms: f64,
    /// Model forward passes this step ran (0 when it had nothing to commit, 2 with CFG).
    pub forwards: usize,
    /// Canvas positions the step's forward pass ran (empty when it ran none).
    pub window: Range<usize>,
    /// Whether that pass read the K/V cache (an approximation) instead of running the canvas.
    pub cached: bool,
    /// Rows of the canvas whose logits that pass computed (the LM head's rows).
    pub logit_rows: usize,
}

/// The outcome of a generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub canvas: Vec<u32>,
    pub prompt_len: usize,
    /// Steps run (fewer than asked when stopped early or cancelled).
    pub steps: usize,
    pub stopped_early: bool,
    pub cancelled: bool,
}

impl Generated {
    pub fn answer(&self) -> &[u32] {
        &self.canvas[self.prompt_len..]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("invalid settings: {0}")]
    Invalid(#[from] ParamError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model chose its own mask token for every position it was to unmask, step after
    /// step (see `Denoiser::check_progress`).
    #[error(
        "decoding stopped at step {step}: for {stalls} steps in a row the model chose its mask token (id {mask}) for every position it was to fill, so no step made progress; try another seed, a lower threshold or sampling without top-p"
    )]
    NoProgress { step: usize, stalls: usize, mask: u32 },
    /// NaN or infinite logits: the weights or the computation are broken.
    #[error(
        "the model's logits are not finite (NaN or infinity) at step {step}, position {position}: the file's weights or the computation are broken, so no answer can be trusted"
    )]
    NonFinite { step: usize, position: usize },
}

/// Steps in a row that unmask nothing before a run gives up (`Denoiser::check_progress`).
pub const MAX_STALLS: usize = 16;

/// The answer as people read it: up to the first end-of-text token, special tokens left out.
pub fn answer_ids<'a>(answer: &'a [u32], special: &SpecialTokens) -> &'a [u32] {
    let end = answer.iter().position(|&id| special.is_end(id)).unwrap_or(answer.len());
    &answer[..end]
}

/// Whether no later step can change the answer as read: every position before the first
/// end-of-text token is committed (committed tokens never change).
fn answer_is_final(answer: &[u32], special: &SpecialTokens) -> bool {
    for &id in answer {
        if id == special.mask {
            return false;
        }
        if special.is_end(id) {
            return true;
        }
    }
    true
}

/// Plans the run (`GenerateParams::plan`) and runs it with `generate_planned`.
pub fn generate(
    model: &mut dyn Forward,
    prompt: &[u32],
    params: &GenerateParams,
    special: SpecialTokens,
    on_step: &mut dyn FnMut(&StepInfo) -> bool,
) -> Result<Generated, SamplerError> {
    let c = model.config();
    let plan = params.plan(c.family, prompt.len(), c.context_length)?;
    generate_planned(model, prompt, &plan, special, on_step)
}

/// Runs the plan's sampler, ported from the family's official code. `on_step` sees every step
/// and returns false to cancel.
pub fn generate_planned(
    model: &mut dyn Forward,
    prompt: &[u32],
    plan: &DecodingPlan,
    special: SpecialTokens,
    on_step: &mut dyn FnMut(&StepInfo) -> bool,
) -> Result<Generated, SamplerError> {
    if prompt.is_empty() {
        return Err(SamplerError::EmptyPrompt);
    }
    let params = plan.params();
    let mut d = Denoiser {
        model,
        params,
        canvas: plan.initial_canvas(prompt, &special),
        special,
        prompt_len: prompt.len(),
        logits: Vec::new(),
        row: Vec::new(),
        rng: ChaCha8Rng::seed_from_u64(plan.seed),
        on_step,
        steps_run: 0,
        forward_ms: 0.0,
        forwards: 0,
        window: 0..0,
        cached: false,
        logit_rows: 0,
        step_start: Instant::now(),
        stop: None,
        stalls: 0,
    };
    // Each loop runs the shape the plan worked out; it derives none of it again.
    match plan.schedule {
        Schedule::Blocks { blocks, block_length, steps_per_block } => {
            llada::run(&mut d, blocks, block_length, steps_per_block)?
        }
        Schedule::CachedBlocks { blocks, block_length, steps_per_block, threshold } => {
            blocks::run(&mut d, blocks, block_length, steps_per_block, threshold)?
        }
        Schedule::Timesteps { steps, eps } => dream::run(&mut d, steps, eps)?,
        Schedule::Quota { steps, per_step, threshold } => dream::run_quota(&mut d, steps, per_step, threshold)?,
        Schedule::Entropy { steps } => rnd1::run(&mut d, steps)?,
    }
    Ok(Generated {
        steps: d.steps_run,
        stopped_early: d.stop == Some(Stop::Early),
        cancelled: d.stop == Some(Stop::Cancelled),
        canvas: d.canvas,
        prompt_len: d.prompt_len,
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stop {
    Early,
    Cancelled,
}

/// State shared by both samplers' loops.
struct Denoiser<'a> {
    model: &'a mut dyn Forward,
    params: &'a GenerateParams,
    special: SpecialTokens,
    canvas: Vec<u32>,
    prompt_len: usize,
    logits: Vec<f32>,
    /// One row of `logits`, copied out to be consumed as scratch.
    row: Vec<f32>,
    rng: ChaCha8Rng,
    on_step: &'a mut dyn FnMut(&StepInfo) -> bool,
    steps_run: usize,
    forward_ms: f64,
    forwards: usize,
    window: Range<usize>,
    cached: bool,
    logit_rows: usize,
    step_start: Instant,
    stop: Option<Stop>,
    /// Steps in a row that had positions to fill and filled none (`check_progress`).
    stalls: usize,
}

impl Denoiser<'_> {
    fn n_vocab(&self) -> usize {
        self.model.config().n_vocab
    }

    fn begin_step(&mut self) {
        self.step_start = Instant::now();
        self.forward_ms = 0.0;
        self.forwards = 0;
        self.window = 0..0;
        self.cached = false;
        self.logit_rows = 0;
    }

    /// Logits of `rows` of `canvas` into `out` from a full pass, timed as forward work.
    fn forward_into(&mut self, canvas: &[u32], rows: &[usize], out: &mut Vec<f32>) -> Result<(), ModelError> {
        self.pass_into(canvas, &Pass::Full, rows, out)
    }

    fn pass_into(&mut self, canvas: &[u32], pass: &Pass, rows: &[usize], out: &mut Vec<f32>) -> Result<(), ModelError> {
        let t = Instant::now();
        self.model.forward_pass(canvas, pass, rows, out)?;
        self.record_pass(t, pass, canvas.len(), rows.len());
        Ok(())
    }

    /// Counts a pass that began at `start` as this step's forward work.
    fn record_pass(&mut self, start: Instant, pass: &Pass, len: usize, rows: usize) {
        self.forward_ms += start.elapsed().as_secs_f64() * 1e3;
        self.forwards += 1;
        self.window = pass.window(len);
        self.cached = matches!(pass, Pass::Window(_));
        self.logit_rows = rows;
    }

    /// The candidate of each of `positions`, whose logits are the canvas rows `rows`, by `rule`:
    /// applied by the backend where the logits are when it can (a GPU), else here to logits
    /// copied back. Either way the rule's random numbers are drawn first, one per row in order,
    /// which is the order the per-row loop would draw them in.
    fn choose_rows(
        &mut self,
        pass: &Pass,
        positions: &[usize],
        rows: &[usize],
        rule: RowRule,
    ) -> Result<Vec<Candidate>, SamplerError> {
        let uniforms: Vec<f64> = if rule.draws() { rows.iter().map(|_| self.uniform()).collect() } else { Vec::new() };
        let t = Instant::now();
        let mut chosen = Vec::with_capacity(rows.len());
        if self.model.choose_rows(&self.canvas, pass, rows, &rule, &uniforms, &mut chosen)? {
            self.record_pass(t, pass, self.canvas.len(), rows.len());
        } else {
            self.forward_pass(pass, rows)?;
            let n_vocab = self.n_vocab();
            // The rows are independent (their random numbers are drawn above), so they run in
            // parallel, each consumed in place: nothing reads these logits again.
            self.logits[..rows.len() * n_vocab]
                .par_chunks_mut(n_vocab)
                .enumerate()
                .map(|(r, row)| {
                    let u = uniforms.get(r).copied().unwrap_or(0.0);
                    let (token, confidence) =
                        RULE_SCRATCH.with_borrow_mut(|scratch| choose_row(&rule, row, u, scratch));
                    (token as u32, confidence)
                })
                .collect_into_vec(&mut chosen);
        }
        let candidates: Vec<Candidate> =
            positions.iter().zip(chosen).map(|(&pos, (token, confidence))| (pos, token, confidence)).collect();
        self.check_finite(&candidates)?;
        Ok(candidates)
    }

    /// Logits of `rows` of the current canvas into `self.logits`, from a full pass.
    fn forward(&mut self, rows: &[usize]) -> Result<(), SamplerError> {
        self.forward_pass(&Pass::Full, rows)
    }

    /// Logits of `rows` of the current canvas into `self.logits`, refused if any is NaN or
    /// infinite (a model's raw logits never are; sampling from them would hide it).
    fn forward_pass(&mut self, pass: &Pass, rows: &[usize]) -> Result<(), SamplerError> {
        let canvas = std::mem::take(&mut self.canvas);
        let mut logits = std::mem::take(&mut self.logits);
        let r = self.pass_into(&canvas, pass, rows, &mut logits);
        self.canvas = canvas;
        self.logits = logits;
        r?;
        let n_vocab = self.n_vocab();
        match self.logits[..rows.len() * n_vocab].chunks(n_vocab).position(|row| !rows::all_finite(row)) {
            Some(r) => Err(SamplerError::NonFinite { step: self.steps_run, position: rows[r] }),
            None => Ok(()),
        }
    }

    /// Refuses candidates whose confidence is NaN: what NaN or infinite logits give (softmax
    /// over them is NaN), whichever backend applied the rule.
    fn check_finite(&self, candidates: &[Candidate]) -> Result<(), SamplerError> {
        match candidates.iter().find(|c| c.2.is_nan()) {
            Some(&(position, _, _)) => Err(SamplerError::NonFinite { step: self.steps_run, position }),
            None => Ok(()),
        }
    }

    /// The bound of the loops that run until no mask is left (the block samplers and Dream's
    /// quota sampler). Upstream (Fast-dLLM's `generate` with a threshold, Dream's
    /// `generation_utils_block.py` and `confidence_threshold`) writes the chosen token even
    /// when it is the mask id, which leaves the position masked, and loops while a mask is
    /// left: a model that keeps choosing its mask token loops it for ever (seen with Dream,
    /// top-p 0.95, threshold 0.5 and a prefix cache: 19,000 steps). dllm writes the same (so
    /// its steps match upstream's) but counts a step that had positions to fill and unmasked
    /// none as a stall, and stops with an error after `MAX_STALLS` in a row. Each step either
    /// unmasks one position at least or is a stall, so a block of n positions ends within
    /// n (MAX_STALLS + 1) steps.
    fn check_progress(&mut self, had_positions: bool, committed: &[Candidate]) -> Result<(), SamplerError> {
        if !had_positions || committed.iter().any(|c| c.1 != self.special.mask) {
            self.stalls = 0;
            return Ok(());
        }
        self.stalls += 1;
        if self.stalls >= MAX_STALLS {
            return Err(SamplerError::NoProgress {
                step: self.steps_run,
                stalls: self.stalls,
                mask: self.special.mask,
            });
        }
        Ok(())
    }

    /// Commits `committed` tokens, reports the step, and decides whether to go on.
    fn end_step(&mut self, committed: &[Candidate]) -> bool {
        for &(pos, id, _) in committed {
            self.canvas[pos] = id;
        }
        let total_ms = self.step_start.elapsed().as_secs_f64() * 1e3;
        let report: Vec<(usize, f32)> = committed.iter().map(|&(p, _, c)| (p, c as f32)).collect();
        let info = StepInfo {
            index: self.steps_run,
            canvas: &self.canvas,
            committed: &report,
            forward_ms: self.forward_ms,
            sample_ms: (total_ms - self.forward_ms).max(0.0),
            forwards: self.forwards,
            window: self.window.clone(),
            cached: self.cached,
            logit_rows: self.logit_rows,
        };
        self.steps_run += 1;
        if !(self.on_step)(&info) {
            self.stop = Some(Stop::Cancelled);
            return false;
        }
        let answer = &self.canvas[self.prompt_len..];
        let steps_remain = answer.contains(&self.special.mask);
        if self.params.early_stop && steps_remain && answer_is_final(answer, &self.special) {
            self.stop = Some(Stop::Early);
            return false;
        }
        true
    }

    fn uniform(&mut self) -> f64 {
        rand::Rng::random::<f64>(&mut self.rng)
    }
}

/// A masked position's proposal: (position, token, confidence). Confidence is kept in f64
/// because Fast-dLLM's LLaDA sampler compares f64 probabilities with the threshold; f32
/// confidences convert exactly.
type Candidate = (usize, u32, f64);

/// The `k` candidates of highest confidence, ties broken by position (torch.topk on the
/// canvas order).
fn top_k_by_confidence(mut candidates: Vec<Candidate>, k: usize) -> Vec<Candidate> {
    candidates.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    candidates.truncate(k);
    candidates
}

/// Fast-dLLM's threshold rule over the `k` most confident candidates: the first is always
/// kept, each other one only if its confidence reaches `threshold`. Returns the kept ones and
/// how many were rejected.
fn keep_confident(candidates: Vec<Candidate>, k: usize, threshold: f64) -> (Vec<Candidate>, usize) {
    let ranked = top_k_by_confidence(candidates, k);
    let n = ranked.len();
    let kept: Vec<_> =
        ranked.into_iter().enumerate().filter(|(i, c)| *i == 0 || c.2 >= threshold).map(|(_, c)| c).collect();
    let rejected = n - kept.len();
    (kept, rejected)
}
