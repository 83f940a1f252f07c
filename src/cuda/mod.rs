//! The CUDA backend: the forward pass's primitives (`backend::Backend`) on an NVIDIA GPU, with our own
//! kernels (kernels/*.cu) compiled by NVRTC for the device found. cudarc loads the driver and
//! NVRTC at run time, so the one binary runs on machines with no CUDA at all.

mod backend;
mod device;
mod gemm_rate;
mod kernels;
mod launch;
mod linear;
mod peak;
mod row_rule;

pub use backend::CudaBackend;
pub use device::{Choice, Device, DeviceRequest, GpuInfo, MIN_COMPUTE, Probe, choose, probe};
pub use gemm_rate::{GemmRate, gemm_rates};
pub use kernels::{ARCHS, KERNELS, Kernels, compile_ptx, nvrtc_present, source};
pub use linear::GpuMatrix;
pub use peak::int8_peak;
pub use row_rule::RowChooser;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("no NVIDIA driver found (libcuda could not be loaded); run on the CPU with --device cpu")]
    NoDriver,
    #[error("no usable NVIDIA GPU: {0}; run on the CPU with --device cpu")]
    NoDevice(String),
    #[error(
        "no GPU with compute capability 8.0 or newer (found {}); dllm's kernels need Ampere or later, run with --device cpu",
        .0.join(", ")
    )]
    TooOld(Vec<String>),
    #[error("{gpu} has {free} free but the model needs {needed}; free GPU memory or run with --device cpu")]
    NotEnoughMemory { gpu: String, needed: String, free: String },
    #[error(
        "NVRTC (libnvrtc.so.12) could not be loaded, so the kernels cannot be compiled; install the CUDA runtime or `pip install nvidia-cuda-nvrtc-cu12` and put its lib folder on LD_LIBRARY_PATH"
    )]
    NoNvrtc,
    #[error("compiling kernels/{file}.cu for {arch} failed: {log}")]
    Compile { file: String, arch: String, log: String },
    #[error("CUDA driver error while {what}: {error}")]
    Driver { what: String, error: String },
    #[error("{0}")]
    Unsupported(String),
}

impl CudaError {
    /// `map_err` adapter naming what was being done; the text is only copied on an error, so it
    /// costs nothing on the per-pass path.
    pub(crate) fn driver(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> CudaError + '_ {
        move |e| CudaError::Driver { what: what.to_owned(), error: e.to_string() }
    }
}

impl From<CudaError> for crate::model::ModelError {
    fn from(e: CudaError) -> Self {
        crate::model::ModelError::Device(std::sync::Arc::new(e))
    }
}
