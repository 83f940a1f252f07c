//! The model on each backend: the layer loop put together with the CPU's or a GPU's
//! weights and buffers, as the engine loads it.

use std::sync::Arc;

use super::Transformer;
use crate::backend::Loaded;
use crate::cpu::pack_cache::CacheWrite;
use crate::cpu::{CpuBackend, CpuLoadOptions};
use crate::cuda::{CudaBackend, GpuInfo, Kernels};
use crate::gguf::GgufFile;
use crate::model::{ModelError, Preparation};

/// A model on the CPU.
pub type CpuModel = Transformer<CpuBackend>;

/// A model on an NVIDIA GPU.
pub type CudaModel = Transformer<CudaBackend>;

impl CpuModel {
    pub fn load(gguf: Arc<GgufFile>) -> Result<CpuModel, ModelError> {
        Self::load_with(gguf, CpuLoadOptions::default(), &|_| {})
    }

    /// `load`, reporting the fraction of the weights prepared (repacked) so far to `progress`,
    /// with `options` (a pack cache directory, wide Q4_K weights).
    pub fn load_with(
        gguf: Arc<GgufFile>,
        options: CpuLoadOptions,
        progress: &dyn Fn(f32),
    ) -> Result<CpuModel, ModelError> {
        let Loaded { backend, config, weights } = CpuBackend::load(&gguf, options, progress)?;
        Ok(Transformer::new(gguf, config, weights, backend))
    }

    /// How the weights were prepared.
    pub fn prepared(&self) -> &Preparation {
        self.backend().prepared()
    }

    /// Whether the load widened Q4_K weights (the faster-weights mode on a path that uses it).
    pub fn widened(&self) -> bool {
        self.weights().products().any(|m| m.packed.as_ref().is_some_and(|p| p.wide))
    }

    /// The background write of the pack cache file this load started, if any.
    pub fn take_pack_cache_write(&mut self) -> Option<CacheWrite> {
        self.backend_mut().take_pack_cache_write()
    }
}

impl CudaModel {
    /// GPU memory the model in `gguf` needs.
    pub fn bytes_needed(gguf: &GgufFile) -> Result<u64, ModelError> {
        CudaBackend::bytes_needed(gguf)
    }

    pub fn load(gguf: Arc<GgufFile>, gpu: &GpuInfo) -> Result<CudaModel, ModelError> {
        Self::load_with_progress(gguf, gpu, &|_| {})
    }

    /// `load`, reporting the fraction of the layers uploaded so far to `progress`.
    pub fn load_with_progress(
        gguf: Arc<GgufFile>,
        gpu: &GpuInfo,
        progress: &dyn Fn(f32),
    ) -> Result<CudaModel, ModelError> {
        let Loaded { backend, config, weights } = CudaBackend::load(&gguf, gpu, progress)?;
        Ok(Transformer::new(gguf, config, weights, backend))
    }

    pub fn gpu(&self) -> &GpuInfo {
        self.backend().gpu()
    }

    /// The kernels, for tests that check each against the CPU function it replaces.
    pub fn kernels(&self) -> (&Arc<cudarc::driver::CudaStream>, &Kernels) {
        self.backend().kernels()
    }
}
