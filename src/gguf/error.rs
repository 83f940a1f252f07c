use std::path::PathBuf;

/// Why a GGUF file could not be read. Every variant names the file; the `what` strings say
/// which part of it is wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot open {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path} is not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\"); is it a safetensors or PyTorch checkpoint? Convert it with llama.cpp's convert_hf_to_gguf.py"
    )]
    BadMagic { path: PathBuf, found: Vec<u8> },
    #[error(
        "{path}: GGUF version {version} is not supported (dllm reads versions 2 and 3); re-convert the model with a current llama.cpp"
    )]
    UnsupportedVersion { path: PathBuf, version: u32 },
    #[error("{path}: the file is truncated or corrupt: {what} (at byte {offset} of {file_len}); download it again")]
    Truncated { path: PathBuf, what: String, offset: u64, file_len: u64 },
    #[error("{path}: corrupt GGUF: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error("{path}: tensor '{tensor}' has unknown ggml type id {type_id}; this file needs a newer runtime")]
    UnknownType { path: PathBuf, tensor: String, type_id: u32 },
}
