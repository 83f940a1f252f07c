//! The GPU's int8 tensor-core peak, measured with kernels/peak.cu in the same run as the
//! benchmark it is compared with.

use std::time::Instant;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};

use super::{CudaError, GpuInfo, Kernels};

/// Multiply-adds of one m16n8k32 mma.
const MMA_MACS: f64 = (16 * 8 * 32) as f64;
/// Independent mma chains per warp in the kernel (kernels/peak.cu's CHAINS).
const CHAINS: f64 = 4.0;

/// int8 multiply-adds per second the tensor cores of `gpu` sustain.
pub fn int8_peak(gpu: &GpuInfo) -> Result<f64, CudaError> {
    let ctx = CudaContext::new(gpu.ordinal).map_err(CudaError::driver("opening the GPU"))?;
    let sms = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(CudaError::driver("reading the SM count"))?;
    let kernels = Kernels::load(&ctx, &gpu.arch())?;
    let stream = ctx.default_stream();
    let mut sink = stream.alloc_zeros::<i32>(1).map_err(CudaError::driver("allocating"))?;
    let (blocks, warps) = (sms as u32 * 8, 8u32);
    let config = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (warps * 32, 1, 1), shared_mem_bytes: 0 };
    let mut run = |iters: i32| -> Result<f64, CudaError> {
        let start = Instant::now();
        let mut b = stream.launch_builder(kernels.get("int8_mma_peak"));
        b.arg(&iters).arg(&mut sink);
        // SAFETY: the kernel takes (int iters, int* sink); sink holds one int.
        unsafe { b.launch(config) }.map_err(CudaError::driver("running the peak kernel"))?;
        stream.synchronize().map_err(CudaError::driver("running the peak kernel"))?;
        Ok(start.elapsed().as_secs_f64())
    };
    run(256)?; // warm-up: clocks up, module loaded
    let iters = 20_000;
    let seconds = run(iters)?;
    Ok(blocks as f64 * warps as f64 * iters as f64 * CHAINS * MMA_MACS / seconds)
}
