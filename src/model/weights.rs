//! The tensors of the backbone (LLaDA, Dream, LLaDA-MoE, RND1), located in the GGUF file and checked once at load:
//! present, of a supported type, of the expected shape. Matrices stay in the memory map;
//! small vectors (norm weights, biases) are dequantized to f32. A backend maps these to its own
//! forms (packed for the CPU kernels, uploaded to a GPU) with `Weights::try_map`.

use crate::gguf::{GgufFile, TensorInfo};
use crate::model::{ModelConfig, ModelError};
use crate::quant::{GgmlType, dequantize};

/// Where a weight matrix lives in the file: `n_out` rows of `n_in` values of type `ty`.
#[derive(Debug, Clone)]
pub struct MatrixRef {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub offset: usize,
    pub n_bytes: usize,
}

impl MatrixRef {
    /// The matrix's bytes in the mapped file.
    pub fn data<'a>(&self, gguf: &'a GgufFile) -> &'a [u8] {
        gguf.data_range(self.offset as u64, self.n_bytes as u64)
    }

    pub fn row_bytes(&self) -> usize {
        self.n_in / self.ty.block_size() * self.ty.type_size()
    }

    /// The `n` rows from row `first` on, as a matrix of their own.
    pub fn rows(&self, first: usize, n: usize) -> MatrixRef {
        let rb = self.row_bytes();
        MatrixRef { ty: self.ty, n_in: self.n_in, n_out: n, offset: self.offset + first * rb, n_bytes: n * rb }
    }

    /// Dequantizes row `r` into `out` (length `n_in`): how both backends read the embeddings
    /// of a canvas's tokens. `r` and the type were checked at load (`check_pass`, `locate`).
    pub fn dequantize_row(&self, gguf: &GgufFile, r: usize, out: &mut [f32]) {
        let rb = self.row_bytes();
        dequantize(self.ty, &self.data(gguf)[r * rb..(r + 1) * rb], out).expect("weights validated at load");
    }
}

/// One transformer block's weights: matrices of type `M` and vectors of type `V`, as found in
/// the file (`MatrixRef`, `Vec<f32>`) or as a backend holds them.
pub struct Layer<M = MatrixRef, V = Vec<f32>> {
    pub attn_norm: V,
    pub wq: M,
    pub wk: M,
    pub wv: M,
    pub wo: M,
    pub bq: Option<V>,
    pub bk: Option<V>,
    pub bv: Option<V>,
    /// Per-head RMSNorm weights of q and k, applied before RoPE (LLaDA-MoE, RND1).
    pub q_norm: Option<V>,
    pub k_norm: Option<V>,
    pub ffn_norm: V,
    pub ffn: Ffn<M>,
}

/// A block's feed-forward network: one SwiGLU, or experts chosen per row by a router.
pub enum Ffn<M = MatrixRef> {
    Dense(Expert<M>),
    Moe {
        /// `ffn_gate_inp`: the router's logits, one per expert.
        router: M,
        experts: Vec<Expert<M>>,
    },
}

/// `down(silu(gate(x)) * up(x))`.
pub struct Expert<M = MatrixRef> {
    pub gate: M,
    pub up: M,
    pub down: M,
}

impl<M> Ffn<M> {
    /// The FFN's matrices in the order a pass multiplies with them (the router first).
    fn matrices(&self) -> Vec<&M> {
        match self {
            Ffn::Dense(e) => vec![&e.gate, &e.up, &e.down],
            Ffn::Moe { router, experts } => {
                std::iter::once(router).chain(experts.iter().flat_map(|e| [&e.gate, &e.up, &e.down])).collect()
            }
        }
    }

    /// This FFN with each matrix mapped, in `matrices` order.
    fn try_map<M2, E>(&self, matrix: &mut impl FnMut(&M) -> Result<M2, E>) -> Result<Ffn<M2>, E> {
        fn expert<M, M2, E>(e: &Expert<M>, matrix: &mut impl FnMut(&M) -> Result<M2, E>) -> Result<Expert<M2>, E> {
            Ok(Expert { gate: matrix(&e.gate)?, up: matrix(&e.up)?, down: matrix(&e.down)? })
        }
        Ok(match self {
            Ffn::Dense(e) => Ffn::Dense(expert(e, matrix)?),
            Ffn::Moe { router, experts } => {
                let router = matrix(router)?;
                Ffn::Moe { router, experts: experts.iter().map(|e| expert(e, matrix)).collect::<Result<_, _>>()? }
            }
        })
    }
}

pub struct Weights<M = MatrixRef, V = Vec<f32>> {
    /// Read a row at a time from the mapped file, by every backend.
    pub token_embd: MatrixRef,
    pub layers: Vec<Layer<M, V>>,
    pub output_norm: V,
    /// The LM head; the embedding matrix when the file ties them (no `output.weight`).
    pub output: M,
}

impl<M, V> Layer<M, V> {
    /// The block's matrices in the order every pass multiplies with them.
    pub fn matrices(&self) -> Vec<&M> {
        [&self.wq, &self.wk, &self.wv, &self.wo].into_iter().chain(self.ffn.matrices()).collect()
    }

    /// This block with each matrix and vector mapped; matrices are visited in `matrices` order.
    pub fn try_map<M2, V2, E>(
        &self,
        matrix: &mut impl FnMut(&M) -> Result<M2, E>,
        vector: &mut impl FnMut(&V) -> Result<V2, E>,
    ) -> Result<Layer<M2, V2>, E> {
        let mut optional = |v: &Option<V>| v.as_ref().map(&mut *vector).transpose();
        let (bq, bk, bv) = (optional(&self.bq)?, optional(&self.bk)?, optional(&self.bv)?);
        let (q_norm, k_norm) = (optional(&self.q_norm)?, optional(&self.k_norm)?);
        Ok(Layer {
            wq: matrix(&self.wq)?,
            wk: matrix(&self.wk)?,
            wv: matrix(&self.wv)?,
            wo: matrix(&self.wo)?,
            ffn: self.ffn.try_map(matrix)?,
            attn_norm: vector(&self.attn_norm)?,
            ffn_norm: vector(&self.ffn_norm)?,
            bq,
            bk,
            bv,
            q_norm,
            k_norm,
        })
    }
}

impl<M, V> Weights<M, V> {
    /// The matrices the forward pass multiplies with (not the embedding table, which is only
    /// read row by row, unless it doubles as the LM head), in the order `try_map` visits them.
    pub fn products(&self) -> impl Iterator<Item = &M> {
        self.layers.iter().flat_map(Layer::matrices).chain(std::iter::once(&self.output))
    }

    /// These weights with each matrix and vector mapped (matrices in `products` order);
    /// `progress` hears the fraction of the layers done.
    pub fn try_map<M2, V2, E>(
        &self,
        mut matrix: impl FnMut(&M) -> Result<M2, E>,
        mut vector: impl FnMut(&V) -> Result<V2, E>,
        progress: &dyn Fn(f32),
    ) -> Result<Weights<M2, V2>, E> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            progress(i as f32 / self.layers.len() as f32);
            layers.push(layer.try_map(&mut matrix, &mut vector)?);
        }
        Ok(Weights {
            token_embd: self.token_embd.clone(),
            layers,
            output: matrix(&self.output)?,
            output_norm: vector(&self.output_norm)?,
        })
    }
}

impl Weights {
    pub fn locate(gguf: &GgufFile, c: &ModelConfig) -> Result<Weights, ModelError> {
        let file = || gguf.path().display().to_string();
        let find = |name: &str| {
            gguf.tensor(name).ok_or_else(|| ModelError::MissingTensor { file: file(), tensor: name.to_owned() })
        };
        let check_type = |t: &TensorInfo| {
            if t.ty.is_supported() {
                Ok(())
            } else {
                Err(ModelError::UnsupportedType { file: file(), tensor: t.name.clone(), ty: t.ty })
            }
        };
        let shape_err = |t: &TensorInfo, expected: Vec<usize>| ModelError::ShapeMismatch {
            file: file(),
            tensor: t.name.clone(),
            expected,
            found: t.dims.iter().map(|&d| d as usize).collect(),
        };
        let matrix = |name: &str, n_in: usize, n_out: usize| -> Result<MatrixRef, ModelError> {
            let t = find(name)?;
            check_type(t)?;
            if t.dims != [n_in as u64, n_out as u64] {
                return Err(shape_err(t, vec![n_in, n_out]));
            }
            Ok(MatrixRef { ty: t.ty, n_in, n_out, offset: t.offset as usize, n_bytes: t.n_bytes as usize })
        };
        let vector = |name: &str, n: usize| -> Result<Vec<f32>, ModelError> {
            let t = find(name)?;
            check_type(t)?;
            if t.dims != [n as u64] {
                return Err(shape_err(t, vec![n]));
            }
            let mut v = vec![0.0; n];
            dequantize(t.ty, gguf.tensor_data(t), &mut v).map_err(|e| ModelError::BadTensor {
                file: file(),
                tensor: name.to_owned(),
                what: e.to_string(),
            })?;
            Ok(v)
        };
        let optional_vector = |name: &str, n: usize| match gguf.tensor(name) {
            Some(_) => vector(name, n).map(Some),
            None => Ok(None),
        };
        let (d, q_dim, kv) = (c.n_embd, c.q_dim(), c.kv_dim());
        // A 3-D tensor [n_in, n_out, n]: n matrices one after the other.
        let stacked = |name: &str, n_in: usize, n_out: usize, n: usize| -> Result<Vec<MatrixRef>, ModelError> {
            let t = find(name)?;
            check_type(t)?;
            if t.dims != [n_in as u64, n_out as u64, n as u64] {
                return Err(shape_err(t, vec![n_in, n_out, n]));
            }
            let all =
                MatrixRef { ty: t.ty, n_in, n_out: n_out * n, offset: t.offset as usize, n_bytes: t.n_bytes as usize };
            Ok((0..n).map(|e| all.rows(e * n_out, n_out)).collect())
        };
        let token_embd = matrix("token_embd.weight", d, c.n_vocab)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            // Newer llama.cpp converters may write q, k and v as one `attn_qkv` matrix (rows q,
            // then k, then v: `llm_graph_context::build_qkv` views it so). Each output row is its
            // own dot product, so the three row ranges are the three matrices, number for number.
            let ((wq, wk, wv), (bq, bk, bv)) = match gguf.tensor(&n("attn_qkv.weight")) {
                Some(_) => {
                    let qkv = matrix(&n("attn_qkv.weight"), d, q_dim + 2 * kv)?;
                    let bias = optional_vector(&n("attn_qkv.bias"), q_dim + 2 * kv)?;
                    let bias_part = |r: std::ops::Range<usize>| bias.as_ref().map(|b| b[r].to_vec());
                    (
                        (qkv.rows(0, q_dim), qkv.rows(q_dim, kv), qkv.rows(q_dim + kv, kv)),
                        (bias_part(0..q_dim), bias_part(q_dim..q_dim + kv), bias_part(q_dim + kv..q_dim + 2 * kv)),
                    )
                }
                None => (
                    (
                        matrix(&n("attn_q.weight"), d, q_dim)?,
                        matrix(&n("attn_k.weight"), d, kv)?,
                        matrix(&n("attn_v.weight"), d, kv)?,
                    ),
                    (
                        optional_vector(&n("attn_q.bias"), q_dim)?,
                        optional_vector(&n("attn_k.bias"), kv)?,
                        optional_vector(&n("attn_v.bias"), kv)?,
                    ),
                ),
            };
            // The MoE FFN (llama.cpp's `llama_model_llada_moe` / `llama_model_rnd1` tensors):
            // the router [d, n_expert], the experts' gate and up [d, n_ff_exp, n_expert] and down
            // [n_ff_exp, d, n_expert].
            let ffn = match &c.moe {
                None => Ffn::Dense(Expert {
                    gate: matrix(&n("ffn_gate.weight"), d, c.n_ff)?,
                    up: matrix(&n("ffn_up.weight"), d, c.n_ff)?,
                    down: matrix(&n("ffn_down.weight"), c.n_ff, d)?,
                }),
                Some(m) => {
                    let gates = stacked(&n("ffn_gate_exps.weight"), d, m.n_ff_exp, m.n_expert)?;
                    let ups = stacked(&n("ffn_up_exps.weight"), d, m.n_ff_exp, m.n_expert)?;
                    let downs = stacked(&n("ffn_down_exps.weight"), m.n_ff_exp, d, m.n_expert)?;
                    Ffn::Moe {
                        router: matrix(&n("ffn_gate_inp.weight"), d, m.n_expert)?,
                        experts: gates
                            .into_iter()
                            .zip(ups)
                            .zip(downs)
                            .map(|((gate, up), down)| Expert { gate, up, down })
                            .collect(),
                    }
                }
            };
            layers.push(Layer {
                attn_norm: vector(&n("attn_norm.weight"), d)?,
                wq,
                wk,
                wv,
                wo: matrix(&n("attn_output.weight"), q_dim, d)?,
                bq,
                bk,
                bv,
                q_norm: optional_vector(&n("attn_q_norm.weight"), c.head_dim)?,
                k_norm: optional_vector(&n("attn_k_norm.weight"), c.head_dim)?,
                ffn_norm: vector(&n("ffn_norm.weight"), d)?,
                ffn,
            });
        }
        let output = match gguf.tensor("output.weight") {
            Some(_) => matrix("output.weight", d, c.n_vocab)?,
            None => token_embd.clone(),
        };
        Ok(Weights { token_embd, layers, output_norm: vector("output_norm.weight", d)?, output })
    }
}
