//! The reference CPU operations of a forward pass.

pub mod attention;
mod column_blocks;
pub mod matmul;
pub mod norm;
pub mod rope;

use rayon::prelude::*;

/// `gate = silu(gate) * up`, elementwise, in parallel (a 148-row canvas of LLaDA-8B is 1.8M
/// values a layer; one thread with libm's expf took 3% of a step).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    const CHUNK: usize = 16 * 1024;
    let isa = crate::cpu::active_isa();
    gate.par_chunks_mut(CHUNK).zip(up.par_chunks(CHUNK)).for_each(|(g, u)| crate::cpu::swiglu_f32(isa, g, u));
}
