//! The integration tests, linked into one test binary: each binary links the whole app
//! (egui, eframe, tokenizers, cudarc), so one binary instead of fifteen saves CI minutes of
//! linking and gigabytes of disk. Run one area with `cargo test --test suite <module>::`.

mod common;

#[cfg(feature = "app")]
mod app;
mod architecture;
mod bench_table;
mod careless;
mod cli;
mod cuda;
mod demo_model;
mod dequant;
mod export;
mod fast_traces;
mod gguf_corrupt;
mod hub;
mod kernels;
mod logits;
mod moe;
mod pack_cache;
mod sampler_options;
mod server;
mod session;
#[cfg(feature = "app")]
mod snapshots;
mod tokenizer;
mod traces;
