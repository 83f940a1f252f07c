//! The forward pass on an NVIDIA GPU: step for step the CPU pass (`model::CpuModel`), with the
//! weights uploaded once in their GGUF blocks and every operation a kernel from kernels/. Within
//! a pass nothing waits for the GPU until the logits of the requested rows are copied back.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, PushKernelArg};

use super::launch::{blocks, cfg, ensure, launch};
use super::linear::{Activations, GpuMatrix, QuantizedInput, upload_bytes};
use super::{CudaError, GpuInfo, Kernels};
use crate::gguf::GgufFile;
use crate::model::weights::{MatrixRef, Weights};
use crate::model::{Forward, ModelConfig, ModelError, Pass, RopeStyle, check_pass};
use crate::ops::rope::RopeTable;

use super::row_rule::RowChooser;
use crate::sampler::RowRule;

struct GpuLayer {
    attn_norm: CudaSlice<f32>,
    ffn_norm: CudaSlice<f32>,
    bq: Option<CudaSlice<f32>>,
    bk: Option<CudaSlice<f32>>,
    bv: Option<CudaSlice<f32>>,
    wq: GpuMatrix,
    wk: GpuMatrix,
    wv: GpuMatrix,
    wo: GpuMatrix,
    gate: GpuMatrix,
    up: GpuMatrix,
    down: GpuMatrix,
}

/// The activation buffers a product reads, so that one quantization serves every product that
/// shares an input (q/k/v, gate/up).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Input {
    H,
    Att,
    Gate,
    Head,
}

/// int8 activations of one input, and which input and format they hold.
struct Quantized {
    buffers: QuantizedInput,
    holds: Option<(Input, Activations)>,
}

/// Device buffers, grown to the largest canvas seen and then reused.
struct Scratch {
    x: CudaSlice<f32>,
    h: CudaSlice<f32>,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    att: CudaSlice<f32>,
    gate: CudaSlice<f32>,
    up: CudaSlice<f32>,
    all_k: CudaSlice<f32>,
    all_v: CudaSlice<f32>,
    head: CudaSlice<f32>,
    head_rows: CudaSlice<i32>,
    logits: CudaSlice<f32>,
    cos: CudaSlice<f32>,
    sin: CudaSlice<f32>,
    quantized: Quantized,
    chooser: RowChooser,
}

/// Each layer's keys (after RoPE) and values from the last `FillCache` pass.
struct GpuCache {
    len: usize,
    keys: Vec<CudaSlice<f32>>,
    values: Vec<CudaSlice<f32>>,
}

pub struct CudaModel {
    gguf: Arc<GgufFile>,
    config: ModelConfig,
    gpu: GpuInfo,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    token_embd: MatrixRef,
    layers: Vec<GpuLayer>,
    output_norm: CudaSlice<f32>,
    output: GpuMatrix,
    scratch: Scratch,
    cache: GpuCache,
    rope: RopeTable,
    /// Host staging for the window's embeddings and the LM head's row indices.
    host_x: Vec<f32>,
    host_rows: Vec<i32>,
}

impl CudaModel {
    /// GPU memory the model needs: its matrices as uploaded, plus activations and the K/V cache
    /// for a full context.
    pub fn bytes_needed(gguf: &GgufFile) -> Result<u64, ModelError> {
        let c = ModelConfig::from_gguf(gguf)?;
        let mut w = Weights::locate(gguf, &c)?;
        let matrices: u64 = w.products_mut().map(|m| upload_bytes(m) as u64).sum();
        let ctx = c.context_length.min(4096) as u64;
        let (d, kv, ff) = (c.n_embd as u64, (c.n_head_kv * c.head_dim) as u64, c.n_ff as u64);
        let activations = ctx * (4 * d + 4 * kv + 3 * ff) * 4 + ctx * d.max(ff) * 2;
        let cache = c.n_layer as u64 * ctx * kv * 2 * 4;
        let logits = 1024 * c.n_vocab as u64 * 4;
        Ok(matrices + activations + cache + logits)
    }

    /// Uploads the model to `gpu` and compiles (or loads cached) kernels for it. The host pages
    /// of every uploaded matrix are released; only the embedding table, read a row at a time for
    /// the canvas tokens, stays mapped.
    pub fn load(gguf: Arc<GgufFile>, gpu: &GpuInfo) -> Result<CudaModel, ModelError> {
        Self::load_with_progress(gguf, gpu, &|_| {})
    }

    /// `load`, reporting the fraction of the layers uploaded so far to `progress`.
    pub fn load_with_progress(
        gguf: Arc<GgufFile>,
        gpu: &GpuInfo,
        progress: &dyn Fn(f32),
    ) -> Result<CudaModel, ModelError> {
        let config = ModelConfig::from_gguf(&gguf)?;
        if ![32, 64, 128].contains(&config.head_dim) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA attention kernel handles head sizes 32, 64 and 128, not {}; run with --device cpu",
                config.head_dim
            ))
            .into());
        }
        let weights = Weights::locate(&gguf, &config)?;
        let ctx = CudaContext::new(gpu.ordinal).map_err(CudaError::driver("opening the GPU"))?;
        let stream = ctx.default_stream();
        let kernels = Kernels::load(&ctx, &gpu.arch())?;
        let vector = |v: &[f32]| stream.clone_htod(v).map_err(CudaError::driver("uploading weights"));
        let embd = weights.token_embd.offset;
        let matrix = |m: &MatrixRef| -> Result<GpuMatrix, ModelError> {
            let g = GpuMatrix::upload(&gguf, &stream, m)?;
            if m.offset != embd {
                gguf.release(m.offset as u64, m.n_bytes as u64);
            }
            Ok(g)
        };
        let mut layers = Vec::with_capacity(config.n_layer);
        for (i, l) in weights.layers.iter().enumerate() {
            progress(i as f32 / weights.layers.len() as f32);
            let optional = |b: &Option<Vec<f32>>| b.as_deref().map(vector).transpose();
            layers.push(GpuLayer {
                attn_norm: vector(&l.attn_norm)?,
                ffn_norm: vector(&l.ffn_norm)?,
                bq: optional(&l.bq)?,
                bk: optional(&l.bk)?,
                bv: optional(&l.bv)?,
                wq: matrix(&l.wq)?,
                wk: matrix(&l.wk)?,
                wv: matrix(&l.wv)?,
                wo: matrix(&l.wo)?,
                gate: matrix(&l.gate)?,
                up: matrix(&l.up)?,
                down: matrix(&l.down)?,
            });
        }
        let output = GpuMatrix::upload(&gguf, &stream, &weights.output)?;
        let output_norm = vector(&weights.output_norm)?;
        let empty = || stream.alloc_zeros::<f32>(1).map_err(CudaError::driver("allocating activations"));
        let scratch = Scratch {
            x: empty()?,
            h: empty()?,
            q: empty()?,
            k: empty()?,
            v: empty()?,
            att: empty()?,
            gate: empty()?,
            up: empty()?,
            all_k: empty()?,
            all_v: empty()?,
            head: empty()?,
            head_rows: stream.alloc_zeros::<i32>(1).map_err(CudaError::driver("allocating activations"))?,
            logits: empty()?,
            cos: empty()?,
            sin: empty()?,
            quantized: Quantized { buffers: QuantizedInput::new(&stream)?, holds: None },
            chooser: RowChooser::new(&stream, 1)?,
        };
        Ok(CudaModel {
            token_embd: weights.token_embd.clone(),
            gguf,
            config,
            gpu: gpu.clone(),
            stream,
            kernels,
            layers,
            output_norm,
            output,
            scratch,
            cache: GpuCache { len: 0, keys: Vec::new(), values: Vec::new() },
            rope: RopeTable::default(),
            host_x: Vec::new(),
            host_rows: Vec::new(),
        })
    }

    pub fn gpu(&self) -> &GpuInfo {
        &self.gpu
    }

    /// The kernels, for tests that check each against the CPU function it replaces.
    pub fn kernels(&self) -> (&Arc<CudaStream>, &Kernels) {
        (&self.stream, &self.kernels)
    }
}

/// The operations of a pass, on one stream with one set of kernels.
struct Ops<'a> {
    stream: &'a Arc<CudaStream>,
    kernels: &'a Kernels,
}

impl Ops<'_> {
    fn rms_norm(
        &self,
        x: &CudaSlice<f32>,
        rows: Option<&CudaSlice<i32>>,
        w: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        n: usize,
        eps: f32,
    ) -> Result<(), CudaError> {
        let d = w.len() as i32;
        let null = 0u64;
        launch(self.stream, self.kernels.get("rms_norm"), cfg((n as u32, 1), 256), |b| {
            b.arg(x);
            match rows {
                Some(r) => b.arg(r),
                None => b.arg(&null),
            };
            b.arg(w).arg(out).arg(&d).arg(&eps);
        })
    }

    fn elementwise(&self, name: &str, x: &mut CudaSlice<f32>, y: &CudaSlice<f32>, n: usize) -> Result<(), CudaError> {
        let n32 = n as i32;
        launch(self.stream, self.kernels.get(name), cfg((blocks(n, 256), 1), 256), |b| {
            b.arg(x).arg(y).arg(&n32);
        })
    }

    fn add_bias(&self, x: &mut CudaSlice<f32>, bias: &Option<CudaSlice<f32>>, n: usize) -> Result<(), CudaError> {
        let Some(bias) = bias else { return Ok(()) };
        let (total, width) = ((n * bias.len()) as i32, bias.len() as i32);
        launch(self.stream, self.kernels.get("add_bias"), cfg((blocks(total as usize, 256), 1), 256), |b| {
            b.arg(x).arg(bias).arg(&total).arg(&width);
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn rope(
        &self,
        x: &mut CudaSlice<f32>,
        s: (&CudaSlice<f32>, &CudaSlice<f32>),
        n: usize,
        n_heads: usize,
        c: &ModelConfig,
        first: usize,
    ) -> Result<(), CudaError> {
        let threads = n * n_heads * (c.rope_dims / 2);
        let args = [n as i32, n_heads as i32, c.head_dim as i32, c.rope_dims as i32, first as i32];
        let halves = i32::from(c.rope_style == RopeStyle::Halves);
        launch(self.stream, self.kernels.get("rope"), cfg((blocks(threads, 256), 1), 256), |b| {
            b.arg(x).arg(s.0).arg(s.1);
            for a in &args {
                b.arg(a);
            }
            b.arg(&halves);
        })
    }

    /// `out = input x w^T` for `n` rows, quantizing `input` first unless `q` already holds it in
    /// the matrix's format.
    fn linear(
        &self,
        w: &GpuMatrix,
        input: (&CudaSlice<f32>, Input),
        n: usize,
        out: &mut CudaSlice<f32>,
        q: &mut Quantized,
    ) -> Result<(), CudaError> {
        if w.activations != Activations::Float && q.holds != Some((input.1, w.activations)) {
            q.buffers.quantize(self.stream, self.kernels, input.0, n, w)?;
            q.holds = Some((input.1, w.activations));
        }
        w.product(self.stream, self.kernels, input.0, &q.buffers, n, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        q: &CudaSlice<f32>,
        k: &CudaSlice<f32>,
        v: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        n_rows: usize,
        n_keys: usize,
        c: &ModelConfig,
    ) -> Result<(), CudaError> {
        let name = match c.head_dim {
            32 => "attention_d32",
            64 => "attention_d64",
            _ => "attention_d128",
        };
        let args = [n_rows as i32, n_keys as i32, c.n_head as i32, c.n_head_kv as i32];
        launch(self.stream, self.kernels.get(name), cfg((blocks(n_rows, 64), c.n_head as u32), 128), |b| {
            b.arg(q).arg(k).arg(v).arg(out);
            for a in &args {
                b.arg(a);
            }
        })
    }

    fn copy(
        &self,
        src: &CudaSlice<f32>,
        from: usize,
        dst: &mut CudaSlice<f32>,
        to: usize,
        n: usize,
    ) -> Result<(), CudaError> {
        self.stream
            .memcpy_dtod(&src.slice(from..from + n), &mut dst.slice_mut(to..to + n))
            .map_err(CudaError::driver("copying keys and values"))
    }
}

impl CudaModel {
    /// Runs a pass up to the LM head: the logits of `rows` stay on the device, in
    /// `scratch.logits` as `[rows.len(), n_vocab]`. Nothing waits for the GPU.
    fn logits_on_device(&mut self, tokens: &[u32], pass: &Pass, rows: &[usize]) -> Result<(), ModelError> {
        let c = self.config.clone();
        let window = check_pass(&c, tokens, pass, rows)?;
        let (len, n, m) = (tokens.len(), window.len(), rows.len());
        let (d, kv, ff) = (c.n_embd, c.n_head_kv * c.head_dim, c.n_ff);
        let stream = self.stream.clone();
        let ops = Ops { stream: &stream, kernels: &self.kernels };
        let s = &mut self.scratch;
        match pass {
            Pass::Full => {}
            Pass::FillCache => {
                self.cache.len = len;
                for bufs in [&mut self.cache.keys, &mut self.cache.values] {
                    while bufs.len() < c.n_layer {
                        bufs.push(
                            stream
                                .alloc_zeros::<f32>(len * kv)
                                .map_err(CudaError::driver("allocating the K/V cache"))?,
                        );
                    }
                }
                for buf in self.cache.keys.iter_mut().chain(self.cache.values.iter_mut()) {
                    ensure(&stream, buf, len * kv)?;
                }
            }
            Pass::Window(_) if self.cache.len != len => {
                return Err(ModelError::CacheMismatch { cached: self.cache.len, canvas: len });
            }
            Pass::Window(_) => {
                ensure(&stream, &mut s.all_k, len * kv)?;
                ensure(&stream, &mut s.all_v, len * kv)?;
            }
        }
        for (buf, size) in [
            (&mut s.x, n * d),
            (&mut s.h, n * d.max(ff)),
            (&mut s.q, n * d),
            (&mut s.k, n * kv),
            (&mut s.v, n * kv),
            (&mut s.att, n * d),
            (&mut s.gate, n * ff),
            (&mut s.up, n * ff),
            (&mut s.head, m.max(1) * d),
            (&mut s.logits, m.max(1) * c.n_vocab),
        ] {
            ensure(&stream, buf, size)?;
        }
        ensure(&stream, &mut s.head_rows, m.max(1))?;
        s.quantized.holds = None;

        // Embeddings of the window's tokens, read from the mapped table on the host.
        self.host_x.resize(n * d, 0.0);
        let embd = self.token_embd.view(&self.gguf);
        for (row, &id) in self.host_x.chunks_exact_mut(d).zip(&tokens[window.clone()]) {
            embd.dequantize_row(id as usize, row).expect("weights validated at load");
        }
        stream
            .memcpy_htod(&self.host_x, &mut s.x.slice_mut(0..n * d))
            .map_err(CudaError::driver("uploading embeddings"))?;
        let half = c.rope_dims / 2;
        if s.cos.len() < len * half {
            self.rope.prepare(len, c.rope_dims, c.rope_base);
            let (cos, sin) = self.rope.cos_sin();
            s.cos = stream.clone_htod(cos).map_err(CudaError::driver("uploading the RoPE table"))?;
            s.sin = stream.clone_htod(sin).map_err(CudaError::driver("uploading the RoPE table"))?;
        }

        for (l, layer) in self.layers.iter().enumerate() {
            let qz = &mut s.quantized;
            ops.rms_norm(&s.x, None, &layer.attn_norm, &mut s.h, n, c.rms_eps)?;
            qz.holds = None;
            ops.linear(&layer.wq, (&s.h, Input::H), n, &mut s.q, qz)?;
            ops.linear(&layer.wk, (&s.h, Input::H), n, &mut s.k, qz)?;
            ops.linear(&layer.wv, (&s.h, Input::H), n, &mut s.v, qz)?;
            ops.add_bias(&mut s.q, &layer.bq, n)?;
            ops.add_bias(&mut s.k, &layer.bk, n)?;
            ops.add_bias(&mut s.v, &layer.bv, n)?;
            ops.rope(&mut s.q, (&s.cos, &s.sin), n, c.n_head, &c, window.start)?;
            ops.rope(&mut s.k, (&s.cos, &s.sin), n, c.n_head_kv, &c, window.start)?;
            match pass {
                Pass::Full => ops.attention(&s.q, &s.k, &s.v, &mut s.att, n, n, &c)?,
                Pass::FillCache => {
                    ops.copy(&s.k, 0, &mut self.cache.keys[l], 0, n * kv)?;
                    ops.copy(&s.v, 0, &mut self.cache.values[l], 0, n * kv)?;
                    ops.attention(&s.q, &s.k, &s.v, &mut s.att, n, n, &c)?;
                }
                Pass::Window(_) => {
                    ops.copy(&self.cache.keys[l], 0, &mut s.all_k, 0, len * kv)?;
                    ops.copy(&self.cache.values[l], 0, &mut s.all_v, 0, len * kv)?;
                    ops.copy(&s.k, 0, &mut s.all_k, window.start * kv, n * kv)?;
                    ops.copy(&s.v, 0, &mut s.all_v, window.start * kv, n * kv)?;
                    ops.attention(&s.q, &s.all_k, &s.all_v, &mut s.att, n, len, &c)?;
                }
            }
            ops.linear(&layer.wo, (&s.att, Input::Att), n, &mut s.h, qz)?;
            ops.elementwise("add_into", &mut s.x, &s.h, n * d)?;
            ops.rms_norm(&s.x, None, &layer.ffn_norm, &mut s.h, n, c.rms_eps)?;
            qz.holds = None;
            ops.linear(&layer.gate, (&s.h, Input::H), n, &mut s.gate, qz)?;
            ops.linear(&layer.up, (&s.h, Input::H), n, &mut s.up, qz)?;
            ops.elementwise("swiglu", &mut s.gate, &s.up, n * ff)?;
            ops.linear(&layer.down, (&s.gate, Input::Gate), n, &mut s.h, qz)?;
            ops.elementwise("add_into", &mut s.x, &s.h, n * d)?;
            qz.holds = None;
        }
        // Final norm and LM head only for the requested rows.
        if m == 0 {
            return Ok(());
        }
        self.host_rows.clear();
        self.host_rows.extend(rows.iter().map(|&r| (r - window.start) as i32));
        stream
            .memcpy_htod(&self.host_rows, &mut s.head_rows.slice_mut(0..m))
            .map_err(CudaError::driver("uploading row indices"))?;
        ops.rms_norm(&s.x, Some(&s.head_rows), &self.output_norm, &mut s.head, m, c.rms_eps)?;
        ops.linear(&self.output, (&s.head, Input::Head), m, &mut s.logits, &mut s.quantized)?;
        Ok(())
    }
}

impl Forward for CudaModel {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn forward_pass(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        self.logits_on_device(tokens, pass, rows)?;
        let n = rows.len() * self.config.n_vocab;
        logits.resize(n, 0.0);
        if n == 0 {
            return Ok(());
        }
        self.stream
            .memcpy_dtoh(&self.scratch.logits.slice(0..n), &mut logits[..])
            .map_err(CudaError::driver("reading logits back"))?;
        self.stream.synchronize().map_err(CudaError::driver("finishing the pass"))?;
        Ok(())
    }

    /// The rule runs in `choose_token`, one block per row, over the logits where the LM head
    /// wrote them; only a token and a confidence per row are copied back.
    fn choose_rows(
        &mut self,
        tokens: &[u32],
        pass: &Pass,
        rows: &[usize],
        rule: &RowRule,
        uniforms: &[f64],
        out: &mut Vec<(u32, f64)>,
    ) -> Result<bool, ModelError> {
        self.logits_on_device(tokens, pass, rows)?;
        let s = &mut self.scratch;
        s.chooser.choose(
            &self.stream,
            &self.kernels,
            &mut s.logits,
            rows.len(),
            self.config.n_vocab,
            rule,
            uniforms,
            out,
        )?;
        Ok(true)
    }
}
