//! The engine API that the CLI and the desktop app share: a model session loaded once, running
//! on its own thread, that generates while emitting one event per denoising step. Errors come
//! back as values; a generation can be cancelled between steps.

mod final_text;
mod session;

pub use final_text::FinalText;
pub use session::{
    Event, Finished, Generation, LoadOptions, ModelFile, ModelInfo, Prompt, PromptEncoder, Session, Started, StepEvent,
    max_threads,
};

use std::path::PathBuf;
use std::sync::Arc;

use crate::chat::TemplateError;
use crate::decoding::{ParamError, SamplerError};
use crate::gguf::GgufError;
use crate::model::ModelError;
use crate::tokenizer::TokenizerError;

/// What went wrong, by kind, for the front ends to match: the file, the model, the
/// tokenizer, the template, a setting (naming it), the prompt, or the engine itself.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// The file could not be read as GGUF.
    #[error(transparent)]
    File(Arc<GgufError>),
    /// The file is not a model dllm runs, or a forward pass failed.
    #[error(transparent)]
    Model(Arc<ModelError>),
    #[error(transparent)]
    Tokenizer(Arc<TokenizerError>),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("{}: no mask token (tokenizer.ggml.mask_token_id); is this a diffusion model?", .0.display())]
    NoMaskToken(PathBuf),
    /// A setting that cannot run with this model and prompt; names the setting.
    #[error("invalid settings: {0}")]
    Invalid(ParamError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error(
        "the conversation does not fit: even its last message alone takes more than the {room} tokens the context leaves beside the answer; shorten it or the answer"
    )]
    PromptTooLong { room: usize },
    /// A run that cannot go on (no progress, non-finite logits); says why.
    #[error("{0}")]
    Decoding(String),
    #[error("{asked} compute threads asked; give 1 to {max} (four per logical CPU of this machine)")]
    Threads { asked: usize, max: usize },
    /// A panic or a stopped thread: a bug, reported rather than raised.
    #[error("the engine stopped unexpectedly: {0}")]
    Internal(String),
}

/// By hand rather than `#[from]`, which would also make the setting's error the source and
/// print it twice in an error chain.
impl From<ParamError> for EngineError {
    fn from(e: ParamError) -> Self {
        EngineError::Invalid(e)
    }
}

impl From<GgufError> for EngineError {
    fn from(e: GgufError) -> Self {
        EngineError::File(Arc::new(e))
    }
}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(Arc::new(e))
    }
}

impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(Arc::new(e))
    }
}

impl From<SamplerError> for EngineError {
    fn from(e: SamplerError) -> Self {
        match e {
            SamplerError::Invalid(p) => EngineError::Invalid(p),
            SamplerError::EmptyPrompt => EngineError::EmptyPrompt,
            SamplerError::Model(m) => m.into(),
            other @ (SamplerError::NoProgress { .. } | SamplerError::NonFinite { .. }) => {
                EngineError::Decoding(other.to_string())
            }
        }
    }
}
