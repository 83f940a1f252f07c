//! Driving the app in egui_kittest while the engine works on its own threads.

use std::time::{Duration, Instant};

use dllm::app::DllmApp;
use egui_kittest::Harness;

/// Steps the UI until `done` holds, then one frame more so the window shows the new state.
/// Fails after two minutes rather than hanging the suite.
pub fn wait_for(h: &mut Harness<'static, DllmApp>, what: &str, done: impl Fn(&DllmApp) -> bool) {
    let start = Instant::now();
    while !done(h.state()) {
        assert!(start.elapsed() < Duration::from_secs(120), "timed out waiting for {what}");
        h.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    h.step();
}
