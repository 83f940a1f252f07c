//! The sampler options the recorded traces do not cover, checked on a scripted model whose
//! logits are known: classifier-free guidance, logits_eos_inf, confidence_eos_eot_inf,
//! random remasking, Dream's shifted logits, origin, top-k sampling, and RND1's sampler.

use dllm::decoding::{DreamAlg, GenerateParams, Remasking, SpecialTokens, generate};
use dllm::forward::{Forward, Pass};
use dllm::model::{Family, ModelConfig, ModelError, RopeStyle};

const MASK: u32 = 7;
const EOS: u32 = 5;
const EOT: u32 = 6;
const N_VOCAB: usize = 8;

/// A model whose logits for (canvas, row) come from a closure; counts forward passes.
struct Scripted<F: Fn(&[u32], usize) -> [f32; N_VOCAB] + Send> {
    config: ModelConfig,
    logits: F,
    forwards: usize,
}

impl<F: Fn(&[u32], usize) -> [f32; N_VOCAB] + Send> Scripted<F> {
    fn new(family: Family, logits: F) -> Self {
        let config = ModelConfig {
            family,
            architecture: family.name().into(),
            n_vocab: N_VOCAB,
            n_embd: 4,
            n_layer: 1,
            n_head: 1,
            n_head_kv: 1,
            head_dim: 4,
            n_ff: 4,
            context_length: 256,
            rope_base: 10_000.0,
            rope_dims: 4,
            rope_style: RopeStyle::Halves,
            rms_eps: 1e-6,
            shift_logits: family != Family::Llada,
            moe: None,
        };
        Scripted { config, logits, forwards: 0 }
    }
}

impl<F: Fn(&[u32], usize) -> [f32; N_VOCAB] + Send> Forward for Scripted<F> {
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    /// The script sees the whole canvas whatever the pass, like a cache that is never stale.
    fn forward_pass(
        &mut self,
        tokens: &[u32],
        _: &Pass,
        rows: &[usize],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        self.forwards += 1;
        logits.clear();
        for &r in rows {
            logits.extend_from_slice(&(self.logits)(tokens, r));
        }
        Ok(())
    }
}

fn special() -> SpecialTokens {
    SpecialTokens::new(MASK, Some(EOS), Some(EOT))
}

fn llada(gen_length: usize, steps: usize) -> GenerateParams {
    GenerateParams {
        gen_length,
        steps,
        block_length: gen_length,
        early_stop: false,
        ..GenerateParams::defaults_for(Family::Llada)
    }
}

fn run(model: &mut dyn Forward, prompt: &[u32], params: &GenerateParams) -> (Vec<u32>, Vec<Vec<(usize, f32)>>) {
    let mut commits = Vec::new();
    let out = generate(model, prompt, params, special(), &mut |s| {
        commits.push(s.committed.to_vec());
        true
    })
    .unwrap();
    (out.canvas, commits)
}

#[test]
fn logits_eos_inf_never_predicts_eos() {
    let logits = |_: &[u32], _: usize| [0.0, 1.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0];
    let (canvas, _) = run(&mut Scripted::new(Family::Llada, logits), &[1], &llada(4, 4));
    assert!(canvas[1..].iter().all(|&t| t == EOS));
    let params = GenerateParams { logits_eos_inf: true, ..llada(4, 4) };
    let (canvas, _) = run(&mut Scripted::new(Family::Llada, logits), &[1], &params);
    assert!(canvas[1..].iter().all(|&t| t == 1));
}

#[test]
fn classifier_free_guidance_combines_conditional_and_unconditional_logits() {
    // With the prompt visible the model prefers token 2 a little; with the prompt masked it
    // prefers 2 a lot. Guidance (scale 1: un + 2 (c - un)) turns the choice to token 3.
    let logits = |canvas: &[u32], _: usize| {
        if canvas[0] == MASK {
            [0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        } else {
            [0.0, 0.0, 1.0, 0.9, 0.0, 0.0, 0.0, 0.0]
        }
    };
    let mut plain = Scripted::new(Family::Llada, logits);
    let (canvas, _) = run(&mut plain, &[1], &llada(4, 4));
    assert_eq!(&canvas[1..], &[2, 2, 2, 2]);
    assert_eq!(plain.forwards, 4);
    let mut guided = Scripted::new(Family::Llada, logits);
    let (canvas, _) = run(&mut guided, &[1], &GenerateParams { cfg_scale: 1.0, ..llada(4, 4) });
    assert_eq!(&canvas[1..], &[3, 3, 3, 3]);
    assert_eq!(guided.forwards, 8, "one conditional and one unconditional pass per step");
}

#[test]
fn confidence_eos_eot_inf_commits_end_of_turn_last() {
    // Position 1 and 2 predict EOT with high probability, 3 and 4 predict token 1 less surely.
    let logits = |_: &[u32], row: usize| {
        if row <= 2 { [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0] } else { [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] }
    };
    let (_, commits) = run(&mut Scripted::new(Family::Llada, logits), &[1], &llada(4, 4));
    assert!(commits[0][0].0 <= 2, "without the flag the sure EOT positions go first");
    let params = GenerateParams { confidence_eos_eot_inf: true, ..llada(4, 4) };
    let (canvas, commits) = run(&mut Scripted::new(Family::Llada, logits), &[1], &params);
    assert!(commits[0][0].0 >= 3 && commits[1][0].0 >= 3, "EOT positions have confidence 0: last");
    assert_eq!(commits[2][0].1, 0.0);
    assert_eq!(&canvas[1..3], &[EOT, EOT]);
}

#[test]
fn random_remasking_commits_the_scheduled_counts_reproducibly() {
    let logits = |_: &[u32], row: usize| {
        let mut l = [0.0; N_VOCAB];
        l[row % 4] = 1.0;
        l
    };
    let params = GenerateParams { remasking: Remasking::Random, seed: 3, ..llada(8, 4) };
    let (a, commits) = run(&mut Scripted::new(Family::Llada, logits), &[1], &params);
    let (b, _) = run(&mut Scripted::new(Family::Llada, logits), &[1], &params);
    assert_eq!(a, b);
    assert_eq!(commits.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2, 2]);
    for (pos, &t) in a.iter().enumerate().skip(1) {
        assert_eq!(t as usize, pos % 4, "the token is still the argmax; only the order is random");
    }
}

fn dream(gen_length: usize, steps: usize) -> GenerateParams {
    GenerateParams {
        gen_length,
        steps,
        temperature: 0.0,
        top_p: None,
        early_stop: false,
        ..GenerateParams::defaults_for(Family::Dream)
    }
}

#[test]
fn dream_reads_the_logits_of_the_previous_position() {
    // Row r predicts token r % 5: position j must receive (j - 1) % 5.
    let logits = |_: &[u32], row: usize| {
        let mut l = [0.0; N_VOCAB];
        l[row % 5] = 2.0;
        l
    };
    let (canvas, _) = run(&mut Scripted::new(Family::Dream, logits), &[1, 2], &dream(6, 3));
    for (j, &t) in canvas.iter().enumerate().skip(2) {
        assert_eq!(t as usize, (j - 1) % 5, "position {j}");
    }
}

#[test]
fn dream_origin_reveals_everything_by_the_last_step() {
    let logits = |_: &[u32], _: usize| [0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0];
    let params = GenerateParams { alg: DreamAlg::Origin, seed: 9, ..dream(16, 4) };
    let (canvas, commits) = run(&mut Scripted::new(Family::Dream, logits), &[1], &params);
    assert!(canvas[1..].iter().all(|&t| t == 3));
    assert_eq!(commits.iter().map(Vec::len).sum::<usize>(), 16);
}

#[test]
fn dream_top_k_one_samples_the_argmax() {
    let logits = |_: &[u32], row: usize| {
        let mut l = [0.5; N_VOCAB];
        l[row % 3] = 0.9;
        l
    };
    let params = GenerateParams { temperature: 1.0, top_k: Some(1), seed: 5, ..dream(9, 3) };
    let (canvas, commits) = run(&mut Scripted::new(Family::Dream, logits), &[1], &params);
    for (j, &t) in canvas.iter().enumerate().skip(1) {
        assert_eq!(t as usize, (j - 1) % 3);
    }
    // After top-k 1 the kept token has probability 1.
    assert!(commits.iter().flatten().all(|&(_, c)| c.abs() < 1e-6), "the entropy of a certain token is 0");
}

/// RND1's `diffusion_sample`: the canvas ends with the pad token; at step s of 3 (counting
/// down) the trunc(5 x s / 3) maskable positions of highest entropy stay masked, read from the
/// shifted rows (position j from row j - 1); the last step commits the rest.
#[test]
fn rnd1_keeps_the_highest_entropy_positions_masked() {
    // Two candidate tokens, 1 and 2, 2 behind by c: rows 1 and 6 are nearly sure (c = 9),
    // the others not at all (c = 0.1, high entropy).
    let logits = |_: &[u32], row: usize| {
        let c = if row == 1 || row == 6 { 9.0 } else { 0.1 };
        [-50.0, 0.0, -c, -50.0, -50.0, -50.0, -50.0, -50.0]
    };
    let params = GenerateParams {
        gen_length: 6,
        steps: 3,
        temperature: 1.0,
        early_stop: false,
        ..GenerateParams::defaults_for(Family::Rnd1)
    };
    let mut model = Scripted::new(Family::Rnd1, logits);
    let (canvas, commits) = run(&mut model, &[1, 2], &params);
    let positions: Vec<Vec<usize>> = commits.iter().map(|c| c.iter().map(|p| p.0).collect()).collect();
    // Step 1 keeps trunc(5 x 2/3) = 3 masked: position 2 reads the sure row 1 (low entropy);
    // positions 3 to 6 tie, and the lower ones stay masked -> 2 and 6 are committed. Step 2
    // keeps trunc(5/3) = 1 (position 3); step 3 commits the rest.
    assert_eq!(positions, vec![vec![2, 6], vec![4, 5], vec![3]]);
    assert_eq!(model.forwards, 3, "one pass a step");
    assert_eq!(canvas[7], 0, "the last position holds the pad token (0 when the file has none)");
    assert!(canvas[2..7].iter().all(|&t| t == 1 || t == 2), "{canvas:?}");
    // The entropy is the step's reported confidence: the sure rows' is near 0.
    assert!(commits[0].iter().all(|&(p, h)| p != 2 || h < 2e-3), "{:?}", commits[0]);
}

#[test]
fn rnd1_needs_room_for_its_end_position_and_has_no_threshold() {
    let p = GenerateParams { gen_length: 1, ..GenerateParams::defaults_for(Family::Rnd1) };
    assert!(p.plan(Family::Rnd1, 4, 4096).unwrap_err().to_string().contains("at least 2"));
    let p = GenerateParams { threshold: Some(0.9), ..GenerateParams::defaults_for(Family::Rnd1) };
    assert!(p.plan(Family::Rnd1, 4, 4096).is_err());
}

/// Every loop that runs until no mask is left, on a model whose most likely token is its own
/// mask token, whatever it is shown (#23.8: a held-out Dream model with top-p 0.95, threshold
/// 0.5 and a prefix cache ran past 19,000 steps). Each ends with the no-progress error.
#[test]
fn a_model_that_keeps_choosing_its_mask_token_stops_with_an_error() {
    use dllm::decoding::{KvCacheMode, MAX_STALLS, SamplerError};
    let logits = |_: &[u32], _: usize| [0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0];
    let cases = [
        (
            Family::Dream,
            GenerateParams { threshold: Some(0.5), block_length: 4, cache: KvCacheMode::Prefix, ..dream(8, 8) },
        ),
        (
            Family::Dream,
            GenerateParams { threshold: Some(0.5), block_length: 4, cache: KvCacheMode::None, ..dream(8, 8) },
        ),
        (Family::Dream, GenerateParams { alg: DreamAlg::ConfidenceThreshold, threshold: Some(0.9), ..dream(8, 8) }),
        (
            Family::Llada,
            GenerateParams { threshold: Some(0.9), block_length: 4, cache: KvCacheMode::Dual, ..llada(8, 8) },
        ),
        (Family::Llada, GenerateParams { threshold: Some(0.9), block_length: 4, ..llada(8, 8) }),
    ];
    for (family, params) in cases {
        let mut model = Scripted::new(family, logits);
        let mut steps = 0;
        let err = generate(&mut model, &[1, 2], &params, special(), &mut |_| {
            steps += 1;
            true
        })
        .unwrap_err();
        assert!(matches!(err, SamplerError::NoProgress { mask: MASK, .. }), "{family:?} {params:?}: {err}");
        assert!(steps <= MAX_STALLS + 2, "{family:?}: {steps} steps");
    }
}

/// A model that chooses its mask token a few times and then a real token is not stopped: the
/// position stays masked for those steps, as upstream, and the run completes.
#[test]
fn a_few_steps_choosing_the_mask_token_are_retried_as_upstream() {
    use dllm::decoding::KvCacheMode;
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let logits = |_: &[u32], _: usize| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 12 {
            [0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0]
        } else {
            [0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5]
        }
    };
    let params = GenerateParams { threshold: Some(0.9), block_length: 4, cache: KvCacheMode::Prefix, ..llada(8, 8) };
    let out = generate(&mut Scripted::new(Family::Llada, logits), &[1, 2], &params, special(), &mut |_| true).unwrap();
    assert!(out.canvas[2..].iter().all(|&t| t == 1), "{:?}", out.canvas);
}

/// NaN or infinite logits are reported with the step and position, not sampled.
#[test]
fn non_finite_logits_are_reported() {
    use dllm::decoding::SamplerError;
    for bad in [f32::NAN, f32::INFINITY] {
        let logits = move |_: &[u32], r: usize| {
            let mut row = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
            if r == 3 {
                row[2] = bad;
            }
            row
        };
        for (family, params) in [(Family::Llada, llada(4, 4)), (Family::Dream, dream(4, 4))] {
            let err =
                generate(&mut Scripted::new(family, logits), &[1, 2], &params, special(), &mut |_| true).unwrap_err();
            assert!(matches!(err, SamplerError::NonFinite { step: 0, .. }), "{family:?} {bad}: {err}");
            assert!(err.to_string().contains("not finite"), "{err}");
        }
    }
}
