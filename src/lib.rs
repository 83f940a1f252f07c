//! dllm: run diffusion language models (LLaDA, Dream) from GGUF files.

pub mod gguf;
pub mod quant;
pub mod summary;
pub mod tokenizer;
