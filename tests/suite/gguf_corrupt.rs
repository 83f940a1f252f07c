//! Corrupt and truncated GGUF files give clear errors that name the file and the problem,
//! never a panic or an allocation sized by an untrusted count.

use crate::common;
use dllm::gguf::{GgufError, GgufFile};
use dllm::model::ModelConfig;
use dllm::model::weights::Weights;
use dllm::quant::dequantize;
use dllm::tokenizer::Tokenizer;

use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(common::data(name)).unwrap()
}

/// Minimal GGUF writer for hand-made bad files.
struct Writer(Vec<u8>);

impl Writer {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut w = Writer(b"GGUF".to_vec());
        w.u32(version);
        w.u64(n_tensors);
        w.u64(n_kv);
        w
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn kv_u32(&mut self, k: &str, v: u32) -> &mut Self {
        self.str(k).u32(4).u32(v)
    }
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn pad_to(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.extend(std::iter::repeat_n(0, n));
        self
    }
    fn parse(&self) -> Result<GgufFile, GgufError> {
        GgufFile::from_bytes("bad.gguf", self.0.clone())
    }
}

fn err_text(r: Result<GgufFile, GgufError>) -> String {
    let e = r.err().expect("the file must be rejected");
    let s = e.to_string();
    assert!(s.contains("bad.gguf"), "error names the file: {s}");
    s
}

#[test]
fn hand_made_files_parse() {
    let mut w = Writer::new(3, 1, 1);
    w.kv_u32("general.alignment", 64).tensor("t", &[32, 2], 8, 0).pad_to(64).zeros(68);
    let g = w.parse().unwrap();
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.tensors()[0].n_bytes, 68);
    let mut v2 = Writer::new(2, 0, 1);
    v2.str("a").u32(9).u32(9).u64(2).u32(5).u64(1).u32(7).u32(5).u64(1).u32(8); // [[7], [8]]
    let g = v2.parse().unwrap();
    assert_eq!(g.get("a").unwrap().as_array().unwrap().len(), 2);
}

#[test]
fn each_defect_gets_its_own_message() {
    assert!(err_text(GgufFile::from_bytes("bad.gguf", b"PK\x03\x04rest".to_vec())).contains("not a GGUF"));
    assert!(err_text(Writer::new(1, 0, 0).parse()).contains("version 1"));
    let mut w = Writer::new(3, 0, 0);
    w.0.truncate(10);
    assert!(err_text(w.parse()).contains("truncated"));
    // A string claiming more bytes than the file holds: no allocation, an error.
    let mut w = Writer::new(3, 0, 1);
    w.u64(u64::MAX / 2);
    assert!(err_text(w.parse()).contains("truncated"));
    // An array claiming 2^60 elements.
    let mut w = Writer::new(3, 0, 1);
    w.str("k").u32(9).u32(4).u64(1 << 60);
    assert!(err_text(w.parse()).contains("claims"));
    // A tensor count far beyond the file.
    let w = Writer::new(3, u64::MAX, 0);
    assert!(err_text(w.parse()).contains("tensor table"));
    // Tensor data past the end of the file.
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[32, 4], 0, 0).pad_to(32).zeros(16);
    assert!(err_text(w.parse()).contains("past the end"));
    // Misaligned offset.
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[4], 0, 4).pad_to(32).zeros(64);
    assert!(err_text(w.parse()).contains("aligned"));
    // Overlapping tensors.
    let mut w = Writer::new(3, 2, 0);
    w.tensor("a", &[16], 0, 0).tensor("b", &[16], 0, 32).pad_to(32).zeros(128);
    assert!(err_text(w.parse()).contains("overlap"));
    // Unknown ggml type id.
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[32], 77, 0).pad_to(32).zeros(128);
    let s = err_text(w.parse());
    assert!(s.contains("77") && s.contains("'w'"), "{s}");
    // Row length that is not a whole number of blocks.
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[100], 12, 0).pad_to(32).zeros(1024);
    assert!(err_text(w.parse()).contains("block size"));
    // Too many dimensions; shape overflow; bad bool; duplicate key.
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[1, 1, 1, 1, 1], 0, 0);
    assert!(err_text(w.parse()).contains("dimensions"));
    let mut w = Writer::new(3, 1, 0);
    w.tensor("w", &[1 << 40, 1 << 40], 0, 0).pad_to(32);
    assert!(err_text(w.parse()).contains("overflows"));
    let mut w = Writer::new(3, 0, 1);
    w.str("b").u32(7).0.push(2);
    assert!(err_text(w.parse()).contains("bool"));
    let mut w = Writer::new(3, 0, 2);
    w.kv_u32("k", 1).kv_u32("k", 2);
    assert!(err_text(w.parse()).contains("twice"));
}

#[test]
fn unsupported_type_parses_but_is_named_when_used() {
    let mut w = Writer::new(3, 1, 0);
    w.tensor("blk.0.attn_q.weight", &[256], 34, 0).pad_to(32).zeros(54);
    let g = w.parse().expect("TQ1_0 is a known type; inspect must show it");
    let t = &g.tensors()[0];
    let err = dequantize(t.ty, g.tensor_data(t), &mut vec![0.0; 256]).unwrap_err();
    assert!(err.to_string().contains("TQ1_0"));
}

/// Everything a loader would touch: parse, hyperparameters, the weights' table, tokenizer,
/// and every tensor's data.
fn exercise(bytes: Vec<u8>) {
    if let Ok(g) = GgufFile::from_bytes("fuzz.gguf", bytes) {
        if let Ok(c) = ModelConfig::from_gguf(&g) {
            let _ = Weights::locate(&g, &c);
        }
        let _ = Tokenizer::from_gguf(&g);
        for t in g.tensors() {
            if t.n_values() <= 1 << 20 {
                let _ = dequantize(t.ty, g.tensor_data(t), &mut vec![0.0; t.n_values() as usize]);
            }
        }
    }
}

const FIXTURES: [&str; 3] =
    ["models/llada-tiny-Q4_K_M.gguf", "models/dream-tiny-Q6_K.gguf", "models/llada-tiny-Q8_0.gguf"];
/// The header (metadata and tensor table) of these fixtures lies within their first 40 kB.
const HEADER_REGION: usize = 40_000;
/// Cases per fuzz test: 2,000 in CI; `DLLM_FUZZ_CASES=100000` for the long run recorded in
/// benches/results/fuzz-gguf.txt.
fn cases() -> u32 {
    std::env::var("DLLM_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2000)
}

fn runner() -> TestRunner {
    TestRunner::new(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })
}

#[test]
fn truncated_fixtures_are_rejected_without_panic() {
    let files: Vec<Vec<u8>> = FIXTURES.iter().map(|f| fixture(f)).collect();
    let strategy = (0usize..3, 0.0f64..1.0, any::<bool>());
    runner()
        .run(&strategy, |(which, cut, header_only)| {
            let bytes = &files[which];
            // Half the cuts land in the header region, where the parser does its work.
            let limit = if header_only { HEADER_REGION } else { bytes.len() };
            let len = (cut * limit as f64) as usize;
            // The last tensor ends at the end of the file, so every cut loses data.
            prop_assert!(GgufFile::from_bytes("cut.gguf", bytes[..len].to_vec()).is_err());
            exercise(bytes[..len].to_vec());
            Ok(())
        })
        .unwrap();
    eprintln!("{} truncated variants rejected, no panic", cases());
}

#[test]
fn byte_flipped_fixtures_never_panic() {
    let files: Vec<Vec<u8>> = FIXTURES.iter().map(|f| fixture(f)).collect();
    let strategy = (0usize..3, proptest::collection::vec((0.0f64..1.0, any::<u8>(), any::<bool>()), 1..8));
    let (parsed, rejected) = (Cell::new(0), Cell::new(0));
    runner()
        .run(&strategy, |(which, flips)| {
            let mut bytes = files[which].clone();
            for (at, value, header) in flips {
                let region = if header { HEADER_REGION } else { bytes.len() };
                bytes[(at * region as f64) as usize] = value;
            }
            match GgufFile::from_bytes("flip.gguf", bytes.clone()) {
                Ok(_) => parsed.set(parsed.get() + 1),
                Err(_) => rejected.set(rejected.get() + 1),
            }
            exercise(bytes);
            Ok(())
        })
        .unwrap();
    eprintln!("{} byte-flipped variants: {} parsed, {} rejected, no panic", cases(), parsed.get(), rejected.get());
}

/// Where each count of a GGUF header lies (tensor and metadata counts, array lengths, string
/// lengths): the fields a flipped byte turns into an absurd size.
fn count_fields(bytes: &[u8]) -> Vec<usize> {
    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }
    /// Skips a value of type `ty` at `at`, recording its counts; returns the offset after it.
    fn value(b: &[u8], ty: u32, at: usize, out: &mut Vec<usize>) -> usize {
        match ty {
            0 | 1 | 7 => at + 1,
            2 | 3 => at + 2,
            4..=6 => at + 4,
            10..=12 => at + 8,
            8 => {
                out.push(at);
                at + 8 + u64_at(b, at) as usize
            }
            9 => {
                let elem = u32_at(b, at);
                out.push(at + 4);
                let n = u64_at(b, at + 4) as usize;
                (0..n).fold(at + 12, |p, _| value(b, elem, p, out))
            }
            _ => panic!("fixture has unknown type {ty}"),
        }
    }
    let mut out = vec![8, 16];
    let (n_tensors, n_kv) = (u64_at(bytes, 8), u64_at(bytes, 16));
    let mut at = 24;
    for _ in 0..n_kv {
        at = value(bytes, 8, at, &mut out);
        let ty = u32_at(bytes, at);
        at = value(bytes, ty, at + 4, &mut out);
    }
    for _ in 0..n_tensors {
        at = value(bytes, 8, at, &mut out);
        let n_dims = u32_at(bytes, at) as usize;
        at += 4 + 8 * n_dims + 4 + 8;
    }
    out
}

/// #23.5 and #23.11: every count of the fixtures' headers set to a huge value (up to 2^64 - 1)
/// is refused or read without a panic and without an allocation sized by the count.
#[test]
fn huge_counts_in_headers_never_allocate_by_the_count() {
    let files: Vec<(Vec<u8>, Vec<usize>)> = FIXTURES
        .iter()
        .map(|f| {
            let b = fixture(f);
            let c = count_fields(&b);
            (b, c)
        })
        .collect();
    assert!(files.iter().all(|(_, c)| c.len() > 1000), "the walker found the counts");
    let strategy = (0usize..3, 0.0f64..1.0, 20u32..64, any::<u64>());
    runner()
        .run(&strategy, |(which, pick, bits, low)| {
            let (bytes, counts) = &files[which];
            let mut bytes = bytes.clone();
            let at = counts[(pick * counts.len() as f64) as usize];
            let huge = (1u64 << bits) | (low >> (64 - bits));
            bytes[at..at + 8].copy_from_slice(&huge.to_le_bytes());
            exercise(bytes);
            Ok(())
        })
        .unwrap();
    eprintln!("{} headers with a huge count: no panic", cases());
}

/// Patches the u32 value of metadata `key` in a fixture.
fn with_u32(mut bytes: Vec<u8>, key: &str, value: u32) -> Vec<u8> {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key.as_bytes());
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("key present") + needle.len();
    assert_eq!(bytes[at..at + 4], 4u32.to_le_bytes(), "{key} is a u32");
    bytes[at + 4..at + 8].copy_from_slice(&value.to_le_bytes());
    bytes
}

/// #23.5: `block_count = 4e9` asked for 1.8 TB before any tensor was looked up.
#[test]
fn an_absurd_block_count_is_refused_before_anything_is_sized_by_it() {
    let bytes = with_u32(fixture("models/llada-tiny-Q8_0.gguf"), "llada.block_count", 4_000_000_000);
    let g = GgufFile::from_bytes("blocks.gguf", bytes).unwrap();
    let err = ModelConfig::from_gguf(&g).unwrap_err().to_string();
    assert!(err.contains("block_count") && err.contains("4000000000"), "{err}");
}

/// #23.5: an array that claims more values than any header holds is refused by count, before
/// its values are read (each takes 32 bytes of memory, however few in the file).
#[test]
fn an_array_past_the_value_budget_is_refused() {
    let count = (1u64 << 22) + 1;
    let mut w = Writer::new(3, 0, 1);
    w.str("x").u32(9).u32(0).u64(count).zeros(count as usize);
    let err = err_text(w.parse());
    assert!(err.contains("array values") && err.contains(&count.to_string()), "{err}");
    // Just under the budget reads.
    let mut w = Writer::new(3, 0, 1);
    w.str("x").u32(9).u32(0).u64(count - 1).zeros(count as usize - 1);
    assert!(w.parse().is_ok());
}

/// #23.5, as a user met it: a one-byte change in an array count of a multi-gigabyte file
/// asked for tens of gigabytes and aborted the process. Here a sparse 2 GB file claims a
/// 2e9-byte array, and `dllm inspect` runs with 3.5 GB of address space: it must answer with
/// an error, not die of an allocation failure.
#[test]
#[cfg(target_os = "linux")]
fn a_huge_array_in_a_large_file_is_an_error_not_an_abort() {
    let dir = std::env::temp_dir().join(format!("dllm-huge-array-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.gguf");
    let count = 2_000_000_000u64;
    let mut w = Writer::new(3, 0, 1);
    w.str("x").u32(9).u32(0).u64(count);
    std::fs::write(&path, &w.0).unwrap();
    // Sparse: no disk is used for the zeros.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(w.0.len() as u64 + count).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v 3500000; exec '{}' inspect '{}'", env!("CARGO_BIN_EXE_dllm"), path.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("array values") && !err.contains("memory allocation"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
