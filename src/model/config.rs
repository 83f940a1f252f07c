//! Model hyperparameters read from GGUF metadata. One backbone serves LLaDA and Dream; what
//! differs between them (RoPE style, biases, logit shift, mask id) is data here, not code paths.

use crate::gguf::GgufFile;
use crate::model::ModelError;

/// The model families dllm runs. LLaDA-8B-Instruct and LLaDA-1.5 load as `Llada`;
/// Dream-v0-Instruct-7B, Dream-Coder-7B and DiffuCoder-7B as `Dream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Llada,
    Dream,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Llada => "llada",
            Family::Dream => "dream",
        }
    }

    /// The name people write: "LLaDA", "Dream".
    pub fn title(self) -> &'static str {
        match self {
            Family::Llada => "LLaDA",
            Family::Dream => "Dream",
        }
    }
}

/// Which dimensions RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (2i, 2i+1): llama.cpp's NORM. LLaDA GGUFs store q/k permuted for it.
    Adjacent,
    /// Halves (i, i + d/2): llama.cpp's NEOX, PyTorch's rotate_half. Dream.
    Halves,
}

#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub family: Family,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub context_length: usize,
    pub rope_base: f32,
    pub rope_dims: usize,
    pub rope_style: RopeStyle,
    pub rms_eps: f32,
    /// The logit for position i comes from the hidden state at i-1 (Dream).
    pub shift_logits: bool,
}

impl ModelConfig {
    pub fn from_gguf(gguf: &GgufFile) -> Result<ModelConfig, ModelError> {
        let file = gguf.path().display().to_string();
        let arch = gguf
            .architecture()
            .ok_or_else(|| ModelError::MissingKey { file: file.clone(), key: "general.architecture".into() })?;
        let family = match arch {
            "llada" => Family::Llada,
            "dream" => Family::Dream,
            other => return Err(ModelError::UnsupportedArchitecture { file, arch: other.to_owned() }),
        };
        let int = |suffix: &str| -> Result<usize, ModelError> {
            let key = format!("{arch}.{suffix}");
            match gguf.get(&key) {
                None => Err(ModelError::MissingKey { file: file.clone(), key }),
                Some(v) => v
                    .as_u64()
                    .filter(|&n| n > 0 && n < (1 << 32))
                    .map(|n| n as usize)
                    .ok_or_else(|| ModelError::BadValue { file: file.clone(), key, value: v.summary() }),
            }
        };
        let float = |suffix: &str, default: f64| gguf.get_f64(&format!("{arch}.{suffix}")).unwrap_or(default) as f32;
        let n_embd = int("embedding_length")?;
        let n_head = int("attention.head_count")?;
        // Optional keys: absent means the default; present but unusable is an error.
        let int_or = |suffix: &str, default: usize| match gguf.get(&format!("{arch}.{suffix}")) {
            None => Ok(default),
            Some(_) => int(suffix),
        };
        let n_head_kv = int_or("attention.head_count_kv", n_head)?;
        let bad = |key: &str, value: String| ModelError::BadValue { file: file.clone(), key: key.into(), value };
        if !n_embd.is_multiple_of(n_head) {
            return Err(bad("attention.head_count", format!("{n_head} does not divide embedding_length {n_embd}")));
        }
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(bad("attention.head_count_kv", format!("{n_head_kv} does not divide head_count {n_head}")));
        }
        let head_dim = n_embd / n_head;
        let rope_dims = int_or("rope.dimension_count", head_dim)?;
        if rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
            return Err(bad("rope.dimension_count", format!("{rope_dims} (head size {head_dim})")));
        }
        // The vocabulary is the embedding matrix's height: real checkpoints pad it beyond the
        // tokenizer, and `<arch>.vocab_size` is not always written.
        let embd = gguf
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor { file: file.clone(), tensor: "token_embd.weight".into() })?;
        let n_vocab = embd.dims.get(1).copied().unwrap_or(0) as usize;
        Ok(ModelConfig {
            family,
            n_vocab,
            n_embd,
            n_layer: int("block_count")?,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: int("feed_forward_length")?,
            context_length: int_or("context_length", 4096)?,
            rope_base: float("rope.freq_base", 10_000.0),
            rope_dims,
            rope_style: match family {
                Family::Llada => RopeStyle::Adjacent,
                Family::Dream => RopeStyle::Halves,
            },
            rms_eps: float("attention.layer_norm_rms_epsilon", 1e-5),
            // Dream's converter writes no key; llama-diffusion-cli then shifts. A LLaDA file
            // without the key must not shift, so the default follows the family.
            shift_logits: gguf.shift_logits().unwrap_or(family == Family::Dream),
        })
    }
}
