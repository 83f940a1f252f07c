//! One frame of the app with a 600-position canvas on screen: a finished run of the tiny LLaDA
//! fixture (its prompt + 576 answer positions; the demo model's context is only 256), so that the
//! 60 fps target (16.7 ms a frame) can be checked. A frame here is what the UI thread does: the app's update (layout of every cell,
//! the charts) and egui's tessellation into triangles; the GPU's drawing is not included.
//! `cargo bench --bench app_frame`.

use dllm::app::DllmApp;
use egui_kittest::Harness;

// The integration tests' helper for stepping the app until the engine is done.
#[path = "../tests/suite/common/harness.rs"]
mod harness;
use harness::wait_for;

fn main() {
    divan::main();
}

fn harness_with_a_600_position_run() -> Harness<'static, DllmApp> {
    let mut h =
        Harness::builder().with_size([1400.0, 1000.0]).allow_missing_glyphs().build_eframe(|cc| DllmApp::new(cc, None));
    h.state_mut().settings.pack_cache = false;
    let ctx = h.ctx.clone();
    h.state_mut().load(format!("{}/tests/data/models/llada-tiny-Q8_0.gguf", env!("CARGO_MANIFEST_DIR")).into(), &ctx);
    wait_for(&mut h, "the fixture to load", |a| !a.is_loading());
    {
        let app = h.state_mut();
        let info = app.session.as_ref().expect("the fixture loads").info().clone();
        let p = app.settings.params_mut(&info);
        // 18 blocks of 32, two steps each: a long canvas without a long wait.
        (p.gen_length, p.block_length, p.steps) = (576, 32, 36);
    }
    h.state_mut().generate(&ctx);
    wait_for(&mut h, "the run", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()) || a.error.is_some());
    assert!(h.state().error.is_none(), "{:?}", h.state().error);
    let positions = h.state().canvas_cells().len();
    assert!(positions >= 600, "{positions} positions");
    h
}

#[divan::bench(sample_count = 30, sample_size = 1)]
fn frame_with_600_cells(bencher: divan::Bencher) {
    let mut h = harness_with_a_600_position_run();
    bencher.bench_local(|| {
        h.step();
        let out = h.output();
        h.ctx.tessellate(out.shapes.clone(), out.pixels_per_point)
    });
}
