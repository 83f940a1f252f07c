//! The LLaDA/Dream backbone's forward pass, once for every backend: the layer loop, the pass
//! kinds (full, fill the K/V cache, a window against it) and the cache's bookkeeping.

use std::sync::Arc;

use super::{Act, Backend, Forward, Keys, Pass, PassShape, RowRule, check_pass};
use crate::gguf::GgufFile;
use crate::model::weights::Weights;
use crate::model::{ModelConfig, ModelError};

/// A model on a backend: its weights in the backend's form, and the backend's buffers.
pub struct Transformer<B: Backend> {
    gguf: Arc<GgufFile>,
    config: ModelConfig,
    weights: Weights<B::Matrix, B::Vector>,
    backend: B,
    /// Canvas length of the pass that filled the K/V cache; 0 when it is empty.
    cached_len: usize,
    /// The LM head's rows within the window, reused between passes.
    head_rows: Vec<usize>,
}

impl<B: Backend> Transformer<B> {
    pub fn new(gguf: Arc<GgufFile>, config: ModelConfig, weights: Weights<B::Matrix, B::Vector>, backend: B) -> Self {
        Transformer { gguf, config, weights, backend, cached_len: 0, head_rows: Vec::new() }
    }

    pub fn gguf(&self) -> &Arc<GgufFile> {
        &self.gguf
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// Runs a pass up to the LM head, whose output for `rows` the backend holds in `Logits`.
    fn run(&mut self, tokens: &[u32], pass: &Pass, rows: &[usize]) -> Result<(), ModelError> {
        let Transformer { gguf, config: c, weights: w, backend: b, cached_len, head_rows } = self;
        let window = check_pass(c, tokens, pass, rows)?;
        let len = tokens.len();
        match pass {
            Pass::Full => {}
            Pass::FillCache => *cached_len = len,
            Pass::Window(_) if *cached_len != len => {
                return Err(ModelError::CacheMismatch { cached: *cached_len, canvas: len });
            }
            Pass::Window(_) => {}
        }
        // Every per-position operation runs on the window's n rows only.
        let (n, m) = (window.len(), rows.len());
        let (d, kv, eps) = (c.n_embd, c.n_head_kv * c.head_dim, c.rms_eps);
        b.begin_pass(c, &PassShape { len, window: window.clone(), head_rows: m })?;
        b.embed(gguf, &w.token_embd, &tokens[window.clone()])?;
        for (l, layer) in w.layers.iter().enumerate() {
            b.rms_norm(Act::X, &layer.attn_norm, Act::H, n, eps)?;
            b.linear(&layer.wq, Act::H, Act::Q, n, false)?;
            b.linear(&layer.wk, Act::H, Act::K, n, true)?;
            b.linear(&layer.wv, Act::H, Act::V, n, true)?;
            for (x, bias) in [(Act::Q, &layer.bq), (Act::K, &layer.bk), (Act::V, &layer.bv)] {
                if let Some(bias) = bias {
                    b.add_bias(x, bias, n)?;
                }
            }
            b.rope(c, Act::Q, n, c.n_head, window.start)?;
            b.rope(c, Act::K, n, c.n_head_kv, window.start)?;
            let keys = match pass {
                Pass::Full => Keys::Fresh,
                Pass::FillCache => {
                    b.cache_store(l, c.n_layer, len, kv)?;
                    Keys::Fresh
                }
                Pass::Window(_) => {
                    b.cache_assemble(l, &window, len, kv)?;
                    Keys::Assembled
                }
            };
            b.attention(c, keys, n, len)?;
            b.linear(&layer.wo, Act::Att, Act::H, n, false)?;
            b.add_into(Act::X, Act::H, n * d)?;
            b.rms_norm(Act::X, &layer.ffn_norm, Act::H, n, eps)?;
            b.linear(&layer.gate, Act::H, Act::Gate, n, false)?;
            b.linear(&layer.up, Act::H, Act::Up, n, true)?;
            b.swiglu(n * c.n_ff)?;
            b.linear(&layer.down, Act::Gate, Act::H, n, false)?;
            b.add_into(Act::X, Act::H, n * d)?;
        }
        // Final norm and LM head only for the requested rows.
        if m == 0 {
            return Ok(());
        }
        head_rows.clear();
        head_rows.extend(rows.iter().map(|&r| r - window.start));
        b.rms_norm_rows(head_rows, &w.output_norm, eps)?;
        b.linear(&w.output, Act::Head, Act::Logits, m, false)
    }
}

impl<B: Backend> Forward for Transformer<B> {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn forward_pass(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        self.run(tokens, pass, rows)?;
        self.backend.logits_to_host(rows.len() * self.config.n_vocab, logits)
    }

    fn choose_rows(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        rule: &RowRule,
        uniforms: &[f64],
        out: &mut Vec<(u32, f64)>,
    ) -> Result<bool, ModelError> {
        if !self.backend.chooses_rows() {
            return Ok(false);
        }
        self.run(tokens, pass, rows)?;
        self.backend.choose_rows(rows.len(), self.config.n_vocab, rule, uniforms, out)?;
        Ok(true)
    }
}
