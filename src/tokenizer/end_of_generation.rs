//! The set of tokens that end a generation, built the way llama.cpp builds `special_eog_ids`
//! (src/llama-vocab.cpp, `llama_vocab::impl::load`): the FIM pad/rep/sep ids, every token whose
//! text is one llama.cpp recognises, then the EOS, EOT and EOM ids the file names (llama.cpp adds
//! those with a warning when the texts missed them).
//!
//! Two texts are dllm's own, from the models' repositories rather than llama.cpp (which does not
//! stop on them): LLaDA-MoE ends its assistant turn with `<|role_end|>`, and DiffuCoder pads its
//! answers with `<|dlm_pad|>` (its generation code cuts the answer there).

/// The ids of end tokens that metadata keys name.
pub struct KeyedIds {
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    /// `fim_pad`, `fim_rep`, `fim_sep`.
    pub fim: [Option<u32>; 3],
}

/// The token texts llama.cpp treats as end of generation.
const LLAMA_CPP_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// The end texts of diffusion models that llama.cpp's list lacks (see the module comment).
const DIFFUSION_TEXTS: &[&str] = &["<|role_end|>", "<|dlm_pad|>"];

/// The end-of-generation ids of a vocabulary, ascending and without repeats.
pub fn set(tokens: &[&str], keyed: &KeyedIds) -> Vec<u32> {
    let mut ids: Vec<u32> = keyed.fim.iter().flatten().copied().collect();
    ids.extend(
        tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| LLAMA_CPP_TEXTS.contains(t) || DIFFUSION_TEXTS.contains(t))
            .map(|(i, _)| i as u32),
    );
    ids.extend([keyed.eos, keyed.eot, keyed.eom].into_iter().flatten());
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: KeyedIds = KeyedIds { eos: None, eot: None, eom: None, fim: [None; 3] };

    #[test]
    fn texts_and_keys_make_one_sorted_set() {
        let tokens = ["a", "<|im_end|>", "<|endoftext|>", "b", "<|role_end|>", "<|dlm_pad|>"];
        assert_eq!(set(&tokens, &NONE), vec![1, 2, 4, 5]);
        let keyed = KeyedIds { eos: Some(3), eot: Some(1), eom: None, fim: [Some(0), None, None] };
        assert_eq!(set(&tokens, &keyed), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn an_ordinary_vocabulary_has_no_end() {
        assert!(set(&["hello", "<|im_start|>", "<s>"], &NONE).is_empty());
    }
}
