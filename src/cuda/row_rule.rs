//! The samplers' row rules (`backend::RowRule`) on the GPU: `choose_token` (kernels/rows.cu)
//! runs one block per row over logits already on the device, and only a token and a confidence
//! per row are copied back.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::{CudaError, Kernels};
use crate::backend::{RowConfidence, RowRule};

/// The kernel's block size (THREADS in kernels/rows.cu).
const THREADS: u32 = 512;

/// Device buffers of the rule's per-row inputs and outputs, grown to the most rows seen.
pub struct RowChooser {
    uniforms: CudaSlice<f64>,
    tokens: CudaSlice<i32>,
    confidences: CudaSlice<f64>,
    host_tokens: Vec<i32>,
    host_confidences: Vec<f64>,
}

/// The kernel's encoding of a rule: rule, temperature, top-p (1 = none), top-k (0 = none),
/// confidence.
fn encode(rule: &RowRule) -> (i32, f32, f32, i32, i32) {
    match *rule {
        RowRule::LladaGreedy { f64 } => (i32::from(f64), 0.0, 1.0, 0, 0),
        RowRule::Dream { temperature, top_p, top_k, confidence } => (
            2,
            temperature,
            top_p.unwrap_or(1.0),
            top_k.map_or(0, |k| k.min(i32::MAX as usize) as i32),
            match confidence {
                RowConfidence::Probability => 0,
                RowConfidence::Margin => 1,
                RowConfidence::NegEntropy => 2,
            },
        ),
        RowRule::Rnd1 { .. } => unreachable!("RND1's rule runs on the host (CudaBackend::chooses_rows)"),
    }
}

impl RowChooser {
    /// Buffers for up to `rows` rows.
    pub fn new(stream: &Arc<CudaStream>, rows: usize) -> Result<RowChooser, CudaError> {
        let what = "allocating the sampler's buffers";
        Ok(RowChooser {
            uniforms: stream.alloc_zeros::<f64>(rows).map_err(CudaError::driver(what))?,
            tokens: stream.alloc_zeros::<i32>(rows).map_err(CudaError::driver(what))?,
            confidences: stream.alloc_zeros::<f64>(rows).map_err(CudaError::driver(what))?,
            host_tokens: Vec::new(),
            host_confidences: Vec::new(),
        })
    }

    /// Applies `rule` to the first `rows` rows of `logits` (`[rows, n_vocab]`, consumed: Dream's
    /// filters write over them) and writes one (token, confidence) per row to `out`. `uniforms`
    /// has one number per row when the rule draws. Waits for the GPU.
    #[allow(clippy::too_many_arguments)]
    pub fn choose(
        &mut self,
        stream: &Arc<CudaStream>,
        kernels: &Kernels,
        logits: &mut CudaSlice<f32>,
        rows: usize,
        n_vocab: usize,
        rule: &RowRule,
        uniforms: &[f64],
        out: &mut Vec<(u32, f64)>,
    ) -> Result<(), CudaError> {
        out.clear();
        if rows == 0 {
            return Ok(());
        }
        assert!(logits.len() >= rows * n_vocab, "logits hold fewer than {rows} rows");
        if self.tokens.len() < rows {
            *self = RowChooser::new(stream, rows)?;
        }
        if rule.draws() {
            assert!(uniforms.len() >= rows, "a drawing rule needs a number per row");
            stream
                .memcpy_htod(&uniforms[..rows], &mut self.uniforms.slice_mut(0..rows))
                .map_err(CudaError::driver("uploading the draws' numbers"))?;
        }
        let n_vocab = n_vocab as i32;
        let (code, temperature, top_p, top_k, confidence) = encode(rule);
        let mut b = stream.launch_builder(kernels.get("choose_token"));
        b.arg(logits).arg(&n_vocab).arg(&code).arg(&temperature).arg(&top_p).arg(&top_k).arg(&confidence);
        b.arg(&self.uniforms).arg(&mut self.tokens).arg(&mut self.confidences);
        let config = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments are those `choose_token` declares, every buffer holds `rows` rows.
        unsafe { b.launch(config) }.map_err(CudaError::driver("launching choose_token"))?;
        self.host_tokens.resize(rows, 0);
        self.host_confidences.resize(rows, 0.0);
        stream
            .memcpy_dtoh(&self.tokens.slice(0..rows), &mut self.host_tokens[..])
            .map_err(CudaError::driver("reading tokens back"))?;
        stream
            .memcpy_dtoh(&self.confidences.slice(0..rows), &mut self.host_confidences[..])
            .map_err(CudaError::driver("reading confidences back"))?;
        stream.synchronize().map_err(CudaError::driver("finishing the sampler's rule"))?;
        out.extend(self.host_tokens.iter().zip(&self.host_confidences).map(|(&id, &c)| (id as u32, c)));
        Ok(())
    }
}
