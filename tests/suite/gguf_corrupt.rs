//! Corrupt and truncated GGUF files give clear errors that name the file and the problem,
//! never a panic or an allocation sized by an untrusted count.

use crate::common;
use dllm::gguf::{GgufError, GgufFile};
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

/// Everything a loader would touch: parse, tokenizer, and every tensor's data.
fn exercise(bytes: Vec<u8>) {
    if let Ok(g) = GgufFile::from_bytes("fuzz.gguf", bytes) {
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
const CASES: u32 = 2000;

fn runner() -> TestRunner {
    TestRunner::new(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })
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
    eprintln!("{CASES} truncated variants rejected, no panic");
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
    eprintln!("{CASES} byte-flipped variants: {} parsed, {} rejected, no panic", parsed.get(), rejected.get());
}
