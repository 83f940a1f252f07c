//! ggml tensor types, their block layouts, dequantization, and the 8-bit integer dot products.

pub mod blocks;
mod dequant;
pub mod iq;
#[rustfmt::skip]
mod iq_grids;
pub mod q8;
mod types;
pub mod vec_dot;

pub use dequant::{DequantError, dequantize};
pub use types::{Activations, GgmlType};
