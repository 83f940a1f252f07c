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

/// Every vector, with special-token parsing off (as llama.cpp made them) and on: the inputs
/// hold no special token's text, so parsing them must change nothing.
fn check_vectors(vocab: &str) {
    let tk = load(&format!("tokenizer/{vocab}"));
    let cases = vectors(vocab);
    let mut failures = Vec::new();
    for (text, expected) in &cases {
        for parse_special in [false, true] {
            let got = tk.encode(text, EncodeOptions { add_special: false, parse_special }).unwrap();
            if &got != expected {
                failures.push(format!("{text:?} (parse_special {parse_special}): got {got:?}, expected {expected:?}"));
            }
            assert_eq!(tk.decode(&got, false), *text, "round trip of {text:?}");
        }
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

/// The pre-tokenizer of the real LLaDA-8B GGUFs: llama.cpp's Llama-3 vocabulary under the name
/// `bailingmoe`, whose regex splits digits one at a time and newline runs apart.
#[test]
fn bailingmoe_vectors_match_llama_cpp() {
    check_vectors("ggml-vocab-bailingmoe.gguf");
    let tk = load("tokenizer/ggml-vocab-bailingmoe.gguf");
    assert_eq!(tk.pre, "bailingmoe");
    let digits = tk.encode("12345", EncodeOptions::default()).unwrap();
    assert_eq!(digits.len(), 5, "one token per digit: {digits:?}");
}

#[test]
fn control_tokens_of_a_real_vocabulary_parse_only_when_asked() {
    let tk = load("tokenizer/ggml-vocab-bailingmoe.gguf");
    let text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
    let parsed = tk.encode(text, EncodeOptions { add_special: false, parse_special: true }).unwrap();
    // Llama-3's ids: <|start_header_id|> 128006, <|end_header_id|> 128007, <|eot_id|> 128009.
    assert_eq!((parsed[0], parsed[2], *parsed.last().unwrap()), (128006, 128007, 128009), "{parsed:?}");
    let plain = tk.encode(text, EncodeOptions::default()).unwrap();
    assert!(!plain.iter().any(|id| (128000..128256).contains(id)), "no special id without parsing: {plain:?}");
    assert_eq!(tk.decode(&plain, false), text);
}

/// The end-of-generation set is llama.cpp's `special_eog_ids` for the real vocabularies (what
/// llama.cpp logs as `EOG token` when it loads them), plus the diffusion models' end texts.
#[test]
fn end_of_generation_sets_of_real_vocabularies() {
    // Llama-3 (3.0, which has no <|eom_id|>): <|end_of_text|> (the EOS key) and <|eot_id|>.
    assert_eq!(load("tokenizer/ggml-vocab-bailingmoe.gguf").special.eog, vec![128001, 128009]);
    // Qwen2: <|endoftext|> and <|im_end|>.
    let qwen = load("tokenizer/ggml-vocab-qwen2.gguf").special.eog;
    assert!(qwen.contains(&151643) && qwen.contains(&151645), "{qwen:?}");
    // The fixtures: LLaDA {<|endoftext|>, <|eot_id|>}, Dream {<|endoftext|>, <|im_end|>}.
    assert_eq!(load("models/llada-tiny-F32.gguf").special.eog, vec![701, 702]);
    assert_eq!(load("models/dream-tiny-F32.gguf").special.eog, vec![700, 702]);
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
    assert!(err.contains("zzzzz") && err.contains("patched.gguf") && err.contains("bailingmoe"), "{err}");
}

/// #23.9: 40 KB of `<|eot_id|>` took 32 s when every special text was searched again after
/// each match; one automaton pass makes it linear. The ids are checked, and the run time is in
/// the closing note (this is no timing assert); before the fix this test alone took 32 s.
#[test]
fn forty_kilobytes_of_special_tokens_tokenize_in_one_pass() {
    let tk = load("tokenizer/ggml-vocab-llama-bpe.gguf");
    let text = "<|eot_id|>".repeat(4000) + "tail<|start_header_id|>";
    let start = std::time::Instant::now();
    let ids = tk.encode(&text, EncodeOptions { add_special: false, parse_special: true }).unwrap();
    eprintln!("40 KB of control tokens: {:?}", start.elapsed());
    assert_eq!(ids.len(), 4002, "{:?}", &ids[3995..]);
    assert!(ids[..4000].iter().all(|&id| id == 128009));
    assert_eq!(ids[4001], 128006);
    // Without parsing, the same text is ordinary text and round-trips.
    let plain = tk.encode(&text, EncodeOptions::default()).unwrap();
    assert!(!plain.contains(&128009));
    assert_eq!(tk.decode(&plain, false), text);
}
