//! Small helpers every kernel launch site shares: grid sizes, launch configs, grown buffers.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, ValidAsZeroBits};

use super::CudaError;

/// Blocks of `per` items that cover `n` (at least one).
pub(super) fn blocks(n: usize, per: usize) -> u32 {
    n.div_ceil(per).max(1) as u32
}

pub(super) fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    cfg3((grid.0, grid.1, 1), block)
}

pub(super) fn cfg3(grid: (u32, u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: grid, block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

/// Makes `buf` hold at least `n` elements (its contents are not kept).
pub(super) fn ensure<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    n: usize,
) -> Result<(), CudaError> {
    if buf.len() < n {
        *buf = stream.alloc_zeros::<T>(n).map_err(CudaError::driver("allocating activations"))?;
    }
    Ok(())
}

/// Launches `f` with the arguments pushed by `args`.
pub(super) fn launch<'a>(
    stream: &'a CudaStream,
    f: &'a CudaFunction,
    config: LaunchConfig,
    args: impl FnOnce(&mut cudarc::driver::LaunchArgs<'a>),
) -> Result<(), CudaError> {
    let mut builder = stream.launch_builder(f);
    args(&mut builder);
    // SAFETY: every launch site passes the argument list its kernel declares (kernels/*.cu), with
    // device buffers at least as long as the sizes it passes.
    unsafe { builder.launch(config) }.map(|_| ()).map_err(CudaError::driver("launching a kernel"))
}
