//! The desktop app: a thin egui front end over `engine::Session`. The engine runs on its own
//! thread; the window drains its step events once per frame and paints the canvas.

mod action;
mod canvas;
mod chart;
mod chat_view;
mod decoding_mode;
mod device;
mod download;
mod params_ui;
mod run_view;
mod settings;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use egui::RichText;
use poll_promise::Promise;

pub use action::Action;
pub use decoding_mode::Mode;
pub use download::DownloadPanel;
pub use run_view::RunView;
pub use settings::Settings;

use crate::decoding::DecodingPlan;
use crate::engine::{EngineError, Prompt, Session};
use crate::export::{RunRecord, html_page};
use crate::model::Family;

/// Opens the window; `model` starts loading at once.
pub fn run(model: Option<PathBuf>) -> anyhow::Result<()> {
    let icon = eframe::icon_data::from_png_bytes(include_bytes!("../../assets/icon.png")).ok();
    let mut viewport = egui::ViewportBuilder::default()
        .with_title(window_title())
        .with_inner_size([1200.0, 820.0])
        .with_drag_and_drop(true);
    if let Some(icon) = icon {
        viewport = viewport.with_icon(icon);
    }
    let options = eframe::NativeOptions { viewport, ..Default::default() };
    eframe::run_native("dllm", options, Box::new(move |cc| Ok(Box::new(DllmApp::new(cc, model)))))
        .map_err(|e| anyhow::anyhow!("the window could not be opened: {e}"))
}

pub fn window_title() -> String {
    format!("dllm {}", env!("CARGO_PKG_VERSION"))
}

pub struct DllmApp {
    pub settings: Settings,
    pub model_path: String,
    loading: Option<Loading>,
    pub session: Option<Arc<Session>>,
    pub run: Option<RunView>,
    pub error: Option<String>,
    /// The step the canvas shows after a run (None: the latest).
    pub replay_step: Option<usize>,
    pub download: DownloadPanel,
    /// The prompt's ids, encoded on a thread of its own (rendering a template and tokenizing
    /// a long prompt must not stall a frame), once per prompt text.
    encoded: Option<Encoded>,
    /// The token count of the last prompt encoded, used while the next one is encoding.
    last_prompt_len: usize,
    /// Generate was asked for; the run starts when the prompt's ids are ready.
    wants_run: bool,
    /// The conversation of the chat view.
    pub chat: chat_view::ChatState,
    /// The loaded model served to other tools (the Serve toggle), and the last step of a
    /// request it served, which the window shows.
    pub serving: Option<crate::server::RunningServer>,
    pub served: Arc<std::sync::Mutex<Option<crate::server::ServedStep>>>,
    pub measured: Measured,
    /// Where the last replay page went (or why it did not).
    pub replay_saved: Option<String>,
    /// What the user asked for while this frame was drawn, applied after it.
    actions: Vec<Action>,
    /// The file dialog, open on its own thread.
    picking: Option<Promise<Option<PathBuf>>>,
    /// The models in the Hugging Face cache (repository, file), as last scanned, and a scan in
    /// progress on its own thread.
    pub downloaded: Vec<(String, PathBuf)>,
    scanning: Option<Promise<Vec<(String, PathBuf)>>>,
}

/// A prompt being (or done being) turned into ids: its ids and, for a conversation, how many
/// of its oldest turns were dropped to fit the context.
struct Encoded {
    prompt: Prompt,
    ids: Promise<Result<(Vec<u32>, usize), EngineError>>,
}

/// A model loading on its own thread.
struct Loading {
    path: PathBuf,
    session: Promise<Result<Session, EngineError>>,
    /// Fraction of the weights prepared so far (f32 bits), written by the loading thread.
    progress: Arc<AtomicU32>,
}

/// What the window reports of this process, measured when something finishes rather than
/// every frame (reading the peak memory is a file read).
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    /// Wall time of the last model load.
    pub load_ms: f64,
    /// The process's peak resident memory so far.
    pub peak_memory: Option<u64>,
    /// The CPU kernels' instruction set (`cpu::active_isa`) on the model card: a fact of this
    /// machine, kept here with the measurements so that snapshots can fix it too.
    pub kernels: &'static str,
}

impl DllmApp {
    pub fn new(cc: &eframe::CreationContext<'_>, model: Option<PathBuf>) -> DllmApp {
        // Tokens can hold any character (emoji, rare scripts): draw a box for what no font
        // has rather than stop.
        cc.egui_ctx.set_missing_glyph_policy(egui::epaint::text::MissingGlyphPolicy::Tofu);
        let settings: Settings = cc.storage.and_then(|s| eframe::get_value(s, eframe::APP_KEY)).unwrap_or_default();
        let mut app = DllmApp {
            model_path: model.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            settings,
            loading: None,
            session: None,
            run: None,
            error: None,
            replay_step: None,
            download: DownloadPanel::default(),
            encoded: None,
            last_prompt_len: 0,
            wants_run: false,
            chat: chat_view::ChatState::default(),
            serving: None,
            served: Arc::default(),
            measured: Measured::default(),
            replay_saved: None,
            actions: Vec::new(),
            picking: None,
            downloaded: Vec::new(),
            scanning: None,
        };
        if let Some(path) = model {
            app.load(path, &cc.egui_ctx);
        }
        app
    }

    /// Starts loading a model in the background. The run in progress is cancelled and the
    /// current model let go at once (its worker frees it after its step, without the window
    /// waiting), so that two models never need memory at the same time.
    pub fn load(&mut self, path: PathBuf, ctx: &egui::Context) {
        self.error = None;
        self.stop();
        self.run = None;
        // The server holds the model too: it stops with it.
        self.serving = None;
        self.session = None;
        let options = self.settings.load_options();
        let p = path.clone();
        let progress = Arc::new(AtomicU32::new(0));
        let written = progress.clone();
        let ctx = ctx.clone();
        let session = Promise::spawn_thread("dllm-load", move || {
            let loaded = Session::load_with_progress(&p, options, &|f| {
                written.store(f.to_bits(), Ordering::Relaxed);
                ctx.request_repaint();
            });
            ctx.request_repaint();
            loaded
        });
        self.loading = Some(Loading { path, session, progress });
    }

    /// Records an action for after this frame (what the drawing code does instead of acting).
    pub fn act(&mut self, action: Action) {
        self.actions.push(action);
    }

    /// Applies one action.
    pub fn apply(&mut self, action: Action, ctx: &egui::Context) {
        match action {
            Action::Load(path) => {
                self.model_path = path.display().to_string();
                self.load(path, ctx);
            }
            Action::PickFile if self.picking.is_none() => {
                let ctx = ctx.clone();
                self.picking = Some(Promise::spawn_thread("dllm-file-dialog", move || {
                    let picked = rfd::FileDialog::new().add_filter("GGUF model", &["gguf"]).pick_file();
                    ctx.request_repaint();
                    picked
                }));
            }
            Action::PickFile => {}
            Action::Reload => {
                if let Some(path) = self.session.as_ref().map(|s| s.info().path.clone()) {
                    self.load(path, ctx);
                }
            }
            Action::ScanDownloads if self.scanning.is_none() => {
                let (hub, ctx) = (self.hub(), ctx.clone());
                self.scanning = Some(Promise::spawn_thread("dllm-hub-scan", move || {
                    let found = hub.downloaded();
                    ctx.request_repaint();
                    found
                }));
            }
            Action::ScanDownloads => {}
            Action::Generate => self.generate(ctx),
            Action::Stop => self.stop(),
            Action::SetParam(param, value) => {
                let Some(session) = &self.session else { return };
                if let Err(e) = self.settings.params_mut(session.info()).set(param, value) {
                    self.error = Some(e.to_string());
                }
            }
            Action::SetDecodingMode(mode) => {
                let Some(session) = &self.session else { return };
                let family = session.info().config.family;
                mode.apply(family, self.settings.params_mut(session.info()));
            }
            Action::ReplayStep(step) => self.replay_step = Some(step),
            Action::Serve(false) => self.serving = None,
            Action::Serve(true) => {
                let Some(session) = &self.session else { return };
                let options = crate::server::ServeOptions { port: self.settings.serve_port, ..Default::default() };
                let (served, ctx) = (self.served.clone(), ctx.clone());
                let observer: crate::server::Observer = Arc::new(move |step| {
                    *served.lock().unwrap_or_else(|e| e.into_inner()) = Some(step.clone());
                    ctx.request_repaint();
                });
                let name = session.info().name.clone().unwrap_or_else(|| "model".into());
                match crate::server::start(session.clone(), name, options, Some(observer)) {
                    Ok(server) => self.serving = Some(server),
                    Err(e) => self.error = Some(e.to_string()),
                }
            }
            chat @ (Action::ChatSend
            | Action::ChatRegenerate
            | Action::ChatEditLast
            | Action::ChatNew
            | Action::ChatOpen(_)
            | Action::ChatDelete(_)
            | Action::ChatRename(_)
            | Action::ChatExport(_)) => self.chat_action(chat, ctx),
            Action::SaveReplay => {
                if let (Some(run), Some(session)) = (&self.run, &self.session) {
                    self.replay_saved = Some(self.save_replay(run, session));
                }
            }
        }
    }

    /// The hub endpoint and cache downloads use (the setting, else the environment).
    pub fn hub(&self) -> crate::hub::Hub {
        let mut hub = crate::hub::Hub::from_env();
        if let Some(endpoint) = self.settings.hf_endpoint.as_ref().filter(|e| !e.trim().is_empty()) {
            hub.endpoint = endpoint.trim().trim_end_matches('/').to_string();
        }
        if let Some(dir) = &self.settings.hf_cache {
            hub.cache_dir = dir.clone();
        }
        hub
    }

    pub fn is_loading(&self) -> bool {
        self.loading.is_some()
    }

    /// Starts encoding the current prompt unless that is done or under way. A conversation
    /// is fitted to the context, its oldest turns dropped when they must go.
    fn encode_prompt(&mut self) {
        let Some(session) = &self.session else { return };
        let prompt = self.prompt();
        if self.encoded.as_ref().is_some_and(|e| e.prompt == prompt) {
            return;
        }
        let encoder = session.prompt_encoder();
        let info = session.info();
        let room = info.config.context_length.saturating_sub(self.settings.params(info).gen_length);
        let asked = prompt.clone();
        let ids = Promise::spawn_thread("dllm-prompt", move || match &asked {
            Prompt::Messages(messages) => encoder.fit(messages, room),
            other => encoder.encode(other).map(|ids| (ids, 0)),
        });
        self.encoded = Some(Encoded { prompt, ids });
    }

    /// The current prompt's ids (and turns dropped), when they are ready.
    fn prompt_ids(&mut self) -> Option<Result<(Vec<u32>, usize), EngineError>> {
        self.encode_prompt();
        let ready = self.encoded.as_ref()?.ids.ready()?.clone();
        if let Ok((ids, _)) = &ready {
            self.last_prompt_len = ids.len();
        }
        Some(ready)
    }

    /// The engine's plan for the current settings and prompt, or why they cannot run. While
    /// the prompt is encoding, the last prompt's length stands in for it.
    pub fn plan(&mut self) -> Option<Result<DecodingPlan, EngineError>> {
        let prompt_len = match self.prompt_ids() {
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok((ids, _))) => ids.len(),
            None => self.last_prompt_len,
        };
        let session = self.session.as_ref()?;
        Some(session.plan(self.settings.params(session.info()), prompt_len))
    }

    /// Why the current settings cannot run, before running.
    pub fn settings_problem(&mut self) -> Option<String> {
        self.plan()?.err().map(|e| e.to_string())
    }

    fn prompt(&self) -> Prompt {
        if self.settings.chat_mode {
            return Prompt::Messages(self.chat.conversation.messages());
        }
        if self.settings.raw_prompt {
            Prompt::Raw(self.settings.prompt.clone())
        } else {
            Prompt::Chat(self.settings.prompt.clone())
        }
    }

    pub fn generate(&mut self, ctx: &egui::Context) {
        self.replay_saved = None;
        self.wants_run = self.session.is_some();
        self.start_when_encoded(ctx);
    }

    /// Starts the run Generate asked for once the prompt's ids are ready (at once when they
    /// already are).
    fn start_when_encoded(&mut self, ctx: &egui::Context) {
        if !self.wants_run {
            return;
        }
        let Some(ids) = self.prompt_ids() else {
            ctx.request_repaint_after(std::time::Duration::from_millis(20));
            return;
        };
        self.wants_run = false;
        let ids = ids.map(|(ids, dropped)| {
            if self.settings.chat_mode {
                // Visibly: the turns go from the conversation and the view says so.
                self.chat.conversation.drop_oldest(dropped);
                self.chat.dropped = dropped;
                self.chat.replying = true;
            }
            ids
        });
        let Some(session) = &self.session else { return };
        let params = self.settings.params(session.info()).clone();
        let notify = ctx.clone();
        let started = ids.and_then(|ids| {
            let generation = session.generate_notifying(ids, params, move || notify.request_repaint())?;
            RunView::new(generation, session.info().special.mask)
        });
        match started {
            Ok(run) => {
                self.run = Some(run);
                self.replay_step = None;
                self.error = None;
            }
            Err(e) => {
                self.chat.replying = false;
                self.error = Some(e.to_string());
            }
        }
    }

    /// Applies a chat action.
    fn chat_action(&mut self, action: Action, ctx: &egui::Context) {
        let store = self.settings.conversations();
        let chat = &mut self.chat;
        match action {
            Action::ChatSend => {
                let text = chat.input.trim().to_string();
                if text.is_empty() || self.session.is_none() {
                    return;
                }
                chat.input.clear();
                chat.conversation.push("user", text);
                chat.replying = true;
                self.generate(ctx);
            }
            Action::ChatRegenerate if chat.conversation.turns.last().is_some_and(|t| t.role == "assistant") => {
                chat.conversation.turns.pop();
                chat.replying = true;
                self.generate(ctx);
            }
            Action::ChatEditLast => {
                if chat.conversation.turns.last().is_some_and(|t| t.role == "assistant") {
                    chat.conversation.turns.pop();
                }
                if let Some(turn) = chat.conversation.turns.pop() {
                    chat.input = turn.content;
                }
                chat.save(&store);
            }
            Action::ChatNew => {
                chat.save(&store);
                let system = std::mem::take(&mut chat.conversation.system);
                chat.conversation = crate::conversation::Conversation { system, ..Default::default() };
                chat.id = None;
                chat.dropped = 0;
            }
            Action::ChatOpen(id) => {
                chat.save(&store);
                if let Some((_, c)) = chat.saved.iter().find(|(i, _)| *i == id) {
                    chat.conversation = c.clone();
                    chat.id = Some(id);
                    chat.dropped = 0;
                }
            }
            Action::ChatDelete(id) => {
                if let Err(e) = store.delete(&id) {
                    chat.message = Some(format!("could not delete the conversation: {e}"));
                }
                if chat.id.as_deref() == Some(id.as_str()) {
                    chat.id = None;
                    chat.conversation = Default::default();
                }
                chat.refresh(&store, true);
            }
            Action::ChatRename(title) => {
                chat.conversation.title = title;
                chat.renaming = None;
                chat.save(&store);
            }
            Action::ChatExport(format) => {
                let dir = self.settings.export_dir();
                let name = chat.id.clone().unwrap_or_else(|| "conversation".into());
                let path = dir.join(format!("dllm-chat-{name}.{format}"));
                chat.message = Some(match std::fs::create_dir_all(&dir).and_then(|()| chat.conversation.save(&path)) {
                    Ok(()) => format!("saved {}", path.display()),
                    Err(e) => format!("could not save {}: {e}", path.display()),
                });
            }
            _ => {}
        }
    }

    pub fn stop(&mut self) {
        if let Some(run) = &mut self.run {
            run.stop();
        }
    }

    /// Takes what the background work has sent (each piece asks for a repaint when it sends,
    /// so nothing here polls on a timer); called at the start of every frame.
    fn poll(&mut self, ctx: &egui::Context) {
        self.start_when_encoded(ctx);
        if self.encoded.as_ref().is_some_and(|e| e.ids.ready().is_none()) {
            ctx.request_repaint_after(std::time::Duration::from_millis(20));
        }
        if let Some(Loading { path, session, progress }) = self.loading.take() {
            match session.try_take() {
                Ok(Ok(session)) => {
                    self.measured = Measured {
                        load_ms: session.info().load_ms,
                        peak_memory: crate::bench::peak_rss_bytes(),
                        kernels: crate::cpu::active_isa().name(),
                    };
                    self.settings.remember_model(path);
                    self.session = Some(Arc::new(session));
                    self.encoded = None;
                    self.run = None;
                }
                Ok(Err(e)) => self.error = Some(e.to_string()),
                Err(session) => self.loading = Some(Loading { path, session, progress }),
            }
        }
        if let Some(run) = &mut self.run {
            if run.drain_events() {
                self.measured.peak_memory = crate::bench::peak_rss_bytes();
            }
            if let Some(e) = run.failed.take() {
                self.error = Some(e);
                self.chat.replying = false;
            }
            // A reply in progress is the run that starts once its prompt is encoded, not the
            // one on display before it.
            if self.chat.replying && !self.wants_run && !run.is_running() {
                // A finished reply joins the conversation, which is saved; a stopped one does not.
                self.chat.replying = false;
                if let Some(f) = run.finished.as_ref().filter(|f| !f.generated.cancelled) {
                    self.chat.conversation.push("assistant", f.text.trim());
                    self.chat.save(&self.settings.conversations());
                }
            }
        }
        if self.settings.chat_mode {
            self.chat.refresh(&self.settings.conversations(), false);
        }
        if let Some(picking) = self.picking.take() {
            match picking.try_take() {
                Ok(Some(path)) => self.act(Action::Load(path)),
                Ok(None) => {}
                Err(picking) => self.picking = Some(picking),
            }
        }
        if let Some(scanning) = self.scanning.take() {
            match scanning.try_take() {
                Ok(found) => self.downloaded = found,
                Err(scanning) => self.scanning = Some(scanning),
            }
        }
        if let Some(path) = self.download.poll(ctx) {
            self.act(Action::Load(path));
        }
        let dropped: Vec<PathBuf> = ctx.input(|i| i.raw.dropped_files.iter().map(|f| f.path().to_path_buf()).collect());
        if let Some(path) = dropped.into_iter().find(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")))
        {
            self.act(Action::Load(path));
        }
    }

    fn top_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.heading("dllm");
            ui.separator();
            let label = ui.label("Model file");
            ui.add(
                egui::TextEdit::singleline(&mut self.model_path).desired_width(420.0).hint_text("path/to/model.gguf"),
            )
            .labelled_by(label.id);
            if ui.button("Load").clicked() && !self.model_path.trim().is_empty() {
                self.act(Action::Load(PathBuf::from(self.model_path.trim())));
            }
            if ui.button("Open\u{2026}").on_hover_text("Choose a .gguf file (or drop one on the window)").clicked() {
                self.act(Action::PickFile);
            }
            let recent = self.settings.recent_models.clone();
            let menu = ui.menu_button("Recent", |ui| {
                if recent.is_empty() {
                    ui.label("No models yet");
                }
                for path in recent {
                    if ui.button(path.display().to_string()).clicked() {
                        self.act(Action::Load(path));
                        ui.close();
                    }
                }
                ui.separator();
                ui.label("Downloaded (Hugging Face cache)");
                if self.scanning.is_some() {
                    ui.label("looking\u{2026}");
                } else if self.downloaded.is_empty() {
                    ui.label("none");
                }
                for (repo, path) in self.downloaded.clone() {
                    let name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                    if ui.button(format!("{repo} / {name}")).clicked() {
                        self.act(Action::Load(path));
                        ui.close();
                    }
                }
            });
            if menu.response.clicked() {
                self.act(Action::ScanDownloads);
            }
            if let Some(loading) = &self.loading {
                let prepared = f32::from_bits(loading.progress.load(Ordering::Relaxed));
                ui.add(
                    egui::ProgressBar::new(prepared)
                        .desired_width(220.0)
                        .text(format!("loading: weights {:.0}% ready", prepared * 100.0)),
                );
            }
        });
    }

    fn model_card(&self, ui: &mut egui::Ui) {
        let Some(session) = &self.session else {
            ui.label("No model loaded. Open a GGUF file of LLaDA or Dream (Q4_K_M, Q6_K, Q8_0, ...).");
            return;
        };
        let info = session.info();
        let c = &info.config;
        if let Some(about) = &info.description {
            ui.label(RichText::new(about).italics());
        }
        egui::Grid::new("model_card").num_columns(2).show(ui, |ui| {
            let file = info.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            ui.label("file");
            ui.label(file);
            ui.end_row();
            ui.label("architecture");
            ui.label(format!("{} ({} layers, {} hidden, {} heads)", c.family.name(), c.n_layer, c.n_embd, c.n_head));
            ui.end_row();
            ui.label("parameters");
            ui.label(crate::summary::human_count(info.n_params));
            ui.end_row();
            ui.label("quant mix");
            ui.label(info.quant_mix.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(", "));
            ui.end_row();
            ui.label("file size");
            ui.label(crate::summary::human_bytes(info.file_bytes));
            ui.end_row();
            // The weights, repacked in place of the mapped file, dominate: this is about the
            // memory the model needs, measured rather than estimated.
            ui.label("peak memory");
            ui.label(self.measured.peak_memory.map_or("?".into(), crate::summary::human_bytes));
            ui.end_row();
            ui.label("device");
            if info.gpu.is_some() {
                ui.label(&info.device);
            } else {
                ui.label(format!("CPU, {} threads ({})", info.threads, self.measured.kernels))
                    .on_hover_text(&info.device);
            }
            ui.end_row();
            ui.label("load time");
            ui.label(format!("{:.2} s", self.measured.load_ms / 1e3)).on_hover_text(info.prepared.to_string());
            ui.end_row();
        });
    }

    fn settings_panel(&mut self, ui: &mut egui::Ui) {
        let Some(session) = &self.session else { return };
        let family = session.info().config.family;
        let p = self.settings.params(session.info()).clone();
        let mut actions = Vec::new();
        egui::Grid::new("settings").num_columns(2).show(ui, |ui| {
            // RND1's sampler has no threshold decoding or cache to pick.
            if family != Family::Rnd1
                && let Some(mode) = decoding_mode::ui(ui, &p)
            {
                actions.push(Action::SetDecodingMode(mode));
            }
            params_ui::rows(ui, family, &p, params_ui::is_main, &mut actions);
        });
        ui.collapsing("Advanced settings", |ui| {
            egui::Grid::new("advanced settings").num_columns(2).show(ui, |ui| {
                params_ui::rows(ui, family, &p, params_ui::is_advanced, &mut actions);
            });
        });
        self.actions.extend(actions);
        ui.checkbox(&mut self.settings.raw_prompt, "raw prompt (no chat template)")
            .on_hover_text("Send the prompt exactly as typed instead of wrapping it in the model's chat template.");
        ui.checkbox(&mut self.settings.color_by_confidence, "colour by confidence").on_hover_text(
            "Colour committed tokens by the model's confidence instead of by the step that committed them.",
        );
        ui.separator();
        let loaded = session.info().options;
        if device::ui(ui, &mut self.settings, Some(&loaded)) {
            self.act(Action::Reload);
        }
    }

    fn central(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.settings.chat_mode, false, "Prompt");
            ui.selectable_value(&mut self.settings.chat_mode, true, "Chat");
        });
        let running = self.run.as_ref().is_some_and(RunView::is_running);
        let problem = self.settings_problem();
        if self.settings.chat_mode {
            let context = self.session.as_ref().map_or((0, 0, 0), |s| {
                let info = s.info();
                (self.last_prompt_len, self.settings.params(info).gen_length, info.config.context_length)
            });
            let mut actions = Vec::new();
            chat_view::ui(ui, &mut self.chat, running, context, &mut actions);
            self.actions.extend(actions);
            if let Some(problem) = &problem {
                ui.colored_label(egui::Color32::from_rgb(240, 170, 60), problem);
            }
        } else {
            self.prompt_controls(ui, running, problem.as_deref());
        }
        self.run_panel(ui);
    }

    fn prompt_controls(&mut self, ui: &mut egui::Ui, running: bool, problem: Option<&str>) {
        let label = ui.label("Prompt");
        ui.add(egui::TextEdit::multiline(&mut self.settings.prompt).desired_rows(3).desired_width(f32::INFINITY))
            .labelled_by(label.id);
        ui.horizontal(|ui| {
            let can_run = self.session.is_some() && !running && problem.is_none();
            if ui.add_enabled(can_run, egui::Button::new("Generate")).clicked() {
                self.act(Action::Generate);
            }
            if ui.add_enabled(running, egui::Button::new("Stop")).clicked() {
                self.act(Action::Stop);
            }
            if let Some(problem) = problem {
                ui.colored_label(egui::Color32::from_rgb(240, 170, 60), problem);
            }
        });
    }

    /// The current run: its canvas, replay slider, answer and charts.
    fn run_panel(&mut self, ui: &mut egui::Ui) {
        if let Some(error) = &self.error {
            ui.colored_label(egui::Color32::from_rgb(240, 90, 90), format!("Error: {error}"));
        }
        let (Some(run), Some(session)) = (&self.run, &self.session) else { return };
        let mut actions = Vec::new();
        ui.separator();
        canvas::legend(ui, self.settings.color_by_confidence, run.total_steps);
        egui::ScrollArea::vertical().max_height(330.0).auto_shrink([false, true]).show(ui, |ui| {
            canvas::show(ui, run, session.tokenizer(), self.replay_step, self.settings.color_by_confidence);
        });
        if !run.is_running() && !run.steps.is_empty() {
            let mut step = self.replay_step.unwrap_or(run.steps.len() - 1);
            let label = ui.label("replay step");
            if ui
                .add(
                    egui::Slider::new(&mut step, 0..=run.steps.len() - 1)
                        .custom_formatter(|v, _| format!("{}", v as usize + 1)),
                )
                .labelled_by(label.id)
                .changed()
            {
                actions.push(Action::ReplayStep(step));
            }
        }
        if let Some(f) = &run.finished {
            ui.horizontal(|ui| {
                ui.label(RichText::new("Answer").strong());
                if ui.button("Copy").clicked() {
                    ui.ctx().copy_text(f.text.clone());
                }
                if ui
                    .button("Save as HTML")
                    .on_hover_text(format!(
                        "A self-contained page that replays this run step by step, saved in {}",
                        self.settings.export_dir().display()
                    ))
                    .clicked()
                {
                    actions.push(Action::SaveReplay);
                }
                if let Some(message) = &self.replay_saved {
                    ui.label(message);
                }
            });
            ui.label(&f.text);
        }
        let steps = run.steps.len();
        let summary = format!(
            "load {:.2} s \u{2022} {steps} steps{} \u{2022} median {:.0} ms/step \u{2022} {:.1} tokens/s \u{2022} peak memory {}",
            self.measured.load_ms / 1e3,
            if run.finished.as_ref().is_some_and(|f| f.generated.stopped_early) { " (early stop)" } else { "" },
            chart::median_step_ms(run),
            run.finished
                .as_ref()
                .map_or(0.0, |f| (f.generated.canvas.len() - f.generated.prompt_len) as f64 / (f.total_ms / 1e3)),
            self.measured.peak_memory.map_or("?".into(), crate::summary::human_bytes),
        );
        ui.label(summary);
        chart::show(ui, run);
        self.actions.extend(actions);
    }

    /// The Serve toggle: the loaded model over the OpenAI-compatible API on 127.0.0.1, with
    /// the last served request's canvas.
    fn serve_panel(&mut self, ui: &mut egui::Ui) {
        let mut on = self.serving.is_some();
        ui.horizontal(|ui| {
            let label = ui.label("Port");
            ui.add_enabled(!on, egui::DragValue::new(&mut self.settings.serve_port)).labelled_by(label.id);
        });
        let enabled = self.session.is_some();
        if ui.add_enabled(enabled, egui::Checkbox::new(&mut on, "Serve this model")).changed() {
            self.act(Action::Serve(on));
        }
        let (Some(server), Some(session)) = (&self.serving, &self.session) else { return };
        ui.label(format!("OpenAI base URL: http://{}/v1", server.addr));
        let status = &server.shared.status;
        ui.label(format!(
            "served {} \u{2022} cancelled {} \u{2022} turned away {}",
            status.served.load(Ordering::Relaxed),
            status.cancelled.load(Ordering::Relaxed),
            status.rejected.load(Ordering::Relaxed)
        ));
        let last = self.served.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(step) = last {
            ui.label(format!("{}: step {} of {}", step.request, step.step, step.steps));
            let tk = session.tokenizer();
            let mask = session.info().special.mask;
            let cells: Vec<String> = step.canvas[step.prompt_len..].iter().map(|&id| tk.cell_text(id, mask)).collect();
            ui.label(RichText::new(cells.join(" ")).monospace());
        }
    }

    /// Writes the run as an HTML replay page into the export folder; says where, or what failed.
    fn save_replay(&self, run: &RunView, session: &Session) -> String {
        let dir = self.settings.export_dir();
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let path = dir.join(format!("dllm-run-{stamp}.html"));
        let record = RunRecord {
            title: &self.settings.prompt,
            prompt_len: run.prompt_len,
            mask: run.mask,
            initial: &run.initial,
            steps: &run.steps,
        };
        let page = html_page(session.tokenizer(), &record);
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, page)) {
            Ok(()) => format!("saved {}", path.display()),
            Err(e) => format!("could not save {}: {e}", path.display()),
        }
    }

    /// The texts the canvas shows for the step on display: what the grid paints.
    pub fn canvas_cells(&self) -> Vec<String> {
        let (Some(run), Some(session)) = (&self.run, &self.session) else { return Vec::new() };
        run.canvas_at(self.replay_step).iter().map(|&id| session.tokenizer().cell_text(id, run.mask)).collect()
    }
}

impl eframe::App for DllmApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        self.poll(&ctx);
        egui::Panel::top("top").show(ui, |ui| self.top_bar(ui));
        egui::Panel::left("side").resizable(true).default_size(330.0).show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                ui.heading("Model");
                self.model_card(ui);
                ui.collapsing("Download from Hugging Face", |ui| {
                    let hub = self.hub();
                    self.download.ui(ui, &hub);
                });
                ui.separator();
                ui.heading("Settings");
                self.settings_panel(ui);
                ui.separator();
                ui.collapsing("Serve to other tools", |ui| self.serve_panel(ui));
                ui.separator();
                ui.collapsing("About", |ui| {
                    ui.label(window_title());
                    ui.label(format!("CPU features: {}", crate::cpu::cpu_flags().join(" ")));
                    ui.label(format!("kernels: {}", crate::cpu::active_isa().name()));
                    ui.label(format!("GPU: {}", crate::cuda::probe().describe()));
                });
            });
        });
        egui::CentralPanel::default().show(ui, |ui| self.central(ui));
        for action in std::mem::take(&mut self.actions) {
            self.apply(action, &ctx);
        }
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, eframe::APP_KEY, &self.settings);
    }
}
