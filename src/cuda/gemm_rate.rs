//! The int8 GEMM alone on the GPU: its rate on given product shapes and canvas sizes, for
//! `dllm bench` to report against the tensor cores' peak measured in the same run.

use std::time::Instant;

use cudarc::driver::CudaContext;

use super::linear::{GpuMatrix, QuantizedInput};
use super::{CudaError, GpuInfo, Kernels};
use crate::quant::GgmlType;

/// One product's measured rate: weights of `ty`, `n_in` x `n_out`, against `rows` activation
/// rows (a part of `dllm bench`'s result files).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct GemmRate {
    pub ty: String,
    pub n_in: usize,
    pub n_out: usize,
    pub rows: usize,
    pub macs_per_s: f64,
}

/// Products timed per measurement, after one that warms up: enough that launch overhead and
/// the host clock are small against the GPU time (even 128 x 4096 x 1024 takes ~10 us).
const REPEATS: usize = 50;

/// Multiply-adds per second of `x (rows x n_in) * W^T` for each weight shape (type, n_in, n_out)
/// and each row count, the activations quantized once beforehand (as the forward pass shares one
/// quantization between the products of one input). The weights are a fixed byte pattern: the
/// kernels' time does not depend on the values.
pub fn gemm_rates(
    gpu: &GpuInfo,
    shapes: &[(GgmlType, usize, usize)],
    rows: &[usize],
) -> Result<Vec<GemmRate>, CudaError> {
    let ctx = CudaContext::new(gpu.ordinal).map_err(CudaError::driver("opening the GPU"))?;
    let kernels = Kernels::load(&ctx, &gpu.arch())?;
    let stream = ctx.default_stream();
    let mut rates = Vec::new();
    for &(ty, n_in, n_out) in shapes {
        let bytes: Vec<u8> = (0..n_in / ty.block_size() * n_out * ty.type_size())
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f)
            .collect();
        let w = GpuMatrix::from_blocks(&stream, ty, n_in, n_out, &bytes)?;
        for &n in rows {
            let x: Vec<f32> = (0..n * n_in).map(|i| ((i % 97) as f32 - 48.0) / 16.0).collect();
            let x = stream.clone_htod(&x).map_err(CudaError::driver("uploading activations"))?;
            let mut out = stream.alloc_zeros::<f32>(n * n_out).map_err(CudaError::driver("allocating"))?;
            let mut q = QuantizedInput::new(&stream)?;
            q.quantize(&stream, &kernels, &x, n, &w)?;
            w.product(&stream, &kernels, &x, &q, n, &mut out)?;
            stream.synchronize().map_err(CudaError::driver("running a product"))?;
            let start = Instant::now();
            for _ in 0..REPEATS {
                w.product(&stream, &kernels, &x, &q, n, &mut out)?;
            }
            stream.synchronize().map_err(CudaError::driver("running a product"))?;
            let seconds = start.elapsed().as_secs_f64();
            rates.push(GemmRate {
                ty: ty.to_string(),
                n_in,
                n_out,
                rows: n,
                macs_per_s: (REPEATS * n * n_in * n_out) as f64 / seconds,
            });
        }
    }
    Ok(rates)
}
