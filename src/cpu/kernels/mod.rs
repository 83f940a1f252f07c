//! The CPU's kernels: run-time dispatch to SIMD implementations of the quantized dot products,
//! each checked against the scalar reference in `quant::vec_dot`, of activation quantization
//! (`quantize`, against `quant::q8`) and of the f32 vector operations (`vec_f32`). All unsafe
//! code of the CPU backend lives here.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_f32;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_f32;
mod features;
#[cfg(target_arch = "x86_64")]
pub(crate) mod int8_dot;
mod peak;
#[cfg(target_arch = "x86_64")]
mod prefetch;
mod qgemm;
mod quantize;
pub mod repack;
mod scalar_f32;
mod vec_f32;

pub use features::{Isa, active_isa, cpu_flags};
pub use peak::{BesideDot, int8_peak, slots_beside_dot};
pub use qgemm::{
    CALL_COLS, MAX_CALL_GROUPS, PACKED_ROW_GROUP, ROW_GROUP, ahead_share, dot_rows_q8_0, dot_rows_q8_1, dot_rows_q8k,
    gemm_packed, gemm_packed_q8_0, gemm_packed_wide, packed_call_groups,
};
pub use quantize::{quantize_q8_0, quantize_q8_k};
pub use vec_f32::{
    QUERY_TILE, Rows, dot_f32, dot_rows_f32, dot_rows_tile_f32, max_f32, softmax_scaled, sum_exp_f32, swiglu_f32,
    weighted_rows_f32, weighted_rows_tile_f32,
};
