//! ggml tensor types, their block layouts, and dequantization.

pub mod blocks;
mod dequant;
mod types;

pub use dequant::{DequantError, dequantize};
pub use types::GgmlType;
