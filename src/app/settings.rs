//! What the app remembers across restarts (through eframe's storage). Every field has a
//! default, so state saved by an older version still loads.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cuda::DeviceRequest;
use crate::decoding::GenerateParams;
use crate::engine::{LoadOptions, ModelInfo};
use crate::model::Family;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Most recent first.
    pub recent_models: Vec<PathBuf>,
    pub llada: GenerateParams,
    pub dream: GenerateParams,
    pub rnd1: GenerateParams,
    /// For the bundled demo model (its own, since it suits longer answers than a CPU can
    /// afford with an 8B model).
    pub demo: GenerateParams,
    /// Tokenize the prompt as it is instead of wrapping it in the chat template.
    pub raw_prompt: bool,
    pub color_by_confidence: bool,
    /// None: the machine's physical cores.
    pub threads: Option<usize>,
    pub device: DeviceRequest,
    /// Keep packed CPU weights in the cache directory between loads (`LoadOptions::pack_cache`).
    pub pack_cache: bool,
    /// The CPU's faster-weights mode (`LoadOptions::wide_weights`).
    pub wide_weights: bool,
    pub prompt: String,
    /// Hugging Face endpoint; None: `HF_ENDPOINT`, else huggingface.co.
    pub hf_endpoint: Option<String>,
    /// Where downloads go; None: the standard Hugging Face cache (`HF_HOME`).
    pub hf_cache: Option<PathBuf>,
    /// Where "Save as HTML" writes replay pages; None: `dllm-runs` in the home folder.
    pub export_dir: Option<PathBuf>,
    /// The central panel shows the chat instead of the single prompt.
    pub chat_mode: bool,
    /// Where conversations are saved; None: `paths::conversations_dir`.
    pub conversations_dir: Option<PathBuf>,
    /// The port the Serve toggle listens on (127.0.0.1; 0: any free one).
    pub serve_port: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            recent_models: Vec::new(),
            llada: GenerateParams::interactive_for(Family::Llada),
            dream: GenerateParams::interactive_for(Family::Dream),
            rnd1: GenerateParams::interactive_for(Family::Rnd1),
            demo: crate::demo::params(),
            raw_prompt: false,
            color_by_confidence: false,
            threads: None,
            device: DeviceRequest::Auto,
            pack_cache: true,
            wide_weights: false,
            prompt: "Tell me a story about a cat.".into(),
            hf_endpoint: None,
            hf_cache: None,
            export_dir: None,
            chat_mode: false,
            conversations_dir: None,
            serve_port: 8080,
        }
    }
}

impl Settings {
    /// The options a model is loaded with.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            threads: self.threads,
            device: self.device,
            pack_cache: self.pack_cache,
            wide_weights: self.wide_weights,
        }
    }

    /// The folder replay pages are saved in.
    pub fn export_dir(&self) -> PathBuf {
        self.export_dir.clone().unwrap_or_else(crate::paths::default_export_dir)
    }

    /// The saved conversations' store.
    pub fn conversations(&self) -> crate::conversation::Store {
        crate::conversation::Store {
            dir: self.conversations_dir.clone().unwrap_or_else(crate::paths::conversations_dir),
        }
    }

    /// The settings for this model: the demo model's, else its family's.
    pub fn params(&self, model: &ModelInfo) -> &GenerateParams {
        match (model.is_demo, model.config.family) {
            (true, _) => &self.demo,
            (false, Family::Llada) => &self.llada,
            (false, Family::Dream) => &self.dream,
            (false, Family::Rnd1) => &self.rnd1,
        }
    }

    pub fn params_mut(&mut self, model: &ModelInfo) -> &mut GenerateParams {
        match (model.is_demo, model.config.family) {
            (true, _) => &mut self.demo,
            (false, Family::Llada) => &mut self.llada,
            (false, Family::Dream) => &mut self.dream,
            (false, Family::Rnd1) => &mut self.rnd1,
        }
    }

    pub fn remember_model(&mut self, path: PathBuf) {
        self.recent_models.retain(|p| p != &path);
        self.recent_models.insert(0, path);
        self.recent_models.truncate(10);
    }
}
