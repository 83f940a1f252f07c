//! Logits on every fixture canvas against the independent references: PyTorch fp32 for the
//! F32 files, llama.cpp for the quantized ones (tolerances from tests/data's reference README).

use crate::common;

use std::sync::Arc;

use common::{compare_logits as compare, data, read_f32, read_i32};
use dllm::forward::CpuModel;
use dllm::forward::Forward;
use dllm::gguf::GgufFile;

fn logits_of(model: &str, canvas: &str) -> (Vec<f32>, usize) {
    logits_of_file(&format!("models/{model}.gguf"), canvas)
}

fn logits_of_file(path: &str, canvas: &str) -> (Vec<f32>, usize) {
    common::cpu_logits(path, &format!("canvases/{canvas}.i32"))
}

const CANVASES: [&str; 3] = ["c17", "c40", "c77"];

#[test]
fn f32_models_match_pytorch() {
    for family in ["llada-tiny", "dream-tiny"] {
        for c in CANVASES {
            let canvas = format!("{family}_{c}");
            let (got, n_vocab) = logits_of(&format!("{family}-F32"), &canvas);
            let e = compare(&got, &read_f32(&format!("logits/{canvas}_pytorch.f32")), n_vocab);
            eprintln!(
                "{canvas} F32 vs PyTorch: max abs {:.3e}, rel {:.3e}, argmax {:.3}",
                e.max_abs, e.rel, e.argmax_agree
            );
            // fp32 with a different summation order: ~1e-6 relative measured by llama.cpp too;
            // any layout, RoPE or permutation error is O(1).
            assert!(e.rel <= 1e-4, "{canvas}: relative error {}", e.rel);
            assert_eq!(e.argmax_agree, 1.0, "{canvas}");
        }
    }
}

#[test]
fn quantized_models_match_llama_cpp() {
    for family in ["llada-tiny", "dream-tiny"] {
        for quant in ["Q8_0", "Q6_K", "Q4_K_M"] {
            for c in CANVASES {
                let canvas = format!("{family}_{c}");
                let (got, n_vocab) = logits_of(&format!("{family}-{quant}"), &canvas);
                let reference = read_f32(&format!("logits/{canvas}_llamacpp-{quant}.f32"));
                let e = compare(&got, &reference, n_vocab);
                eprintln!(
                    "{canvas} {quant} vs llama.cpp: max abs {:.3e}, rel {:.3e}, argmax {:.3}",
                    e.max_abs, e.rel, e.argmax_agree
                );
                // Both sides quantize activations to 8 bits and take integer block dot products, so
                // most canvases agree to ~1e-7. llama.cpp's float steps differ by an ulp (its SIMD
                // exp in softmax and SiLU), which now and then flips one activation's rounding;
                // through attention that reaches other rows: ~1e-2 at worst, within the
                // reference README's 0.02 for implementations that are not bit-faithful ports.
                assert!(e.rel <= 0.02, "{canvas} {quant}: relative error {}", e.rel);
                assert!(e.argmax_agree >= 0.9, "{canvas} {quant}: argmax agreement {}", e.argmax_agree);
            }
        }
    }
}

/// Every other tier community repositories publish (tests/data/quants: `llama-quantize` of the
/// F32 fixtures, a tier mixing types as llama.cpp chose), against llama.cpp's logits.
#[test]
fn every_quantization_tier_matches_llama_cpp() {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("quants/manifest.json")).unwrap()).unwrap();
    let mut worst = Vec::new();
    for f in manifest["files"].as_array().unwrap() {
        let (model, variant) = (f["model"].as_str().unwrap(), f["variant"].as_str().unwrap());
        let canvas = format!("{model}_c40");
        let (got, n_vocab) = logits_of_file(&format!("quants/{}", f["gguf"].as_str().unwrap()), &canvas);
        let reference = read_f32(&format!("quants/logits/{canvas}_llamacpp-{variant}.f32"));
        let e = compare(&got, &reference, n_vocab);
        let quantization_error = f["vs_pytorch"]["max_abs_over_max_ref"].as_f64().unwrap();
        eprintln!(
            "{canvas} {variant:<7} vs llama.cpp: rel {:.2e} (llama.cpp vs PyTorch {quantization_error:.2e}), argmax {:.3}",
            e.rel, e.argmax_agree
        );
        // As `quantized_models_match_llama_cpp`: the same integer dots on the same quantized
        // activations, float steps an ulp apart now and then (0.02 of max |logit|, the reference
        // README's bound); the F16/BF16 files round the activations as ggml does.
        assert!(e.rel <= 0.02, "{canvas} {variant}: relative error {}", e.rel);
        assert!(e.argmax_agree >= 0.9, "{canvas} {variant}: argmax agreement {}", e.argmax_agree);
        worst.push((variant.to_owned(), e.rel));
    }
    assert_eq!(worst.len(), 22, "every tier of tests/data/quants was compared");
}

#[test]
fn f32_model_matches_llama_cpp_f32_too() {
    let (got, n_vocab) = logits_of("llada-tiny-F32", "llada-tiny_c40");
    let e = compare(&got, &read_f32("logits/llada-tiny_c40_llamacpp-F32.f32"), n_vocab);
    assert!(e.rel <= 1e-4, "{}", e.rel);
}

#[test]
fn only_requested_rows_are_computed_and_they_match_the_full_pass() {
    let gguf = Arc::new(GgufFile::open(data("models/dream-tiny-Q4_K_M.gguf")).unwrap());
    let mut m = CpuModel::load(gguf).unwrap();
    let tokens = read_i32("canvases/dream-tiny_c40.i32");
    let n_vocab = m.config().n_vocab;
    let mut all = Vec::new();
    m.forward(&tokens, &(0..tokens.len()).collect::<Vec<_>>(), &mut all).unwrap();
    let mut some = Vec::new();
    m.forward(&tokens, &[39, 3, 17], &mut some).unwrap();
    assert_eq!(some.len(), 3 * n_vocab);
    for (i, r) in [39, 3, 17].into_iter().enumerate() {
        assert_eq!(&some[i * n_vocab..(i + 1) * n_vocab], &all[r * n_vocab..(r + 1) * n_vocab]);
    }
}

/// A file whose q, k and v projections are one fused `attn_qkv` matrix (and bias), as newer
/// llama.cpp converters write (made from dream-tiny-Q8_0 by tools/fused-qkv/fuse_qkv.py), gives
/// the separate file's logits bit for bit: each output row is the same dot product.
#[test]
fn fused_qkv_gives_the_same_logits_as_separate_projections() {
    let (fused, _) = logits_of("dream-tiny-Q8_0-fused-qkv", "dream-tiny_c40");
    let (separate, _) = logits_of("dream-tiny-Q8_0", "dream-tiny_c40");
    assert_eq!(fused, separate);
}
