//! The seam between the layer loop and the devices: the primitives of a forward pass, as a
//! backend (`cpu`, `cuda`) implements them over its own buffers.
//!
//! The layer loop (`forward::Transformer`) names activations by role (`Act`); each backend
//! keeps one buffer per role, grown to the largest pass seen and then reused, so that the loop
//! never sees a device pointer and a steady-state pass allocates nothing.

mod routing;
mod row_rule;

use std::ops::Range;

use crate::gguf::GgufFile;
use crate::model::weights::{Expert, MatrixRef, Weights};
use crate::model::{ModelConfig, ModelError, MoeConfig};
pub use routing::Routes;
pub use row_rule::{RowConfidence, RowRule};

/// A model read and readied for a backend: what the layer loop is put together from.
pub struct Loaded<B: Backend> {
    pub backend: B,
    pub config: ModelConfig,
    pub weights: Weights<B::Matrix, B::Vector>,
}

/// An activation buffer of a pass, by role; row-major, one row per canvas position of the
/// window (`Head`: per requested row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// The residual stream, `[n, n_embd]`.
    X,
    /// A normalized input or a product's output, `[n, max(n_embd, n_ff)]`.
    H,
    Q,
    K,
    V,
    /// Attention's output, `[n, n_embd]`.
    Att,
    Gate,
    Up,
    /// Keys and values of the whole canvas for a windowed pass, `[len, kv]`: cached rows
    /// outside the window and fresh ones inside it.
    AllK,
    AllV,
    /// The final norm of the rows whose logits were asked for, `[m, n_embd]`.
    Head,
    /// The LM head's output, `[m, n_vocab]`.
    Logits,
    /// A MoE router's logits, `[n, n_expert]`.
    Router,
    /// The rows of `H` in the routing's gathered order (grouped by expert),
    /// `[n * n_expert_used, n_embd]`; then the experts' outputs in the same order.
    Picked,
    /// The experts' weighted outputs summed per row, `[n, n_embd]`.
    Moe,
}

impl Act {
    pub const COUNT: usize = 15;
}

/// One of an expert's three matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertPart {
    Gate,
    Up,
    Down,
}

impl ExpertPart {
    pub const ALL: [ExpertPart; 3] = [ExpertPart::Gate, ExpertPart::Up, ExpertPart::Down];

    pub fn of<M>(self, e: &Expert<M>) -> &M {
        match self {
            ExpertPart::Gate => &e.gate,
            ExpertPart::Up => &e.up,
            ExpertPart::Down => &e.down,
        }
    }
}

/// The sizes of one pass.
#[derive(Debug, Clone)]
pub struct PassShape {
    /// Canvas positions (keys of every attention).
    pub len: usize,
    /// The positions this pass runs (`n = window.len()` rows per activation).
    pub window: Range<usize>,
    /// Rows whose logits were asked for.
    pub head_rows: usize,
}

/// The keys and values attention reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// `K` and `V`: the window's own, when the window is the whole canvas.
    Fresh,
    /// `AllK` and `AllV`, assembled by `cache_assemble`.
    Assembled,
}

/// What a backend does for the layer loop. The loop calls these in order for each pass; a
/// backend may queue them (a GPU stream) as long as `logits_to_host` and `choose_rows` see their
/// results.
pub trait Backend: Send {
    /// A weight matrix ready for this backend's products.
    type Matrix: Send;
    /// A norm weight or bias vector ready for this backend.
    type Vector: Send;

    /// Sizes the buffers for a pass of `shape` (grown, never shrunk) and the RoPE table for its
    /// positions.
    fn begin_pass(&mut self, c: &ModelConfig, shape: &PassShape) -> Result<(), ModelError>;

    /// `X` = the embeddings of `tokens` (the window's), read from `table` in the mapped file.
    fn embed(&mut self, gguf: &GgufFile, table: &MatrixRef, tokens: &[u32]) -> Result<(), ModelError>;

    /// `output = rms_norm(input) * weight` for `rows` rows of `weight.len()` values (the
    /// per-head norms of q and k are `n_heads` such rows per position); `input` may be `output`.
    fn rms_norm(
        &mut self,
        input: Act,
        weight: &Self::Vector,
        output: Act,
        rows: usize,
        eps: f32,
    ) -> Result<(), ModelError>;

    /// `Head` = `rms_norm(X) * weight` of the window's rows `rows` (the LM head's inputs).
    fn rms_norm_rows(&mut self, rows: &[usize], weight: &Self::Vector, eps: f32) -> Result<(), ModelError>;

    /// `output = input x w^T` for `rows` rows. `same_input`: the previous product read the same,
    /// unchanged input, so activations it quantized may serve again.
    fn linear(
        &mut self,
        w: &Self::Matrix,
        input: Act,
        output: Act,
        rows: usize,
        same_input: bool,
    ) -> Result<(), ModelError>;

    /// `x += bias` on each of `rows` rows.
    fn add_bias(&mut self, x: Act, bias: &Self::Vector, rows: usize) -> Result<(), ModelError>;

    /// RoPE on the `n_heads` heads of `rows` rows of `x`, the first at canvas position `first`.
    fn rope(&mut self, c: &ModelConfig, x: Act, rows: usize, n_heads: usize, first: usize) -> Result<(), ModelError>;

    /// `Att = softmax(Q K^T / sqrt(d)) V` for `rows` query rows over `n_keys` keys.
    fn attention(&mut self, c: &ModelConfig, keys: Keys, rows: usize, n_keys: usize) -> Result<(), ModelError>;

    /// `Gate = silu(Gate) * Up` over the first `n` values.
    fn swiglu(&mut self, n: usize) -> Result<(), ModelError>;

    /// `x += y` over the first `n` values (the residual adds).
    fn add_into(&mut self, x: Act, y: Act, n: usize) -> Result<(), ModelError>;

    /// Keeps layer `layer`'s `K` and `V` (`len * kv` values each) in the cache, which holds
    /// `n_layer` layers.
    fn cache_store(&mut self, layer: usize, n_layer: usize, len: usize, kv: usize) -> Result<(), ModelError>;

    /// `AllK`/`AllV` = layer `layer`'s cached keys and values of a `len`-position canvas, with
    /// the window's fresh `K`/`V` in its rows.
    fn cache_assemble(&mut self, layer: usize, window: &Range<usize>, len: usize, kv: usize) -> Result<(), ModelError>;

    /// Routes `rows` rows by the router's logits in `Router` (`[rows, n_expert]`): each row's
    /// `n_expert_used` experts and their weights, the chosen rows grouped by expert
    /// (`backend::Routes` computes it on the host).
    fn route(&mut self, m: &MoeConfig, rows: usize) -> Result<(), ModelError>;

    /// `dst` = the rows of `src` in the routing's gathered order, rows of `width` values.
    fn gather_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError>;

    /// `output = input x w^T` over the routing's gathered rows, each expert's rows by its own
    /// matrix (`part` of `experts[e]`, the experts of layer `layer`); the experts may run side by
    /// side. `same_input` as for `linear`.
    fn linear_experts(
        &mut self,
        layer: usize,
        part: ExpertPart,
        experts: &[Expert<Self::Matrix>],
        input: Act,
        output: Act,
        same_input: bool,
    ) -> Result<(), ModelError>;

    /// `dst`'s row r = the weighted sum of row r's experts' outputs (`src`, gathered order),
    /// most probable expert first, rows of `width` values.
    fn combine_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError>;

    /// The first `n` values of `Logits`, copied (or moved) into `out`.
    fn logits_to_host(&mut self, n: usize, out: &mut Vec<f32>) -> Result<(), ModelError>;

    /// Whether `choose_rows` applies `rule` where the logits are.
    fn chooses_rows(&self, _rule: &RowRule) -> bool {
        false
    }

    /// Applies `rule` to each of the `m` rows of `Logits`, one (token, confidence) per row in
    /// `out`. Called only when `chooses_rows`.
    fn choose_rows(
        &mut self,
        _m: usize,
        _n_vocab: usize,
        _rule: &RowRule,
        _uniforms: &[f64],
        _out: &mut Vec<(u32, f64)>,
    ) -> Result<(), ModelError> {
        let why: Box<dyn std::error::Error + Send + Sync> = "this backend applies row rules on the host".into();
        Err(ModelError::Device(why.into()))
    }
}
