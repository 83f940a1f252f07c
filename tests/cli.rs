//! The `dllm` binary: `inspect` reports the facts the reference README states for every
//! fixture, and `tokenize` prints what the library computes, for any text.

use std::process::Command;

fn data(path: &str) -> String {
    format!("{}/tests/data/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn dllm(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dllm")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn inspect_json(path: &str) -> serde_json::Value {
    let (ok, out, err) = dllm(&["inspect", "--json", &data(path)]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn inspect_matches_the_reference_facts_for_every_fixture() {
    // (fixture, architecture, heads, K/V heads, pre-tokenizer, mask id)
    let cases = [("llada-tiny", "llada", 4, 4, "llama-bpe", 705), ("dream-tiny", "dream", 4, 2, "qwen2", 703)];
    for (name, arch, heads, kv, pre, mask) in cases {
        for variant in ["F32", "Q8_0", "Q6_K", "Q4_K_M"] {
            let path = format!("models/{name}-{variant}.gguf");
            let j = inspect_json(&path);
            let hp = &j["hyperparameters"];
            assert_eq!(j["architecture"], arch, "{path}");
            assert_eq!(hp["attention.head_count"], heads, "{path}");
            assert_eq!(hp["attention.head_count_kv"], kv, "{path}");
            assert_eq!(hp["block_count"], 2, "{path}");
            assert_eq!(hp["embedding_length"], 256, "{path}");
            assert_eq!(hp["feed_forward_length"], 512, "{path}");
            assert_eq!(j["tokenizer"]["n_tokens"], 768, "{path}");
            assert_eq!(j["tokenizer"]["pre"], pre, "{path}");
            assert_eq!(j["tokenizer"]["mask_token_id"], mask, "{path}");
            assert_eq!(j["chat_template"], true, "{path}");
            assert_eq!(j["file_bytes"], std::fs::metadata(data(&path)).unwrap().len());
            // 2 layers x 9 tensors + embeddings, final norm, output; Dream adds 3 biases per layer.
            let n_tensors = if arch == "dream" { 27 } else { 21 };
            assert_eq!(j["tensors"].as_array().unwrap().len(), n_tensors, "{path}");
            let types: Vec<&str> = j["types"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
            let main_type = if variant == "Q4_K_M" { "Q4_K" } else { variant };
            assert!(types.contains(&main_type), "{path}: {types:?}");
        }
    }
    assert_eq!(inspect_json("models/llada-tiny-F32.gguf")["shift_logits"], false);
    assert_eq!(inspect_json("models/dream-tiny-F32.gguf")["shift_logits"], serde_json::Value::Null);
}

#[test]
fn inspect_reads_vocabulary_only_files() {
    let j = inspect_json("tokenizer/ggml-vocab-qwen2.gguf");
    assert_eq!(j["tensors"].as_array().unwrap().len(), 0);
    assert_eq!(j["tokenizer"]["n_tokens"], 151936);
    let (ok, out, _) = dllm(&["inspect", &data("tokenizer/ggml-vocab-llama-bpe.gguf")]);
    assert!(ok && out.contains("128256 tokens") && out.contains("llama-bpe"), "{out}");
}

#[test]
fn inspect_reports_a_bad_file_clearly() {
    let (ok, _, err) = dllm(&["inspect", &data("README.md")]);
    assert!(!ok);
    assert!(err.contains("README.md") && err.contains("not a GGUF"), "{err}");
}

#[test]
fn tokenize_prints_ids_and_pieces() {
    let model = data("tokenizer/ggml-vocab-qwen2.gguf");
    let (ok, out, _) = dllm(&["tokenize", "-m", &model, "--ids", "Hello world"]);
    assert!(ok);
    assert_eq!(out, "9707 1879\n");
    let (_, out, _) = dllm(&["tokenize", "-m", &model, "Hello world"]);
    assert_eq!(out, "9707\tHello\n1879\t world\n");
}

#[test]
fn tokenize_takes_any_text_after_double_dash() {
    let model = data("models/dream-tiny-F32.gguf");
    for text in ["--help", "-x", "   ", "line one\nline two"] {
        let (ok, out, err) = dllm(&["tokenize", "-m", &model, "--", text]);
        assert!(ok, "{text:?}: {err}");
        let pieces: String = out.lines().map(|l| l.split_once('\t').unwrap().1).collect();
        assert_eq!(pieces, text.replace('\n', "\\n"), "{text:?}: newlines are escaped");
    }
}

#[test]
fn tokenize_special_and_bos_flags() {
    let model = data("models/llada-tiny-F32.gguf");
    let (_, plain, _) = dllm(&["tokenize", "-m", &model, "--ids", "<|eot_id|>"]);
    let (_, special, _) = dllm(&["tokenize", "-m", &model, "--ids", "--special", "<|eot_id|>"]);
    let (_, bos, _) = dllm(&["tokenize", "-m", &model, "--ids", "--bos", "a"]);
    assert_ne!(plain.trim(), "702");
    assert_eq!(special.trim(), "702");
    assert!(bos.starts_with("700 "), "{bos}");
}
