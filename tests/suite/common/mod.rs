//! Helpers shared by the integration tests: fixture paths and raw little-endian arrays.

#[cfg(feature = "app")]
pub mod harness;
pub mod mock_hub;
#[cfg(feature = "app")]
pub mod soft_render;

pub fn data(path: &str) -> String {
    format!("{}/tests/data/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// The built `dllm` binary, with its cache directory (XDG_CACHE_HOME) in a temporary folder of
/// this test process, so that no test writes to the user's cache.
pub fn dllm_command() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dllm"));
    c.env("XDG_CACHE_HOME", std::env::temp_dir().join(format!("dllm-test-cache-{}", std::process::id())));
    c
}

pub fn read_f32(path: &str) -> Vec<f32> {
    std::fs::read(data(path)).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

pub fn read_i32(path: &str) -> Vec<u32> {
    std::fs::read(data(path))
        .unwrap()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect()
}

pub fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data("manifest.json")).unwrap()).unwrap()
}

/// The tiny random-weight F32 fixture of a family, the one every reference trace was made with.
pub fn f32_fixture(family: dllm::model::Family) -> dllm::forward::CpuModel {
    let file = match family {
        dllm::model::Family::Llada => "models/llada-tiny-F32.gguf",
        dllm::model::Family::Dream => "models/dream-tiny-F32.gguf",
        dllm::model::Family::Rnd1 => "moe/models/rnd1-tiny-F32.gguf",
    };
    let gguf = dllm::gguf::GgufFile::open(data(file)).unwrap();
    dllm::forward::CpuModel::load(std::sync::Arc::new(gguf)).unwrap()
}

/// Raw logits of every row of the canvas at `canvas` (a tests/data path) from the model at
/// `model` (a tests/data path), on the CPU: `([rows, n_vocab], n_vocab)`.
pub fn cpu_logits(model: &str, canvas: &str) -> (Vec<f32>, usize) {
    use dllm::forward::Forward;
    let gguf = dllm::gguf::GgufFile::open(data(model)).unwrap();
    let mut m = dllm::forward::CpuModel::load(std::sync::Arc::new(gguf)).unwrap();
    let tokens = read_i32(canvas);
    let rows: Vec<usize> = (0..tokens.len()).collect();
    let mut logits = Vec::new();
    m.forward(&tokens, &rows, &mut logits).unwrap();
    (logits, m.config().n_vocab)
}

/// How far logits are from a reference: largest absolute difference, that relative to the
/// reference's largest magnitude, and the share of rows whose argmax agrees.
pub struct LogitErrors {
    pub max_abs: f32,
    pub rel: f32,
    pub argmax_agree: f32,
}

pub fn compare_logits(got: &[f32], reference: &[f32], n_vocab: usize) -> LogitErrors {
    let max_ref = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let max_abs = got.iter().zip(reference).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    let argmax = |r: &[f32]| r.iter().enumerate().fold(0, |best, (i, v)| if *v > r[best] { i } else { best });
    let rows = reference.len() / n_vocab;
    let agree =
        got.chunks_exact(n_vocab).zip(reference.chunks_exact(n_vocab)).filter(|(a, b)| argmax(a) == argmax(b)).count();
    LogitErrors { max_abs, rel: max_abs / max_ref, argmax_agree: agree as f32 / rows as f32 }
}
