//! ggml tensor types, their block layouts, dequantization, and the 8-bit integer dot products.

pub mod blocks;
mod dequant;
pub mod q8;
mod types;
pub mod vec_dot;

pub use dequant::{DequantError, dequantize};
pub use types::GgmlType;
