//! CPU kernels: run-time dispatch to SIMD implementations of the quantized dot products,
//! each checked against the scalar reference in `quant::vec_dot`.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod features;
mod peak;
mod qgemm;
pub mod repack;

pub use features::{Isa, active_isa, cpu_flags};
pub use peak::int8_peak;
pub use qgemm::{ROW_GROUP, dot_rows_q8_0, dot_rows_q8k, gemm_packed, gemm_packed_q8_0};
