//! The tokens matched as whole texts before BPE (control tokens when special tokens are
//! parsed, user-defined tokens always, as llama.cpp's `tokenizer_st_partition`), found in one
//! pass over the text.
//!
//! Why an automaton: searching every special text at every match made the cost (special
//! tokens) x (text length) x (matches); 40 KB of `<|eot_id|>` took 32 s. Aho-Corasick with
//! leftmost-longest matching finds the same tokens (the earliest match, at one position the
//! longest, at one length the lowest id) in time linear in the text.

use aho_corasick::{AhoCorasick, MatchKind};

/// One automaton over a set of token texts, with the id of each pattern.
struct Automaton {
    texts: AhoCorasick,
    ids: Vec<u32>,
}

impl Automaton {
    /// `tokens`: (text, id), in preference order for equal matches.
    fn new<'a>(tokens: impl Iterator<Item = (&'a str, u32)>) -> Automaton {
        let (texts, ids): (Vec<&str>, Vec<u32>) = tokens.unzip();
        let texts = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(texts)
            .expect("an automaton over a bounded vocabulary's texts builds");
        Automaton { texts, ids }
    }
}

pub struct AtomicTokens {
    /// Control and user-defined tokens.
    with_special: Automaton,
    /// User-defined tokens only.
    without_special: Automaton,
}

/// A piece of text: plain text for BPE, or a token matched whole.
pub enum Piece<'t> {
    Text(&'t str),
    Token(u32),
}

impl AtomicTokens {
    /// `tokens`: (text, id, is a control token); empty texts are never matched.
    pub fn new(tokens: &[(String, u32, bool)]) -> AtomicTokens {
        let mut sorted: Vec<&(String, u32, bool)> = tokens.iter().filter(|t| !t.0.is_empty()).collect();
        sorted.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        AtomicTokens {
            with_special: Automaton::new(sorted.iter().map(|t| (t.0.as_str(), t.1))),
            without_special: Automaton::new(sorted.iter().filter(|t| !t.2).map(|t| (t.0.as_str(), t.1))),
        }
    }

    /// Splits `text` into plain runs and matched tokens, in order.
    pub fn split<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Piece<'t>> {
        let automaton = if parse_special { &self.with_special } else { &self.without_special };
        let mut pieces = Vec::new();
        let mut at = 0;
        for m in automaton.texts.find_iter(text) {
            if m.start() > at {
                pieces.push(Piece::Text(&text[at..m.start()]));
            }
            pieces.push(Piece::Token(automaton.ids[m.pattern().as_usize()]));
            at = m.end();
        }
        if at < text.len() {
            pieces.push(Piece::Text(&text[at..]));
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(a: &AtomicTokens, text: &str, special: bool) -> Vec<String> {
        a.split(text, special)
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => t.to_string(),
                Piece::Token(id) => format!("#{id}"),
            })
            .collect()
    }

    #[test]
    fn earliest_then_longest_then_lowest_id() {
        let a = AtomicTokens::new(&[
            ("<a>".into(), 5, true),
            ("<a><b>".into(), 6, true),
            ("<b>".into(), 7, false),
            ("<b>".into(), 3, false),
        ]);
        assert_eq!(ids(&a, "x<a><b>y<b>", true), ["x", "#6", "y", "#3"]);
        assert_eq!(ids(&a, "x<a><b>y<b>", false), ["x<a>", "#3", "y", "#3"]);
        assert_eq!(ids(&a, "", true), Vec::<String>::new());
    }
}
