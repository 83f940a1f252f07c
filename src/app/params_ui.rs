//! The generation settings' controls, one per row of the engine's table (`decoding::PARAMS`):
//! the label, the hover help and the range are the table's, and a change is an action
//! (`Action::SetParam`) that the app applies after drawing.

use egui::Ui;

use super::Action;
use crate::decoding::{GenerateParams, Kind, PARAMS, Param, ParamSpec, Value};
use crate::model::Family;

/// The settings in the main grid; the rest are under "Advanced settings".
const MAIN: &[Param] = &[
    Param::GenLength,
    Param::Steps,
    Param::BlockLength,
    Param::Threshold,
    Param::Temperature,
    Param::Remasking,
    Param::Alg,
    Param::Seed,
    Param::EarlyStop,
];

/// The value an optional setting takes when its box is ticked: the family's default, else a
/// usual one (Fast-dLLM's threshold, a top-k of 50).
fn turned_on(param: Param, family: Family) -> Value {
    match GenerateParams::defaults_for(family).get(param) {
        Value::Off if param == Param::TopK => Value::Count(50),
        Value::Off => Value::Real(0.9),
        value => value,
    }
}

/// Rows of `params` for the settings `which` picks, as a two-column grid's rows.
pub fn rows(ui: &mut Ui, family: Family, p: &GenerateParams, which: fn(Param) -> bool, actions: &mut Vec<Action>) {
    for spec in PARAMS.iter().filter(|s| s.param.applies_to(family) && which(s.param)) {
        // Dream's block length means something only with a threshold.
        if spec.param == Param::BlockLength && family == Family::Dream && p.threshold.is_none() {
            continue;
        }
        let label = ui.label(spec.label).on_hover_text(spec.help);
        if let Some(value) = control(ui, spec, family, p.get(spec.param), label.id) {
            actions.push(Action::SetParam(spec.param, value));
        }
        ui.end_row();
    }
}

pub fn is_main(param: Param) -> bool {
    MAIN.contains(&param)
}

pub fn is_advanced(param: Param) -> bool {
    !is_main(param)
}

/// One setting's widget; the new value when the user changed it.
fn control(ui: &mut Ui, spec: &ParamSpec, family: Family, value: Value, label: egui::Id) -> Option<Value> {
    if spec.optional {
        return ui
            .horizontal(|ui| {
                let mut on = value != Value::Off;
                let toggled = ui.checkbox(&mut on, "").labelled_by(label).on_hover_text(spec.help).changed();
                let shown = if value == Value::Off { turned_on(spec.param, family) } else { value };
                let edited = if on { widget(ui, spec, shown, label) } else { None };
                match (toggled, on) {
                    (true, false) => Some(Value::Off),
                    (true, true) => Some(shown),
                    (false, _) => edited,
                }
            })
            .inner;
    }
    widget(ui, spec, value, label)
}

fn widget(ui: &mut Ui, spec: &ParamSpec, value: Value, label: egui::Id) -> Option<Value> {
    let changed = |r: egui::Response| r.labelled_by(label).on_hover_text(spec.help).changed();
    match (spec.kind, value) {
        (Kind::Count { min, max }, Value::Count(mut n)) => {
            changed(ui.add(egui::DragValue::new(&mut n).range(min..=max))).then_some(Value::Count(n))
        }
        (Kind::Real { min, max, step }, Value::Real(mut x)) => {
            changed(ui.add(egui::DragValue::new(&mut x).range(min..=max).speed(step))).then_some(Value::Real(x))
        }
        (Kind::Switch { .. }, Value::Switch(mut on)) => changed(ui.checkbox(&mut on, "")).then_some(Value::Switch(on)),
        (Kind::Choice(names), Value::Choice(mut chosen)) => {
            let response = egui::ComboBox::from_id_salt(spec.name)
                .selected_text(chosen)
                .show_ui(ui, |ui| {
                    for &name in names {
                        ui.selectable_value(&mut chosen, name, name);
                    }
                })
                .response;
            response.labelled_by(label).on_hover_text(spec.help);
            (Value::Choice(chosen) != value).then_some(Value::Choice(chosen))
        }
        _ => None,
    }
}
