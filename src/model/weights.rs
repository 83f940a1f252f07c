//! The tensors of the LLaDA/Dream backbone, located in the GGUF file and checked once at load:
//! present, of a supported type, of the expected shape. Matrices stay in the memory map;
//! small vectors (norm weights, biases) are dequantized to f32.

use std::sync::Arc;

use crate::cpu::repack::Packed;
use crate::gguf::{GgufFile, TensorInfo};
use crate::model::{ModelConfig, ModelError};
use crate::ops::matmul::Matrix;
use crate::quant::dequantize;

/// Where a weight matrix lives in the file, and its interleaved copy when the CPU kernels
/// use one.
#[derive(Clone)]
pub struct MatrixRef {
    pub ty: crate::quant::GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub offset: usize,
    pub n_bytes: usize,
    pub packed: Option<Arc<Packed>>,
}

impl MatrixRef {
    pub fn view<'a>(&'a self, gguf: &'a GgufFile) -> Matrix<'a> {
        let data = gguf.data_range(self.offset as u64, self.n_bytes as u64);
        Matrix { ty: self.ty, n_in: self.n_in, n_out: self.n_out, data, packed: self.packed.as_deref() }
    }
}

pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: MatrixRef,
    pub wk: MatrixRef,
    pub wv: MatrixRef,
    pub wo: MatrixRef,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub gate: MatrixRef,
    pub up: MatrixRef,
    pub down: MatrixRef,
}

pub struct Weights {
    pub token_embd: MatrixRef,
    pub layers: Vec<Layer>,
    pub output_norm: Vec<f32>,
    /// The LM head; the embedding matrix when the file ties them (no `output.weight`).
    pub output: MatrixRef,
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
            Ok(MatrixRef {
                ty: t.ty,
                n_in,
                n_out,
                offset: t.offset as usize,
                n_bytes: t.n_bytes as usize,
                packed: None,
            })
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
        let (d, kv) = (c.n_embd, c.n_head_kv * c.head_dim);
        let token_embd = matrix("token_embd.weight", d, c.n_vocab)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            layers.push(Layer {
                attn_norm: vector(&n("attn_norm.weight"), d)?,
                wq: matrix(&n("attn_q.weight"), d, d)?,
                wk: matrix(&n("attn_k.weight"), d, kv)?,
                wv: matrix(&n("attn_v.weight"), d, kv)?,
                wo: matrix(&n("attn_output.weight"), d, d)?,
                bq: optional_vector(&n("attn_q.bias"), d)?,
                bk: optional_vector(&n("attn_k.bias"), kv)?,
                bv: optional_vector(&n("attn_v.bias"), kv)?,
                ffn_norm: vector(&n("ffn_norm.weight"), d)?,
                gate: matrix(&n("ffn_gate.weight"), d, c.n_ff)?,
                up: matrix(&n("ffn_up.weight"), d, c.n_ff)?,
                down: matrix(&n("ffn_down.weight"), c.n_ff, d)?,
            });
        }
        let output = match gguf.tensor("output.weight") {
            Some(_) => matrix("output.weight", d, c.n_vocab)?,
            None => token_embd.clone(),
        };
        Ok(Weights { token_embd, layers, output_norm: vector("output_norm.weight", d)?, output })
    }
}

impl Weights {
    /// The matrices the forward pass multiplies with (not the embedding table, which is only
    /// read row by row, unless it doubles as the LM head).
    pub fn products_mut(&mut self) -> impl Iterator<Item = &mut MatrixRef> {
        self.layers
            .iter_mut()
            .flat_map(|l| [&mut l.wq, &mut l.wk, &mut l.wv, &mut l.wo, &mut l.gate, &mut l.up, &mut l.down])
            .chain(std::iter::once(&mut self.output))
    }
}
