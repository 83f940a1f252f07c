//! The CPU backend: the forward pass's primitives (`backend`) over the operations in `ops`,
//! which run on the SIMD kernels in `kernels`; the packed weights' cache file (`pack_cache`).

mod backend;
pub mod kernels;
mod kv_cache;
pub mod ops;
pub mod pack_cache;

pub use backend::{CpuBackend, CpuLoadOptions, CpuMatrix, widens_weights};
pub use kernels::{Isa, active_isa, cpu_flags, int8_peak};
