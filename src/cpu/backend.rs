//! The CPU backend: the forward pass's primitives (`backend::Backend`) over f32 activations,
//! with the quantized products on the int8 kernels, and the load that readies the weights for
//! them (packed in memory or mapped from the pack cache).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use super::kernels::repack::{COLS, Packed, has_layout, pack};
use super::kernels::{Isa, active_isa};
use super::kv_cache::KvCache;
use super::ops::attention::{AttentionScratch, AttentionShape, attention};
use super::ops::matmul::{MatmulScratch, Matrix, grow, matmul, matmul_experts, matmul_same_input};
use super::ops::norm::rms_norm;
use super::ops::{add_into, swiglu};
use super::pack_cache::{CacheMiss, CacheWrite, MatrixSpec, PackCache};
use crate::backend::{Act, Backend, ExpertPart, Keys, Loaded, PassShape, Routes};
use crate::gguf::GgufFile;
use crate::model::rope::RopeTable;
use crate::model::weights::{Expert, MatrixRef, Weights};
use crate::model::{ModelConfig, ModelError, MoeConfig, Preparation};

/// A weight matrix as the CPU kernels read it: in the mapped file, and its interleaved copy
/// when the packed kernels use one.
pub struct CpuMatrix {
    pub at: MatrixRef,
    pub packed: Option<Arc<Packed>>,
}

impl CpuMatrix {
    pub fn view<'a>(&'a self, gguf: &'a GgufFile) -> Matrix<'a> {
        let m = &self.at;
        Matrix { ty: m.ty, n_in: m.n_in, n_out: m.n_out, data: m.data(gguf), packed: self.packed.as_deref() }
    }
}

/// How the CPU backend readies a model's weights.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuLoadOptions<'a> {
    /// A directory keeping the packed weights in a cache file (`cpu::pack_cache`).
    pub pack_cache: Option<&'a Path>,
    /// Q4_K matrices expanded to a byte per weight after packing (`Packed::widen`): 1.84x their
    /// memory, no unpacking in the kernels, the same numbers.
    pub wide_weights: bool,
}

pub struct CpuBackend {
    gguf: Arc<GgufFile>,
    /// One buffer per `Act`, sized for the largest pass seen and then reused.
    acts: [Vec<f32>; Act::COUNT],
    positions: Vec<usize>,
    rope: RopeTable,
    matmul: MatmulScratch,
    attention: AttentionScratch,
    cache: KvCache,
    prepared: Prepared,
    /// The output of a norm in place (q/k per head), swapped with the input's buffer after.
    norm_out: Vec<f32>,
    /// A MoE layer's routing.
    routes: Routes,
}

/// How the weights were made ready for the kernels at load.
struct Prepared {
    how: Preparation,
    /// The background write of a new cache file, while it has not been waited for.
    cache_write: Option<CacheWrite>,
}

impl CpuBackend {
    /// The model in `gguf` made ready for the CPU: its hyperparameters, its weights (packed for
    /// the kernels, with a `pack_cache` directory through a cache file there: mapped from it
    /// when a valid one exists, else packed in memory and written there in the background) and
    /// the backend's buffers. `progress` hears the fraction of the weights prepared so far.
    pub fn load(
        gguf: &Arc<GgufFile>,
        options: CpuLoadOptions,
        progress: &dyn Fn(f32),
    ) -> Result<Loaded<CpuBackend>, ModelError> {
        let config = ModelConfig::from_gguf(gguf)?;
        let located = Weights::locate(gguf, &config)?;
        let (weights, prepared) = if active_isa().is_x86_simd() {
            let (weights, prepared) = pack_for_kernels(gguf, located, options.pack_cache, progress);
            (if options.wide_weights && widens_weights(active_isa()) { widen(weights) } else { weights }, prepared)
        } else {
            let weights = located.try_map(unpacked, |v| Ok::<_, ModelError>(v.clone()), &|_| {})?;
            (weights, Prepared { how: Preparation::Mapped, cache_write: None })
        };
        progress(1.0);
        let backend = CpuBackend {
            gguf: gguf.clone(),
            acts: Default::default(),
            positions: Vec::new(),
            rope: RopeTable::default(),
            matmul: MatmulScratch::default(),
            attention: AttentionScratch::default(),
            cache: KvCache::default(),
            prepared,
            norm_out: Vec::new(),
            routes: Routes::default(),
        };
        Ok(Loaded { backend, config, weights })
    }

    /// How the weights were prepared.
    pub fn prepared(&self) -> &Preparation {
        &self.prepared.how
    }

    /// The background write of the pack cache file the load started, if any (to wait for it
    /// before the process ends, since an unfinished one is thrown away).
    pub fn take_pack_cache_write(&mut self) -> Option<CacheWrite> {
        self.prepared.cache_write.take()
    }
}

/// Whether the faster-weights mode widens the weights on `isa`: on the 256-bit paths. On AVX-512
/// VNNI, Q4_K's 512-bit kernels (32 or 16 columns a call) read the normal layout and the wide
/// one has only the 256-bit kernel, so the weights are left as they are there.
pub fn widens_weights(isa: Isa) -> bool {
    matches!(isa, Isa::Avx2 | Isa::AvxVnni)
}

/// Every packed Q4_K matrix of `weights` widened (`Packed::widen`); the others as they are.
/// The originals' pages of a cache file are dropped as each is widened, and their anonymous
/// memory freed when the old weights are, so that memory holds one copy of each matrix.
fn widen(weights: Weights<CpuMatrix>) -> Weights<CpuMatrix> {
    let matrix = |m: &CpuMatrix| {
        let packed = m.packed.as_ref().map(|p| match p.widen() {
            Some(wide) => {
                p.release_pages();
                Arc::new(wide)
            }
            None => p.clone(),
        });
        Ok::<_, std::convert::Infallible>(CpuMatrix { at: m.at.clone(), packed })
    };
    let Ok(wide) = weights.try_map(matrix, |v| Ok(v.clone()), &|_| {});
    wide
}

fn unpacked(m: &MatrixRef) -> Result<CpuMatrix, ModelError> {
    Ok(CpuMatrix { at: m.clone(), packed: None })
}

/// Gives every Q4_K, Q5_K, Q6_K and Q8_0 product matrix its interleaved layout for the packed
/// kernels: mapped from a valid cache file in `pack_cache`, or packed in memory (letting the OS
/// drop the mapped pages it came from; the embedding table, read row by row, stays) and then,
/// with a cache directory, written there in the background.
fn pack_for_kernels(
    gguf: &GgufFile,
    weights: Weights,
    pack_cache: Option<&Path>,
    progress: &dyn Fn(f32),
) -> (Weights<CpuMatrix>, Prepared) {
    let embd_offset = weights.token_embd.offset;
    let packs = |m: &MatrixRef| has_layout(m.ty) && m.n_out >= COLS;
    let specs: Vec<MatrixSpec> = weights
        .products()
        .filter(|m| packs(m))
        .map(|m| MatrixSpec { ty: m.ty, n_in: m.n_in, n_out: m.n_out, source_offset: m.offset as u64 })
        .collect();
    let cache = pack_cache.and_then(|dir| PackCache::for_model(dir, gguf, &specs));
    let from_cache = cache.as_ref().map(|c| c.read(&specs));
    let damaged = match &from_cache {
        Some(Err(CacheMiss::Damaged(why))) => Some(why.clone()),
        _ => None,
    };
    let reading_cache = matches!(from_cache, Some(Ok(_)));
    let packed_all: Vec<Arc<Packed>> = match from_cache {
        Some(Ok(packed)) => packed.into_iter().map(Arc::new).collect(),
        _ => {
            let total: usize = weights.products().filter(|m| packs(m)).map(|m| m.n_bytes).sum();
            let mut done = 0;
            let mut packed_all = Vec::with_capacity(specs.len());
            for m in weights.products().filter(|m| packs(m)) {
                let row_bytes = (m.n_bytes / m.n_out) as u64;
                let (offset, shared_with_embedding) = (m.offset as u64, m.offset == embd_offset);
                let packed = pack(m.ty, m.data(gguf), m.n_in, m.n_out, |rows| {
                    if !shared_with_embedding {
                        gguf.release(offset + rows.start as u64 * row_bytes, rows.len() as u64 * row_bytes);
                    }
                    done += rows.len() * row_bytes as usize;
                    progress(done as f32 / total as f32);
                });
                packed_all.push(Arc::new(packed));
            }
            packed_all
        }
    };
    // `try_map` visits the matrices in `products` order, the order they were packed in.
    let mut next = packed_all.iter().cloned();
    let matrix = |m: &MatrixRef| {
        let packed = if packs(m) { next.next() } else { None };
        Ok::<_, std::convert::Infallible>(CpuMatrix { at: m.clone(), packed })
    };
    let mapped = weights.try_map(matrix, |v| Ok(v.clone()), &|_| {});
    let Ok(mapped) = mapped;
    let prepared = match cache {
        Some(cache) if reading_cache => {
            Prepared { how: Preparation::FromPackCache(cache.path().to_path_buf()), cache_write: None }
        }
        Some(cache) => {
            let path = cache.path().to_path_buf();
            let how = match damaged {
                Some(why) => Preparation::RepackedDamagedCache { path, why },
                None => Preparation::PackedWritingCache(path),
            };
            Prepared { how, cache_write: Some(cache.write_in_background(packed_all)) }
        }
        None => Prepared { how: Preparation::PackedInMemory, cache_write: None },
    };
    (mapped, prepared)
}

/// The buffers of two different roles, the first to read and the second to write.
fn pair(acts: &mut [Vec<f32>; Act::COUNT], read: Act, write: Act) -> (&[f32], &mut Vec<f32>) {
    let [r, w] = acts.get_disjoint_mut([read as usize, write as usize]).expect("two different roles");
    (r, w)
}

impl Backend for CpuBackend {
    type Matrix = CpuMatrix;
    type Vector = Vec<f32>;

    fn begin_pass(&mut self, c: &ModelConfig, shape: &PassShape) -> Result<(), ModelError> {
        let (n, d) = (shape.window.len(), c.n_embd);
        grow(&mut self.acts[Act::X as usize], n * d);
        grow(&mut self.acts[Act::H as usize], n * d.max(c.n_ff));
        grow(&mut self.acts[Act::Att as usize], n * d.max(c.q_dim()));
        if c.moe.is_some() {
            grow(&mut self.acts[Act::Moe as usize], n * d);
            grow(&mut self.acts[Act::Picked as usize], n * d);
        }
        self.positions.clear();
        self.positions.extend(shape.window.clone());
        self.rope.prepare(shape.len, c.rope_dims, c.rope_base);
        Ok(())
    }

    fn embed(&mut self, gguf: &GgufFile, table: &MatrixRef, tokens: &[u32]) -> Result<(), ModelError> {
        for (row, &id) in self.acts[Act::X as usize].chunks_exact_mut(table.n_in).zip(tokens) {
            table.dequantize_row(gguf, id as usize, row);
        }
        Ok(())
    }

    fn rms_norm(
        &mut self,
        input: Act,
        weight: &Vec<f32>,
        output: Act,
        rows: usize,
        eps: f32,
    ) -> Result<(), ModelError> {
        let n = rows * weight.len();
        if input == output {
            let x = &mut self.acts[input as usize];
            grow(&mut self.norm_out, x.len());
            rms_norm(&x[..n], weight, eps, &mut self.norm_out[..n]);
            x[..n].copy_from_slice(&self.norm_out[..n]);
            return Ok(());
        }
        let (x, out) = pair(&mut self.acts, input, output);
        rms_norm(&x[..n], weight, eps, &mut out[..n]);
        Ok(())
    }

    fn rms_norm_rows(&mut self, rows: &[usize], weight: &Vec<f32>, eps: f32) -> Result<(), ModelError> {
        let d = weight.len();
        let (x, head) = pair(&mut self.acts, Act::X, Act::Head);
        grow(head, rows.len() * d);
        for (&r, out) in rows.iter().zip(head.chunks_exact_mut(d)) {
            rms_norm(&x[r * d..(r + 1) * d], weight, eps, out);
        }
        Ok(())
    }

    fn linear(
        &mut self,
        w: &CpuMatrix,
        input: Act,
        output: Act,
        rows: usize,
        same_input: bool,
    ) -> Result<(), ModelError> {
        let m = w.view(&self.gguf);
        let (x, out) = pair(&mut self.acts, input, output);
        grow(out, rows * m.n_out);
        let product = if same_input { matmul_same_input } else { matmul };
        product(&x[..rows * m.n_in], rows, &m, &mut out[..rows * m.n_out], &mut self.matmul);
        Ok(())
    }

    fn add_bias(&mut self, x: Act, bias: &Vec<f32>, rows: usize) -> Result<(), ModelError> {
        for row in self.acts[x as usize][..rows * bias.len()].chunks_exact_mut(bias.len()) {
            for (v, b) in row.iter_mut().zip(bias) {
                *v += b;
            }
        }
        Ok(())
    }

    fn rope(&mut self, c: &ModelConfig, x: Act, rows: usize, n_heads: usize, first: usize) -> Result<(), ModelError> {
        debug_assert_eq!(self.positions.first(), Some(&first));
        let values = &mut self.acts[x as usize][..rows * n_heads * c.head_dim];
        self.rope.apply(values, &self.positions[..rows], c.head_dim, c.rope_style);
        Ok(())
    }

    fn attention(&mut self, c: &ModelConfig, keys: Keys, rows: usize, n_keys: usize) -> Result<(), ModelError> {
        let (d, kv) = (c.q_dim(), c.kv_dim());
        let (k, v) = match keys {
            Keys::Fresh => (Act::K, Act::V),
            Keys::Assembled => (Act::AllK, Act::AllV),
        };
        let [q, k, v, out] = self
            .acts
            .get_disjoint_mut([Act::Q as usize, k as usize, v as usize, Act::Att as usize])
            .expect("four different roles");
        let shape =
            AttentionShape { n_rows: rows, n_keys, n_head: c.n_head, n_head_kv: c.n_head_kv, head_dim: c.head_dim };
        attention(
            &q[..rows * d],
            &k[..n_keys * kv],
            &v[..n_keys * kv],
            shape,
            &mut out[..rows * d],
            &mut self.attention,
        );
        Ok(())
    }

    fn swiglu(&mut self, n: usize) -> Result<(), ModelError> {
        let (up, gate) = pair(&mut self.acts, Act::Up, Act::Gate);
        swiglu(&mut gate[..n], &up[..n]);
        Ok(())
    }

    fn add_into(&mut self, x: Act, y: Act, n: usize) -> Result<(), ModelError> {
        let (y, x) = pair(&mut self.acts, y, x);
        add_into(&mut x[..n], &y[..n]);
        Ok(())
    }

    fn cache_store(&mut self, layer: usize, n_layer: usize, len: usize, kv: usize) -> Result<(), ModelError> {
        let (k, v) = (&self.acts[Act::K as usize][..len * kv], &self.acts[Act::V as usize][..len * kv]);
        self.cache.store(layer, n_layer, k, v);
        Ok(())
    }

    fn cache_assemble(&mut self, layer: usize, window: &Range<usize>, len: usize, kv: usize) -> Result<(), ModelError> {
        let n = window.len() * kv;
        let [k, v, all_k, all_v] = self
            .acts
            .get_disjoint_mut([Act::K as usize, Act::V as usize, Act::AllK as usize, Act::AllV as usize])
            .expect("four different roles");
        grow(all_k, len * kv);
        grow(all_v, len * kv);
        let fresh = (&k[..n], &v[..n]);
        self.cache.assemble(layer, window, kv, fresh, &mut all_k[..len * kv], &mut all_v[..len * kv]);
        Ok(())
    }

    fn route(&mut self, m: &MoeConfig, rows: usize) -> Result<(), ModelError> {
        self.routes.plan(&self.acts[Act::Router as usize][..rows * m.n_expert], rows, m);
        Ok(())
    }

    fn gather_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
        let (src, dst) = pair(&mut self.acts, src, dst);
        grow(dst, self.routes.len() * width);
        self.routes.gather(src, width, dst);
        Ok(())
    }

    fn linear_experts(
        &mut self,
        _layer: usize,
        part: ExpertPart,
        experts: &[Expert<CpuMatrix>],
        input: Act,
        output: Act,
        same_input: bool,
    ) -> Result<(), ModelError> {
        let gguf = &*self.gguf;
        let w = |e: usize| part.of(&experts[e]).view(gguf);
        let (n_in, n_out) = (w(0).n_in, w(0).n_out);
        let rows = self.routes.len();
        let (x, out) = pair(&mut self.acts, input, output);
        grow(out, rows * n_out);
        let (x, out) = (&x[..rows * n_in], &mut out[..rows * n_out]);
        matmul_experts(x, self.routes.groups(), w, out, &mut self.matmul, same_input);
        Ok(())
    }

    fn combine_routed(&mut self, src: Act, width: usize, dst: Act) -> Result<(), ModelError> {
        let (src, dst) = pair(&mut self.acts, src, dst);
        let rows = self.routes.rows();
        grow(dst, rows * width);
        self.routes.combine(src, width, &mut dst[..rows * width]);
        Ok(())
    }

    fn logits_to_host(&mut self, n: usize, out: &mut Vec<f32>) -> Result<(), ModelError> {
        // The buffers trade places: the caller's next pass hands this one back, so neither the
        // copy nor an allocation happens in a steady state.
        let logits = &mut self.acts[Act::Logits as usize];
        grow(logits, n);
        std::mem::swap(logits, out);
        out.truncate(n);
        Ok(())
    }
}
