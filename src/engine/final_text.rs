//! The part of an answer that no later step can change, as text that grows step by step:
//! the committed prefix of the answer (up to its first masked position; committed tokens never
//! change), up to the first end-of-text token, special tokens left out, decoded without ever
//! splitting a character. What a stream sends as OpenAI deltas and `dllm chat` prints.

use crate::decoding::{SpecialTokens, answer_ids};
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// Follows one run's answer.
#[derive(Default)]
pub struct FinalText {
    /// Final tokens already decoded.
    done: usize,
    decoder: StreamDecoder,
}

impl FinalText {
    /// The text that became final since the last call, given the answer part of the canvas.
    pub fn advance(&mut self, answer: &[u32], tokenizer: &Tokenizer, special: &SpecialTokens) -> String {
        let committed = answer.iter().position(|&t| t == special.mask).unwrap_or(answer.len());
        let final_ids = answer_ids(&answer[..committed], special);
        let mut text = String::new();
        for &id in &final_ids[self.done.min(final_ids.len())..] {
            if !tokenizer.is_special(id) {
                text.push_str(&self.decoder.push(tokenizer.piece_bytes(id)));
            }
        }
        self.done = self.done.max(final_ids.len());
        text
    }
}
