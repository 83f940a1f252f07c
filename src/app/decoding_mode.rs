//! The decoding mode picker: the official sampler (exact), Fast-dLLM threshold decoding (same
//! model outputs, fewer steps), or threshold decoding with the dual K/V cache (approximate).

use crate::decoding::{DreamAlg, GenerateParams, KvCacheMode};
use crate::model::Family;

/// Fast-dLLM's recommended confidence threshold.
const DEFAULT_THRESHOLD: f64 = 0.9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exact,
    Fast,
    Faster,
}

impl Mode {
    pub fn of(p: &GenerateParams) -> Mode {
        match (p.threshold, p.cache) {
            (None, KvCacheMode::None) => Mode::Exact,
            (Some(_), KvCacheMode::None) => Mode::Fast,
            _ => Mode::Faster,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Mode::Exact => "Exact",
            Mode::Fast => "Fast: threshold",
            Mode::Faster => "Faster: threshold + cache (approximate)",
        }
    }

    /// Sets the parameters this mode stands for, keeping the user's threshold if any.
    pub fn apply(self, family: Family, p: &mut GenerateParams) {
        let threshold = p.threshold.unwrap_or(DEFAULT_THRESHOLD);
        match self {
            Mode::Exact => (p.threshold, p.cache) = (None, KvCacheMode::None),
            Mode::Fast => (p.threshold, p.cache) = (Some(threshold), KvCacheMode::None),
            Mode::Faster => (p.threshold, p.cache) = (Some(threshold), KvCacheMode::Dual),
        }
        if family == Family::Dream {
            // Dream's threshold decoding is its block sampler, which rates positions by probability.
            if p.alg == DreamAlg::ConfidenceThreshold {
                p.alg = DreamAlg::Entropy;
            }
            if self != Mode::Exact && (p.block_length >= p.gen_length || !p.gen_length.is_multiple_of(p.block_length)) {
                p.block_length = if p.gen_length.is_multiple_of(32) { 32 } else { p.gen_length };
            }
        }
    }
}

/// The mode picker (and a warning when the mode approximates); the mode chosen, if changed.
pub fn ui(ui: &mut egui::Ui, p: &GenerateParams) -> Option<Mode> {
    let current = Mode::of(p);
    let mut mode = current;
    let tip = "Exact: the model's official sampler, a fixed number of steps.\n\
        Fast: each step commits every masked position of the current block the model is sure of \
        (probability at least the threshold), at least one; same model outputs, fewer steps.\n\
        Faster: also reuses the keys and values of positions outside the current block \
        (Fast-dLLM's dual cache), so most steps run only the block; an approximation, the \
        answer can differ from Exact.";
    let label = ui.label("decoding").on_hover_text(tip);
    egui::ComboBox::from_id_salt("decoding")
        .selected_text(mode.label())
        .show_ui(ui, |ui| {
            for m in [Mode::Exact, Mode::Fast, Mode::Faster] {
                ui.selectable_value(&mut mode, m, m.label());
            }
        })
        .response
        .labelled_by(label.id)
        .on_hover_text(tip);
    ui.end_row();
    if p.cache != KvCacheMode::None {
        ui.label("");
        ui.colored_label(
            egui::Color32::from_rgb(240, 170, 60),
            "approximate: cached keys/values ignore tokens committed since the block began",
        );
        ui.end_row();
    }
    (mode != current).then_some(mode)
}
