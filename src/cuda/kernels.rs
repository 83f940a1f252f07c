//! The CUDA C++ sources in kernels/, compiled by NVRTC for the GPU found at run time.
//!
//! Why NVRTC at run time rather than PTX built ahead: the build needs no CUDA toolkit (so one
//! `cargo build` works everywhere), and each GPU gets code for its own architecture. The PTX is
//! cached on disk, keyed by the source, the architecture and the NVRTC version, so only the first
//! load on a machine pays for compilation.

use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use sha2::{Digest, Sha256};

use super::CudaError;

const COMMON: &str = include_str!("../../kernels/common.cuh");

/// (file stem, source, kernels it defines).
pub const KERNELS: [(&str, &str, &[&str]); 7] = [
    (
        "elementwise",
        include_str!("../../kernels/elementwise.cu"),
        &["rms_norm", "add_bias", "add_into", "swiglu", "rope"],
    ),
    ("quantize", include_str!("../../kernels/quantize.cu"), &["quantize_q8_k", "quantize_q8_0"]),
    (
        "qgemm",
        include_str!("../../kernels/qgemm.cu"),
        &[
            "qgemm_q4_k",
            "qgemm_q5_k",
            "qgemm_q6_k",
            "qgemm_q8_0",
            "gemm_f32",
            "gemm_f16",
            "gemm_bf16",
            "qgemm_q4_k_experts",
            "qgemm_q5_k_experts",
            "qgemm_q6_k_experts",
            "qgemm_q8_0_experts",
            "gemm_f32_experts",
            "gemm_f16_experts",
            "gemm_bf16_experts",
        ],
    ),
    ("attention", include_str!("../../kernels/attention.cu"), &["attention_d32", "attention_d64", "attention_d128"]),
    ("rows", include_str!("../../kernels/rows.cu"), &["choose_token"]),
    ("moe", include_str!("../../kernels/moe.cu"), &["moe_route", "moe_group", "gather_rows", "moe_combine"]),
    ("peak", include_str!("../../kernels/peak.cu"), &["int8_mma_peak"]),
];

/// The architectures CI compiles every kernel for (Ampere and Hopper).
pub const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// Whether the NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// A kernel file's source with the shared header pasted in (NVRTC is given no include path).
pub fn source(file: &str) -> Option<String> {
    KERNELS.iter().find(|k| k.0 == file).map(|k| k.1.replace("#include \"common.cuh\"", COMMON))
}

/// PTX of one kernel file for `arch` (e.g. "sm_90").
pub fn compile_ptx(file: &str, arch: &str) -> Result<String, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoNvrtc);
    }
    let src = source(file).ok_or_else(|| CudaError::Unsupported(format!("no kernel file '{file}'")))?;
    let options = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some(format!("{file}.cu")),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, options).map_err(|e| CudaError::Compile {
        file: file.into(),
        arch: arch.into(),
        log: match e {
            CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
            other => other.to_string(),
        },
    })?;
    Ok(ptx.to_src())
}

/// Compiled PTX from the disk cache, compiling (and caching) it on a miss. A cache that cannot
/// be written only costs the next load a compilation.
fn cached_ptx(file: &str, arch: &str) -> Result<String, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); the call only writes the two integers.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    let version = format!("{major}.{minor}");
    let key: String = Sha256::digest(format!("{arch}\n{version}\n{}", source(file).unwrap_or_default()))
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let path: PathBuf = crate::paths::cache_dir().join("ptx").join(format!("{file}-{arch}-{key}.ptx"));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        return Ok(ptx);
    }
    let ptx = compile_ptx(file, arch)?;
    if let Some(dir) = path.parent() {
        let partial = path.with_extension(format!("{}.partial", std::process::id()));
        let _ = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&partial, &ptx))
            .and_then(|_| std::fs::rename(&partial, &path));
    }
    Ok(ptx)
}

/// Every kernel, loaded into one context.
pub struct Kernels {
    functions: Vec<(&'static str, CudaFunction)>,
}

impl Kernels {
    pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Kernels, CudaError> {
        let mut functions = Vec::new();
        for (file, _, names) in KERNELS {
            let ptx = cached_ptx(file, arch)?;
            let module =
                ctx.load_module(Ptx::from_src(ptx)).map_err(CudaError::driver(&format!("loading {file}.ptx")))?;
            for &name in names {
                let f = module.load_function(name).map_err(CudaError::driver(&format!("finding kernel {name}")))?;
                functions.push((name, f));
            }
        }
        Ok(Kernels { functions })
    }

    /// A kernel by name; the names are the fixed list in `KERNELS`.
    pub fn get(&self, name: &str) -> &CudaFunction {
        &self.functions.iter().find(|f| f.0 == name).unwrap_or_else(|| panic!("kernel {name} is not in KERNELS")).1
    }
}
