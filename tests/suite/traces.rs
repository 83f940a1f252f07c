//! At temperature 0 the samplers reproduce the official PyTorch traces canvas for canvas at
//! every step (F32 fixtures), and early stop never changes the answer.

use crate::common;

use common::{f32_fixture, manifest, read_i32};
use dllm::decoding::{GenerateParams, Generated, SpecialTokens, answer_ids, generate};
use dllm::forward::Forward;
use dllm::model::Family;

struct Trace {
    name: String,
    family: Family,
    prompt: Vec<u32>,
    params: GenerateParams,
    mask: u32,
    /// [n_steps][canvas_len]
    steps: Vec<Vec<u32>>,
}

fn traces() -> Vec<Trace> {
    let m = manifest();
    m["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let name = t["trace"].as_str().unwrap().to_owned();
            let family = if t["family"] == "llada" { Family::Llada } else { Family::Dream };
            let s = &t["settings"];
            let mut params = GenerateParams::defaults_for(family);
            params.gen_length = s["gen_length"].as_u64().unwrap() as usize;
            params.steps = s["steps"].as_u64().unwrap() as usize;
            params.temperature = 0.0;
            params.top_p = None;
            params.early_stop = false;
            match family {
                Family::Llada => {
                    params.block_length = s["block_length"].as_u64().unwrap() as usize;
                    params.remasking = s["alg"].as_str().unwrap().parse().unwrap();
                }
                Family::Dream => {
                    params.alg = s["alg"].as_str().unwrap().parse().unwrap();
                    params.eps = s["eps"].as_f64().unwrap() as f32;
                }
                Family::Rnd1 => unreachable!("the reference traces are LLaDA's and Dream's"),
            }
            let canvas_len = t["canvas_len"].as_u64().unwrap() as usize;
            let steps = read_i32(&format!("traces/{name}_official_steps.i32"))
                .chunks(canvas_len)
                .map(<[u32]>::to_vec)
                .collect();
            Trace {
                prompt: read_i32(&format!("traces/{name}_prompt.i32")),
                mask: t["mask_token_id"].as_u64().unwrap() as u32,
                name,
                family,
                params,
                steps,
            }
        })
        .collect()
}

fn run(m: &mut dyn Forward, t: &Trace, special: SpecialTokens, params: &GenerateParams) -> (Generated, Vec<Vec<u32>>) {
    let mut canvases = Vec::new();
    let out = generate(m, &t.prompt, params, special, &mut |s| {
        canvases.push(s.canvas.to_vec());
        true
    })
    .unwrap();
    (out, canvases)
}

#[test]
fn official_traces_are_reproduced_step_by_step() {
    let all = traces();
    assert_eq!(all.len(), 9);
    for t in &all {
        let mut m = f32_fixture(t.family);
        let special = SpecialTokens::new(t.mask, None, None);
        let (out, canvases) = run(&mut m, t, special, &t.params);
        assert_eq!(canvases.len(), t.steps.len(), "{}: number of steps", t.name);
        for (k, (got, want)) in canvases.iter().zip(&t.steps).enumerate() {
            assert_eq!(got, want, "{}: canvas after step {k}", t.name);
        }
        assert_eq!(&out.canvas, t.steps.last().unwrap());
        eprintln!("{}: {} steps reproduced exactly", t.name, canvases.len());
    }
}

/// The fixtures' random weights never produce end-of-text, so each trace is rerun with one
/// of its own answer tokens playing end-of-text: the canvases are unchanged (the end token
/// only matters to early stop) and the answer read up to it must be the same. The token is
/// the first one, a third of the way into the answer or later, that did not occur before it.
#[test]
fn early_stop_gives_the_full_runs_answer() {
    let mut stopped_early = 0;
    for t in traces() {
        let mut m = f32_fixture(t.family);
        let final_answer = &t.steps.last().unwrap()[t.prompt.len()..];
        let Some(end) = (final_answer.len() / 3..final_answer.len())
            .find(|&i| !final_answer[..i].contains(&final_answer[i]))
            .map(|i| final_answer[i])
        else {
            continue;
        };
        let special = SpecialTokens::new(t.mask, Some(end), None);
        let (full, _) = run(&mut m, &t, special.clone(), &t.params);
        let early_params = GenerateParams { early_stop: true, ..t.params.clone() };
        let (early, canvases) = run(&mut m, &t, special.clone(), &early_params);
        for (k, c) in canvases.iter().enumerate() {
            assert_eq!(c, &t.steps[k], "{}: step {k} before the stop", t.name);
        }
        assert_eq!(answer_ids(early.answer(), &special), answer_ids(full.answer(), &special), "{}", t.name);
        assert!(early.steps <= full.steps);
        assert_eq!(early.stopped_early, early.steps < full.steps);
        stopped_early += usize::from(early.stopped_early);
        eprintln!("{}: early stop after {} of {} steps, same answer", t.name, early.steps, full.steps);
    }
    assert!(stopped_early >= 5, "early stop must actually trigger on most traces ({stopped_early})");
}
