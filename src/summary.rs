//! A description of a GGUF file for people and tools: what `dllm inspect` prints and what the
//! app's model card shows. The JSON form is a stable interface (documented in the README):
//! fields may be added, never renamed or removed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::GgmlType;

#[derive(Debug, Serialize)]
pub struct Summary {
    pub file: String,
    pub file_bytes: u64,
    pub gguf_version: u32,
    pub alignment: u64,
    pub architecture: Option<String>,
    pub name: Option<String>,
    /// Every `<architecture>.*` key, without the prefix.
    pub hyperparameters: BTreeMap<String, serde_json::Value>,
    pub n_params: u64,
    pub tensor_bytes: u64,
    pub types: Vec<TypeTotal>,
    pub tensors: Vec<TensorInfo>,
    pub tokenizer: Option<TokenizerSummary>,
    pub chat_template: bool,
    pub shift_logits: Option<bool>,
    /// Every metadata key with a short rendering of its value (long arrays abbreviated).
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub struct TypeTotal {
    #[serde(rename = "type")]
    pub ty: GgmlType,
    pub tensors: usize,
    pub params: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct TokenizerSummary {
    pub model: Option<String>,
    pub pre: Option<String>,
    pub n_tokens: usize,
    pub n_merges: usize,
    pub bos_token_id: Option<u64>,
    pub eos_token_id: Option<u64>,
    pub eot_token_id: Option<u64>,
    pub padding_token_id: Option<u64>,
    pub mask_token_id: Option<u64>,
    pub add_bos_token: Option<bool>,
}

impl Summary {
    pub fn of(gguf: &GgufFile) -> Summary {
        let arch = gguf.architecture().map(str::to_owned);
        let hyperparameters = match &arch {
            Some(a) => gguf
                .metadata()
                .iter()
                .filter_map(|(k, v)| {
                    let rest = k.strip_prefix(a.as_str())?.strip_prefix('.')?;
                    Some((rest.to_owned(), serde_json::to_value(v).unwrap_or_default()))
                })
                .collect(),
            None => BTreeMap::new(),
        };
        let mut totals: BTreeMap<GgmlType, TypeTotal> = BTreeMap::new();
        for t in gguf.tensors() {
            let e = totals.entry(t.ty).or_insert(TypeTotal { ty: t.ty, tensors: 0, params: 0, bytes: 0 });
            e.tensors += 1;
            e.params += t.n_values();
            e.bytes += t.n_bytes;
        }
        let array_len = |k: &str| gguf.get(k).and_then(|v| v.as_array()).map_or(0, <[_]>::len);
        let tokenizer = gguf.get("tokenizer.ggml.tokens").map(|_| TokenizerSummary {
            model: gguf.get_str("tokenizer.ggml.model").map(str::to_owned),
            pre: gguf.get_str("tokenizer.ggml.pre").map(str::to_owned),
            n_tokens: array_len("tokenizer.ggml.tokens"),
            n_merges: array_len("tokenizer.ggml.merges"),
            bos_token_id: gguf.get_u64("tokenizer.ggml.bos_token_id"),
            eos_token_id: gguf.get_u64("tokenizer.ggml.eos_token_id"),
            eot_token_id: gguf.get_u64("tokenizer.ggml.eot_token_id"),
            padding_token_id: gguf.get_u64("tokenizer.ggml.padding_token_id"),
            mask_token_id: gguf.mask_token_id(),
            add_bos_token: gguf.get_bool("tokenizer.ggml.add_bos_token"),
        });
        Summary {
            file: gguf.path().display().to_string(),
            file_bytes: gguf.file_len(),
            gguf_version: gguf.version(),
            alignment: gguf.alignment(),
            name: gguf.get_str("general.name").map(str::to_owned),
            architecture: arch,
            hyperparameters,
            n_params: totals.values().map(|t| t.params).sum(),
            tensor_bytes: totals.values().map(|t| t.bytes).sum(),
            types: totals.into_values().collect(),
            tensors: gguf.tensors().to_vec(),
            tokenizer,
            chat_template: gguf.chat_template().is_some(),
            shift_logits: gguf.shift_logits(),
            metadata: gguf.metadata().iter().map(|(k, v)| (k.clone(), v.summary())).collect(),
        }
    }
}

/// Bytes in a human unit (KiB, MiB, GiB).
pub fn human_bytes(n: u64) -> String {
    bytesize::ByteSize::b(n).display().iec().to_string()
}

/// A parameter count in a human unit (K, M, B).
pub fn human_count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.2} B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2} M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} K", n as f64 / 1e3),
        n => n.to_string(),
    }
}
