//! dllm: run diffusion language models (LLaDA, Dream) from GGUF files.

#[cfg(feature = "app")]
pub mod app;
pub mod backend;
pub mod bench;
pub mod chat;
pub mod conversation;
pub mod cpu;
pub mod cuda;
pub mod decoding;
pub mod demo;
pub mod engine;
pub mod export;
pub mod forward;
pub mod gguf;
pub mod hub;
pub mod model;
pub mod paths;
pub mod quant;
pub mod server;
pub mod summary;
pub mod tokenizer;
