//! GPT-2's byte-level alphabet: every byte is shown as one printable character in vocabulary
//! strings (space is 'Ġ', newline 'Ċ', ...). Decoding maps those characters back to bytes.

use std::sync::OnceLock;

/// The character GPT-2 uses for each byte value.
fn byte_to_char() -> &'static [char; 256] {
    static TABLE: OnceLock<[char; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let printable = |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
        let mut table = ['\0'; 256];
        let mut next = 256u32;
        for b in 0..256u32 {
            table[b as usize] = if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap()
            };
        }
        table
    })
}

/// The bytes a byte-level vocabulary string stands for. A character outside the alphabet
/// (never produced by GPT-2-style converters, but possible in hand-made vocabularies) stands
/// for its own UTF-8 bytes.
pub fn decode_token(s: &str) -> Vec<u8> {
    let table = byte_to_char();
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let cp = c as u32;
        let found = if cp < 0x200 { table.iter().position(|&t| t == c) } else { None };
        match found {
            Some(b) => out.push(b as u8),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_characters() {
        assert_eq!(decode_token("Ġthe"), b" the");
        assert_eq!(decode_token("Ċ"), b"\n");
        assert_eq!(decode_token("Ã©"), "é".as_bytes());
        assert_eq!(decode_token("<|im_start|>"), b"<|im_start|>");
    }

    #[test]
    fn alphabet_is_a_bijection() {
        let t = byte_to_char();
        for (b, c) in t.iter().enumerate() {
            assert_eq!(decode_token(&c.to_string()), vec![b as u8]);
        }
    }
}
