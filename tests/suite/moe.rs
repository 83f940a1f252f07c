//! The mixture-of-experts architectures (`llada-moe`, `rnd1`) against their references
//! (tests/data/moe, see its README): the F32 files against an independent float64 forward
//! (numpy), every quantized file against llama.cpp's logits on the same file.

use crate::common;

use std::sync::Arc;

use common::{compare_logits as compare, data, read_f32};
use dllm::forward::{CpuModel, Forward};
use dllm::gguf::GgufFile;
use dllm::model::Family;

fn logits_of(model: &str, variant: &str, canvas: &str) -> (Vec<f32>, usize) {
    common::cpu_logits(&format!("moe/models/{model}-{variant}.gguf"), &format!("moe/canvases/{canvas}.i32"))
}

const MODELS: [&str; 2] = ["llada-moe-tiny", "rnd1-tiny"];
const CANVASES: [&str; 3] = ["c17", "c40", "c77"];

#[test]
fn f32_files_match_the_float64_forward() {
    for model in MODELS {
        for c in CANVASES {
            let canvas = format!("{model}_{c}");
            let (got, n_vocab) = logits_of(model, "F32", &canvas);
            let e = compare(&got, &read_f32(&format!("moe/logits/{canvas}_numpy-f64.f32")), n_vocab);
            eprintln!("{canvas} F32 vs float64: rel {:.2e}, argmax {:.3}", e.rel, e.argmax_agree);
            // The README's bound: f32 arithmetic in another order is ~1e-7 of max |logit| from
            // float64 (llama.cpp's own F32 is within 1e-6); a wrong norm, routing or pairing is O(1).
            assert!(e.rel <= 1e-5, "{canvas}: relative error {}", e.rel);
            assert_eq!(e.argmax_agree, 1.0, "{canvas}");
        }
    }
}

#[test]
fn quantized_files_match_llama_cpp() {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("moe/manifest.json")).unwrap()).unwrap();
    let llama_vs_f64 = |canvas: &str, variant: &str| -> f64 {
        manifest["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["canvas"].as_str().is_some_and(|c| c.contains(canvas)) && f["variant"] == variant)
            .and_then(|f| f["vs_numpy_f64"]["max_abs_over_max_ref"].as_f64())
            .unwrap()
    };
    for model in MODELS {
        for variant in ["Q8_0", "Q6_K", "Q4_K_M"] {
            for c in CANVASES {
                let canvas = format!("{model}_{c}");
                let (got, n_vocab) = logits_of(model, variant, &canvas);
                let e = compare(&got, &read_f32(&format!("moe/logits/{canvas}_llamacpp-{variant}.f32")), n_vocab);
                let quantization_error = llama_vs_f64(&format!("{canvas}.i32"), variant);
                eprintln!(
                    "{canvas} {variant} vs llama.cpp: rel {:.2e} (llama.cpp vs float64 {quantization_error:.2e}), argmax {:.3}",
                    e.rel, e.argmax_agree
                );
                // The same integer dots on the same 8-bit activations: most canvases agree to
                // ~1e-7. As in the dense files (`logits::quantized_models_match_llama_cpp`), an
                // ulp of difference in a float step now and then flips one activation's 8-bit
                // rounding, which attention carries to other rows (and here can change a row's
                // expert choice): the reference README's 0.02 of max |logit|, and a fraction of
                // llama.cpp's own distance from the float64 forward (the README's test).
                assert!(e.rel <= 0.02, "{canvas} {variant}: relative error {}", e.rel);
                assert!((e.rel as f64) <= 0.5 * quantization_error, "{canvas} {variant}: relative error {}", e.rel);
            }
        }
    }
}

#[test]
fn the_architectures_load_as_their_families() {
    for (model, family, shift) in [("llada-moe-tiny", Family::Llada, false), ("rnd1-tiny", Family::Rnd1, true)] {
        let gguf = Arc::new(GgufFile::open(data(&format!("moe/models/{model}-Q8_0.gguf"))).unwrap());
        let m = CpuModel::load(gguf).unwrap();
        let c = m.config();
        assert_eq!((c.family, c.shift_logits), (family, shift), "{model}");
        let moe = c.moe.as_ref().expect("a MoE config");
        assert_eq!((moe.n_expert, moe.n_expert_used, moe.n_ff_exp), (8, 2, 256), "{model}");
        assert_eq!(moe.normalize_weights, family == Family::Rnd1, "{model}");
    }
    // RND1-tiny: 8 heads of 64 (key_length) over a 256-wide embedding.
    let gguf = Arc::new(GgufFile::open(data("moe/models/rnd1-tiny-F32.gguf")).unwrap());
    let c = CpuModel::load(gguf).unwrap().config().clone();
    assert_eq!((c.head_dim, c.q_dim(), c.n_embd), (64, 512, 256));
}

/// Both architectures run end to end through the engine: RND1 asked as its repository asks
/// (`Question: ...\nAnswer:`), its canvas ending with the pad token; LLaDA-MoE through its chat
/// template with LLaDA's block sampler.
#[test]
fn both_generate_through_the_session() {
    use dllm::decoding::GenerateParams;
    use dllm::engine::{LoadOptions, Prompt, Session};
    use dllm::tokenizer::EncodeOptions;

    let load = |model: &str| {
        let options = LoadOptions { threads: Some(2), ..Default::default() };
        Session::load(data(&format!("moe/models/{model}-Q8_0.gguf")), options).unwrap()
    };
    let rnd1 = load("rnd1-tiny");
    let ids = rnd1.prompt_ids(&Prompt::Chat("hi".into())).unwrap();
    let asked = rnd1.tokenizer().encode("Question: hi\nAnswer:", EncodeOptions::default()).unwrap();
    assert_eq!(ids, asked);
    let params =
        GenerateParams { gen_length: 8, steps: 4, early_stop: false, ..GenerateParams::defaults_for(Family::Rnd1) };
    let done = rnd1.generate(ids.clone(), params).unwrap().wait(|_| {}).unwrap();
    let canvas = &done.generated.canvas;
    assert_eq!(canvas.len(), ids.len() + 8);
    assert_eq!(canvas.last(), rnd1.tokenizer().special.pad.as_ref(), "RND1's last position is the pad token");
    assert!(!canvas.contains(&703), "no mask is left: {canvas:?}");

    let moe = load("llada-moe-tiny");
    let ids = moe.prompt_ids(&Prompt::Chat("hi".into())).unwrap();
    let params =
        GenerateParams { gen_length: 8, steps: 8, block_length: 4, early_stop: false, ..GenerateParams::default() };
    let done = moe.generate(ids.clone(), params.clone()).unwrap().wait(|_| {}).unwrap();
    assert!(!done.generated.canvas.contains(&705));
    assert_eq!(done.generated.steps, 8);
    // Fast-dLLM's threshold decoding with the dual cache: windowed passes through the experts.
    let fast = GenerateParams { threshold: Some(0.9), cache: dllm::decoding::KvCacheMode::Dual, ..params };
    let mut cached_passes = 0;
    let done = moe.generate(ids, fast).unwrap().wait(|e| cached_passes += usize::from(e.cached)).unwrap();
    assert!(!done.generated.canvas.contains(&705));
    assert!(cached_passes > 0, "the dual cache ran windowed passes");
}
