//! The diffusion LM backbone shared by LLaDA, Dream, LLaDA-MoE and RND1 as a GGUF file describes it: its
//! hyperparameters, its tensors, RoPE, and the errors of a file that does not fit. What computes
//! with it is `forward` over a backend (`cpu`, `cuda`).

mod config;
mod preparation;
pub mod rope;
pub mod weights;

pub use config::{Family, ModelConfig, MoeConfig, RopeStyle};
pub use preparation::Preparation;

use crate::quant::GgmlType;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    #[error(
        "{file}: architecture '{arch}' is not supported (dllm runs 'llada', 'dream', 'llada-moe' and 'rnd1' GGUFs)"
    )]
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
        "{file}: tensor '{tensor}' uses type {ty}, which dllm does not support yet (it runs every llama.cpp weight type but TQ1_0, TQ2_0 and MXFP4); pick another quantization of the model"
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
    /// The device backend failed (`cuda::CudaError` for a GPU).
    #[error("{0}")]
    Device(std::sync::Arc<dyn std::error::Error + Send + Sync>),
    #[error("the K/V cache holds {cached} positions but the canvas has {canvas}; run a full pass that fills it first")]
    CacheMismatch { cached: usize, canvas: usize },
}
