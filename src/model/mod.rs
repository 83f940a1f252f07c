//! The diffusion LM backbone shared by LLaDA and Dream, and the seam (`Forward`) behind which
//! each backend computes logits for a canvas.

mod config;
mod cpu;
mod kv_cache;
mod preparation;
pub(crate) mod weights;

use std::ops::Range;

pub use config::{Family, ModelConfig, RopeStyle};
pub use cpu::CpuModel;
pub use kv_cache::KvCache;
pub use preparation::Preparation;

use crate::quant::GgmlType;
use crate::sampler::RowRule;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error("{file}: architecture '{arch}' is not supported (dllm runs 'llada' and 'dream' GGUFs)")]
    UnsupportedArchitecture { file: String, arch: String },
    #[error("{file}: metadata key '{key}' is missing; the file is not a complete model")]
    MissingKey { file: String, key: String },
    #[error("{file}: metadata key '{key}' has an unusable value: {value}")]
    BadValue { file: String, key: String, value: String },
    #[error("{file}: tensor '{tensor}' is missing; the file is not a complete model")]
    MissingTensor { file: String, tensor: String },
    #[error("{file}: tensor '{tensor}' has shape {found:?}, expected {expected:?}")]
    ShapeMismatch { file: String, tensor: String, expected: Vec<usize>, found: Vec<usize> },
    #[error(
        "{file}: tensor '{tensor}' uses type {ty}, which dllm does not support yet; pick a file quantized as Q4_K_M, Q5_K_M, Q6_K, Q8_0 or F16"
    )]
    UnsupportedType { file: String, tensor: String, ty: GgmlType },
    #[error("{file}: tensor '{tensor}': {what}")]
    BadTensor { file: String, tensor: String, what: String },
    #[error("token id {id} is outside the model's {n_vocab}-entry vocabulary")]
    TokenOutOfRange { id: u32, n_vocab: usize },
    #[error("a canvas of {len} positions is longer than the model's context of {context}")]
    CanvasTooLong { len: usize, context: usize },
    #[error("row {row} is outside the {len}-position canvas")]
    RowOutOfRange { row: usize, len: usize },
    #[error("row {row} is outside the window {start}..{end} this pass runs")]
    RowOutsideWindow { row: usize, start: usize, end: usize },
    #[error("window {start}..{end} does not lie within the {len}-position canvas")]
    BadWindow { start: usize, end: usize, len: usize },
    #[error("{0}")]
    Device(String),
    #[error("the K/V cache holds {cached} positions but the canvas has {canvas}; run a full pass that fills it first")]
    CacheMismatch { cached: usize, canvas: usize },
}

/// Which canvas positions one forward pass runs, and how it uses the K/V cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    /// Every position; the cache is left alone.
    Full,
    /// Every position, keeping each layer's keys and values for later `Window` passes.
    FillCache,
    /// Only the positions in the window run. Their queries attend to every position of the
    /// canvas: fresh keys and values inside the window, cached ones outside it. A window that
    /// reaches the canvas end is Fast-dLLM's prefix cache; a block-sized one is its dual cache.
    Window(Range<usize>),
}

impl Pass {
    /// The positions this pass computes for a canvas of `len`.
    pub fn window(&self, len: usize) -> Range<usize> {
        match self {
            Pass::Full | Pass::FillCache => 0..len,
            Pass::Window(w) => w.clone(),
        }
    }
}

/// Checks one pass's inputs against the model, the same way for every backend, and returns the
/// window of positions it runs.
pub fn check_pass(c: &ModelConfig, tokens: &[u32], pass: &Pass, rows: &[usize]) -> Result<Range<usize>, ModelError> {
    let len = tokens.len();
    if len > c.context_length {
        return Err(ModelError::CanvasTooLong { len, context: c.context_length });
    }
    if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.n_vocab) {
        return Err(ModelError::TokenOutOfRange { id, n_vocab: c.n_vocab });
    }
    if let Some(&row) = rows.iter().find(|&&r| r >= len) {
        return Err(ModelError::RowOutOfRange { row, len });
    }
    let window = pass.window(len);
    if window.start >= window.end || window.end > len {
        return Err(ModelError::BadWindow { start: window.start, end: window.end, len });
    }
    if let Some(&row) = rows.iter().find(|&&r| !window.contains(&r)) {
        return Err(ModelError::RowOutsideWindow { row, start: window.start, end: window.end });
    }
    Ok(window)
}

/// A backend that computes logits for a canvas. Implementations keep their work buffers
/// between calls, so a steady-state call allocates nothing.
pub trait Forward: Send {
    fn config(&self) -> &ModelConfig;

    /// Raw logits (no Dream shift applied) of the canvas positions `rows`, written to
    /// `logits` as `[rows.len(), n_vocab]` row-major. `rows` must lie in the pass's window.
    fn forward_pass(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError>;

    /// Runs a pass and applies `rule` to the logits of each of `rows` where the backend holds
    /// them, writing one (token, confidence) per row to `out`, so that only those cross to the
    /// host; `uniforms` has one number per row when the rule draws. Returns false, having done
    /// nothing, on a backend whose logits are on the host anyway: the caller applies the rule.
    fn choose_rows(
        &mut self,
        _tokens: &[u32],
        _pass: &Pass,
        _rows: &[usize],
        _rule: &RowRule,
        _uniforms: &[f64],
        _out: &mut Vec<(u32, f64)>,
    ) -> Result<bool, ModelError> {
        Ok(false)
    }

    /// A full pass that leaves the cache alone.
    fn forward(&mut self, tokens: &[u32], rows: &[usize], logits: &mut Vec<f32>) -> Result<(), ModelError> {
        self.forward_pass(tokens, &Pass::Full, rows, logits)
    }
}
