//! The chat view: a conversation with the loaded model, every turn rendered through the
//! model's chat template, the answer's canvas painted live below the turns as it denoises.
//! Conversations are saved (one JSON file each, in the app's data folder) after every reply,
//! listed, renamed, deleted and exported as Markdown or JSON.

use std::path::PathBuf;

use egui::RichText;

use super::action::Action;
use crate::conversation::{Conversation, Store};

#[derive(Default)]
pub struct ChatState {
    /// The saved conversation on display (None: not saved yet).
    pub id: Option<String>,
    pub conversation: Conversation,
    /// The message being written.
    pub input: String,
    /// Turns dropped at the last send to fit the context (said until the next send).
    pub dropped: usize,
    /// A reply to the conversation is asked for or being generated (the app's next or
    /// current run).
    pub replying: bool,
    /// The saved conversations, and the folder they were listed from.
    pub saved: Vec<(String, Conversation)>,
    listed_from: Option<PathBuf>,
    /// The title being edited, for the conversation on display.
    pub renaming: Option<String>,
    pub message: Option<String>,
}

impl ChatState {
    /// Lists the store's conversations when the folder changed since the last listing.
    pub fn refresh(&mut self, store: &Store, force: bool) {
        if force || self.listed_from.as_ref() != Some(&store.dir) {
            self.saved = store.list();
            self.listed_from = Some(store.dir.clone());
        }
    }

    /// Saves the conversation on display (giving it an id the first time).
    pub fn save(&mut self, store: &Store) {
        if self.conversation.turns.is_empty() {
            return;
        }
        let id = self.id.get_or_insert_with(|| store.new_id()).clone();
        if let Err(e) = store.save(&id, &self.conversation) {
            self.message = Some(format!("could not save the conversation in {}: {e}", store.dir.display()));
        }
        self.refresh(store, true);
    }
}

/// Draws the conversation list, the turns and the message box; what the user asks for goes
/// to `actions`. `context` is (prompt tokens at the last check, answer tokens, context size).
pub fn ui(
    ui: &mut egui::Ui,
    chat: &mut ChatState,
    running: bool,
    context: (usize, usize, usize),
    actions: &mut Vec<Action>,
) {
    ui.horizontal_wrapped(|ui| {
        if ui.button("New chat").clicked() {
            actions.push(Action::ChatNew);
        }
        let current = chat.id.clone();
        egui::ComboBox::from_label("Conversations")
            .selected_text(if chat.conversation.title.is_empty() {
                "(new)".to_string()
            } else {
                chat.conversation.title.clone()
            })
            .show_ui(ui, |ui| {
                for (id, c) in &chat.saved {
                    if ui.selectable_label(current.as_deref() == Some(id), &c.title).clicked() {
                        actions.push(Action::ChatOpen(id.clone()));
                    }
                }
            });
        if let Some(id) = current {
            if ui.button("Rename").clicked() {
                chat.renaming = Some(chat.conversation.title.clone());
            }
            if ui.button("Delete").clicked() {
                actions.push(Action::ChatDelete(id));
            }
            if ui.button("Export Markdown").clicked() {
                actions.push(Action::ChatExport("md"));
            }
            if ui.button("Export JSON").clicked() {
                actions.push(Action::ChatExport("json"));
            }
        }
    });
    if let Some(title) = &mut chat.renaming {
        ui.horizontal(|ui| {
            let label = ui.label("Title");
            ui.text_edit_singleline(title).labelled_by(label.id);
            if ui.button("Save title").clicked() {
                actions.push(Action::ChatRename(title.clone()));
            }
        });
    }
    ui.horizontal(|ui| {
        let label = ui.label("System prompt");
        ui.add(egui::TextEdit::singleline(&mut chat.conversation.system).desired_width(f32::INFINITY))
            .labelled_by(label.id);
    });
    ui.separator();
    egui::ScrollArea::vertical().max_height(260.0).auto_shrink([false, true]).stick_to_bottom(true).show(ui, |ui| {
        for turn in &chat.conversation.turns {
            let who = if turn.role == "user" { "You" } else { "Assistant" };
            ui.label(RichText::new(who).strong());
            ui.label(&turn.content);
            ui.add_space(4.0);
        }
    });
    if chat.dropped > 0 {
        ui.colored_label(
            egui::Color32::from_rgb(240, 170, 60),
            format!("The {} oldest turns no longer fit the context and were dropped.", chat.dropped),
        );
    }
    let (prompt, answer, size) = context;
    ui.label(format!("Context: {prompt} prompt + {answer} answer tokens of {size}"));
    let label = ui.label("Message");
    ui.add(egui::TextEdit::multiline(&mut chat.input).desired_rows(2).desired_width(f32::INFINITY))
        .labelled_by(label.id);
    ui.horizontal(|ui| {
        let has_input = !chat.input.trim().is_empty();
        if ui.add_enabled(!running && has_input, egui::Button::new("Send")).clicked() {
            actions.push(Action::ChatSend);
        }
        let last_is_reply = chat.conversation.turns.last().is_some_and(|t| t.role == "assistant");
        if ui.add_enabled(!running && last_is_reply, egui::Button::new("Regenerate")).clicked() {
            actions.push(Action::ChatRegenerate);
        }
        if ui.add_enabled(!running && !chat.conversation.turns.is_empty(), egui::Button::new("Edit last")).clicked() {
            actions.push(Action::ChatEditLast);
        }
        if ui.add_enabled(running, egui::Button::new("Stop")).clicked() {
            actions.push(Action::Stop);
        }
    });
    if let Some(message) = &chat.message {
        ui.label(message);
    }
}
