//! Step-time chart (forward and sampling ms per step) and tokens committed per step, split by
//! the kind of forward pass that step ran (whole canvas, or a window against the K/V cache).

use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};

use super::run_view::RunView;

pub fn show(ui: &mut egui::Ui, run: &RunView) {
    let forward: PlotPoints = run.steps.iter().map(|s| [s.index as f64 + 1.0, s.forward_ms]).collect();
    let sampling: PlotPoints = run.steps.iter().map(|s| [s.index as f64 + 1.0, s.sample_ms]).collect();
    let commits = |cached: bool| -> Vec<Bar> {
        run.steps
            .iter()
            .filter(|s| s.forwards > 0 && s.cached == cached)
            .map(|s| Bar::new(s.index as f64 + 1.0, s.committed.len() as f64).width(0.7))
            .collect()
    };
    ui.label("ms per step");
    Plot::new("step_ms").height(130.0).legend(Legend::default()).allow_scroll(false).show(ui, |p| {
        p.line(Line::new("forward", forward));
        p.line(Line::new("sampling", sampling));
    });
    let passes = run.steps.iter().map(|s| s.forwards).sum::<usize>();
    let cached = run.steps.iter().filter(|s| s.cached).count();
    ui.label(format!("tokens committed per step \u{2022} {passes} forward passes ({cached} cached)"));
    Plot::new("commits").height(110.0).legend(Legend::default()).allow_scroll(false).show(ui, |p| {
        p.bar_chart(BarChart::new("after a full pass", commits(false)));
        p.bar_chart(BarChart::new("after a cached pass", commits(true)));
    });
}

/// Median of the step times, for the summary line.
pub fn median_step_ms(run: &RunView) -> f64 {
    let mut v: Vec<f64> = run.steps.iter().map(|s| s.forward_ms + s.sample_ms).collect();
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}
