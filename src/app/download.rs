//! The "Download from Hugging Face" panel: list a repository's .gguf files, download one in
//! the background with progress, speed and ETA, cancel, and load it once verified.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use poll_promise::Promise;

use crate::hub::{Hub, HubError, PRESETS, RemoteFile, parse_spec, pick};
use crate::summary::human_bytes;

/// Bytes done and total of the transfer in progress, written by the download thread.
type Progress = Arc<Mutex<(u64, u64)>>;

/// A repository listing in progress: (repository, its .gguf files).
type Listing = Promise<Result<(String, Vec<RemoteFile>), HubError>>;

pub struct Transfer {
    file: RemoteFile,
    progress: Progress,
    cancel: Arc<AtomicBool>,
    started: Instant,
    result: Promise<Result<PathBuf, HubError>>,
}

#[derive(Default)]
pub struct DownloadPanel {
    pub repo_spec: String,
    listing: Option<Listing>,
    pub repo: String,
    pub files: Vec<RemoteFile>,
    pub selected: Option<usize>,
    pub transfer: Option<Transfer>,
    pub message: Option<String>,
}

impl DownloadPanel {
    pub fn is_busy(&self) -> bool {
        self.listing.is_some() || self.transfer.is_some()
    }

    pub fn list(&mut self, hub: Hub) {
        self.message = None;
        match parse_spec(&self.repo_spec) {
            Ok((repo, _)) => {
                self.listing = Some(Promise::spawn_thread("dllm-hub-list", move || {
                    hub.list_gguf(&repo).map(|files| (repo, files))
                }));
            }
            Err(e) => self.message = Some(e.to_string()),
        }
    }

    pub fn download(&mut self, hub: Hub) {
        let Some(file) = self.selected.and_then(|i| self.files.get(i)).cloned() else { return };
        let progress: Progress = Arc::new(Mutex::new((0, file.size)));
        let cancel = Arc::new(AtomicBool::new(false));
        let (p, c, f, repo) = (progress.clone(), cancel.clone(), file.clone(), self.repo.clone());
        let result = Promise::spawn_thread("dllm-hub-download", move || {
            hub.download(&repo, &f, &mut |done, total| *p.lock().unwrap_or_else(|e| e.into_inner()) = (done, total), &c)
        });
        self.message = None;
        self.transfer = Some(Transfer { file, progress, cancel, started: Instant::now(), result });
    }

    pub fn cancel(&self) {
        if let Some(t) = &self.transfer {
            t.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Polls the background work; returns a verified file to load when a download finished.
    pub fn poll(&mut self, ctx: &egui::Context) -> Option<PathBuf> {
        if let Some(listing) = self.listing.take() {
            match listing.try_take() {
                Ok(Ok((repo, files))) => {
                    let quant = parse_spec(&self.repo_spec).ok().and_then(|(_, q)| q);
                    self.selected = pick(&repo, &files, quant.as_deref())
                        .ok()
                        .and_then(|chosen| files.iter().position(|f| f == chosen));
                    if self.selected.is_none() {
                        self.message = pick(&repo, &files, quant.as_deref()).err().map(|e| e.to_string());
                    }
                    self.repo = repo;
                    self.files = files;
                }
                Ok(Err(e)) => self.message = Some(e.to_string()),
                Err(listing) => {
                    self.listing = Some(listing);
                    ctx.request_repaint_after(std::time::Duration::from_millis(50));
                }
            }
        }
        let transfer = self.transfer.take()?;
        match transfer.result.try_take() {
            Ok(Ok(path)) => {
                self.message = Some(format!("downloaded and verified {}", transfer.file.path));
                Some(path)
            }
            Ok(Err(e)) => {
                self.message = Some(e.to_string());
                None
            }
            Err(result) => {
                self.transfer = Some(Transfer { result, ..transfer });
                ctx.request_repaint_after(std::time::Duration::from_millis(50));
                None
            }
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, hub: &Hub) {
        ui.horizontal_wrapped(|ui| {
            ui.label("Models:");
            for preset in PRESETS {
                let button = ui.add_enabled(!self.is_busy(), egui::Button::new(preset.model));
                if button.on_hover_text(format!("{}\n{}", preset.about, preset.spec)).clicked() {
                    self.repo_spec = preset.spec.to_string();
                    self.list(hub.clone());
                }
            }
        });
        ui.horizontal(|ui| {
            let label = ui.label("Repository");
            ui.add(
                egui::TextEdit::singleline(&mut self.repo_spec)
                    .hint_text("owner/name or owner/name:Q4_K_M")
                    .desired_width(200.0),
            )
            .labelled_by(label.id)
            .on_hover_text("A Hugging Face repository with GGUF files; add :QUANT to pick a quantization.");
            if ui.add_enabled(!self.is_busy(), egui::Button::new("List files")).clicked() {
                self.list(hub.clone());
            }
        });
        ui.label(egui::RichText::new(format!("from {}", hub.endpoint)).small());
        if self.listing.is_some() {
            ui.horizontal(|ui| {
                ui.spinner();
                ui.label("listing\u{2026}");
            });
        }
        for (i, f) in self.files.iter().enumerate() {
            let text = format!("{}  {}  {}", f.path, human_bytes(f.size), f.quant().unwrap_or_default());
            if ui.selectable_label(self.selected == Some(i), text).clicked() && self.transfer.is_none() {
                self.selected = Some(i);
            }
        }
        match &self.transfer {
            Some(t) => {
                let (done, total) = *t.progress.lock().unwrap_or_else(|e| e.into_inner());
                let secs = t.started.elapsed().as_secs_f64().max(1e-3);
                let speed = done as f64 / secs;
                let eta = if speed > 0.0 { (total.saturating_sub(done)) as f64 / speed } else { f64::INFINITY };
                ui.add(egui::ProgressBar::new(done as f32 / total.max(1) as f32).show_percentage());
                ui.label(format!(
                    "{} of {} \u{2022} {}/s \u{2022} {eta:.0} s left",
                    human_bytes(done),
                    human_bytes(total),
                    human_bytes(speed as u64)
                ));
                if ui.button("Cancel download").clicked() {
                    self.cancel();
                }
            }
            None => {
                if ui.add_enabled(self.selected.is_some() && !self.is_busy(), egui::Button::new("Download")).clicked() {
                    self.download(hub.clone());
                }
            }
        }
        if let Some(m) = &self.message {
            ui.label(m);
        }
    }
}
