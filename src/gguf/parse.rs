//! The GGUF header parser: a bounds-checked cursor over the mapped bytes. Every length and
//! count read from the file is checked against the bytes that remain before anything is
//! allocated for it, so a corrupt file yields an error, never a panic or a huge allocation.

use super::value::{Value, ValueType};

/// What went wrong, before the file name is attached.
pub(super) enum ParseFail {
    Truncated { what: String, offset: u64 },
    Corrupt(String),
}

pub(super) type ParseResult<T> = Result<T, ParseFail>;

/// Nested arrays deeper than this are rejected (real files use one level).
const MAX_ARRAY_DEPTH: usize = 8;

/// Array elements a header may hold in all. A parsed value takes 32 bytes of memory however
/// few it takes in the file (a u8 takes one), so a count that fits the file can still ask for
/// many times its size; this bound keeps the header's memory under 128 MiB. The largest real
/// vocabularies (Gemma's 262k tokens with scores and types, Qwen2's 151k tokens and merges)
/// hold under a million values.
pub(super) const MAX_ARRAY_VALUES: u64 = 1 << 22;

/// A capacity to reserve for `count` items read from a file: the count, up to a page of items.
/// Beyond that the vector grows as items are actually read, so an absurd count costs nothing
/// before it is found to be a lie.
pub(super) fn capacity(count: u64) -> usize {
    count.min(4096) as usize
}

pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Array elements still allowed (`MAX_ARRAY_VALUES` in all).
    values_left: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0, values_left: MAX_ARRAY_VALUES }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> ParseResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(ParseFail::Truncated {
                what: format!("{} needs {n} bytes, {} left", what(), self.remaining()),
                offset: self.pos as u64,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> ParseResult<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("take returned N bytes"))
    }

    pub fn u32(&mut self, what: &dyn Fn() -> String) -> ParseResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &dyn Fn() -> String) -> ParseResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub fn string(&mut self, what: &dyn Fn() -> String) -> ParseResult<String> {
        let len = self.u64(&|| format!("length of {}", what()))?;
        let bytes = self.take(len, &|| format!("{} ({len}-byte string)", what()))?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ParseFail::Corrupt(format!("{} is not valid UTF-8", what())))
    }

    /// Checks that `count` items of at least `min_size` bytes each can still fit in the file.
    pub fn check_count(&self, count: u64, min_size: u64, what: &dyn Fn() -> String) -> ParseResult<()> {
        match count.checked_mul(min_size) {
            Some(n) if n <= self.remaining() => Ok(()),
            _ => Err(ParseFail::Truncated {
                what: format!("{} claims {count} entries but only {} bytes remain", what(), self.remaining()),
                offset: self.pos as u64,
            }),
        }
    }

    pub fn value(&mut self, ty: ValueType, what: &dyn Fn() -> String, depth: usize) -> ParseResult<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>(what)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(what)?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => Value::U32(self.u32(what)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => Value::U64(self.u64(what)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            ValueType::Bool => match self.array::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(ParseFail::Corrupt(format!("{} is a bool with byte value {b}", what()))),
            },
            ValueType::String => Value::String(self.string(what)?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(ParseFail::Corrupt(format!("{} nests arrays deeper than {MAX_ARRAY_DEPTH}", what())));
                }
                let type_id = self.u32(&|| format!("element type of {}", what()))?;
                let elem = ValueType::from_id(type_id)
                    .ok_or_else(|| ParseFail::Corrupt(format!("{} has unknown element type {type_id}", what())))?;
                let count = self.u64(&|| format!("length of {}", what()))?;
                self.check_count(count, elem.min_encoded_size(), what)?;
                if count > self.values_left {
                    return Err(ParseFail::Corrupt(format!(
                        "{} claims {count} entries, past the {MAX_ARRAY_VALUES} array values dllm reads from a header in all (real vocabularies hold under a million)",
                        what()
                    )));
                }
                self.values_left -= count;
                let mut items = Vec::with_capacity(capacity(count));
                for i in 0..count {
                    items.push(self.value(elem, &|| format!("{}[{i}]", what()), depth + 1)?);
                }
                Value::Array(items)
            }
        })
    }
}
