//! The byte-level BPE tokenizer stored in a GGUF file (`tokenizer.ggml.model` = "gpt2").
//! Encoding runs on the `tokenizers` crate built from the GGUF arrays; decoding is our own
//! byte-exact table lookup so that pieces can be streamed and shown per canvas cell.

mod atomic;
mod byte_level;
mod end_of_generation;
pub mod pre;
mod stream;

use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{PreTokenizerWrapper, SplitDelimiterBehavior};

use crate::gguf::{GgufFile, Value};
pub use stream::StreamDecoder;

/// `tokenizer.ggml.token_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_i64(v: i64) -> TokenType {
        match v {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Normal,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("{file}: no tokenizer in this GGUF (tokenizer.ggml.tokens is missing)")]
    Missing { file: String },
    #[error("{file}: tokenizer model '{model}' is not supported (dllm supports byte-level BPE, 'gpt2')")]
    UnsupportedModel { file: String, model: String },
    #[error(
        "{file}: pre-tokenizer '{pre}' is not supported (supported: {supported}); convert the model with a llama.cpp that writes one of these, or report the name"
    )]
    UnsupportedPre { file: String, pre: String, supported: String },
    #[error("{file}: tokenizer metadata is malformed: {what}")]
    Malformed { file: String, what: String },
    #[error("tokenization failed: {0}")]
    Encode(String),
}

/// Options of `Tokenizer::encode`, mirroring llama.cpp's `llama_tokenize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodeOptions {
    /// Prepend BOS when the model asks for it (`tokenizer.ggml.add_bos_token`).
    pub add_special: bool,
    /// Turn the text of control tokens (`<|im_start|>`, ...) into their ids.
    pub parse_special: bool,
}

/// Ids of the tokens the engine treats specially.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    /// Every token that ends a generation, ascending (`end_of_generation` says how the set is
    /// built).
    pub eog: Vec<u32>,
}

pub struct Tokenizer {
    bpe: tokenizers::Tokenizer,
    pieces: Vec<Vec<u8>>,
    types: Vec<TokenType>,
    /// Texts of tokens matched before BPE.
    atomic: atomic::AtomicTokens,
    pub special: SpecialIds,
    pub add_bos: bool,
    pub pre: String,
    /// The row of `pre::PRE_TOKENIZERS` that `pre` names.
    pub pre_tokenizer: &'static pre::PreTokenizer,
}

impl Tokenizer {
    pub fn from_gguf(gguf: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let file = gguf.path().display().to_string();
        let malformed = |what: String| TokenizerError::Malformed { file: file.clone(), what };
        let model = gguf.get_str("tokenizer.ggml.model").unwrap_or("gpt2");
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel { file, model: model.into() });
        }
        let tokens = gguf
            .get("tokenizer.ggml.tokens")
            .ok_or_else(|| TokenizerError::Missing { file: file.clone() })?
            .as_array()
            .ok_or_else(|| malformed("tokenizer.ggml.tokens is not an array".into()))?;
        let tokens: Vec<&str> = tokens
            .iter()
            .map(|v| v.as_str().ok_or_else(|| malformed("tokenizer.ggml.tokens holds a non-string".into())))
            .collect::<Result<_, _>>()?;
        let types: Vec<TokenType> = match gguf.get("tokenizer.ggml.token_type").and_then(Value::as_array) {
            Some(a) if a.len() == tokens.len() => {
                a.iter().map(|v| TokenType::from_i64(v.as_i64().unwrap_or(1))).collect()
            }
            Some(a) => return Err(malformed(format!("{} token types for {} tokens", a.len(), tokens.len()))),
            None => vec![TokenType::Normal; tokens.len()],
        };
        let merges: Vec<(String, String)> = match gguf.get("tokenizer.ggml.merges").and_then(Value::as_array) {
            Some(a) => a
                .iter()
                .map(|v| {
                    let s = v.as_str().ok_or_else(|| malformed("a merge is not a string".into()))?;
                    // The first character may itself be a space-like symbol; split after it.
                    let split = s.char_indices().skip(1).find(|&(_, c)| c == ' ').map(|(i, _)| i);
                    let i = split.ok_or_else(|| malformed(format!("merge {s:?} has no space")))?;
                    Ok((s[..i].to_owned(), s[i + 1..].to_owned()))
                })
                .collect::<Result<_, TokenizerError>>()?,
            None => Vec::new(),
        };
        // A file without the key gets llama.cpp's `default` (which warns that quality suffers).
        let pre = gguf.get_str("tokenizer.ggml.pre").unwrap_or("default").to_owned();
        let Some(pre_tokenizer) = pre::find(&pre) else {
            let supported = pre::all_names().collect::<Vec<_>>().join(", ");
            return Err(TokenizerError::UnsupportedPre { file, pre, supported });
        };
        let n = tokens.len();
        let mut vocab = Vocab::default();
        for (i, t) in tokens.iter().enumerate() {
            vocab.entry((*t).to_owned()).or_insert(i as u32);
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(pre_tokenizer.ignore_merges)
            .build()
            .map_err(|e| malformed(format!("BPE: {e}")))?;
        let mut steps = pre_tokenizer
            .regexes
            .iter()
            .map(|r| {
                Split::new(SplitPattern::Regex((*r).into()), SplitDelimiterBehavior::Isolated, false)
                    .map(PreTokenizerWrapper::Split)
                    .map_err(|e| malformed(format!("pre-tokenizer {pre} regex {r}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        steps.push(PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, false)));
        let pre_tok = Sequence::new(steps);
        let mut tk = tokenizers::Tokenizer::new(bpe);
        tk.with_pre_tokenizer(Some(pre_tok));

        let pieces = tokens
            .iter()
            .zip(&types)
            .map(|(t, ty)| match ty {
                TokenType::Normal | TokenType::Byte => byte_level::decode_token(t),
                _ => t.as_bytes().to_vec(),
            })
            .collect();
        let atomic: Vec<(String, u32, bool)> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter_map(|(i, (t, ty))| match ty {
                TokenType::Control if !t.is_empty() => Some((t.to_string(), i as u32, true)),
                TokenType::UserDefined if !t.is_empty() => Some((t.to_string(), i as u32, false)),
                _ => None,
            })
            .collect();
        let atomic = atomic::AtomicTokens::new(&atomic);

        let id = |key: &str| -> Result<Option<u32>, TokenizerError> {
            match gguf.get_u64(key) {
                Some(v) if (v as usize) < n => Ok(Some(v as u32)),
                Some(v) => Err(malformed(format!("{key} = {v} is outside the {n}-token vocabulary"))),
                None => Ok(None),
            }
        };
        let by_text = |texts: &[&str]| texts.iter().find_map(|t| tokens.iter().position(|x| x == t).map(|i| i as u32));
        let eos = id("tokenizer.ggml.eos_token_id")?;
        // Converters often omit EOT; llama.cpp then finds it by its text.
        let eot = id("tokenizer.ggml.eot_token_id")?.or_else(|| by_text(&["<|eot_id|>", "<|im_end|>", "<|end|>"]));
        let keyed = end_of_generation::KeyedIds {
            eos,
            eot,
            eom: id("tokenizer.ggml.eom_token_id")?,
            fim: [
                id("tokenizer.ggml.fim_pad_token_id")?,
                id("tokenizer.ggml.fim_rep_token_id")?,
                id("tokenizer.ggml.fim_sep_token_id")?,
            ],
        };
        let special = SpecialIds {
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos,
            eot,
            pad: id("tokenizer.ggml.padding_token_id")?,
            mask: id("tokenizer.ggml.mask_token_id")?,
            eog: end_of_generation::set(&tokens, &keyed),
        };
        // llama.cpp: the pre-tokenizer's default, overridden by the file's key.
        let add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token").unwrap_or(pre_tokenizer.add_bos);
        Ok(Tokenizer { bpe: tk, pieces, types, atomic, special, add_bos, pre, pre_tokenizer })
    }

    pub fn n_vocab(&self) -> usize {
        self.pieces.len()
    }

    /// Text to ids. Control-token texts become their ids only with `parse_special`;
    /// user-defined tokens always do (as in llama.cpp).
    pub fn encode(&self, text: &str, opts: EncodeOptions) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        if opts.add_special && self.add_bos {
            ids.extend(self.special.bos);
        }
        for piece in self.atomic.split(text, opts.parse_special) {
            match piece {
                atomic::Piece::Token(id) => ids.push(id),
                atomic::Piece::Text(plain) => {
                    let enc = self.bpe.encode_fast(plain, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
                    ids.extend_from_slice(enc.get_ids());
                }
            }
        }
        Ok(ids)
    }

    /// The bytes of one token (its text for control tokens); empty for an unknown id.
    pub fn piece_bytes(&self, id: u32) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// One token as text for display (invalid UTF-8 shown as U+FFFD).
    pub fn piece(&self, id: u32) -> String {
        String::from_utf8_lossy(self.piece_bytes(id)).into_owned()
    }

    /// What a canvas cell shows for a token: the mask as a shaded block, line breaks and tabs
    /// made visible, and `[id]` for a token with no text.
    pub fn cell_text(&self, id: u32, mask: u32) -> String {
        if id == mask {
            return "\u{2591}\u{2591}".into();
        }
        let shown = self.piece(id).replace('\n', "\u{21b5}").replace('\t', "\u{21e5}");
        if shown.is_empty() { format!("[{id}]") } else { shown }
    }

    /// A canvas as one line of text: each token's text, each masked position a `░` (what the
    /// terminal views and the server's step events show).
    pub fn canvas_text(&self, ids: &[u32], mask: u32) -> String {
        ids.iter().map(|&id| if id == mask { "\u{2591}".to_string() } else { self.piece(id) }).collect()
    }

    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// Whether the token is a control, unused or unknown token rather than text.
    pub fn is_special(&self, id: u32) -> bool {
        matches!(self.token_type(id), Some(TokenType::Control | TokenType::Unused | TokenType::Unknown))
    }

    /// Ids to bytes; `skip_special` leaves out control, unused and unknown tokens.
    pub fn decode_bytes(&self, ids: &[u32], skip_special: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if !(skip_special && self.is_special(id)) {
                out.extend_from_slice(self.piece_bytes(id));
            }
        }
        out
    }

    /// Ids to text (invalid UTF-8 shown as U+FFFD).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, skip_special)).into_owned()
    }
}
