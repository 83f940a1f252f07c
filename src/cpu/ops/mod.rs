//! The CPU backend's operations of a forward pass, on the kernels of `cpu::kernels`.

pub mod attention;
mod column_blocks;
pub mod matmul;
pub mod norm;

use rayon::prelude::*;

/// Values per parallel task of the elementwise operations (a 148-row canvas of LLaDA-8B is 0.6M
/// to 1.8M values per operation and layer).
const ELEMENTWISE_CHUNK: usize = 16 * 1024;

/// `gate = silu(gate) * up`, elementwise, in parallel (one thread with libm's expf took 3% of
/// a step).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    let isa = crate::cpu::kernels::active_isa();
    gate.par_chunks_mut(ELEMENTWISE_CHUNK)
        .zip(up.par_chunks(ELEMENTWISE_CHUNK))
        .for_each(|(g, u)| crate::cpu::kernels::swiglu_f32(isa, g, u));
}

/// `x += y`, elementwise, in parallel (the residual adds).
pub fn add_into(x: &mut [f32], y: &[f32]) {
    x.par_chunks_mut(ELEMENTWISE_CHUNK).zip(y.par_chunks(ELEMENTWISE_CHUNK)).for_each(|(x, y)| {
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
    });
}
