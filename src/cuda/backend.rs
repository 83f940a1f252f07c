//! The CUDA backend: the forward pass's primitives (`backend::Backend`) on an NVIDIA GPU, with
//! the weights uploaded once in their GGUF blocks and every operation a kernel from kernels/.
//! The operations queue on one stream; nothing waits for the GPU until the logits of the
//! requested rows (or the tokens chosen from them) are copied back.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, PushKernelArg};

use super::launch::{blocks, cfg, ensure, launch};
use super::linear::{Activations, ExpertProduct, GpuMatrix, QuantizedInput, upload_bytes};
use super::row_rule::RowChooser;
use super::{CudaError, GpuInfo, Kernels};
use crate::backend::{Act, Backend, ExpertPart, Keys, Loaded, PassShape, RowRule};
use crate::gguf::GgufFile;
use crate::model::rope::RopeTable;
use crate::model::weights::{Expert, Ffn, MatrixRef, Weights};
use crate::model::{ModelConfig, ModelError, MoeConfig, RopeStyle};

/// int8 activations of one input, and which input and format they hold, so that one
/// quantization serves every product that shares an input (q/k/v, gate/up).
struct Quantized {
    buffers: QuantizedInput,
    holds: Option<(Act, Activations)>,
}

impl Quantized {
    /// Readies the activations `x` (of role `input`, `rows` rows) for `w`'s kernel: quantized,
    /// unless the buffers hold them already in its format (`same_input`: the previous product
    /// read the same, unchanged input).
    fn prepare(
        &mut self,
        (stream, kernels): (&Arc<CudaStream>, &Kernels),
        (input, x): (Act, &CudaSlice<f32>),
        rows: usize,
        w: &GpuMatrix,
        same_input: bool,
    ) -> Result<(), CudaError> {
        if !same_input {
            self.holds = None;
        }
        if w.activations != Activations::Float && self.holds != Some((input, w.activations)) {
            self.buffers.quantize(stream, kernels, x, rows, w)?;
            self.holds = Some((input, w.activations));
        }
        Ok(())
    }
}

pub struct CudaBackend {
    gpu: GpuInfo,
    stream: Arc<CudaStream>,
    kernels: Kernels,
    /// One device buffer per `Act`, grown to the largest pass seen and then reused.
    acts: [CudaSlice<f32>; Act::COUNT],
    head_rows: CudaSlice<i32>,
    cos: CudaSlice<f32>,
    sin: CudaSlice<f32>,
    quantized: Quantized,
    chooser: RowChooser,
    /// Each layer's keys (after RoPE) and values from the last pass that filled the cache.
    cache_keys: Vec<CudaSlice<f32>>,
    cache_values: Vec<CudaSlice<f32>>,
    rope: RopeTable,
    /// Host staging for the window's embeddings and the LM head's row indices.
    host_x: Vec<f32>,
    host_rows: Vec<i32>,
    /// A norm's output when it is its input's (q/k per head), copied back after.
    norm_out: CudaSlice<f32>,
    /// A MoE layer's routing, computed on the device.
    routes: DeviceRoutes,
    /// Per layer, the device addresses of its experts' gate, up and down matrices (empty for a
    /// dense layer).
    expert_tables: Vec<Vec<CudaSlice<u64>>>,
}

/// `backend::Routes` on the device (kernels/moe.cu): each row's slots (expert, weight, gathered
/// position), each expert's gathered positions and the row at each position.
struct DeviceRoutes {
    slot_expert: CudaSlice<i32>,
    slot_weight: CudaSlice<f32>,
    slot_position: CudaSlice<i32>,
    starts: CudaSlice<i32>,
    gathered: CudaSlice<i32>,
    rows: usize,
    k: usize,
    n_expert: usize,
}

impl DeviceRoutes {
    fn new(stream: &Arc<CudaStream>) -> Result<DeviceRoutes, CudaError> {
        let what = "allocating the routing";
        let ints = || stream.alloc_zeros::<i32>(1).map_err(CudaError::driver(what));
        Ok(DeviceRoutes {
            slot_expert: ints()?,
            slot_weight: stream.alloc_zeros::<f32>(1).map_err(CudaError::driver(what))?,
            slot_position: ints()?,
            starts: ints()?,
            gathered: ints()?,
            rows: 0,
            k: 0,
            n_expert: 0,
        })
    }
}

/// The most experts kernels/moe.cu's `moe_group` handles (`MAX_EXPERTS` there).
const MAX_EXPERTS: usize = 1024;

impl CudaBackend {
    /// GPU memory the model in `gguf` needs: its matrices as uploaded, plus activations and the
    /// K/V cache for a full context.
    pub fn bytes_needed(gguf: &GgufFile) -> Result<u64, ModelError> {
        let c = ModelConfig::from_gguf(gguf)?;
        let w = Weights::locate(gguf, &c)?;
        let matrices: u64 = w.products().map(|m| upload_bytes(m) as u64).sum();
        let ctx = c.context_length.min(4096) as u64;
        // A MoE layer's gathered rows: each row once per expert it takes.
        let k = c.moe.as_ref().map_or(0, |m| m.n_expert_used) as u64;
        let ff_exp = c.moe.as_ref().map_or(0, |m| m.n_ff_exp) as u64;
        let (d, kv, ff) = (c.n_embd.max(c.q_dim()) as u64, c.kv_dim() as u64, (c.n_ff as u64).max(k * ff_exp));
        let activations = ctx * (4 * d + 4 * kv + 3 * ff + k * d) * 4 + ctx * d.max(ff) * 2;
        let cache = c.n_layer as u64 * ctx * kv * 2 * 4;
        let logits = 1024 * c.n_vocab as u64 * 4;
        Ok(matrices + activations + cache + logits)
    }

    /// The model in `gguf` uploaded to `gpu`, with kernels compiled (or loaded cached) for it:
    /// its hyperparameters, its weights on the device and the backend's buffers. The host pages
    /// of every uploaded matrix are released; only the embedding table, read a row at a time
    /// for the canvas tokens, stays mapped. `progress` hears the fraction of the layers uploaded.
    pub fn load(
        gguf: &Arc<GgufFile>,
        gpu: &GpuInfo,
        progress: &dyn Fn(f32),
    ) -> Result<Loaded<CudaBackend>, ModelError> {
        let config = ModelConfig::from_gguf(gguf)?;
        if ![32, 64, 128].contains(&config.head_dim) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA attention kernel handles head sizes 32, 64 and 128, not {}; run with --device cpu",
                config.head_dim
            ))
            .into());
        }
        if let Some(m) = config.moe.as_ref().filter(|m| m.n_expert > MAX_EXPERTS) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA routing kernel handles up to {MAX_EXPERTS} experts, not {}; run with --device cpu",
                m.n_expert
            ))
            .into());
        }
        let located = Weights::locate(gguf, &config)?;
        let ctx = CudaContext::new(gpu.ordinal).map_err(CudaError::driver("opening the GPU"))?;
        let stream = ctx.default_stream();
        let kernels = Kernels::load(&ctx, &gpu.arch())?;
        let embd = located.token_embd.offset;
        let matrix = |m: &MatrixRef| -> Result<GpuMatrix, ModelError> {
            let g = GpuMatrix::upload(gguf, &stream, m)?;
            if m.offset != embd {
                gguf.release(m.offset as u64, m.n_bytes as u64);
            }
            Ok(g)
        };
        let vector = |v: &Vec<f32>| -> Result<CudaSlice<f32>, ModelError> {
            Ok(stream.clone_htod(v).map_err(CudaError::driver("uploading weights"))?)
        };
        let weights = located.try_map(matrix, vector, progress)?;
        let expert_tables = expert_tables(&stream, &weights)?;
        let empty = || stream.alloc_zeros::<f32>(1).map_err(CudaError::driver("allocating activations"));
        let acts: Vec<CudaSlice<f32>> = (0..Act::COUNT).map(|_| empty()).collect::<Result<_, _>>()?;
        let Ok(acts) = <[CudaSlice<f32>; Act::COUNT]>::try_from(acts) else { unreachable!("one per role") };
        let backend = CudaBackend {
            gpu: gpu.clone(),
            acts,
            head_rows: stream.alloc_zeros::<i32>(1).map_err(CudaError::driver("allocating activations"))?,
            cos: empty()?,
            sin: empty()?,
            quantized: Quantized { buffers: QuantizedInput::new(&stream)?, holds: None },
            chooser: RowChooser::new(&stream, 1)?,
            cache_keys: Vec::new(),
            cache_values: Vec::new(),
            rope: RopeTable::default(),
            host_x: Vec::new(),
            host_rows: Vec::new(),
            norm_out: empty()?,
            routes: DeviceRoutes::new(&stream)?,
            expert_tables,
            kernels,
            stream,
        };
        Ok(Loaded { backend, config, weights })
    }

    pub fn gpu(&self) -> &GpuInfo {
        &self.gpu
    }

    /// The kernels, for tests that check each against the CPU function it replaces.
    pub fn kernels(&self) -> (&Arc<CudaStream>, &Kernels) {
        (&self.stream, &self.kernels)
    }

    fn elementwise(&mut self, name: &str, x: Act, y: Act, n: usize) -> Result<(), ModelError> {
        let n32 = n as i32;
        let [x, y] = self.acts.get_disjoint_mut([x as usize, y as usize]).expect("two different roles");
        launch(&self.stream, self.kernels.get(name), cfg((blocks(n, 256), 1), 256), |b| {
            b.arg(x).arg(&*y).arg(&n32);
        })?;
        Ok(())
    }
}

impl Backend for CudaBackend {
    type Matrix = GpuMatrix;
    type Vector = CudaSlice<f32>;

    fn begin_pass(&mut self, c: &ModelConfig, shape: &PassShape) -> Result<(), ModelError> {
        let (n, m) = (shape.window.len(), shape.head_rows);
        let (d, q, kv) = (c.n_embd, c.q_dim(), c.kv_dim());
        // A MoE layer's gathered rows: every row once per expert it takes.
        let slots = n * c.moe.as_ref().map_or(0, |moe| moe.n_expert_used);
        let ff = c.moe.as_ref().map_or(n * c.n_ff, |moe| (n * c.n_ff).max(slots * moe.n_ff_exp));
        let n_expert = c.moe.as_ref().map_or(0, |moe| moe.n_expert);
        for (act, size) in [
            (Act::X, n * d),
            (Act::H, (n * d).max(ff)),
            (Act::Q, n * q),
            (Act::K, n * kv),
            (Act::V, n * kv),
            (Act::Att, n * d.max(q)),
            (Act::Gate, ff),
            (Act::Up, ff),
            (Act::Head, m.max(1) * d),
            (Act::Logits, m.max(1) * c.n_vocab),
            (Act::Router, (n * n_expert).max(1)),
            (Act::Picked, (slots * d).max(1)),
            (Act::Moe, if n_expert > 0 { n * d } else { 1 }),
        ] {
            ensure(&self.stream, &mut self.acts[act as usize], size)?;
        }
        ensure(&self.stream, &mut self.head_rows, m.max(1))?;
        self.quantized.holds = None;
        let half = c.rope_dims / 2;
        if self.cos.len() < shape.len * half {
            self.rope.prepare(shape.len, c.rope_dims, c.rope_base);
            let (cos, sin) = self.rope.cos_sin();
            self.cos = self.stream.clone_htod(cos).map_err(CudaError::driver("uploading the RoPE table"))?;
            self.sin = self.stream.clone_htod(sin).map_err(CudaError::driver("uploading the RoPE table"))?;
        }
        Ok(())
    }

    fn embed(&mut self, gguf: &GgufFile, table: &MatrixRef, tokens: &[u32]) -> Result<(), ModelError> {
        let d = table.n_in;
        self.host_x.resize(tokens.len() * d, 0.0);
        for (row, &id) in self.host_x.chunks_exact_mut(d).zip(tokens) {
            table.dequantize_row(gguf, id as usize, row);
        }
        let x = &mut self.acts[Act::X as usize];
        self.stream
            .memcpy_htod(&self.host_x, &mut x.slice_mut(0..tokens.len() * d))
            .map_err(CudaError::driver("uploading embeddings"))?;
        Ok(())
    }

    fn rms_norm(
        &mut self,
        input: Act,
        weight: &CudaSlice<f32>,
        output: Act,
        rows: usize,
        eps: f32,
    ) -> Result<(), ModelError> {
        let (d, null) = (weight.len() as i32, 0u64);
        if input == output {
            let n = rows * weight.len();
            ensure(&self.stream, &mut self.norm_out, n)?;
            let (x, out) = (&mut self.acts[input as usize], &mut self.norm_out);
            launch(&self.stream, self.kernels.get("rms_norm"), cfg((rows as u32, 1), 256), |b| {
                b.arg(&*x).arg(&null).arg(weight).arg(&mut *out).arg(&d).arg(&eps);
            })?;
            self.stream
                .memcpy_dtod(&out.slice(0..n), &mut x.slice_mut(0..n))
                .map_err(CudaError::driver("copying a norm back"))?;
            return Ok(());
        }
        let [x, out] = self.acts.get_disjoint_mut([input as usize, output as usize]).expect("two different roles");
        launch(&self.stream, self.kernels.get("rms_norm"), cfg((rows as u32, 1), 256), |b| {
            b.arg(&*x).arg(&null).arg(weight).arg(out).arg(&d).arg(&eps);
        })?;
        Ok(())
    }

    fn rms_norm_rows(&mut self, rows: &[usize], weight: &CudaSlice<f32>, eps: f32) -> Result<(), ModelError> {
        let m = rows.len();
        self.host_rows.clear();
        self.host_rows.extend(rows.iter().map(|&r| r as i32));
        self.stream
            .memcpy_htod(&self.host_rows, &mut self.head_rows.slice_mut(0..m))
            .map_err(CudaError::driver("uploading row indices"))?;
        let d = weight.len() as i32;
        let [x, out] = self.acts.get_disjoint_mut([Act::X as usize, Act::Head as usize]).expect("two different roles");
        let head_rows = &self.head_rows;
        launch(&self.stream, self.kernels.get("rms_norm"), cfg((m as u32, 1), 256), |b| {
            b.arg(&*x).arg(head_rows).arg(weight).arg(out).arg(&d).arg(&eps);
        })?;
        Ok(())
    }

    /// Quantizes `input` first unless the buffers already hold it in the matrix's format.
    fn linear(
        &mut self,
        w: &GpuMatrix,
        input: Act,
        output: Act,
        rows: usize,
        same_input: bool,
    ) -> Result<(), ModelError> {
        let q = &mut self.quantized;
        let [x, out] = self.acts.get_disjoint_mut([input as usize, output as usize]).expect("two different roles");
        q.prepare((&self.stream, &self.kernels), (input, x), rows, w, same_input)?;
        w.product(&self.stream, &self.kernels, x, &q.buffers, rows, out)?;
        Ok(())
    }

    fn add_bias(&mut self, x: Act, bias: &CudaSlice<f32>, rows: usize) -> Result<(), ModelError> {
        let (total, width) = ((rows * bias.len()) as i32, bias.len() as i32);
        let x = &mut self.acts[x as usize];
        launch(&self.stream, self.kernels.get("add_bias"), cfg((blocks(total as usize, 256), 1), 256), |b| {
            b.arg(x).arg(bias).arg(&total).arg(&width);
        })?;
        Ok(())
    }

    fn rope(&mut self, c: &ModelConfig, x: Act, rows: usize, n_heads: usize, first: usize) -> Result<(), ModelError> {
        let threads = rows * n_heads * (c.rope_dims / 2);
        let args = [rows as i32, n_heads as i32, c.head_dim as i32, c.rope_dims as i32, first as i32];
        let halves = i32::from(c.rope_style == RopeStyle::Halves);
        let (x, cos, sin) = (&mut self.acts[x as usize], &self.cos, &self.sin);
        launch(&self.stream, self.kernels.get("rope"), cfg((blocks(threads, 256), 1), 256), |b| {
            b.arg(x).arg(cos).arg(sin);
            for a in &args {
                b.arg(a);
            }
            b.arg(&halves);
        })?;
        Ok(())
    }

    fn attention(&mut self, c: &ModelConfig, keys: Keys, rows: usize, n_keys: usize) -> Result<(), ModelError> {
        let name = match c.head_dim {
            32 => "attention_d32",
            64 => "attention_d64",
            _ => "attention_d128",
        };
        let (k, v) = match keys {
            Keys::Fresh => (Act::K, Act::V),
            Keys::Assembled => (Act::AllK, Act::AllV),
        };
        let args = [rows as i32, n_keys as i32, c.n_head as i32, c.n_head_kv as i32];
        let [q, k, v, out] = self
            .acts
            .get_disjoint_mut([Act::Q as usize, k as usize, v as usize, Act::Att as usize])
            .expect("four different roles");
        launch(&self.stream, self.kernels.get(name), cfg((blocks(rows, 64), c.n_head as u32), 128), |b| {
            b.arg(&*q).arg(&*k).arg(&*v).arg(out);
            for a in &args {
                b.arg(a);
            }
        })?;
        Ok(())
    }

    fn swiglu(&mut self, n: usize) -> Result<(), ModelError> {
        self.elementwise("swiglu", Act::Gate, Act::Up, n)
    }

    fn add_into(&mut self, x: Act, y: Act, n: usize) -> Result<(), ModelError> {
        self.elementwise("add_into", x, y, n)
    }

    fn cache_store(&mut self, layer: usize, n_layer: usize, len: usize, kv: usize) -> Result<(), ModelError> {
        for bufs in [&mut self.cache_keys, &mut self.cache_values] {
            while bufs.len() < n_layer {
                bufs.push(
                    self.stream.alloc_zeros::<f32>(len * kv).map_err(CudaError::driver("allocating the K/V cache"))?,
                );
            }
            ensure(&self.stream, &mut bufs[layer], len * kv)?;
        }
        let n = len * kv;
        for (act, kept) in [(Act::K, &mut self.cache_keys[layer]), (Act::V, &mut self.cache_values[layer])] {
            self.stream
                .memcpy_dtod(&self.acts[act as usize].slice(0..n), &mut kept.slice_mut(0..n))
                .map_err(CudaError::driver("copying keys and values"))?;
        }
        Ok(())
    }

    fn cache_assemble(&mut self, layer: usize, window: &Range<usize>, len: usize, kv: usize) -> Result<(), ModelError> {
        ensure(&self.stream, &mut self.acts[Act::AllK as usize], len * kv)?;
        ensure(&self.stream, &mut self.acts[Act::AllV as usize], len * kv)?;
        let n = window.len() * kv;
        for (cached, all) in [(&self.cache_keys[layer], Act::AllK), (&self.cache_values[layer], Act::AllV)] {
            self.stream
                .memcpy_dtod(&cached.slice(0..len * kv), &mut self.acts[all as usize].slice_mut(0..len * kv))
                .map_err(CudaError::driver("copying keys and values"))?;
        }
        for (fresh, all) in [(Act::K, Act::AllK), (Act::V, Act::AllV)] {
            let [fresh, all] = self.acts.get_disjoint_mut([fresh as usize, all as usize]).expect("two different roles");
            self.stream
                .memcpy_dtod(&fresh.slice(0..n), &mut all.slice_mut(window.start * kv..window.start * kv + n))
                .map_err(CudaError::driver("copying keys and values"))?;
        }
        Ok(())
    }

    /// `moe_route` (a thread per row) then `moe_group` (the counting sort by expert).
    fn route(&mut self, m: &MoeConfig, rows: usize) -> Result<(), ModelError> {
        let (k, n_expert) = (m.n_expert_used, m.n_expert);
        let slots = rows * k;
        let r = &mut self.routes;
        ensure(&self.stream, &mut r.slot_expert, slots.max(1))?;
        ensure(&self.stream, &mut r.slot_weight, slots.max(1))?;
        ensure(&self.stream, &mut r.slot_position, slots.max(1))?;
        ensure(&self.stream, &mut r.gathered, slots.max(1))?;
        ensure(&self.stream, &mut r.starts, n_expert + 1)?;
        (r.rows, r.k, r.n_expert) = (rows, k, n_expert);
        let (n_rows, n_e, k32, n_slots) = (rows as i32, n_expert as i32, k as i32, slots as i32);
        let (normalize, scale) = (m.normalize_weights as i32, m.weights_scale);
        let logits = &self.acts[Act::Router as usize];
        launch(&self.stream, self.kernels.get("moe_route"), cfg((blocks(rows, 128), 1), 128), |b| {
            b.arg(logits).arg(&n_rows).arg(&n_e).arg(&k32).arg(&normalize).arg(&scale);
            b.arg(&mut r.slot_expert).arg(&mut r.slot_weight);
        })?;
        launch(&self.stream, self.kernels.get("moe_group"), cfg((1, 1), 1), |b| {
            b.arg(&r.slot_expert).arg(&n_slots).arg(&k32).arg(&n_e);
            b.arg(&mut r.starts).arg(&mut r.gathered).arg(&mut r.slot_position);
        })?;
        Ok(())
    }

    fn gather_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
        let slots = self.routes.rows * self.routes.k;
        ensure(&self.stream, &mut self.acts[dst as usize], slots * width)?;
        let (n, w) = (slots as i32, width as i32);
        let [src, dst] = self.acts.get_disjoint_mut([src as usize, dst as usize]).expect("two different roles");
        let rows = &self.routes.gathered;
        launch(&self.stream, self.kernels.get("gather_rows"), cfg((blocks(width, 256), slots as u32), 256), |b| {
            b.arg(&*src).arg(rows).arg(dst).arg(&n).arg(&w);
        })?;
        Ok(())
    }

    /// Quantizes the gathered rows once (as `linear`), then one launch for every expert.
    fn linear_experts(
        &mut self,
        layer: usize,
        part: ExpertPart,
        experts: &[Expert<GpuMatrix>],
        input: Act,
        output: Act,
        same_input: bool,
    ) -> Result<(), ModelError> {
        let w = part.of(&experts[0]);
        let slots = self.routes.rows * self.routes.k;
        let q = &mut self.quantized;
        let [x, out] = self.acts.get_disjoint_mut([input as usize, output as usize]).expect("two different roles");
        q.prepare((&self.stream, &self.kernels), (input, x), slots, w, same_input)?;
        let table = self
            .expert_tables
            .get(layer)
            .and_then(|t| t.get(part as usize))
            .ok_or_else(|| CudaError::Unsupported(format!("layer {layer} has no experts on the GPU")))?;
        let product = ExpertProduct {
            table,
            starts: &self.routes.starts,
            n_expert: self.routes.n_expert,
            max_rows: self.routes.rows,
        };
        w.product_experts(&self.stream, &self.kernels, &product, x, &q.buffers, out)?;
        Ok(())
    }

    fn combine_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
        let r = &self.routes;
        let (n, k, w) = (r.rows as i32, r.k as i32, width as i32);
        let [src, dst] = self.acts.get_disjoint_mut([src as usize, dst as usize]).expect("two different roles");
        let grid = (blocks(width, 256), r.rows as u32);
        launch(&self.stream, self.kernels.get("moe_combine"), cfg(grid, 256), |b| {
            b.arg(&*src).arg(&r.slot_position).arg(&r.slot_weight).arg(dst).arg(&n).arg(&k).arg(&w);
        })?;
        Ok(())
    }

    fn logits_to_host(&mut self, n: usize, out: &mut Vec<f32>) -> Result<(), ModelError> {
        out.resize(n, 0.0);
        if n == 0 {
            return Ok(());
        }
        self.stream
            .memcpy_dtoh(&self.acts[Act::Logits as usize].slice(0..n), &mut out[..])
            .map_err(CudaError::driver("reading logits back"))?;
        self.stream.synchronize().map_err(CudaError::driver("finishing the pass"))?;
        Ok(())
    }

    /// Every rule but RND1's, which runs on the host over the logits copied back.
    fn chooses_rows(&self, rule: &RowRule) -> bool {
        !matches!(rule, RowRule::Rnd1 { .. })
    }

    /// The rule runs in `choose_token`, one block per row, over the logits where the LM head
    /// wrote them; only a token and a confidence per row are copied back.
    fn choose_rows(
        &mut self,
        m: usize,
        n_vocab: usize,
        rule: &RowRule,
        uniforms: &[f64],
        out: &mut Vec<(u32, f64)>,
    ) -> Result<(), ModelError> {
        let logits = &mut self.acts[Act::Logits as usize];
        self.chooser.choose(&self.stream, &self.kernels, logits, m, n_vocab, rule, uniforms, out)?;
        Ok(())
    }
}

/// Each layer's tables of expert matrix addresses (gate, up, down), uploaded once.
fn expert_tables(
    stream: &Arc<CudaStream>,
    weights: &Weights<GpuMatrix, CudaSlice<f32>>,
) -> Result<Vec<Vec<CudaSlice<u64>>>, ModelError> {
    let mut tables = Vec::with_capacity(weights.layers.len());
    for layer in &weights.layers {
        let mut parts = Vec::new();
        if let Ffn::Moe { experts, .. } = &layer.ffn {
            for part in ExpertPart::ALL {
                let addresses: Vec<u64> = experts.iter().map(|e| part.of(e).address(stream)).collect();
                parts.push(stream.clone_htod(&addresses).map_err(CudaError::driver("uploading expert tables"))?);
            }
        }
        tables.push(parts);
    }
    Ok(tables)
}
