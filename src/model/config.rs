//! Model hyperparameters read from GGUF metadata. One backbone serves LLaDA, Dream and the
//! mixture-of-experts models LLaDA-MoE and RND1; what differs between them (RoPE style, biases,
//! q/k norms, the FFN's experts, logit shift, mask id) is data here, not code paths.

use crate::gguf::GgufFile;
use crate::model::ModelError;

/// The model families dllm runs, each with its official sampler. LLaDA-8B-Instruct, LLaDA-1.5
/// and LLaDA-MoE-7B-A1B load as `Llada`; Dream-v0-Instruct-7B, Dream-Coder-7B and DiffuCoder-7B
/// as `Dream`; RND1-30B-A3B as `Rnd1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Llada,
    Dream,
    Rnd1,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Llada => "llada",
            Family::Dream => "dream",
            Family::Rnd1 => "rnd1",
        }
    }

    /// The name people write: "LLaDA", "Dream", "RND1".
    pub fn title(self) -> &'static str {
        match self {
            Family::Llada => "LLaDA",
            Family::Dream => "Dream",
            Family::Rnd1 => "RND1",
        }
    }
}

/// A mixture-of-experts FFN (llama.cpp's `build_moe_ffn` with softmax gating, no shared expert):
/// each row goes to the `n_expert_used` experts its router ranks highest.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeConfig {
    pub n_expert: usize,
    pub n_expert_used: usize,
    /// Each expert's hidden width (`expert_feed_forward_length`).
    pub n_ff_exp: usize,
    /// The kept experts' weights are divided by their sum (RND1, as Qwen3-MoE; not LLaDA-MoE:
    /// llama.cpp's `llama_model_rnd1` and `llama_model_llada_moe` graphs).
    pub normalize_weights: bool,
    /// `expert_weights_scale`, applied when it is neither 0 nor 1 (as llama.cpp does).
    pub weights_scale: f32,
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
    /// `general.architecture`: `llada`, `dream`, `llada-moe` or `rnd1`.
    pub architecture: String,
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
    /// The logit for position i comes from the hidden state at i-1 (Dream, RND1).
    pub shift_logits: bool,
    /// The FFN's experts (`llada-moe`, `rnd1`); None for a dense FFN.
    pub moe: Option<MoeConfig>,
}

impl ModelConfig {
    pub fn from_gguf(gguf: &GgufFile) -> Result<ModelConfig, ModelError> {
        let file = gguf.path().display().to_string();
        let arch = gguf
            .architecture()
            .ok_or_else(|| ModelError::MissingKey { file: file.clone(), key: "general.architecture".into() })?;
        // RoPE pairing per architecture: llama.cpp's `llama_model_rope_type` runs LLaDA with
        // NORM (on q/k weights its converter permuted) and Dream, LLaDA-MoE and RND1 with NEOX.
        let (family, rope_style) = match arch {
            "llada" => (Family::Llada, RopeStyle::Adjacent),
            "dream" => (Family::Dream, RopeStyle::Halves),
            "llada-moe" => (Family::Llada, RopeStyle::Halves),
            "rnd1" => (Family::Rnd1, RopeStyle::Halves),
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
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(bad("attention.head_count_kv", format!("{n_head_kv} does not divide head_count {n_head}")));
        }
        // `attention.key_length` when the file gives it (RND1's heads x key_length is not
        // embedding_length), else embedding_length / head_count, as llama.cpp's loader.
        let head_dim = match gguf.get(&format!("{arch}.attention.key_length")) {
            Some(_) => int("attention.key_length")?,
            None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
            None => {
                return Err(bad("attention.head_count", format!("{n_head} does not divide embedding_length {n_embd}")));
            }
        };
        if let Some(v) = gguf.get(&format!("{arch}.attention.value_length"))
            && v.as_u64() != Some(head_dim as u64)
        {
            return Err(bad(
                "attention.value_length",
                format!("{} (dllm needs it equal to key_length {head_dim})", v.summary()),
            ));
        }
        let moe = match gguf.get(&format!("{arch}.expert_count")) {
            None => None,
            Some(_) => {
                let (n_expert, n_expert_used) = (int("expert_count")?, int("expert_used_count")?);
                if n_expert_used > n_expert {
                    return Err(bad(
                        "expert_used_count",
                        format!("{n_expert_used} is more than expert_count {n_expert}"),
                    ));
                }
                // llama.cpp: without the key, each expert is feed_forward_length / expert_used_count wide.
                let n_ff_exp = int_or("expert_feed_forward_length", int("feed_forward_length")? / n_expert_used)?;
                Some(MoeConfig {
                    n_expert,
                    n_expert_used,
                    n_ff_exp,
                    normalize_weights: arch == "rnd1",
                    weights_scale: float("expert_weights_scale", 0.0),
                })
            }
        };
        if moe.is_none() && matches!(arch, "llada-moe" | "rnd1") {
            return Err(ModelError::MissingKey { file: file.clone(), key: format!("{arch}.expert_count") });
        }
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
        // Every block has several tensors, so the tensor table bounds the block count before
        // anything is sized by it (a flipped byte once asked for 4e9 blocks, 1.8 TB of them).
        let n_layer = int("block_count")?;
        if n_layer > gguf.tensors().len() {
            return Err(bad(
                "block_count",
                format!("{n_layer}, but the file holds only {} tensors", gguf.tensors().len()),
            ));
        }
        Ok(ModelConfig {
            family,
            architecture: arch.to_owned(),
            n_vocab,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: int("feed_forward_length")?,
            context_length: int_or("context_length", 4096)?,
            rope_base: float("rope.freq_base", 10_000.0),
            rope_dims,
            rope_style,
            rms_eps: float("attention.layer_norm_rms_epsilon", 1e-5),
            // Dream's and RND1's converters write no key; llama-diffusion-cli then shifts. A
            // LLaDA file without the key must not shift, so the default follows the family.
            shift_logits: gguf.shift_logits().unwrap_or(family != Family::Llada),
            moe,
        })
    }

    /// The width of a row of queries (and of attention's output): heads x head size, which is
    /// `n_embd` but for RND1.
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// The width of a row of keys or values.
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}
