//! Snapshot images of the main screens, kept in tests/snapshots: the empty window, the bundled
//! demo model's canvas half way through a run, and the finished run with its answer and charts.
//! They are rendered in software (`common::soft_render`), so the pixels are the same on any
//! machine. What differs from run to run (step times, load time, peak memory) is set to fixed
//! values before a picture is taken; everything else is what the app drew. A change in the look
//! fails the test (kittest writes `<name>.diff.png` beside the snapshot); after checking the new
//! image, `UPDATE_SNAPSHOTS=1 cargo test --test suite snapshots::` accepts it.

use crate::common;

use common::harness::wait_for;
use common::soft_render::SoftRenderer;
use dllm::app::{DllmApp, Measured};
use egui_kittest::Harness;

fn harness() -> Harness<'static, DllmApp> {
    let mut h = Harness::builder()
        .with_size([1200.0, 900.0])
        .renderer(SoftRenderer::default())
        .build_eframe(|cc| DllmApp::new(cc, None));
    // An empty Hugging Face cache, so that the list of downloaded models is the same everywhere.
    let cache = std::env::temp_dir().join(format!("dllm-snapshot-hub-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    h.state_mut().settings.hf_cache = Some(cache);
    // Nothing written to the user's cache directory (the pack cache has its own tests).
    h.state_mut().settings.pack_cache = false;
    h
}

/// Replaces every measured time and size with a fixed one: 40 ms forward and 2 ms sampling per
/// step (a little more on every tenth, so the chart has a shape), 0.5 s to load, 300 MB peak,
/// and the AVX2 kernels (this machine's best may be another).
fn fix_measurements(app: &mut DllmApp) {
    app.measured = Measured { load_ms: 500.0, peak_memory: Some(300 << 20), kernels: "avx2" };
    if let Some(run) = &mut app.run {
        for (i, step) in run.steps.iter_mut().enumerate() {
            step.forward_ms = if i % 10 == 9 { 48.0 } else { 40.0 };
            step.sample_ms = 2.0;
        }
        let total: f64 = run.steps.iter().map(|s| s.forward_ms + s.sample_ms).sum();
        if let Some(f) = &mut run.finished {
            f.total_ms = total;
        }
    }
}

#[test]
fn main_screens_match_their_snapshots() {
    let mut h = harness();
    h.run_steps(4);
    h.snapshot("empty-window");

    // The demo model, typed as a path relative to the checkout (the working directory of
    // tests), so that the field reads the same on every machine.
    h.state_mut().model_path = "assets/demo-model-Q8_0.gguf".into();
    let ctx = h.ctx.clone();
    h.state_mut().load("assets/demo-model-Q8_0.gguf".into(), &ctx);
    wait_for(&mut h, "the demo model to load", |a| !a.is_loading());
    assert!(h.state().session.is_some(), "{:?}", h.state().error);
    {
        let app = h.state_mut();
        app.settings.prompt = "Tell me a story about a cat.".into();
        let info = app.session.as_ref().unwrap().info().clone();
        let p = app.settings.params_mut(&info);
        p.gen_length = 64;
        p.steps = 64;
        p.block_length = 32;
    }
    h.state_mut().generate(&ctx);
    wait_for(&mut h, "the run to finish", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
    fix_measurements(h.state_mut());

    h.state_mut().replay_step = Some(31);
    h.run_steps(4);
    h.snapshot("demo-half-way");

    h.state_mut().replay_step = None;
    h.run_steps(4);
    h.snapshot("demo-finished");
    if let Some(cache) = h.state().settings.hf_cache.clone() {
        std::fs::remove_dir_all(cache).ok();
    }
}
