//! The load settings: which device runs the model, with how many CPU threads, and whether the
//! packed CPU weights are cached between loads. They take
//! effect when a model loads, so a change offers to reload the current one.

use crate::cuda::DeviceRequest;
use crate::engine::LoadOptions;

use super::settings::Settings;

/// Shows the load settings; true when the user asks to reload with them.
pub fn ui(ui: &mut egui::Ui, settings: &mut Settings, loaded: Option<&LoadOptions>) -> bool {
    egui::Grid::new("load settings").num_columns(2).show(ui, |ui| {
        let tip = "Where the model runs. auto: an NVIDIA GPU (compute capability 8.0 or newer) with enough free memory, else the CPU; the model card says which and why.";
        let label = ui.label("device").on_hover_text(tip);
        egui::ComboBox::from_id_salt("device")
            .selected_text(settings.device.name())
            .show_ui(ui, |ui| {
                for d in DeviceRequest::ALL {
                    ui.selectable_value(&mut settings.device, d, d.name());
                }
            })
            .response
            .labelled_by(label.id)
            .on_hover_text(tip);
        ui.end_row();
        let tip = "CPU threads for the forward pass. auto: one per physical core.";
        let label = ui.label("threads").on_hover_text(tip);
        let mut threads = settings.threads.unwrap_or(0);
        ui.add(
            egui::DragValue::new(&mut threads)
                .range(0..=256)
                .custom_formatter(|v, _| if v == 0.0 { "auto".into() } else { format!("{v}") }),
        )
        .labelled_by(label.id)
        .on_hover_text(tip);
        settings.threads = (threads > 0).then_some(threads);
        ui.end_row();
        let tip = "Keep the CPU's packed weights in a file in the cache folder (the size of the model), so that the next load of this model maps them instead of packing again.";
        let label = ui.label("pack cache").on_hover_text(tip);
        ui.checkbox(&mut settings.pack_cache, "").labelled_by(label.id).on_hover_text(tip);
        ui.end_row();
        let tip = "Faster weights (CPU, AVX2 and AVX-VNNI): expand the Q4_K weights to a byte each at load, so that no step unpacks them. A Q4_K_M model then takes about 1.6x its file size in memory; the answers are the same.";
        let label = ui.label("wide weights").on_hover_text(tip);
        ui.checkbox(&mut settings.wide_weights, "").labelled_by(label.id).on_hover_text(tip);
        ui.end_row();
    });
    let wanted = settings.load_options();
    loaded.is_some_and(|l| *l != wanted) && ui.button("Reload the model with these settings").clicked()
}
