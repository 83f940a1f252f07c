//! Weight matrices on the GPU and their products: int8 tensor-core kernels over the GGUF blocks
//! for the K-quants and Q8_0 (activations quantized on the GPU first), float kernels otherwise.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, PushKernelArg};

use super::launch::{blocks, cfg, cfg3, ensure, launch};
use super::{CudaError, Kernels};
use crate::gguf::GgufFile;
use crate::model::ModelError;
use crate::model::weights::MatrixRef;
use crate::quant::{GgmlType, dequantize};

/// How a matrix's activations are quantized before its product.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Activations {
    /// ggml's Q8_K (256 values per f32 scale): the K-quants.
    Q8K,
    /// ggml's Q8_0 (32 values per f16 scale): Q8_0 weights.
    Q8_0,
    /// f32 as they are: float weights.
    Float,
}

/// A weight matrix on the GPU, in its GGUF blocks where a kernel reads them, else as f32.
pub struct GpuMatrix {
    kernel: &'static str,
    /// The kernel's mixture-of-experts form (qgemm.cu's `*_experts`).
    experts_kernel: &'static str,
    pub(super) activations: Activations,
    pub(super) n_in: usize,
    n_out: usize,
    data: CudaSlice<u8>,
}

/// Bytes a matrix takes on the GPU: its blocks, or f32 values for types without an int8 kernel.
pub(super) fn upload_bytes(m: &MatrixRef) -> usize {
    match gpu_form(m.ty, m.n_in) {
        Some(_) => m.n_bytes,
        None => m.n_in * m.n_out * 4,
    }
}

/// The kernel and activation format for a matrix kept in its own type, or None when it is
/// dequantized to f32 at upload (types without an int8 kernel; Q8_0 rows not a whole number of
/// 256-value tiles).
pub(super) fn gpu_form(ty: GgmlType, n_in: usize) -> Option<(&'static str, &'static str, Activations)> {
    match ty {
        GgmlType::Q4_K => Some(("qgemm_q4_k", "qgemm_q4_k_experts", Activations::Q8K)),
        GgmlType::Q5_K => Some(("qgemm_q5_k", "qgemm_q5_k_experts", Activations::Q8K)),
        GgmlType::Q6_K => Some(("qgemm_q6_k", "qgemm_q6_k_experts", Activations::Q8K)),
        GgmlType::Q8_0 if n_in.is_multiple_of(256) => Some(("qgemm_q8_0", "qgemm_q8_0_experts", Activations::Q8_0)),
        GgmlType::F32 => Some(("gemm_f32", "gemm_f32_experts", Activations::Float)),
        GgmlType::F16 => Some(("gemm_f16", "gemm_f16_experts", Activations::Float)),
        GgmlType::BF16 => Some(("gemm_bf16", "gemm_bf16_experts", Activations::Float)),
        _ => None,
    }
}

impl GpuMatrix {
    /// Uploads one of the file's matrices, in its own blocks where a kernel reads them.
    pub(super) fn upload(gguf: &GgufFile, stream: &Arc<CudaStream>, m: &MatrixRef) -> Result<GpuMatrix, ModelError> {
        let bytes = gguf.data_range(m.offset as u64, m.n_bytes as u64);
        if gpu_form(m.ty, m.n_in).is_some() {
            return Ok(GpuMatrix::from_blocks(stream, m.ty, m.n_in, m.n_out, bytes)?);
        }
        let mut values = vec![0f32; m.n_in * m.n_out];
        dequantize(m.ty, bytes, &mut values).map_err(|e| ModelError::BadTensor {
            file: gguf.path().display().to_string(),
            tensor: format!("matrix at offset {}", m.offset),
            what: e.to_string(),
        })?;
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(GpuMatrix::from_blocks(stream, GgmlType::F32, m.n_in, m.n_out, &raw)?)
    }

    /// A matrix of a type with a kernel, from its bytes in GGUF layout.
    pub(super) fn from_blocks(
        stream: &Arc<CudaStream>,
        ty: GgmlType,
        n_in: usize,
        n_out: usize,
        bytes: &[u8],
    ) -> Result<GpuMatrix, CudaError> {
        let (kernel, experts_kernel, activations) =
            gpu_form(ty, n_in).ok_or_else(|| CudaError::Unsupported(format!("no GPU kernel for {ty} x {n_in}")))?;
        let data = stream.clone_htod(bytes).map_err(CudaError::driver("uploading weights"))?;
        Ok(GpuMatrix { kernel, experts_kernel, activations, n_in, n_out, data })
    }

    /// The matrix's device address, for the tables of expert matrices a MoE product reads.
    /// The weights are written once, at upload, and only read after.
    pub(super) fn address(&self, stream: &CudaStream) -> u64 {
        let (address, _read) = self.data.device_ptr(stream);
        address
    }

    /// `out = input x self^T` for `n` rows. The int8 kernels read `q`, which must hold `input`
    /// quantized for this matrix (`QuantizedInput::quantize`); the float ones read `input`.
    pub(super) fn product(
        &self,
        stream: &CudaStream,
        kernels: &Kernels,
        input: &CudaSlice<f32>,
        q: &QuantizedInput,
        n: usize,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let dims = [n as i32, self.n_in as i32, self.n_out as i32];
        if self.activations == Activations::Float {
            return launch(stream, kernels.get(self.kernel), cfg((blocks(self.n_out, 16), blocks(n, 16)), 256), |b| {
                b.arg(&self.data).arg(input).arg(out);
                for a in &dims {
                    b.arg(a);
                }
            });
        }
        launch(stream, kernels.get(self.kernel), cfg((blocks(self.n_out, 64), blocks(n, 32)), 128), |b| {
            b.arg(&self.data).arg(&q.q).arg(&q.d).arg(&q.bsums).arg(out);
            for a in &dims {
                b.arg(a);
            }
        })
    }
}

/// A mixture-of-experts product: for each expert e, its rows `starts[e]..starts[e + 1]` of the
/// gathered input times its matrix (`table[e]`, the device addresses of matrices of this one's
/// type and shape, this one among them), into the same rows of `out`; no expert takes more than
/// `max_rows` rows. The int8 kernels read `q`, which must hold the input quantized.
pub(super) struct ExpertProduct<'a> {
    pub table: &'a CudaSlice<u64>,
    pub starts: &'a CudaSlice<i32>,
    pub n_expert: usize,
    pub max_rows: usize,
}

impl GpuMatrix {
    pub(super) fn product_experts(
        &self,
        stream: &CudaStream,
        kernels: &Kernels,
        experts: &ExpertProduct,
        input: &CudaSlice<f32>,
        q: &QuantizedInput,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), CudaError> {
        let dims = [self.n_in as i32, self.n_out as i32];
        let (table, starts, z) = (experts.table, experts.starts, experts.n_expert as u32);
        let f = kernels.get(self.experts_kernel);
        if self.activations == Activations::Float {
            let grid = (blocks(self.n_out, 16), blocks(experts.max_rows, 16), z);
            return launch(stream, f, cfg3(grid, 256), |b| {
                b.arg(table).arg(starts).arg(input).arg(out).arg(&dims[0]).arg(&dims[1]);
            });
        }
        let grid = (blocks(self.n_out, 64), blocks(experts.max_rows, 32), z);
        launch(stream, f, cfg3(grid, 128), |b| {
            b.arg(table).arg(starts).arg(&q.q).arg(&q.d).arg(&q.bsums).arg(out).arg(&dims[0]).arg(&dims[1]);
        })
    }
}

/// int8 activations, their scales and (Q8_K) their 16-value sums, grown to the largest input.
pub(super) struct QuantizedInput {
    q: CudaSlice<i8>,
    d: CudaSlice<f32>,
    bsums: CudaSlice<i16>,
}

impl QuantizedInput {
    pub(super) fn new(stream: &Arc<CudaStream>) -> Result<QuantizedInput, CudaError> {
        let what = "allocating activations";
        Ok(QuantizedInput {
            q: stream.alloc_zeros::<i8>(1).map_err(CudaError::driver(what))?,
            d: stream.alloc_zeros::<f32>(1).map_err(CudaError::driver(what))?,
            bsums: stream.alloc_zeros::<i16>(1).map_err(CudaError::driver(what))?,
        })
    }

    /// Quantizes `n` rows of `input` in the format `w`'s kernel reads (an int8 kernel's).
    pub(super) fn quantize(
        &mut self,
        stream: &Arc<CudaStream>,
        kernels: &Kernels,
        input: &CudaSlice<f32>,
        n: usize,
        w: &GpuMatrix,
    ) -> Result<(), CudaError> {
        ensure(stream, &mut self.q, n * w.n_in)?;
        ensure(stream, &mut self.d, n * w.n_in / 32)?;
        ensure(stream, &mut self.bsums, n * w.n_in / 16)?;
        let n_in = w.n_in as i32;
        match w.activations {
            Activations::Q8K => {
                launch(stream, kernels.get("quantize_q8_k"), cfg(((w.n_in / 256) as u32, n as u32), 256), |b| {
                    b.arg(input).arg(&n_in).arg(&mut self.q).arg(&mut self.d).arg(&mut self.bsums);
                })
            }
            Activations::Q8_0 => {
                launch(stream, kernels.get("quantize_q8_0"), cfg((blocks(w.n_in / 32, 8), n as u32), 256), |b| {
                    b.arg(input).arg(&n_in).arg(&mut self.q).arg(&mut self.d);
                })
            }
            Activations::Float => Ok(()),
        }
    }
}
