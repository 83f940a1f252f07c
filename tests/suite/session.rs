//! The engine API: a session generates on its own thread, reports every step, can be
//! cancelled promptly, and returns errors as values.

use crate::common;

use std::time::{Duration, Instant};

use common::{data, manifest, read_i32};
use dllm::decoding::{GenerateParams, Param};
use dllm::engine::{EngineError, Event, LoadOptions, Prompt, Session};
use dllm::model::Family;

fn session(file: &str) -> Session {
    Session::load(data(&format!("models/{file}")), LoadOptions { threads: Some(2), ..Default::default() }).unwrap()
}

#[test]
fn events_carry_every_step_and_the_result() {
    let s = session("llada-tiny-F32.gguf");
    let trace = &manifest()["traces"][1]; // llada-tiny_p0_low_confidence_g64_s16_b16
    let prompt = read_i32("traces/llada-tiny_p0_low_confidence_g64_s16_b16_prompt.i32");
    let params =
        GenerateParams { gen_length: 64, steps: 16, block_length: 16, early_stop: false, ..Default::default() };
    let mut steps = Vec::new();
    let done = s.generate(prompt, params).unwrap().wait(|e| steps.push(e.clone())).unwrap();
    assert_eq!(steps.len(), 16);
    let committed: Vec<usize> = steps.iter().map(|e| e.committed.len()).collect();
    let expected: Vec<usize> =
        trace["tokens_unmasked_per_step"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert_eq!(committed, expected);
    assert!(steps.iter().all(|e| e.forward_ms > 0.0 && e.forwards == 1));
    assert!(steps.iter().flat_map(|e| &e.committed).all(|&(_, c)| c > 0.0 && c <= 1.0));
    let final_ids: Vec<u32> =
        trace["final_ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    assert_eq!(done.generated.canvas, final_ids);
    assert_eq!(done.generated.canvas, steps.last().unwrap().canvas);
    assert_eq!(done.text, s.tokenizer().decode(&final_ids[28..], true));
}

#[test]
fn cancel_stops_promptly_and_cleanly() {
    let s = session("dream-tiny-Q8_0.gguf");
    let params =
        GenerateParams { gen_length: 256, steps: 256, temperature: 0.0, ..GenerateParams::defaults_for(Family::Dream) };
    let prompt = s.prompt_ids(&Prompt::Chat("Tell me a long story".into())).unwrap();
    let generation = s.generate(prompt.clone(), params.clone()).unwrap();
    let mut step_times = Vec::new();
    let mut cancelled_at = None;
    let finished = loop {
        match generation.events().recv_timeout(Duration::from_secs(60)).expect("events keep coming") {
            Event::Step(e) => {
                step_times.push(e.forward_ms + e.sample_ms);
                if e.index == 3 {
                    generation.cancel();
                    cancelled_at = Some(Instant::now());
                }
            }
            Event::Started(_) => {}
            Event::Done(f) => break f,
            Event::Failed(e) => panic!("{e}"),
        }
    };
    let waited = cancelled_at.unwrap().elapsed().as_secs_f64() * 1e3;
    assert!(finished.generated.cancelled);
    assert!(finished.generated.steps <= 6, "stopped within a step or two ({} steps)", finished.generated.steps);
    let slowest = step_times.iter().cloned().fold(0.0, f64::max);
    assert!(waited < 2.0 * slowest + 1000.0, "stop took {waited:.0} ms; a step takes {slowest:.0} ms");
    // The session is still usable afterwards.
    let again = s.generate(prompt, GenerateParams { gen_length: 8, steps: 4, ..params }).unwrap();
    assert_eq!(again.wait(|_| {}).unwrap().generated.steps, 4);
}

#[test]
fn dropping_the_receiver_cancels() {
    let s = session("llada-tiny-Q4_K_M.gguf");
    let g = s.generate(
        vec![700, 1, 2],
        GenerateParams { gen_length: 256, steps: 256, block_length: 32, ..Default::default() },
    );
    drop(g);
    // The next request is served, so the abandoned run ended.
    let g =
        s.generate(vec![700, 1, 2], GenerateParams { gen_length: 8, steps: 8, block_length: 8, ..Default::default() });
    assert!(g.unwrap().wait(|_| {}).is_ok());
}

#[test]
fn bad_requests_are_errors_not_panics() {
    let s = session("llada-tiny-Q4_K_M.gguf");
    let too_long = vec![1u32; 4090];
    let e = s.generate(too_long, GenerateParams::default()).err().unwrap();
    // The error names the setting to change.
    assert!(
        matches!(&e, EngineError::Invalid(p) if p.param == Param::GenLength && p.reason.contains("context")),
        "{e}"
    );
    let e = s.generate(vec![700], GenerateParams { steps: 102, ..Default::default() }).err().unwrap();
    assert!(e.to_string().contains("multiple of the number of blocks"), "{e}");
    let e = s.generate(vec![700], GenerateParams { block_length: 48, ..Default::default() }).err().unwrap();
    assert!(e.to_string().contains("must divide"), "{e}");
    let e = s.generate(vec![99_999], GenerateParams::default()).err().unwrap();
    assert!(e.to_string().contains("outside"), "{e}");
    assert!(s.logits(vec![1, 2, 3], vec![7]).unwrap_err().to_string().contains("outside"));
}

#[test]
fn load_errors_name_the_problem() {
    let e = Session::load(data("tokenizer/ggml-vocab-qwen2.gguf"), LoadOptions::default()).err().unwrap();
    assert!(e.to_string().contains("'qwen2' is not supported"), "{e}");
    let e = Session::load(data("nope.gguf"), LoadOptions::default()).err().unwrap();
    assert!(e.to_string().contains("nope.gguf"), "{e}");
}

#[test]
fn chat_prompts_use_the_template_without_doubling_bos() {
    let llada = session("llada-tiny-Q8_0.gguf");
    let ids = llada.prompt_ids(&Prompt::Chat("hi".into())).unwrap();
    assert_eq!(ids[0], 700);
    assert_ne!(ids[1], 700, "the template writes BOS; no second one");
    assert_eq!(ids[1], 703, "<|start_header_id|> parsed as one token");
    assert!(llada.tokenizer().decode(&ids, false).ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
    let dream = session("dream-tiny-Q8_0.gguf");
    let ids = dream.prompt_ids(&Prompt::Chat("hi".into())).unwrap();
    assert_eq!(ids[0], 701, "<|im_start|>");
    let text = dream.tokenizer().decode(&ids, false);
    assert!(
        text.starts_with("<|im_start|>system\nYou are a helpful assistant.")
            && text.ends_with("<|im_start|>assistant\n")
    );
    let raw = dream.prompt_ids(&Prompt::Raw("hi".into())).unwrap();
    assert_eq!(dream.tokenizer().decode(&raw, false), "hi");
}

#[test]
fn seeded_sampling_is_reproducible() {
    let s = session("dream-tiny-Q4_K_M.gguf");
    let params = GenerateParams { gen_length: 24, steps: 8, ..GenerateParams::defaults_for(Family::Dream) };
    assert!(params.temperature > 0.0);
    let run =
        |seed| s.generate(vec![701, 50, 60], GenerateParams { seed, ..params.clone() }).unwrap().wait(|_| {}).unwrap();
    assert_eq!(run(7).generated.canvas, run(7).generated.canvas);
    assert_ne!(run(7).generated.canvas, run(8).generated.canvas);
}

#[test]
fn an_unusable_optional_hyperparameter_is_an_error_not_a_default() {
    // Patch llada.attention.head_count_kv (u32 4) to 0 in place.
    let mut bytes = std::fs::read(data("models/llada-tiny-Q4_K_M.gguf")).unwrap();
    let key = b"llada.attention.head_count_kv";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    assert_eq!(&bytes[at..at + 8], &[4, 0, 0, 0, 4, 0, 0, 0], "u32 type tag, then the value 4");
    bytes[at + 4] = 0;
    let gguf = dllm::gguf::GgufFile::from_bytes("patched.gguf", bytes).unwrap();
    let err = dllm::model::ModelConfig::from_gguf(&gguf).unwrap_err().to_string();
    assert!(err.contains("head_count_kv") && err.contains("patched.gguf"), "{err}");
}

/// Loading reports the weights' preparation: fractions that only grow, in (0, 1], ending at 1.
/// On the x86 SIMD paths the K-quant matrices are repacked one by one, so a Q4_K_M file reports steps between.
#[test]
fn load_reports_progress_up_to_one() {
    let seen = std::sync::Mutex::new(Vec::new());
    let options = LoadOptions { device: dllm::cuda::DeviceRequest::Cpu, ..Default::default() };
    Session::load_with_progress(data("models/llada-tiny-Q4_K_M.gguf"), options, &|f| seen.lock().unwrap().push(f))
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.last(), Some(&1.0));
    assert!(seen.windows(2).all(|w| w[0] <= w[1]) && seen.iter().all(|&f| f > 0.0 && f <= 1.0), "{seen:?}");
    if dllm::cpu::active_isa().is_x86_simd() {
        assert!(seen.iter().filter(|&&f| f < 1.0).count() >= 4, "{seen:?}");
    }
}

/// The run's first event is its start: the engine's plan and the canvas the first step starts
/// from, so a front end computes neither; the planned steps are the steps run.
#[test]
fn a_run_starts_with_its_plan_and_initial_canvas() {
    let s = session("llada-tiny-Q8_0.gguf");
    let prompt = s.prompt_ids(&Prompt::Chat("Hello".into())).unwrap();
    let params =
        GenerateParams { gen_length: 32, steps: 16, block_length: 16, early_stop: false, ..Default::default() };
    let mut events = Vec::new();
    let finished = s.generate(prompt.clone(), params.clone()).unwrap().wait_events(|e| events.push(e.clone())).unwrap();
    let Some(Event::Started(started)) = events.first() else { panic!("no start event first") };
    assert_eq!(started.plan, s.plan(&params, prompt.len()).unwrap());
    assert_eq!(started.plan.prompt_len, prompt.len());
    assert_eq!(&started.initial[..prompt.len()], &prompt[..]);
    assert!(started.initial[prompt.len()..].iter().all(|&t| t == s.info().special.mask));
    assert_eq!(started.initial.len(), prompt.len() + 32);
    assert!(started.plan.fixed_steps);
    assert_eq!(started.plan.max_steps, finished.generated.steps);
    // Threshold decoding takes a data-dependent number of steps, at most the planned bound.
    let fast = GenerateParams { threshold: Some(0.9), ..params };
    let plan = s.plan(&fast, prompt.len()).unwrap();
    assert!(!plan.fixed_steps);
    let steps = s.generate(prompt, fast).unwrap().wait(|_| {}).unwrap().generated.steps;
    assert!(steps <= plan.max_steps, "{steps} steps of at most {}", plan.max_steps);
}

/// Dropping a session while a run goes neither waits for the run nor lets it go on: the app
/// loads another model without freezing.
#[test]
fn dropping_a_session_during_a_run_does_not_wait_for_it() {
    let s = session("dream-tiny-Q8_0.gguf");
    let params =
        GenerateParams { gen_length: 256, steps: 256, temperature: 0.0, ..GenerateParams::defaults_for(Family::Dream) };
    let prompt = s.prompt_ids(&Prompt::Chat("Tell me a long story".into())).unwrap();
    let generation = s.generate(prompt, params).unwrap();
    // Wait for the run to be under way.
    while !matches!(generation.events().recv_timeout(Duration::from_secs(60)).unwrap(), Event::Step(_)) {}
    let start = Instant::now();
    drop(s);
    let dropped_in = start.elapsed();
    let finished = generation.wait(|_| {}).unwrap();
    assert!(finished.generated.cancelled, "the run stopped when its session went");
    assert!(finished.generated.steps < 256);
    assert!(dropped_in < Duration::from_millis(100), "drop took {dropped_in:?}");
}
