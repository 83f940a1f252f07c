//! GGUF files (v2 and v3): metadata, tensor table, and zero-copy access to tensor data through
//! a read-only memory map.

mod error;
mod parse;
mod value;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::quant::GgmlType;
pub use error::GgufError;
use parse::{Cursor, ParseFail};
pub use value::{Value, ValueType};

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most four dimensions.
const MAX_DIMS: u32 = 4;
/// name (8) + n_dims (4) + type (4) + offset (8): the fewest bytes a tensor record takes.
const MIN_TENSOR_INFO_SIZE: u64 = 24;
/// key length (8) + value type (4) + smallest value (1).
const MIN_KV_SIZE: u64 = 13;

/// One entry of the tensor table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TensorInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: GgmlType,
    /// ggml order: `dims[0]` is the contiguous (input-feature) dimension.
    pub dims: Vec<u64>,
    /// Absolute byte offset of the data in the file.
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    pub fn n_values(&self) -> u64 {
        self.dims.iter().product()
    }
}

enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A parsed GGUF file whose tensor data stays in the (mapped) file.
pub struct GgufFile {
    path: PathBuf,
    /// Which version of which file was mapped (None for in-memory images).
    identity: Option<FileIdentity>,
    bytes: Bytes,
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Maps and parses the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| GgufError::Io { path: path.clone(), source };
        let file = std::fs::File::open(&path).map_err(io)?;
        // SAFETY: the map is read-only; dllm never writes to model files. Another process
        // truncating the file while it is mapped is outside what any mmap reader can defend
        // against (llama.cpp makes the same assumption).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        let identity = file.metadata().ok().map(|m| FileIdentity::of(&m));
        Ok(GgufFile { identity, ..Self::parse(path, Bytes::Mapped(map))? })
    }

    /// Parses a GGUF image held in memory; `name` stands in for the path in messages.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Self, GgufError> {
        Self::parse(name.into(), Bytes::Owned(bytes))
    }

    fn parse(path: PathBuf, bytes: Bytes) -> Result<Self, GgufError> {
        let data = bytes.as_slice();
        let file_len = data.len() as u64;
        if data.len() < 4 || &data[..4] != MAGIC {
            return Err(GgufError::BadMagic { path, found: data[..data.len().min(4)].to_vec() });
        }
        let mut cur = Cursor::new(data);
        let header = (|| -> Result<_, ParseFail> {
            cur.take(4, &|| "magic".into())?;
            let version = cur.u32(&|| "version".into())?;
            Ok(version)
        })();
        let with_path = |path: &Path, fail: ParseFail| match fail {
            ParseFail::Truncated { what, offset } => {
                GgufError::Truncated { path: path.to_path_buf(), what, offset, file_len }
            }
            ParseFail::Corrupt(what) => GgufError::Corrupt { path: path.to_path_buf(), what },
        };
        let version = header.map_err(|f| with_path(&path, f))?;
        if version != 2 && version != 3 {
            return Err(GgufError::UnsupportedVersion { path, version });
        }
        let body = parse_body(&mut cur, file_len);
        let (metadata, raw_tensors, alignment, data_start) = body.map_err(|f| with_path(&path, f))?;

        let corrupt = |what: String| GgufError::Corrupt { path: path.clone(), what };
        let mut index = HashMap::with_capacity(metadata.len());
        for (i, (k, _)) in metadata.iter().enumerate() {
            if index.insert(k.clone(), i).is_some() {
                return Err(corrupt(format!("metadata key '{k}' appears twice")));
            }
        }
        let mut tensors = Vec::with_capacity(raw_tensors.len());
        let mut tensor_index = HashMap::with_capacity(raw_tensors.len());
        for raw in raw_tensors {
            let ty = GgmlType::from_id(raw.type_id).ok_or_else(|| GgufError::UnknownType {
                path: path.clone(),
                tensor: raw.name.clone(),
                type_id: raw.type_id,
            })?;
            let n_values = raw.dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
            let n_values =
                n_values.ok_or_else(|| corrupt(format!("tensor '{}' shape {:?} overflows", raw.name, raw.dims)))?;
            if raw.dims.first().is_some_and(|&d0| !d0.is_multiple_of(ty.block_size() as u64)) {
                return Err(corrupt(format!(
                    "tensor '{}' ({ty}) has row length {} which is not a multiple of the {ty} block size {}",
                    raw.name,
                    raw.dims[0],
                    ty.block_size()
                )));
            }
            let n_bytes = ty.bytes_for(n_values).ok_or_else(|| {
                corrupt(format!("tensor '{}' shape {:?} does not fit {ty} blocks", raw.name, raw.dims))
            })?;
            if !raw.offset.is_multiple_of(alignment) {
                return Err(corrupt(format!(
                    "tensor '{}' data offset {} is not aligned to {alignment} bytes",
                    raw.name, raw.offset
                )));
            }
            let offset = data_start.checked_add(raw.offset);
            let end = offset.and_then(|o| o.checked_add(n_bytes));
            match (offset, end) {
                (Some(offset), Some(end)) if end <= file_len => {
                    if tensor_index.insert(raw.name.clone(), tensors.len()).is_some() {
                        return Err(corrupt(format!("tensor '{}' appears twice", raw.name)));
                    }
                    tensors.push(TensorInfo { name: raw.name, ty, dims: raw.dims, offset, n_bytes });
                }
                _ => {
                    return Err(GgufError::Truncated {
                        path: path.clone(),
                        what: format!(
                            "tensor '{}' data ({n_bytes} bytes at data offset {}) runs past the end of the file",
                            raw.name, raw.offset
                        ),
                        offset: data_start.saturating_add(raw.offset),
                        file_len,
                    });
                }
            }
        }
        let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
        by_offset.sort_by_key(|t| t.offset);
        for pair in by_offset.windows(2) {
            if pair[0].offset + pair[0].n_bytes > pair[1].offset {
                return Err(corrupt(format!("tensors '{}' and '{}' overlap", pair[0].name, pair[1].name)));
            }
        }
        Ok(GgufFile { path, identity: None, bytes, version, alignment, metadata, index, tensors, tensor_index })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    pub fn file_len(&self) -> u64 {
        self.bytes.as_slice().len() as u64
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    /// `general.architecture`, e.g. "llada" or "dream".
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// `diffusion.shift_logits`; None when the file does not say (Dream's converter).
    pub fn shift_logits(&self) -> Option<bool> {
        self.get_bool("diffusion.shift_logits")
    }

    pub fn mask_token_id(&self) -> Option<u64> {
        self.get_u64("tokenizer.ggml.mask_token_id")
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.get_str("tokenizer.chat_template")
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of a tensor, borrowed from the map.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        self.data_range(t.offset, t.n_bytes)
    }

    /// Which version of which file this is, for caches derived from it; None for in-memory
    /// images.
    pub fn identity(&self) -> Option<&FileIdentity> {
        self.identity.as_ref()
    }

    /// Tells the OS that the mapped pages of `offset..offset + n_bytes` are not needed now
    /// (after the weights there were copied into another layout). They are read again from
    /// the file if touched later; nothing changes for in-memory images.
    pub fn release(&self, offset: u64, n_bytes: u64) {
        #[cfg(unix)]
        if let Bytes::Mapped(m) = &self.bytes {
            // Only whole pages inside the range may be dropped.
            let page = 4096u64;
            let start = offset.div_ceil(page) * page;
            let end = (offset + n_bytes) / page * page;
            if end > start {
                // SAFETY: the map is private and read-only and the file is not modified, so
                // dropped pages read back from the file with the same contents when touched.
                let _ = unsafe {
                    m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start as usize, (end - start) as usize)
                };
            }
        }
    }

    /// `n_bytes` bytes at absolute `offset`: a tensor's data or part of it. Tensor ranges
    /// were checked against the file length in `parse`; other ranges panic when outside it.
    pub fn data_range(&self, offset: u64, n_bytes: u64) -> &[u8] {
        &self.bytes.as_slice()[offset as usize..(offset + n_bytes) as usize]
    }
}

/// A file's length, modification time and (on Unix) device and inode: a cache built from the
/// file is valid while these are unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIdentity {
    pub len: u64,
    pub modified_ns: u128,
    pub device: u64,
    pub inode: u64,
}

impl FileIdentity {
    pub fn of(m: &std::fs::Metadata) -> FileIdentity {
        let modified_ns =
            m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        };
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        FileIdentity { len: m.len(), modified_ns, device, inode }
    }
}

struct RawTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    offset: u64,
}

type Body = (Vec<(String, Value)>, Vec<RawTensor>, u64, u64);

fn parse_body(cur: &mut Cursor, file_len: u64) -> Result<Body, ParseFail> {
    let n_tensors = cur.u64(&|| "tensor count".into())?;
    let n_kv = cur.u64(&|| "metadata count".into())?;
    cur.check_count(n_kv, MIN_KV_SIZE, &|| "the metadata table".into())?;
    let mut metadata = Vec::with_capacity(parse::capacity(n_kv));
    for i in 0..n_kv {
        let key = cur.string(&|| format!("metadata key #{i}"))?;
        let type_id = cur.u32(&|| format!("type of metadata '{key}'"))?;
        let ty = ValueType::from_id(type_id)
            .ok_or_else(|| ParseFail::Corrupt(format!("metadata '{key}' has unknown value type {type_id}")))?;
        let value = cur.value(ty, &|| format!("metadata '{key}'"), 0)?;
        metadata.push((key, value));
    }
    cur.check_count(n_tensors, MIN_TENSOR_INFO_SIZE, &|| "the tensor table".into())?;
    let mut tensors = Vec::with_capacity(parse::capacity(n_tensors));
    for i in 0..n_tensors {
        let name = cur.string(&|| format!("name of tensor #{i}"))?;
        let n_dims = cur.u32(&|| format!("dimension count of tensor '{name}'"))?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(ParseFail::Corrupt(format!(
                "tensor '{name}' has {n_dims} dimensions (1 to {MAX_DIMS} allowed)"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(cur.u64(&|| format!("dimension {d} of tensor '{name}'"))?);
        }
        let type_id = cur.u32(&|| format!("type of tensor '{name}'"))?;
        let offset = cur.u64(&|| format!("data offset of tensor '{name}'"))?;
        tensors.push(RawTensor { name, dims, type_id, offset });
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, v)) => match v.as_u64() {
            Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
            _ => return Err(ParseFail::Corrupt(format!("general.alignment {v:?} is not a power of two"))),
        },
    };
    let data_start = (cur.pos() as u64).div_ceil(alignment) * alignment;
    if data_start > file_len && !tensors.is_empty() {
        return Err(ParseFail::Truncated { what: "tensor data section is missing".into(), offset: data_start });
    }
    Ok((metadata, tensors, alignment, data_start))
}
