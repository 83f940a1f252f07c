//! The `dllm` binary: `inspect` reports the facts the reference README states for every
//! fixture, and `tokenize` prints what the library computes, for any text.

use crate::common;

use common::{data, read_f32, read_i32};
use dllm::decoding::{PARAMS, Param};
use dllm::model::Family;

pub fn dllm(args: &[&str]) -> (bool, String, String) {
    let out = common::dllm_command().args(args).output().unwrap();
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

/// `inspect` names the end-of-generation set and, for every tensor type, how dllm runs it.
#[test]
fn inspect_shows_end_of_generation_and_how_each_type_runs() {
    let j = inspect_json("models/llada-tiny-F32.gguf");
    let eog: Vec<(u64, &str)> = j["end_of_generation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_u64().unwrap(), t["text"].as_str().unwrap()))
        .collect();
    assert_eq!(eog, vec![(701, "<|endoftext|>"), (702, "<|eot_id|>")]);
    // The fixture's llama-bpe row: merges ignored, BOS by default, spaces cleaned.
    let pre = &j["pre_tokenizer"];
    assert_eq!(
        (&pre["ignore_merges"], &pre["add_bos"], &pre["clean_spaces"]),
        (&true.into(), &true.into(), &true.into())
    );
    let j = inspect_json("tokenizer/ggml-vocab-bailingmoe.gguf");
    assert_eq!(j["pre_tokenizer"]["clean_spaces"], false, "bailingmoe keeps its spaces");
    let j = inspect_json("quants/models/llada-tiny-IQ3_S.gguf");
    let products = j["products"].as_object().unwrap();
    assert!(products["IQ3_S"].as_str().unwrap().starts_with("Q8_K activations"), "{products:?}");
    let j = inspect_json("quants/models/llada-tiny-Q4_0.gguf");
    let q4_0 = j["products"]["Q4_0"].as_str().unwrap();
    assert!(q4_0.starts_with("Q8_0 activations"), "{q4_0}");
    let (ok, out, _) = dllm(&["inspect", &data("quants/models/dream-tiny-Q2_K.gguf")]);
    assert!(ok && out.contains("end of generation: 700 <|endoftext|>, 702 <|im_end|>"), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("Q2_K") && l.contains("Q8_K activations")), "{out}");
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

fn ids_arg(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn run_writes_a_trace_that_matches_the_official_sampler() {
    let name = "dream-tiny_p0_entropy_g32_s16";
    let prompt = read_i32(&format!("traces/{name}_prompt.i32"));
    let official = read_i32(&format!("traces/{name}_official_steps.i32"));
    let trace = std::env::temp_dir().join(format!("dllm-trace-{}.jsonl", std::process::id()));
    let model = data("models/dream-tiny-F32.gguf");
    let args = ["run", "-m", &model, "--prompt-ids", &ids_arg(&prompt), "--gen", "32", "--steps", "16"];
    let (ok, out, err) = dllm(
        &[
            &args[..],
            &[
                "--alg",
                "entropy",
                "--temperature",
                "0",
                "--top-p",
                "1",
                "--no-early-stop",
                "--trace",
                trace.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    std::fs::remove_file(&trace).ok();
    assert_eq!(lines.len(), 17);
    let width = prompt.len() + 32;
    for (k, line) in lines[..16].iter().enumerate() {
        assert_eq!(line["step"], k);
        let canvas: Vec<u32> = serde_json::from_value(line["canvas"].clone()).unwrap();
        assert_eq!(canvas, official[k * width..(k + 1) * width], "step {k}");
        assert!(line["ms"].as_f64().unwrap() > 0.0);
        let committed: Vec<usize> = serde_json::from_value(line["committed"].clone()).unwrap();
        assert!(committed.iter().all(|&p| p >= prompt.len() && p < width));
    }
    let done = &lines[16];
    assert_eq!(done["done"], true);
    assert_eq!(done["steps"], 16);
    let ids: Vec<u32> = serde_json::from_value(done["ids"].clone()).unwrap();
    assert_eq!(ids, official[15 * width..]);
    assert_eq!(out.trim_end_matches('\n'), done["text"].as_str().unwrap());
}

#[test]
fn logits_command_writes_rows_that_match_pytorch() {
    let canvas = read_i32("canvases/llada-tiny_c17.i32");
    let reference = read_f32("logits/llada-tiny_c17_pytorch.f32");
    let out = std::env::temp_dir().join(format!("dllm-logits-{}.f32", std::process::id()));
    let model = data("models/llada-tiny-F32.gguf");
    let (ok, _, err) =
        dllm(&["logits", "-m", &model, "--ids", &ids_arg(&canvas), "--rows", "16,0", "--out", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let got: Vec<f32> =
        std::fs::read(&out).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    std::fs::remove_file(&out).ok();
    assert_eq!(got.len(), 2 * 768);
    let max_ref = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, row) in [16usize, 0].into_iter().enumerate() {
        for v in 0..768 {
            // fp32 against fp32 with another summation order (see tests/logits.rs).
            assert!((got[i * 768 + v] - reference[row * 768 + v]).abs() <= 1e-4 * max_ref);
        }
    }
}

#[test]
fn run_explains_bad_settings() {
    let llada = data("models/llada-tiny-Q4_K_M.gguf");
    let (ok, _, err) = dllm(&["run", "-m", &llada, "hi", "--alg", "entropy"]);
    assert!(!ok && err.contains("Dream"), "{err}");
    let (ok, _, err) = dllm(&["run", "-m", &llada, "hi", "--gen", "64", "--block", "32", "--steps", "7"]);
    assert!(!ok && err.contains("multiple of the number of blocks"), "{err}");
    let (ok, _, err) = dllm(&["run", "-m", &llada, "hi", "--gen", "5000"]);
    assert!(!ok && err.contains("context"), "{err}");
    let dream = data("models/dream-tiny-Q4_K_M.gguf");
    let (ok, _, err) = dllm(&["run", "-m", &dream, "hi", "--alg", "fastest"]);
    assert!(!ok && err.contains("--alg: unknown value 'fastest' (choose origin, "), "{err}");
    let (ok, _, err) = dllm(&["run", "-m", &dream, "hi", "--remasking", "random"]);
    assert!(!ok && err.contains("LLaDA"), "{err}");
}

#[test]
fn run_generates_from_a_chat_prompt() {
    let model = data("models/llada-tiny-Q8_0.gguf");
    let (ok, _, err) = dllm(&["run", "-m", &model, "Hello", "--gen", "16", "--steps", "8", "--block", "8", "--visual"]);
    assert!(ok, "{err}");
    assert!(err.contains("step 8") && err.contains("8 steps"), "{err}");
}

/// What changes one setting from the `plan` helpers' base run, for every setting of the
/// engine's table: (flags it needs first, the flags that change it). A new setting without a
/// row here fails the tests below, so none goes untested.
pub fn changing_flags(param: Param, family: Family) -> (Vec<&'static str>, Vec<&'static str>) {
    let dream = family == Family::Dream;
    let threshold = if dream { vec!["--threshold", "0.9"] } else { vec![] };
    match param {
        Param::GenLength => (vec![], vec!["--gen", "64"]),
        Param::Steps => (vec![], vec!["--steps", "16"]),
        Param::BlockLength => (threshold, vec!["--block", "8"]),
        Param::Temperature => (vec![], vec!["--temperature", "0.7"]),
        Param::Seed => (vec![], vec!["--seed", "7"]),
        Param::EarlyStop => (vec![], vec!["--no-early-stop"]),
        Param::Remasking => (vec![], vec!["--remasking", "random"]),
        Param::CfgScale => (vec![], vec!["--cfg", "1.5"]),
        Param::LogitsEosInf => (vec![], vec!["--logits-eos-inf"]),
        Param::ConfidenceEosEotInf => (vec![], vec!["--confidence-eos-eot-inf"]),
        Param::Alg => (vec![], vec!["--alg", "origin"]),
        Param::AlgTemp => (vec![], vec!["--alg-temp", "0.5"]),
        Param::Eps => (vec![], vec!["--eps", "0.01"]),
        Param::TopP => (vec![], vec!["--top-p", "0.5"]),
        Param::TopK => (vec![], vec!["--top-k", "5"]),
        Param::Threshold => (vec![], vec!["--threshold", "0.8"]),
        Param::Cache => (threshold, vec!["--cache", "dual"]),
    }
}

/// The engine's plan of `dllm run --dry-run` on `model` with `flags` (and, where they give
/// none, 32 tokens in 32 steps, blocks of 16 on LLaDA).
fn plan(model: &str, flags: &[&str]) -> Result<serde_json::Value, String> {
    let mut args = vec!["run", "-m", model, "--dry-run"];
    for (flag, value) in [("--gen", "32"), ("--steps", "32"), ("--block", "16")] {
        if !flags.contains(&flag) && (flag != "--block" || model.contains("llada")) {
            args.extend([flag, value]);
        }
    }
    args.extend(flags);
    args.push("Hello");
    let (ok, out, err) = dllm(&args);
    if !ok {
        return Err(err);
    }
    Ok(serde_json::from_str(&out).unwrap())
}

/// Every generation flag reaches the engine: for each setting of the engine's table that
/// applies to the model, the planned run with the flag differs from the one without it. A flag
/// that is parsed but never used fails here.
#[test]
fn every_generation_flag_reaches_the_plan() {
    for (model, family) in [
        ("models/llada-tiny-Q8_0.gguf", Family::Llada),
        ("models/dream-tiny-Q8_0.gguf", Family::Dream),
        ("moe/models/rnd1-tiny-Q8_0.gguf", Family::Rnd1),
    ] {
        let model = data(model);
        let base = plan(&model, &[]).unwrap();
        assert_eq!(base["gen_length"], 32);
        for spec in PARAMS.iter().filter(|s| s.param.applies_to(family)) {
            let (needs, flags) = changing_flags(spec.param, family);
            assert!(flags.contains(&format!("--{}", spec.flag).as_str()), "{}", spec.name);
            let before = plan(&model, &needs).unwrap();
            let after = plan(&model, &[needs.as_slice(), flags.as_slice()].concat())
                .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
            assert_ne!(before, after, "{flags:?} is parsed but does not reach the {} plan", family.name());
        }
        // A setting of the other family is refused, by its flag.
        let other = PARAMS.iter().find(|s| !s.param.applies_to(family)).unwrap();
        let (_, flags) = changing_flags(other.param, family);
        let e = plan(&model, &flags).unwrap_err();
        assert!(e.contains(&format!("--{}: applies to", other.flag)), "{e}");
    }
}

/// `dllm chat` reads turns and commands line by line (here from a pipe): a reply per message
/// through the template, /system, /save as JSON and Markdown, /reset.
#[test]
fn chat_answers_turns_and_saves_the_conversation() {
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("dllm-cli-chat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, md) = (dir.join("chat.json"), dir.join("chat.md"));
    let model = data("models/llada-tiny-Q8_0.gguf");
    let mut child = common::dllm_command()
        .args(["chat", "-m", &model, "--gen", "16", "--steps", "16", "--block", "16", "--no-early-stop"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!(
        "/system Be brief.\nHello there\nAnd then?\n/save {}\n/save {}\n/reset\n/quit\n",
        json.display(),
        md.display()
    );
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let saved = dllm::conversation::Conversation::load(&json).unwrap();
    assert_eq!(saved.system, "Be brief.");
    let roles: Vec<&str> = saved.turns.iter().map(|t| t.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(saved.turns[2].content, "And then?");
    // Each reply was printed, in order.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.find(saved.turns[1].content.as_str()).expect("the first reply printed");
    assert!(stdout[first..].contains(saved.turns[3].content.as_str()), "{stdout}");
    assert!(std::fs::read_to_string(&md).unwrap().contains("**You:** And then?"));
    assert!(err.contains("the conversation is forgotten"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
