//! The bundled demo model (assets/demo-model-Q8_0.gguf) end to end: dllm writes what the
//! official LLaDA sampler writes with the same weights (recorded by tools/demo-model in
//! PyTorch, not by dllm), and `dllm run` uses the model when no -m is given.

use crate::common;

use common::data;
use dllm::engine::{LoadOptions, Prompt, Session};

fn demo_file() -> String {
    format!("{}/assets/demo-model-Q8_0.gguf", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_bundled_bytes_are_the_asset_file() {
    assert_eq!(dllm::demo::BYTES, std::fs::read(demo_file()).unwrap().as_slice());
}

/// How far apart two of the reference's choices must be for dllm to be held to the same
/// choice. dllm runs Q8_0 weights the way llama.cpp does, with activations quantized to 8
/// bits per block of 32; the reference runs the same (dequantized) weights in float32. On the
/// demo model's canvases the two disagree by up to 0.19 in a logit, so a token whose two
/// best logits are closer than that, or a position whose confidence is within that factor
/// (in log space) of the one chosen, is a tie either side may break.
const LOGIT_TIE: f64 = 0.2;

/// At every step of the official sampler's run, fed the reference's own canvas, dllm's logits
/// lead to the same commits — the same positions with the same tokens — except at near-ties
/// (above), which must stay rare. The recorded reference is tools/demo-model's run of
/// ML-GSAI/LLaDA generate.py on the GGUF's weights, not dllm's output.
#[test]
fn the_demo_model_makes_the_official_samplers_choices() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("demo/expected.json")).unwrap()).unwrap();
    let session = Session::load(demo_file(), LoadOptions::default()).unwrap();
    assert_eq!(session.info().name.as_deref(), Some(dllm::demo::NAME));
    let mask = session.info().special.mask;
    let n_vocab = session.info().config.n_vocab;
    let cases = expected["cases"].as_array().unwrap();
    assert!(cases.len() >= 3);
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
    };
    for case in cases {
        let text = case["prompt"].as_str().unwrap().to_owned();
        let prompt =
            if case["chat"].as_bool().unwrap() { Prompt::Chat(text.clone()) } else { Prompt::Raw(text.clone()) };
        let prompt_ids = session.prompt_ids(&prompt).unwrap();
        assert_eq!(prompt_ids, ids(&case["prompt_ids"]), "{text:?}: prompt tokens (tokenizer and chat template)");
        let gen_length = case["gen_length"].as_u64().unwrap() as usize;
        let final_canvas = ids(&case["canvas"]);
        let mut canvas = prompt_ids.clone();
        canvas.resize(prompt_ids.len() + gen_length, mask);
        let (mut ties, steps) = (0, case["trace"].as_array().unwrap().len());
        for (k, step) in case["trace"].as_array().unwrap().iter().enumerate() {
            // Reference candidates: position -> (token, confidence, gap between its top logits).
            let mut candidates: Vec<(usize, u32, f64, f64)> = step["candidates"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(p, c)| {
                    (p.parse().unwrap(), c[0].as_u64().unwrap() as u32, c[1].as_f64().unwrap(), c[2].as_f64().unwrap())
                })
                .collect();
            candidates.sort_by_key(|c| c.0);
            let rows: Vec<usize> = candidates.iter().map(|c| c.0).collect();
            let logits = session.logits(canvas.clone(), rows.clone()).unwrap();
            let ours: Vec<(u32, f64)> = logits
                .chunks(n_vocab)
                .map(|row| {
                    let best = (0..n_vocab).max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a))).unwrap();
                    let max = row[best] as f64;
                    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
                    (best as u32, 1.0 / sum)
                })
                .collect();
            let committed: Vec<usize> =
                step["committed"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap() as usize).collect();
            let mut tie = false;
            for &p in &committed {
                let i = rows.binary_search(&p).unwrap();
                if ours[i].0 != candidates[i].1 {
                    assert!(
                        candidates[i].3 < LOGIT_TIE,
                        "{text:?} step {k}: position {p} token {} vs the reference's {} (logit gap {})",
                        ours[i].0,
                        candidates[i].1,
                        candidates[i].3
                    );
                    tie = true;
                }
            }
            let mut order: Vec<usize> = (0..rows.len()).collect();
            order.sort_by(|&a, &b| ours[b].1.total_cmp(&ours[a].1).then(a.cmp(&b)));
            let mut ours_chosen: Vec<usize> = order[..committed.len()].iter().map(|&i| rows[i]).collect();
            ours_chosen.sort();
            if ours_chosen != committed {
                let conf = |p: &usize| candidates[rows.binary_search(p).unwrap()].2;
                let weakest_reference = committed.iter().map(conf).fold(f64::INFINITY, f64::min);
                let strongest_other =
                    ours_chosen.iter().filter(|p| !committed.contains(p)).map(conf).fold(0.0, f64::max);
                let gap = (weakest_reference / strongest_other).ln();
                assert!(
                    gap < LOGIT_TIE,
                    "{text:?} step {k}: dllm commits {ours_chosen:?}, the reference {committed:?} (log-confidence gap {gap})"
                );
                tie = true;
            }
            ties += usize::from(tie);
            for &p in &committed {
                canvas[p] = final_canvas[p];
            }
        }
        assert_eq!(canvas, final_canvas);
        assert!(ties * 10 <= steps, "{text:?}: {ties} near-ties in {steps} steps is too many to be numerics");
        eprintln!("{text:?}: {steps} steps, same choices at {} ({ties} near-ties) -> {:?}", steps - ties, case["text"]);
    }
}

#[test]
fn run_uses_the_demo_model_when_no_model_is_given() {
    let cache = std::env::temp_dir().join(format!("dllm-demo-cli-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dllm"))
        .args(["run", "Once upon a time", "--raw"])
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("built-in demo model"), "{stderr}");
    let words = stdout.split_whitespace().count();
    assert!(words >= 10, "a story, not {stdout:?}");
    // The demo model's copy (the `packed` folder beside it is the pack cache).
    let cached: Vec<_> = std::fs::read_dir(cache.join("dllm"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(cached.len(), 1, "one complete copy, no partial file: {cached:?}");
    std::fs::remove_dir_all(&cache).unwrap();
}
