//! Decoding token by token without printing half of a UTF-8 character.

/// Buffers the bytes of an unfinished UTF-8 sequence until the token that completes it.
#[derive(Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// Adds a token's bytes; returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap());
                    match e.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Bytes that can never become valid: show a replacement character.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Flushes what is left at the end of the stream (an unfinished sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_character_waits_for_its_end() {
        let mut d = StreamDecoder::default();
        let euro = "€".as_bytes();
        assert_eq!(d.push(b"a"), "a");
        assert_eq!(d.push(&euro[..1]), "");
        assert_eq!(d.push(&euro[1..]), "€");
        assert_eq!(d.push(&[0xff, b'b']), "\u{fffd}b");
        assert_eq!(d.push(&euro[..2]), "");
        assert_eq!(d.finish(), "\u{fffd}");
    }
}
