//! The GGUF tokenizer agrees id for id with llama.cpp's own test vectors
//! (tests/data/tokenizer, add_special=false, parse_special=false) and round-trips.

use crate::common;

use common::data;
use dllm::gguf::GgufFile;
use dllm::tokenizer::{EncodeOptions, StreamDecoder, Tokenizer};

fn load(path: &str) -> Tokenizer {
    Tokenizer::from_gguf(&GgufFile::open(data(path)).unwrap()).unwrap()
}

/// (text, expected ids) pairs of a llama.cpp `.inp` / `.out` vector file.
fn vectors(vocab: &str) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(data(&format!("tokenizer/{vocab}.inp"))).unwrap();
    let out = std::fs::read_to_string(data(&format!("tokenizer/{vocab}.out"))).unwrap();
    let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let texts = &texts[..texts.len() - 1]; // the file ends with a separator
    let ids: Vec<Vec<u32>> = out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    assert_eq!(texts.len(), ids.len(), "{vocab}: inputs and outputs pair up");
    texts.iter().map(|t| t.to_string()).zip(ids).collect()
}

fn check_vectors(vocab: &str) {
    let tk = load(&format!("tokenizer/{vocab}"));
    let cases = vectors(vocab);
    let mut failures = Vec::new();
    for (text, expected) in &cases {
        let got = tk.encode(text, EncodeOptions::default()).unwrap();
        if &got != expected {
            failures.push(format!("{text:?}: got {got:?}, expected {expected:?}"));
        }
        assert_eq!(tk.decode(&got, false), *text, "round trip of {text:?}");
    }
    assert!(
        failures.is_empty(),
        "{vocab}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    eprintln!("{vocab}: {} of {} cases agree with llama.cpp", cases.len(), cases.len());
}

#[test]
fn qwen2_vectors_match_llama_cpp() {
    check_vectors("ggml-vocab-qwen2.gguf");
}

#[test]
fn llama_bpe_vectors_match_llama_cpp() {
    check_vectors("ggml-vocab-llama-bpe.gguf");
}

#[test]
fn special_tokens_are_parsed_only_when_asked() {
    let tk = load("models/dream-tiny-F32.gguf");
    let text = "<|im_start|>user\nhi<|im_end|>";
    let plain = tk.encode(text, EncodeOptions::default()).unwrap();
    assert!(!plain.contains(&701), "without parse_special the marker is ordinary text");
    let parsed = tk.encode(text, EncodeOptions { parse_special: true, add_special: false }).unwrap();
    assert_eq!(parsed.first(), Some(&701));
    assert_eq!(parsed.last(), Some(&702));
    assert_eq!(tk.decode(&parsed, false), text);
    assert_eq!(tk.decode(&parsed, true), "user\nhi");
}

#[test]
fn bos_is_added_only_for_models_that_want_it() {
    let llada = load("models/llada-tiny-F32.gguf");
    let ids = llada.encode("hi", EncodeOptions { add_special: true, parse_special: false }).unwrap();
    assert_eq!(ids[0], 700);
    let dream = load("models/dream-tiny-F32.gguf");
    let ids = dream.encode("hi", EncodeOptions { add_special: true, parse_special: false }).unwrap();
    assert_ne!(ids[0], 700);
}

#[test]
fn special_ids_come_from_metadata_or_token_text() {
    let llada = load("models/llada-tiny-F32.gguf");
    assert_eq!((llada.special.bos, llada.special.eos, llada.special.mask), (Some(700), Some(701), Some(705)));
    assert_eq!(llada.special.eot, Some(702), "found by its text <|eot_id|>");
    let dream = load("models/dream-tiny-F32.gguf");
    assert_eq!((dream.special.eos, dream.special.mask, dream.special.eot), (Some(700), Some(703), Some(702)));
}

#[test]
fn streaming_decode_never_splits_a_character() {
    let tk = load("tokenizer/ggml-vocab-qwen2.gguf");
    let text = "Ünïcödé 🦙 text, 日本語 and emoji 🎉🎉";
    let ids = tk.encode(text, EncodeOptions::default()).unwrap();
    let mut dec = StreamDecoder::default();
    let mut out = String::new();
    for &id in &ids {
        let part = dec.push(tk.piece_bytes(id));
        assert!(!part.contains('\u{fffd}'), "token {id} produced a broken character");
        out.push_str(&part);
    }
    out.push_str(&dec.finish());
    assert_eq!(out, text);
}

#[test]
fn unknown_pre_tokenizer_is_named() {
    // Rewrite the fixture's pre-tokenizer name in place (same length keeps the file valid).
    let mut bytes = std::fs::read(data("models/dream-tiny-Q4_K_M.gguf")).unwrap();
    let pos = bytes.windows(5).position(|w| w == b"qwen2").unwrap();
    bytes[pos..pos + 5].copy_from_slice(b"zzzzz");
    let gguf = GgufFile::from_bytes("patched.gguf", bytes).unwrap();
    let err = Tokenizer::from_gguf(&gguf).err().expect("unknown pre-tokenizer must fail").to_string();
    assert!(err.contains("zzzzz") && err.contains("patched.gguf"), "{err}");
}
