//! The engine API that the CLI and the desktop app share: a model session loaded once, running
//! on its own thread, that generates while emitting one event per denoising step. Errors come
//! back as values; a generation can be cancelled between steps.

mod session;

pub use session::{Event, Finished, Generation, LoadOptions, ModelInfo, Prompt, Session, StepEvent};

use crate::model::ModelError;
use crate::tokenizer::TokenizerError;

#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Load(String),
    #[error("{0}")]
    Tokenizer(String),
    #[error("{0}")]
    Template(String),
    #[error("invalid settings: {0}")]
    Invalid(String),
    #[error("{0}")]
    Model(String),
    #[error("the engine stopped unexpectedly: {0}")]
    Internal(String),
}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(e.to_string())
    }
}

impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(e.to_string())
    }
}

impl From<crate::sampler::SamplerError> for EngineError {
    fn from(e: crate::sampler::SamplerError) -> Self {
        match e {
            crate::sampler::SamplerError::Invalid(s) => EngineError::Invalid(s),
            crate::sampler::SamplerError::Model(m) => m.into(),
        }
    }
}
