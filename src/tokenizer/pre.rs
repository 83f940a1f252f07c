//! The pre-tokenizers of byte-level BPE vocabularies, as data: one row per family of
//! `tokenizer.ggml.pre` names, with llama.cpp's regexes and flags.
//!
//! Source: llama.cpp `src/llama-vocab.cpp` (as vendored by llama-cpp-python 0.3.36):
//! `llama_vocab::impl::load` maps each name to a `LLAMA_VOCAB_PRE_TYPE_*` and sets
//! `ignore_merges`, `add_bos` and `clean_spaces`; `llm_tokenizer_bpe`'s constructor gives each
//! type its regexes. llama.cpp applies the regexes in order, each one splitting the pieces the
//! previous one left (a match and the text between matches are pieces of their own); the
//! tokenizer builds the same sequence of isolating splits. Every regex is llama.cpp's adapted
//! form (the case-insensitive group of the original written out, possessive quantifiers made
//! greedy), not the one in the model's `tokenizer.json`.

/// The Llama-3 regex (`LLAMA_VOCAB_PRE_TYPE_LLAMA3`, also DBRX, Smaug, ChatGLM-4).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's: Llama-3's with digits one at a time (`QWEN2`, also StableLM-2, Hunyuan, Grok-2).
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-2's original (`GPT2`, also MPT, OLMo, JAIS, Trillion, Granite-Docling).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// One family of pre-tokenizer names.
#[derive(Debug, serde::Serialize)]
pub struct PreTokenizer {
    /// The `tokenizer.ggml.pre` values llama.cpp maps to this pre-tokenizer.
    pub names: &'static [&'static str],
    /// Applied in order, each splitting the pieces the previous one left.
    pub regexes: &'static [&'static str],
    /// A piece that is a whole vocabulary entry is that token, without running the merges.
    pub ignore_merges: bool,
    /// Whether BOS is prepended when the file has no `tokenizer.ggml.add_bos_token`.
    pub add_bos: bool,
    /// llama.cpp's detokenizer removes the spaces the pre-tokenizer put before punctuation
    /// (`clean_up_tokenization_spaces`); dllm decodes the bytes as they are and reports the flag
    /// (`dllm inspect`).
    pub clean_spaces: bool,
}

const fn row(names: &'static [&'static str], regexes: &'static [&'static str]) -> PreTokenizer {
    PreTokenizer { names, regexes, ignore_merges: false, add_bos: false, clean_spaces: true }
}

impl PreTokenizer {
    const fn merges_ignored(mut self) -> Self {
        self.ignore_merges = true;
        self
    }
    const fn with_bos(mut self) -> Self {
        self.add_bos = true;
        self
    }
    const fn spaces_kept(mut self) -> Self {
        self.clean_spaces = false;
        self
    }
}

/// Every pre-tokenizer dllm ports, the ones diffusion GGUFs carry first: LLaDA-8B
/// (`bailingmoe`), LLaDA-MoE (`llada-moe`, `bailingmoe2`), Dream, DiffuCoder and RND1 (`qwen2`).
pub static PRE_TOKENIZERS: &[PreTokenizer] = &[
    // LLAMA_VOCAB_PRE_TYPE_BAILINGMOE: Ant's Ling tokenizer. Digits one at a time, and a
    // newline run is one character (`\s*[\r\n]`, not Llama-3's `\s*[\r\n]+`).
    row(
        &["bailingmoe", "bailingmoe2", "llada-moe"],
        &[
            r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
    )
    .spaces_kept(),
    row(&["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"], &[QWEN2]).spaces_kept(),
    // `megrez` is QWEN2 with clean_spaces left on.
    row(&["megrez", "stablelm2"], &[QWEN2]),
    row(&["hunyuan", "solar-open", "grok-2"], &[QWEN2]).spaces_kept(),
    row(
        &["qwen35"],
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    )
    .spaces_kept(),
    row(
        &["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"],
        &[LLAMA3],
    )
    .merges_ignored()
    .with_bos(),
    row(&["dbrx", "smaug-bpe"], &[LLAMA3]),
    row(&["chatglm-bpe"], &[LLAMA3]),
    row(&["glm4", "glm5"], &[LLAMA3]).merges_ignored(),
    row(
        &[
            "gpt-2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "mpt",
            "olmo",
            "jais",
            "exaone4",
        ],
        &[GPT2],
    ),
    row(&["trillion", "granite-docling"], &[GPT2]).spaces_kept(),
    // LLAMA_VOCAB_PRE_TYPE_STARCODER and the types that share its regexes: digits split apart
    // first, then GPT-2's pattern.
    row(&["starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"], &[r"\p{N}", GPT2]),
    row(&["command-r", "smollm"], &[r"\p{N}", GPT2]).spaces_kept(),
    row(
        &["seed-coder"],
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    )
    .spaces_kept(),
    row(
        &["falcon"],
        &[r"[\p{P}\$\+<=>\^~\|`]+", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)", r"[0-9][0-9][0-9]"],
    ),
    row(&["deepseek-coder"], &[r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"]).spaces_kept(),
    row(
        &["minicpm5"],
        &[
            r"\p{N}{1,3}",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    )
    .merges_ignored(),
    row(
        &["ufakzeka"],
        &[r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    )
    .spaces_kept(),
    // LLAMA_VOCAB_PRE_TYPE_DEFAULT: what llama.cpp runs for `default` (and, with a warning, for
    // a file that names no pre-tokenizer).
    row(
        &["default"],
        &[
            r"[\p{P}\$\+<=>\^~\|]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"\p{N}+",
            r"[0-9][0-9][0-9]",
        ],
    ),
];

/// The pre-tokenizer llama.cpp runs for `name`, if dllm ports it.
pub fn find(name: &str) -> Option<&'static PreTokenizer> {
    PRE_TOKENIZERS.iter().find(|p| p.names.contains(&name))
}

/// Every name of the table, for error messages and documentation.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    PRE_TOKENIZERS.iter().flat_map(|p| p.names.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::SplitDelimiterBehavior;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};

    #[test]
    fn names_are_unique_and_every_regex_compiles() {
        let names: Vec<&str> = all_names().collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[i + 1..].contains(n), "{n} is listed twice");
        }
        for p in PRE_TOKENIZERS {
            for r in p.regexes {
                let split = Split::new(SplitPattern::Regex((*r).into()), SplitDelimiterBehavior::Isolated, false);
                assert!(split.is_ok(), "{:?}: {r}", p.names);
            }
        }
    }

    #[test]
    fn the_diffusion_models_names_are_found() {
        for name in ["bailingmoe", "bailingmoe2", "llada-moe", "qwen2", "llama-bpe", "llama3", "gpt-2", "default"] {
            assert!(find(name).is_some(), "{name}");
        }
        assert!(find("bailingmoe").unwrap().regexes[0].contains(r"\s*[\r\n]|"));
        assert!(find("llama-bpe").unwrap().ignore_merges && find("llama-bpe").unwrap().add_bos);
        assert!(!find("qwen2").unwrap().add_bos);
        assert!(find("nonesuch").is_none());
    }
}
