//! The forward pass: a canvas of token ids in, logits (or one chosen token per row) out.
//!
//! `Forward` is the seam the samplers call. It has one implementation, `Transformer<B>`: the
//! layer loop of the LLaDA/Dream backbone, the pass kinds and the K/V cache bookkeeping,
//! written once over a `backend::Backend`, whose primitives (norm, products, RoPE, attention,
//! ...) the CPU (`cpu::CpuBackend`) and CUDA (`cuda::CudaBackend`) implement; `models` puts
//! each backend's model together.

mod models;
mod transformer;

use std::ops::Range;

pub use models::{CpuModel, CudaModel};
pub use transformer::Transformer;

use crate::backend::RowRule;
use crate::model::{ModelConfig, ModelError};

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

/// Checks one pass's inputs against the model and returns the window of positions it runs.
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

/// A model that computes logits for a canvas. Implementations keep their work buffers between
/// calls, so a steady-state call allocates nothing.
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
