//! The reference CPU operations of a forward pass.

pub mod attention;
mod column_blocks;
pub mod matmul;
pub mod norm;
pub mod rope;

/// `gate = silu(gate) * up`, elementwise.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}
