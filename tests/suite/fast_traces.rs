//! Fast-dLLM's samplers (threshold decoding, prefix and dual K/V caches, Dream's quota and
//! block samplers) reproduce every trace of ../shared/reference/fast canvas for canvas at every
//! step, with the same forward passes (window and full/cached) — and a cached pass on a fresh
//! cache gives the full pass's logits.

use crate::common;

use std::sync::Arc;

use common::{data, f32_fixture, read_i32};
use dllm::decoding::{DreamAlg, GenerateParams, KvCacheMode, SpecialTokens, generate};
use dllm::forward::CpuModel;
use dllm::forward::{Forward, Pass};
use dllm::gguf::GgufFile;
use dllm::model::Family;

struct FastTrace {
    name: String,
    family: Family,
    prompt: Vec<u32>,
    params: GenerateParams,
    mask: u32,
    /// [n_steps][canvas_len]: the canvas after each step.
    steps: Vec<Vec<u32>>,
    /// Per step: the positions the pass ran and whether it read the cache.
    windows: Vec<(usize, usize)>,
    cached: Vec<bool>,
}

fn fast_manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data("fast/fastdllm_manifest.json")).unwrap()).unwrap()
}

fn traces() -> Vec<FastTrace> {
    fast_manifest()["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let name = t["trace"].as_str().unwrap().to_owned();
            let family = if t["family"] == "llada" { Family::Llada } else { Family::Dream };
            let mode = t["mode"].as_str().unwrap();
            let s = &t["settings"];
            let mut params = GenerateParams::defaults_for(family);
            params.gen_length = s["gen_length"].as_u64().unwrap() as usize;
            params.steps = s["steps"].as_u64().unwrap() as usize;
            params.temperature = 0.0;
            params.top_p = None;
            params.early_stop = false;
            params.threshold = Some(s["threshold"].as_f64().unwrap());
            params.cache = match mode {
                "prefix" => KvCacheMode::Prefix,
                "dual" => KvCacheMode::Dual,
                _ => KvCacheMode::None,
            };
            // Dream's "nocache" is the quota sampler (no blocks); its block sampler has no
            // cache-free upstream mode, "block_nocache" is the exact counterpart of prefix/dual.
            if family == Family::Dream && mode == "nocache" {
                params.alg = DreamAlg::ConfidenceThreshold;
            } else {
                params.block_length = s["block_length"].as_u64().unwrap() as usize;
            }
            let canvas_len = t["canvas_len"].as_u64().unwrap() as usize;
            let steps = read_i32(&format!("fast/{}", t["steps_file"].as_str().unwrap()))
                .chunks(canvas_len)
                .map(<[u32]>::to_vec)
                .collect();
            let windows = t["forward_windows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| (w[0].as_u64().unwrap() as usize, w[1].as_u64().unwrap() as usize))
                .collect();
            let cached = t["forward_kinds"].as_array().unwrap().iter().map(|k| k == "cached").collect();
            FastTrace {
                prompt: read_i32(&format!("fast/{}", t["prompt_file"].as_str().unwrap())),
                mask: t["mask_token_id"].as_u64().unwrap() as u32,
                name,
                family,
                params,
                steps,
                windows,
                cached,
            }
        })
        .collect()
}

#[test]
fn every_fast_dllm_trace_is_reproduced_pass_for_pass() {
    let all = traces();
    assert_eq!(all.len(), 112, "4 modes x 2 prompts x 2 shapes x 4 thresholds x 2 models, less LLaDA block_nocache");
    let mut total_steps = 0;
    for t in &all {
        let mut m = f32_fixture(t.family);
        let special = SpecialTokens::new(t.mask, None, None);
        let (mut canvases, mut windows, mut cached, mut forwards) = (vec![], vec![], vec![], 0);
        let out = generate(&mut m, &t.prompt, &t.params, special, &mut |s| {
            canvases.push(s.canvas.to_vec());
            windows.push((s.window.start, s.window.end));
            cached.push(s.cached);
            forwards += s.forwards;
            true
        })
        .unwrap();
        for (k, (got, want)) in canvases.iter().zip(&t.steps).enumerate() {
            assert_eq!(got, want, "{}: canvas after step {k}", t.name);
            assert_eq!(windows[k], t.windows[k], "{}: window of step {k}", t.name);
            assert_eq!(cached[k], t.cached[k], "{}: cached or full at step {k}", t.name);
        }
        assert_eq!(canvases.len(), t.steps.len(), "{}: number of steps", t.name);
        assert_eq!(forwards, t.steps.len(), "{}: forward count (one per step)", t.name);
        assert_eq!(&out.canvas, t.steps.last().unwrap());
        total_steps += canvases.len();
    }
    eprintln!("{} traces, {total_steps} steps reproduced exactly", all.len());
}

/// On a fresh cache (filled from this very canvas) a windowed pass computes the same keys,
/// values and attention inputs as the full pass, row for row, so its logits must be equal.
/// Every row's products are computed independently of how many rows the pass runs, so the
/// comparison is exact, on the F32 fixtures and on the quantized ones (integer dot products).
#[test]
fn a_pass_on_a_fresh_cache_gives_the_full_pass_logits() {
    for file in ["llada-tiny-F32", "dream-tiny-F32", "llada-tiny-Q4_K_M", "dream-tiny-Q8_0"] {
        let mut m = CpuModel::load(Arc::new(GgufFile::open(data(&format!("models/{file}.gguf"))).unwrap())).unwrap();
        let n_vocab = m.config().n_vocab as u32;
        let canvas: Vec<u32> = (0..80u32).map(|i| (i * 37 + 11) % n_vocab).collect();
        for window in [20..80, 20..36, 0..80, 79..80] {
            let rows: Vec<usize> = window.clone().collect();
            let (mut full, mut cached) = (Vec::new(), Vec::new());
            m.forward_pass(&canvas, &Pass::FillCache, &rows, &mut full).unwrap();
            m.forward_pass(&canvas, &Pass::Window(window.clone()), &rows, &mut cached).unwrap();
            assert_eq!(full, cached, "{file}: window {window:?}");
        }
    }
}

#[test]
fn a_window_pass_needs_a_matching_cache() {
    let mut m = f32_fixture(Family::Llada);
    let mut out = Vec::new();
    let err = m.forward_pass(&[1, 2, 3, 4], &Pass::Window(2..4), &[2], &mut out).unwrap_err();
    assert!(err.to_string().contains("run a full pass that fills it first"), "{err}");
    m.forward_pass(&[1, 2, 3, 4], &Pass::FillCache, &[0], &mut out).unwrap();
    let err = m.forward_pass(&[1, 2, 3, 4, 5], &Pass::Window(2..4), &[2], &mut out).unwrap_err();
    assert!(err.to_string().contains("holds 4 positions but the canvas has 5"), "{err}");
    let err = m.forward_pass(&[1, 2, 3, 4], &Pass::Window(2..4), &[1], &mut out).unwrap_err();
    assert!(err.to_string().contains("outside the window 2..4"), "{err}");
}
