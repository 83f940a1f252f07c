//! The forward pass on the CPU with the reference operations.

use std::path::Path;
use std::sync::Arc;

use super::kv_cache::KvCache;
use super::weights::{MatrixRef, Weights};
use super::{Forward, ModelConfig, ModelError, Pass, Preparation};
use crate::cpu::active_isa;
use crate::cpu::pack_cache::{CacheWrite, MatrixSpec, PackCache};
use crate::cpu::repack::{COLS, has_layout, pack};
use crate::gguf::GgufFile;
use crate::ops::attention::{AttentionScratch, AttentionShape, attention};
use crate::ops::matmul::{MatmulScratch, grow, matmul, matmul_same_input};
use crate::ops::norm::rms_norm;
use crate::ops::rope::RopeTable;
use crate::ops::{add_into, swiglu};

/// Activations and work buffers, sized for the largest canvas seen and then reused.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    rows: Vec<f32>,
    /// Keys and values of the whole canvas for a windowed pass (cached rows and fresh ones).
    all_k: Vec<f32>,
    all_v: Vec<f32>,
    positions: Vec<usize>,
    rope: RopeTable,
    matmul: MatmulScratch,
    attention: AttentionScratch,
}

pub struct CpuModel {
    gguf: Arc<GgufFile>,
    config: ModelConfig,
    weights: Weights,
    scratch: Scratch,
    cache: KvCache,
    prepared: Prepared,
}

/// How the weights were made ready for the kernels at load.
struct Prepared {
    how: Preparation,
    /// The background write of a new cache file, while it has not been waited for.
    cache_write: Option<CacheWrite>,
}

impl CpuModel {
    pub fn load(gguf: Arc<GgufFile>) -> Result<CpuModel, ModelError> {
        Self::load_with(gguf, None, &|_| {})
    }

    /// `load`, reporting the fraction of the weights prepared (repacked) so far to `progress`,
    /// and with a `pack_cache` directory keeping the packed weights in a cache file there
    /// (`cpu::pack_cache`): mapped from it when a valid one exists, else packed in memory and
    /// written there in the background.
    pub fn load_with(
        gguf: Arc<GgufFile>,
        pack_cache: Option<&Path>,
        progress: &dyn Fn(f32),
    ) -> Result<CpuModel, ModelError> {
        let config = ModelConfig::from_gguf(&gguf)?;
        let mut weights = Weights::locate(&gguf, &config)?;
        let prepared = if active_isa().is_x86_simd() {
            pack_for_kernels(&gguf, &mut weights, pack_cache, progress)
        } else {
            Prepared { how: Preparation::Mapped, cache_write: None }
        };
        progress(1.0);
        Ok(CpuModel { gguf, config, weights, scratch: Scratch::default(), cache: KvCache::default(), prepared })
    }

    /// How the weights were prepared.
    pub fn prepared(&self) -> &Preparation {
        &self.prepared.how
    }

    /// The background write of the pack cache file this load started, if any (to wait for it
    /// before the process ends, since an unfinished one is thrown away).
    pub fn take_pack_cache_write(&mut self) -> Option<CacheWrite> {
        self.prepared.cache_write.take()
    }

    pub fn gguf(&self) -> &Arc<GgufFile> {
        &self.gguf
    }

    /// `output = input x w^T`. `same_input`: the previous product read the same, unchanged
    /// input, so its quantized activations serve again.
    fn linear(&mut self, input: Buf, w: MatrixRef, n_rows: usize, output: Buf, same_input: bool) {
        let s = &mut self.scratch;
        let m = w.view(&self.gguf);
        let (x, out) = match (input, output) {
            (Buf::H, Buf::Q) => (&s.h, &mut s.q),
            (Buf::H, Buf::K) => (&s.h, &mut s.k),
            (Buf::H, Buf::V) => (&s.h, &mut s.v),
            (Buf::Att, Buf::H) => (&s.att, &mut s.h),
            (Buf::H, Buf::Gate) => (&s.h, &mut s.gate),
            (Buf::H, Buf::Up) => (&s.h, &mut s.up),
            (Buf::Gate, Buf::H) => (&s.gate, &mut s.h),
            _ => unreachable!("no other products occur in the block"),
        };
        grow(out, n_rows * m.n_out);
        let product = if same_input { matmul_same_input } else { matmul };
        product(&x[..n_rows * m.n_in], n_rows, &m, &mut out[..n_rows * m.n_out], &mut s.matmul);
    }
}

/// Gives every Q4_K, Q5_K, Q6_K and Q8_0 product matrix its interleaved layout for the packed
/// kernels: mapped from a valid cache file in `pack_cache`, or packed in memory (letting the OS
/// drop the mapped pages it came from; the embedding table, read row by row, stays) and then,
/// with a cache directory, written there in the background.
fn pack_for_kernels(
    gguf: &GgufFile,
    weights: &mut Weights,
    pack_cache: Option<&Path>,
    progress: &dyn Fn(f32),
) -> Prepared {
    let embd_offset = weights.token_embd.offset;
    let packs = |m: &MatrixRef| has_layout(m.ty) && m.n_out >= COLS;
    let specs: Vec<MatrixSpec> = weights
        .products_mut()
        .filter(|m| packs(m))
        .map(|m| MatrixSpec { ty: m.ty, n_in: m.n_in, n_out: m.n_out, source_offset: m.offset as u64 })
        .collect();
    let cache = pack_cache.and_then(|dir| PackCache::for_model(dir, gguf, &specs));
    if let Some((cache, packed)) = cache.as_ref().and_then(|c| Some((c, c.read(&specs)?))) {
        for (m, p) in weights.products_mut().filter(|m| packs(m)).zip(packed) {
            m.packed = Some(Arc::new(p));
        }
        return Prepared { how: Preparation::FromPackCache(cache.path().to_path_buf()), cache_write: None };
    }
    let total: usize = weights.products_mut().filter(|m| packs(m)).map(|m| m.n_bytes).sum();
    let mut done = 0;
    let mut packed_all = Vec::with_capacity(specs.len());
    for m in weights.products_mut() {
        if !packs(m) {
            continue;
        }
        let row_bytes = (m.n_bytes / m.n_out) as u64;
        let (offset, shared_with_embedding) = (m.offset as u64, m.offset == embd_offset);
        let source = gguf.data_range(offset, m.n_bytes as u64);
        let packed = Arc::new(pack(m.ty, source, m.n_in, m.n_out, |rows| {
            if !shared_with_embedding {
                gguf.release(offset + rows.start as u64 * row_bytes, rows.len() as u64 * row_bytes);
            }
            done += rows.len() * row_bytes as usize;
            progress(done as f32 / total as f32);
        }));
        packed_all.push(packed.clone());
        m.packed = Some(packed);
    }
    match cache {
        Some(cache) => Prepared {
            how: Preparation::PackedWritingCache(cache.path().to_path_buf()),
            cache_write: Some(cache.write_in_background(packed_all)),
        },
        None => Prepared { how: Preparation::PackedInMemory, cache_write: None },
    }
}

#[derive(Clone, Copy)]
enum Buf {
    H,
    Q,
    K,
    V,
    Att,
    Gate,
    Up,
}

fn add_bias(x: &mut [f32], bias: &Option<Vec<f32>>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            for (v, bi) in row.iter_mut().zip(b) {
                *v += bi;
            }
        }
    }
}

impl Forward for CpuModel {
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
        let c = self.config.clone();
        let len = tokens.len();
        let window = super::check_pass(&c, tokens, pass, rows)?;
        let kv = c.n_head_kv * c.head_dim;
        match pass {
            Pass::Full => {}
            Pass::FillCache => self.cache.begin_fill(c.n_layer, len, kv),
            Pass::Window(_) => self.cache.check(len)?,
        }
        // Every per-position operation runs on the window's n rows only.
        let n = window.len();
        let d = c.n_embd;
        {
            let s = &mut self.scratch;
            grow(&mut s.x, n * d);
            grow(&mut s.h, n * d.max(c.n_ff));
            grow(&mut s.att, n * d);
            if matches!(pass, Pass::Window(_)) {
                grow(&mut s.all_k, len * kv);
                grow(&mut s.all_v, len * kv);
            }
            s.positions.clear();
            s.positions.extend(window.clone());
            s.rope.prepare(len, c.rope_dims, c.rope_base);
            let embd = self.weights.token_embd.view(&self.gguf);
            for (row, &id) in s.x.chunks_exact_mut(d).zip(&tokens[window.clone()]) {
                embd.dequantize_row(id as usize, row).expect("weights validated at load");
            }
        }
        for l in 0..c.n_layer {
            let layer = &self.weights.layers[l];
            let (wq, wk, wv, wo, gate, up, down) = (
                layer.wq.clone(),
                layer.wk.clone(),
                layer.wv.clone(),
                layer.wo.clone(),
                layer.gate.clone(),
                layer.up.clone(),
                layer.down.clone(),
            );
            let s = &mut self.scratch;
            rms_norm(&s.x[..n * d], &layer.attn_norm, c.rms_eps, &mut s.h[..n * d]);
            self.linear(Buf::H, wq, n, Buf::Q, false);
            self.linear(Buf::H, wk, n, Buf::K, true);
            self.linear(Buf::H, wv, n, Buf::V, true);
            let layer = &self.weights.layers[l];
            let s = &mut self.scratch;
            add_bias(&mut s.q[..n * d], &layer.bq);
            add_bias(&mut s.k[..n * kv], &layer.bk);
            add_bias(&mut s.v[..n * kv], &layer.bv);
            s.rope.apply(&mut s.q[..n * d], &s.positions[..n], c.head_dim, c.rope_style);
            s.rope.apply(&mut s.k[..n * kv], &s.positions[..n], c.head_dim, c.rope_style);
            let shape = AttentionShape {
                n_rows: n,
                n_keys: len,
                n_head: c.n_head,
                n_head_kv: c.n_head_kv,
                head_dim: c.head_dim,
            };
            let (keys, values) = match pass {
                Pass::Full => (&s.k[..n * kv], &s.v[..n * kv]),
                Pass::FillCache => {
                    self.cache.store(l, &s.k[..n * kv], &s.v[..n * kv]);
                    (&s.k[..n * kv], &s.v[..n * kv])
                }
                Pass::Window(_) => {
                    let fresh = (&s.k[..n * kv], &s.v[..n * kv]);
                    self.cache.assemble(l, &window, fresh, &mut s.all_k[..len * kv], &mut s.all_v[..len * kv]);
                    (&s.all_k[..len * kv], &s.all_v[..len * kv])
                }
            };
            attention(&s.q[..n * d], keys, values, shape, &mut s.att[..n * d], &mut s.attention);
            self.linear(Buf::Att, wo, n, Buf::H, false);
            let layer = &self.weights.layers[l];
            let s = &mut self.scratch;
            add_into(&mut s.x[..n * d], &s.h[..n * d]);
            rms_norm(&s.x[..n * d], &layer.ffn_norm, c.rms_eps, &mut s.h[..n * d]);
            self.linear(Buf::H, gate, n, Buf::Gate, false);
            self.linear(Buf::H, up, n, Buf::Up, true);
            let s = &mut self.scratch;
            swiglu(&mut s.gate[..n * c.n_ff], &s.up[..n * c.n_ff]);
            self.linear(Buf::Gate, down, n, Buf::H, false);
            let s = &mut self.scratch;
            add_into(&mut s.x[..n * d], &s.h[..n * d]);
        }
        // Final norm and LM head only for the requested rows.
        let s = &mut self.scratch;
        let m = rows.len();
        grow(&mut s.rows, m * d);
        for (i, &r) in rows.iter().enumerate() {
            let r = r - window.start;
            rms_norm(&s.x[r * d..(r + 1) * d], &self.weights.output_norm, c.rms_eps, &mut s.rows[i * d..(i + 1) * d]);
        }
        logits.resize(m * c.n_vocab, 0.0);
        let head = self.weights.output.view(&self.gguf);
        matmul(&s.rows[..m * d], m, &head, logits, &mut s.matmul);
        Ok(())
    }
}
