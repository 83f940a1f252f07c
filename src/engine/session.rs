//! A loaded model on its own worker thread.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Instant;

use super::EngineError;
use crate::chat::{Message, render};
use crate::cpu::CpuLoadOptions;
use crate::cpu::pack_cache::CacheWrite;
use crate::cuda::{Device, DeviceRequest, GpuInfo, choose, probe};
use crate::decoding::{DecodingPlan, GenerateParams, Generated, SpecialTokens, answer_ids, generate_planned};
use crate::forward::{CpuModel, CudaModel, Forward};
use crate::gguf::GgufFile;
use crate::model::{Family, ModelConfig, ModelError, Preparation};
use crate::summary::Summary;
use crate::tokenizer::{EncodeOptions, Tokenizer};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Worker threads for the forward pass; None = the machine's physical cores.
    pub threads: Option<usize>,
    /// Where the forward pass runs.
    pub device: DeviceRequest,
    /// Keep the CPU's packed weights in a cache file in `paths::pack_cache_dir()` so that the
    /// next load maps them instead of packing again (`cpu::pack_cache`). The front ends turn it
    /// on; off by default, so that library users and tests write nothing unasked.
    pub pack_cache: bool,
    /// The faster-weights mode of the CPU: Q4_K matrices expanded to a byte per weight at load
    /// (`cpu::CpuLoadOptions::wide_weights`; on the 256-bit paths, `cpu::widens_weights`), 1.84x
    /// their memory for no unpacking per step; the numbers do not change. Off by default.
    pub wide_weights: bool,
}

/// What the front ends show about a loaded model.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub path: PathBuf,
    /// `general.name` and `general.description`, when the file has them.
    pub name: Option<String>,
    pub description: Option<String>,
    pub config: ModelConfig,
    pub special: SpecialTokens,
    pub n_params: u64,
    pub file_bytes: u64,
    /// (type name, bytes) of the tensor data, largest first.
    pub quant_mix: Vec<(String, u64)>,
    pub chat_template: Option<String>,
    pub threads: usize,
    /// What the model was loaded with.
    pub options: LoadOptions,
    /// The device running the model and why it was chosen ("CPU: no NVIDIA driver found ...").
    pub device: String,
    /// The GPU running it, when it is one.
    pub gpu: Option<GpuInfo>,
    /// How the weights were made ready for the kernels.
    pub prepared: Preparation,
    /// Whether Q4_K weights were widened (`LoadOptions::wide_weights` on a CPU path that uses
    /// it).
    pub widened: bool,
    pub load_ms: f64,
    /// Whether this is the bundled demo model (`demo`).
    pub is_demo: bool,
    /// The settings a run starts from: the demo model's, else the family's official ones.
    pub defaults: GenerateParams,
}

/// A prompt: chat text wrapped in the model's template, or ids/text used as they are.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// The user's message, wrapped in the chat template with the assistant's turn to follow.
    Chat(String),
    /// Text tokenized as it is (BOS added when the model wants one).
    Raw(String),
    /// Token ids used exactly as given.
    Ids(Vec<u32>),
    /// A conversation (a system message first, if any, then user and assistant turns ending
    /// with the user's), wrapped in the chat template with the assistant's turn to follow.
    Messages(Vec<Message>),
}

/// One denoising step, as sent to the front ends.
#[derive(Debug, Clone)]
pub struct StepEvent {
    pub index: usize,
    pub canvas: Vec<u32>,
    pub committed: Vec<(usize, f32)>,
    pub forward_ms: f64,
    pub sample_ms: f64,
    pub forwards: usize,
    /// Canvas positions the step's forward pass ran.
    pub window: std::ops::Range<usize>,
    /// Whether that pass read the K/V cache (an approximation) rather than the whole canvas.
    pub cached: bool,
    /// Canvas rows whose logits that pass computed.
    pub logit_rows: usize,
}

/// What a run is about to do, sent before its first step.
#[derive(Debug, Clone)]
pub struct Started {
    pub plan: DecodingPlan,
    /// The canvas before the first step: the prompt, then masks.
    pub initial: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct Finished {
    pub generated: Generated,
    /// The answer as read: up to the first end-of-text token, special tokens left out.
    pub text: String,
    pub total_ms: f64,
}

#[derive(Debug, Clone)]
pub enum Event {
    Started(Started),
    Step(StepEvent),
    Done(Finished),
    Failed(EngineError),
}

/// A running generation: its events, and a way to stop it.
pub struct Generation {
    events: Receiver<Event>,
    cancel: Arc<AtomicBool>,
}

impl Generation {
    /// Asks the engine to stop after the step in progress.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn events(&self) -> &Receiver<Event> {
        &self.events
    }

    /// Waits for the end, passing each step to `on_step`.
    pub fn wait(self, mut on_step: impl FnMut(&StepEvent)) -> Result<Finished, EngineError> {
        self.wait_events(|event| {
            if let Event::Step(s) = event {
                on_step(s)
            }
        })
    }

    /// Waits for the end, passing every event before it (the start, each step) to `on_event`.
    pub fn wait_events(self, mut on_event: impl FnMut(&Event)) -> Result<Finished, EngineError> {
        for event in self.events.iter() {
            match event {
                Event::Done(f) => return Ok(f),
                Event::Failed(e) => return Err(e),
                other => on_event(&other),
            }
        }
        Err(EngineError::Internal("the engine thread ended without a result".into()))
    }
}

enum Command {
    Generate {
        prompt: Vec<u32>,
        plan: Box<DecodingPlan>,
        events: Sender<Event>,
        cancel: Arc<AtomicBool>,
        /// Called after each event is sent (a window's repaint request).
        notify: Arc<dyn Fn() + Send + Sync>,
    },
    Logits {
        ids: Vec<u32>,
        rows: Vec<usize>,
        reply: Sender<Result<Vec<f32>, EngineError>>,
    },
}

pub struct Session {
    info: ModelInfo,
    tokenizer: Arc<Tokenizer>,
    commands: Sender<Command>,
    /// Set when the session is dropped: the run in progress stops after its step.
    closing: Arc<AtomicBool>,
    pack_cache_write: std::sync::Mutex<Option<CacheWrite>>,
}

/// Turns a prompt into token ids: the tokenizer and the chat template of a loaded model.
#[derive(Clone)]
pub struct PromptEncoder {
    tokenizer: Arc<Tokenizer>,
    chat_template: Option<Arc<str>>,
    family: Family,
}

impl PromptEncoder {
    pub fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, EngineError> {
        let tk = &self.tokenizer;
        let with_bos = EncodeOptions { add_special: true, parse_special: true };
        match prompt {
            Prompt::Ids(ids) => Ok(ids.clone()),
            Prompt::Raw(text) => Ok(tk.encode(text, with_bos)?),
            // RND1's own "Question: ..." prompts are taken as they are; see `encode_messages`.
            Prompt::Chat(text) if self.family == Family::Rnd1 && text.trim_start().starts_with("Question:") => {
                Ok(tk.encode(text, with_bos)?)
            }
            Prompt::Chat(text) => self.encode_messages(&[Message::user(text.clone())]),
            Prompt::Messages(messages) => self.encode_messages(messages),
        }
    }

    fn encode_messages(&self, messages: &[Message]) -> Result<Vec<u32>, EngineError> {
        let tk = &self.tokenizer;
        let with_bos = EncodeOptions { add_special: true, parse_special: true };
        // RND1 is a base model: its repository's demo (task mode) asks as
        // "Question: ...\nAnswer:", whatever template the file carries; earlier turns are
        // earlier questions and answers.
        if self.family == Family::Rnd1 {
            let mut text = String::new();
            for m in messages {
                match m.role.as_str() {
                    "user" => text.push_str(&format!("Question: {}\nAnswer:", m.content)),
                    "assistant" => text.push_str(&format!(" {}\n", m.content)),
                    _ => text.push_str(&format!("{}\n", m.content)),
                }
            }
            return Ok(tk.encode(&text, with_bos)?);
        }
        let Some(template) = &self.chat_template else {
            // No template: the turns' texts, one after another.
            let text: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
            return Ok(tk.encode(&text.join("\n"), with_bos)?);
        };
        let piece = |id: Option<u32>| id.map(|i| tk.piece(i)).unwrap_or_default();
        let (bos, eos) = (piece(tk.special.bos), piece(tk.special.eos));
        let rendered = render(template, messages, true, &bos, &eos)?;
        // Templates that write BOS themselves (LLaDA's) must not get a second one.
        let add_bos = bos.is_empty() || !rendered.starts_with(&bos);
        Ok(tk.encode(&rendered, EncodeOptions { add_special: add_bos, parse_special: true })?)
    }

    /// The ids of a conversation that leaves `room` tokens or fewer for the prompt: the whole
    /// conversation when it fits, else without its oldest turns (a system message is kept),
    /// dropped one at a time. Returns the ids and how many turns were dropped; an error when
    /// even the last message alone does not fit.
    pub fn fit(&self, messages: &[Message], room: usize) -> Result<(Vec<u32>, usize), EngineError> {
        let system = messages.first().is_some_and(|m| m.role == "system") as usize;
        for dropped in 0..messages.len().saturating_sub(system).max(1) {
            let kept: Vec<Message> = messages[..system].iter().chain(&messages[system + dropped..]).cloned().collect();
            let ids = self.encode_messages(&kept)?;
            if ids.len() <= room {
                return Ok((ids, dropped));
            }
        }
        Err(EngineError::PromptTooLong { room })
    }
}

/// A model file mapped and its hyperparameters read, its weights not loaded yet: enough to
/// check a run's settings before paying for a load (a typo must not cost a 5 GB load).
pub struct ModelFile {
    path: PathBuf,
    gguf: Arc<GgufFile>,
    config: ModelConfig,
    name: Option<String>,
    defaults: GenerateParams,
}

impl ModelFile {
    /// Maps the file and reads its header and hyperparameters (milliseconds: no tensor data
    /// is read).
    pub fn open(path: impl AsRef<Path>) -> Result<ModelFile, EngineError> {
        let gguf = Arc::new(GgufFile::open(path.as_ref())?);
        let config = ModelConfig::from_gguf(&gguf)?;
        let name = gguf.get_str("general.name").map(str::to_owned);
        let defaults = if name.as_deref() == Some(crate::demo::NAME) {
            crate::demo::params()
        } else {
            GenerateParams::defaults_for(config.family)
        };
        Ok(ModelFile { path: path.as_ref().to_path_buf(), gguf, config, name, defaults })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The settings a run starts from: the demo model's, else the family's official ones.
    pub fn defaults(&self) -> &GenerateParams {
        &self.defaults
    }

    /// Checks `params` against the model, as a run after a one-token prompt would (the
    /// prompt's own length is checked when it is known).
    pub fn check(&self, params: &GenerateParams) -> Result<(), EngineError> {
        params.plan(self.config.family, 1, self.config.context_length)?;
        Ok(())
    }

    /// Loads the weights, builds the tokenizer and starts the worker thread.
    pub fn load(self, options: LoadOptions, progress: &dyn Fn(f32)) -> Result<Session, EngineError> {
        Session::from_file(self, options, progress)
    }
}

/// The most compute threads a load accepts: four per logical CPU is already past any gain
/// (the products are memory-bound beyond one per core); a larger number is a typo.
pub fn max_threads() -> usize {
    4 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl LoadOptions {
    /// Refuses a thread count of 0 or above [`max_threads`].
    pub fn check(&self) -> Result<(), EngineError> {
        match self.threads {
            Some(n) if n == 0 || n > max_threads() => Err(EngineError::Threads { asked: n, max: max_threads() }),
            _ => Ok(()),
        }
    }
}

impl Session {
    /// Maps and checks the model and starts its worker thread.
    pub fn load(path: impl AsRef<Path>, options: LoadOptions) -> Result<Session, EngineError> {
        Self::load_with_progress(path, options, &|_| {})
    }

    /// `load`, reporting to `progress` the fraction of the weights prepared for the device so
    /// far (repacked for the CPU kernels or uploaded to the GPU: most of a load's time).
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        options: LoadOptions,
        progress: &dyn Fn(f32),
    ) -> Result<Session, EngineError> {
        ModelFile::open(path)?.load(options, progress)
    }

    fn from_file(file: ModelFile, options: LoadOptions, progress: &dyn Fn(f32)) -> Result<Session, EngineError> {
        options.check()?;
        let start = Instant::now();
        let ModelFile { path, gguf, name, defaults, .. } = file;
        // The tokenizer builds while the weights are checked and repacked.
        let (tokenizer, model) = std::thread::scope(|s| {
            let tokenizer = s.spawn(|| Tokenizer::from_gguf(&gguf));
            let model = load_model(&gguf, options, progress);
            (tokenizer.join(), model)
        });
        let tokenizer = Arc::new(tokenizer.map_err(|_| EngineError::Internal("tokenizer thread panicked".into()))??);
        let Loaded { model, device, gpu, prepared, widened, pack_cache_write } = model?;
        let mask = tokenizer.special.mask.ok_or_else(|| EngineError::NoMaskToken(path.clone()))?;
        let special = SpecialTokens {
            mask,
            eos: tokenizer.special.eos,
            eot: tokenizer.special.eot,
            end_of_generation: tokenizer.special.eog.as_slice().into(),
            pad: tokenizer.special.pad,
        };
        let threads = options.threads.unwrap_or_else(num_cpus::get_physical).max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("dllm-compute-{i}"))
            .build()
            .map_err(|e| EngineError::Internal(e.to_string()))?;
        let summary = Summary::of(&gguf);
        let mut quant_mix: Vec<(String, u64)> = summary.types.iter().map(|t| (t.ty.to_string(), t.bytes)).collect();
        quant_mix.sort_by_key(|t| std::cmp::Reverse(t.1));
        let is_demo = name.as_deref() == Some(crate::demo::NAME);
        let info = ModelInfo {
            path,
            is_demo,
            defaults,
            name,
            description: gguf.get_str("general.description").map(str::to_owned),
            config: model.config().clone(),
            special: special.clone(),
            n_params: summary.n_params,
            file_bytes: summary.file_bytes,
            quant_mix,
            chat_template: gguf.chat_template().map(str::to_owned),
            threads,
            options,
            device,
            gpu,
            prepared,
            widened,
            load_ms: start.elapsed().as_secs_f64() * 1e3,
        };
        let (tx, rx) = channel();
        let worker_tokenizer = tokenizer.clone();
        let closing = Arc::new(AtomicBool::new(false));
        let worker_closing = closing.clone();
        // Detached: dropping the session must not wait for it (see `Drop`).
        std::thread::Builder::new()
            .name("dllm-engine".into())
            .spawn(move || worker_loop(model, pool, worker_tokenizer, special, rx, worker_closing))
            .map_err(|e| EngineError::Internal(e.to_string()))?;
        let pack_cache_write = std::sync::Mutex::new(pack_cache_write);
        Ok(Session { info, tokenizer, commands: tx, closing, pack_cache_write })
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Waits for the pack cache file this load is writing in the background, if it is: its
    /// path, or why it could not be written (the model runs either way). A command-line run
    /// calls this before it exits, since an unfinished cache file is thrown away.
    pub fn wait_for_pack_cache(&self) -> Option<Result<PathBuf, String>> {
        let handle = self.pack_cache_write.lock().ok()?.take()?;
        Some(handle.join().unwrap_or_else(|_| Err("the pack cache writer panicked".into())))
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The token ids of a prompt.
    pub fn prompt_ids(&self, prompt: &Prompt) -> Result<Vec<u32>, EngineError> {
        self.prompt_encoder().encode(prompt)
    }

    /// What turns prompts into ids, to use on another thread (a window must not render a
    /// template or tokenize a long prompt while it draws).
    pub fn prompt_encoder(&self) -> PromptEncoder {
        PromptEncoder {
            tokenizer: self.tokenizer.clone(),
            chat_template: self.info.chat_template.clone().map(Arc::from),
            family: self.info.config.family,
        }
    }

    fn send(&self, command: Command) -> Result<(), EngineError> {
        self.commands.send(command).map_err(|_| EngineError::Internal("the engine thread has stopped".into()))
    }

    /// The plan of a run of `params` after a prompt of `prompt_len` tokens: what `generate`
    /// would do, or which setting stops it.
    pub fn plan(&self, params: &GenerateParams, prompt_len: usize) -> Result<DecodingPlan, EngineError> {
        let c = &self.info.config;
        Ok(params.plan(c.family, prompt_len, c.context_length)?)
    }

    /// Starts generating on the worker thread. Settings are checked first, so an invalid
    /// combination is reported before any work starts; the first event is the run's start.
    pub fn generate(&self, prompt: Vec<u32>, params: GenerateParams) -> Result<Generation, EngineError> {
        self.generate_notifying(prompt, params, || {})
    }

    /// `generate`, calling `notify` on the worker thread after each event it sends, so that a
    /// front end can wake up for events instead of polling for them.
    pub fn generate_notifying(
        &self,
        prompt: Vec<u32>,
        params: GenerateParams,
        notify: impl Fn() + Send + Sync + 'static,
    ) -> Result<Generation, EngineError> {
        let c = &self.info.config;
        let plan = self.plan(&params, prompt.len())?;
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if let Some(&id) = prompt.iter().find(|&&id| id as usize >= c.n_vocab) {
            return Err(ModelError::TokenOutOfRange { id, n_vocab: c.n_vocab }.into());
        }
        let (events, rx) = channel();
        let initial = plan.initial_canvas(&prompt, &self.info.special);
        let _ = events.send(Event::Started(Started { plan: plan.clone(), initial }));
        let cancel = Arc::new(AtomicBool::new(false));
        let notify = Arc::new(notify);
        self.send(Command::Generate { prompt, plan: Box::new(plan), events, cancel: cancel.clone(), notify })?;
        Ok(Generation { events: rx, cancel })
    }

    /// Raw logits (no shift) of `rows` of the canvas `ids`, `[rows.len(), n_vocab]`.
    pub fn logits(&self, ids: Vec<u32>, rows: Vec<usize>) -> Result<Vec<f32>, EngineError> {
        let (reply, rx) = channel();
        self.send(Command::Logits { ids, rows, reply })?;
        rx.recv().map_err(|_| EngineError::Internal("the engine thread has stopped".into()))?
    }
}

impl Drop for Session {
    /// Does not wait for the worker: a front end that drops a session (to load another
    /// model) must not freeze for the rest of a step. The worker frees the model when it ends.
    fn drop(&mut self) {
        // The run in progress ends after its step; the channel, closed as the session's fields
        // drop, ends the worker loop.
        self.closing.store(true, Ordering::Relaxed);
    }
}

/// The model on the device the request resolves to.
struct Loaded {
    model: Box<dyn Forward>,
    /// The device and the reason for the choice.
    device: String,
    gpu: Option<GpuInfo>,
    prepared: Preparation,
    widened: bool,
    pack_cache_write: Option<CacheWrite>,
}

fn load_model(gguf: &Arc<GgufFile>, options: LoadOptions, progress: &dyn Fn(f32)) -> Result<Loaded, ModelError> {
    let request = options.device;
    let needed = if request == DeviceRequest::Cpu { 0 } else { CudaModel::bytes_needed(gguf)? };
    let choice = choose(request, needed, probe())?;
    Ok(match choice.device {
        Device::Cpu => {
            let dir = options.pack_cache.then(crate::paths::pack_cache_dir);
            let cpu = CpuLoadOptions { pack_cache: dir.as_deref(), wide_weights: options.wide_weights };
            let mut model = CpuModel::load_with(gguf.clone(), cpu, progress)?;
            let (prepared, widened) = (model.prepared().clone(), model.widened());
            let pack_cache_write = model.take_pack_cache_write();
            Loaded { model: Box::new(model), device: choice.reason, gpu: None, prepared, widened, pack_cache_write }
        }
        Device::Cuda(gpu) => {
            let model = CudaModel::load_with_progress(gguf.clone(), &gpu, progress)?;
            let device = format!("CUDA: {}", choice.reason);
            let prepared = Preparation::Uploaded;
            Loaded { model: Box::new(model), device, gpu: Some(gpu), prepared, widened: false, pack_cache_write: None }
        }
    })
}

fn worker_loop(
    mut model: Box<dyn Forward>,
    pool: rayon::ThreadPool,
    tokenizer: Arc<Tokenizer>,
    special: SpecialTokens,
    commands: Receiver<Command>,
    closing: Arc<AtomicBool>,
) {
    for command in commands.iter() {
        match command {
            Command::Generate { prompt, plan, events, cancel, notify } => {
                let start = Instant::now();
                let result = catch_unwind(AssertUnwindSafe(|| {
                    pool.install(|| {
                        generate_planned(&mut *model, &prompt, &plan, special.clone(), &mut |s| {
                            let event = StepEvent {
                                index: s.index,
                                canvas: s.canvas.to_vec(),
                                committed: s.committed.to_vec(),
                                forward_ms: s.forward_ms,
                                sample_ms: s.sample_ms,
                                forwards: s.forwards,
                                window: s.window.clone(),
                                cached: s.cached,
                                logit_rows: s.logit_rows,
                            };
                            // A front end that dropped its receiver, or the session, no longer
                            // wants the run.
                            let sent = events.send(Event::Step(event)).is_ok();
                            notify();
                            sent && !cancel.load(Ordering::Relaxed) && !closing.load(Ordering::Relaxed)
                        })
                    })
                }));
                let event = match result {
                    Ok(Ok(generated)) => {
                        let text = tokenizer.decode(answer_ids(generated.answer(), &special), true);
                        Event::Done(Finished { generated, text, total_ms: start.elapsed().as_secs_f64() * 1e3 })
                    }
                    Ok(Err(e)) => Event::Failed(e.into()),
                    Err(panic) => Event::Failed(EngineError::Internal(panic_message(&panic))),
                };
                let _ = events.send(event);
                notify();
            }
            Command::Logits { ids, rows, reply } => {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    let mut out = Vec::new();
                    pool.install(|| model.forward(&ids, &rows, &mut out)).map(|_| out)
                }));
                let _ = reply.send(match result {
                    Ok(r) => r.map_err(EngineError::from),
                    Err(panic) => Err(EngineError::Internal(panic_message(&panic))),
                });
            }
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
