//! The canvas grid: one cell per position, wrapping like text. Masked cells look masked,
//! cells committed in the step shown are outlined, earlier commits are coloured by the step
//! they were committed in (or by confidence), and hovering shows the details.

use egui::{Color32, Stroke};

use super::run_view::RunView;
use crate::tokenizer::Tokenizer;

/// Colour of a commit made at `step` of `total` steps: early commits blue, late ones orange.
fn step_color(step: usize, total: usize) -> Color32 {
    let t = if total <= 1 { 0.0 } else { step as f32 / (total - 1) as f32 };
    let lerp = |a: f32, b: f32| (a + (b - a) * t) as u8;
    Color32::from_rgb(lerp(60.0, 235.0), lerp(120.0, 150.0), lerp(230.0, 50.0))
}

fn confidence_color(c: f32) -> Color32 {
    let c = c.clamp(0.0, 1.0);
    Color32::from_rgb((220.0 * (1.0 - c)) as u8 + 30, (190.0 * c) as u8 + 40, 70)
}

pub fn show(ui: &mut egui::Ui, run: &RunView, tokenizer: &Tokenizer, shown_step: Option<usize>, by_confidence: bool) {
    let canvas = run.canvas_at(shown_step);
    let current = shown_step.or(run.steps.len().checked_sub(1));
    let total_steps = run.total_steps.max(1);
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing = egui::vec2(2.0, 3.0);
        for (pos, &id) in canvas.iter().enumerate() {
            let text = tokenizer.cell_text(id, run.mask);
            let commit = run.committed_by(pos, shown_step);
            let (fill, fg) = if pos < run.prompt_len {
                (Color32::from_gray(55), Color32::from_gray(200))
            } else if id == run.mask {
                (Color32::from_gray(35), Color32::from_gray(90))
            } else {
                match commit {
                    Some((step, conf)) => {
                        let c = if by_confidence { confidence_color(conf) } else { step_color(step, total_steps) };
                        (c.gamma_multiply(0.55), Color32::WHITE)
                    }
                    None => (Color32::from_gray(70), Color32::WHITE),
                }
            };
            let just_committed = commit.is_some_and(|(s, _)| Some(s) == current);
            // Cells are painted, not laid out as frames, so that the wrapping layout knows each
            // cell's size before placing it (and 600 cells stay cheap).
            let galley = ui.painter().layout_no_wrap(text, egui::TextStyle::Monospace.resolve(ui.style()), fg);
            let size = galley.size() + egui::vec2(8.0, 4.0);
            let (rect, response) = ui.allocate_exact_size(size, egui::Sense::hover());
            let painter = ui.painter();
            painter.rect_filled(rect, 3.0, fill);
            if just_committed {
                painter.rect_stroke(rect, 3.0, Stroke::new(1.5, Color32::YELLOW), egui::StrokeKind::Inside);
            }
            painter.galley(rect.min + egui::vec2(4.0, 2.0), galley, fg);
            response.on_hover_ui(|ui| {
                ui.label(format!("position {pos}, token {id}"));
                ui.label(format!("text {:?}", tokenizer.piece(id)));
                if pos < run.prompt_len {
                    ui.label("prompt");
                } else if let Some((step, conf)) = commit {
                    ui.label(format!("committed at step {}, confidence {conf:.3}", step + 1));
                } else {
                    ui.label("masked");
                }
            });
        }
    });
}

/// A small legend for the colouring in use.
pub fn legend(ui: &mut egui::Ui, by_confidence: bool, total_steps: usize) {
    ui.horizontal(|ui| {
        let swatch = |ui: &mut egui::Ui, c: Color32, label: &str| {
            let (rect, _) = ui.allocate_exact_size(egui::vec2(12.0, 12.0), egui::Sense::hover());
            ui.painter().rect_filled(rect, 2.0, c);
            ui.label(label);
        };
        swatch(ui, Color32::from_gray(55), "prompt");
        swatch(ui, Color32::from_gray(35), "masked");
        if by_confidence {
            swatch(ui, confidence_color(0.0).gamma_multiply(0.55), "low confidence");
            swatch(ui, confidence_color(1.0).gamma_multiply(0.55), "high confidence");
        } else {
            swatch(ui, step_color(0, total_steps).gamma_multiply(0.55), "early step");
            swatch(ui, step_color(total_steps.saturating_sub(1), total_steps).gamma_multiply(0.55), "late step");
        }
        let (rect, _) = ui.allocate_exact_size(egui::vec2(12.0, 12.0), egui::Sense::hover());
        ui.painter().rect_stroke(rect, 2.0, Stroke::new(1.5, Color32::YELLOW), egui::StrokeKind::Inside);
        ui.label("committed in the step shown");
    });
}
