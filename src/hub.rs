//! Getting GGUF models from Hugging Face (or any endpoint that speaks its API, such as a mirror
//! or a local test server): list a repository's .gguf files with sizes, download one into the
//! standard Hugging Face cache with progress, resume and cancel, and verify it before use.
//!
//! The transfer and the cache layout are hf-hub's (`models--owner--repo/{blobs,snapshots,refs}`,
//! resume from a `.part` file). hf-hub does not check that a finished transfer is complete, so
//! every download is verified here: its size, and its sha256 when the hub lists one. A file
//! that fails is moved back to `.part` (the next attempt resumes or restarts) and never
//! returned as a model.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Cache, Repo, RepoType};
use sha2::{Digest, Sha256};

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A known repository of llama.cpp-format GGUF conversions of a supported model.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub model: &'static str,
    /// `owner/name:QUANT`, as typed in the repository field or given to `dllm pull`.
    pub spec: &'static str,
    pub about: &'static str,
}

/// The repositories the app offers with one click. Chosen because other runtimes document them
/// for these models (mojo-dllm's benchmarks use the LLaDA file, llama.cpp users the Dream one,
/// LM Studio's tracker the LLaDA-MoE one: lmstudio-bug-tracker issue 1025) and all are converted
/// by llama.cpp's own script, whose layout dllm reads. No community conversion of RND1 could be
/// identified; its model card's instructions convert it with that script.
pub const PRESETS: [Preset; 3] = [
    Preset {
        model: "LLaDA-8B-Instruct",
        spec: "mradermacher/LLaDA-8B-Instruct-GGUF:Q4_K_M",
        about: "GSAI-ML's LLaDA 8B, instruction tuned; Q4_K_M is about 4.9 GB",
    },
    Preset {
        model: "Dream-v0-Instruct-7B",
        spec: "bartowski/Dream-org_Dream-v0-Instruct-7B-GGUF:Q4_K_M",
        about: "Dream-org's Dream 7B, instruction tuned; Q4_K_M is about 4.7 GB",
    },
    Preset {
        model: "LLaDA-MoE-7B-A1B-Instruct",
        spec: "mradermacher/LLaDA-MoE-7B-A1B-Instruct-GGUF:Q4_K_M",
        about: "inclusionAI's LLaDA-MoE, 7B parameters of which 1.4B run per token; fast on a CPU",
    },
];

/// One .gguf file of a repository.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteFile {
    pub path: String,
    pub size: u64,
    /// sha256 of the content, when the hub lists it (files stored with LFS).
    pub sha256: Option<String>,
}

impl RemoteFile {
    /// The quant type named in the file name (`...-Q4_K_M.gguf` gives `Q4_K_M`).
    pub fn quant(&self) -> Option<String> {
        const KNOWN: [&str; 30] = [
            "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q3_K_M", "Q3_K_L", "Q3_K_S", "Q2_K_S", "Q2_K", "Q6_K", "Q8_0",
            "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS",
            "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS", "BF16", "F16", "F32",
        ];
        let stem = self.path.rsplit('/').next()?.strip_suffix(".gguf")?.to_ascii_uppercase();
        KNOWN.iter().find(|q| stem.ends_with(*q)).map(|q| q.to_string())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "'{0}' is not a repository id; write it as owner/name, optionally followed by :QUANT (for example owner/model-GGUF:Q4_K_M)"
    )]
    BadRepoId(String),
    #[error("{repo} was not found on {endpoint}: check the name (private repositories are not supported)")]
    NotFound { repo: String, endpoint: String },
    #[error("cannot reach {endpoint}: {why}; check the network connection (or HF_ENDPOINT)")]
    Network { endpoint: String, why: String },
    #[error("{repo} holds no .gguf file")]
    NoGguf { repo: String },
    #[error("{repo} has no .gguf file for {quant}; it has: {available}")]
    NoQuant { repo: String, quant: String, available: String },
    #[error("the download of {file} failed: {why}")]
    Download { file: String, why: String },
    #[error(
        "{file} is incomplete or corrupt ({why}); it was kept as a partial download, run the download again to resume"
    )]
    Verify { file: String, why: String },
    #[error("writing {path} failed: {source}; is the disk full?")]
    Disk { path: PathBuf, source: std::io::Error },
    #[error("download cancelled; run it again to resume")]
    Cancelled,
}

/// Splits `owner/repo` or `owner/repo:QUANT`; a preset's model name stands for its spec.
pub fn parse_spec(spec: &str) -> Result<(String, Option<String>), HubError> {
    let spec = PRESETS.iter().find(|p| p.model.eq_ignore_ascii_case(spec.trim())).map_or(spec, |p| p.spec);
    let (repo, quant) = match spec.trim().split_once(':') {
        Some((r, q)) => (r, Some(q.to_string())),
        None => (spec.trim(), None),
    };
    let valid_part = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match repo.split_once('/') {
        Some((owner, name)) if valid_part(owner) && valid_part(name) && quant.as_deref() != Some("") => {
            Ok((repo.to_string(), quant))
        }
        _ => Err(HubError::BadRepoId(spec.to_string())),
    }
}

/// Picks the file for `quant` (case-insensitive), or with none asked: Q4_K_M if present,
/// else the smallest file.
pub fn pick<'a>(repo: &str, files: &'a [RemoteFile], quant: Option<&str>) -> Result<&'a RemoteFile, HubError> {
    let want = quant
        .map(str::to_ascii_uppercase)
        .or_else(|| files.iter().any(|f| f.quant().as_deref() == Some("Q4_K_M")).then(|| "Q4_K_M".to_string()));
    match want {
        Some(q) => files.iter().find(|f| f.quant().as_deref() == Some(q.as_str())).ok_or_else(|| HubError::NoQuant {
            repo: repo.to_string(),
            quant: q,
            available: files.iter().filter_map(RemoteFile::quant).collect::<Vec<_>>().join(", "),
        }),
        None => files.iter().min_by_key(|f| f.size).ok_or_else(|| HubError::NoGguf { repo: repo.to_string() }),
    }
}

/// A hub endpoint and the local cache it downloads into.
#[derive(Debug, Clone)]
pub struct Hub {
    pub endpoint: String,
    pub cache_dir: PathBuf,
}

impl Hub {
    /// `HF_ENDPOINT` (default huggingface.co) and the standard cache (`HF_HOME`/hub, by default
    /// ~/.cache/huggingface/hub).
    pub fn from_env() -> Hub {
        let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.to_string());
        Hub { endpoint: endpoint.trim_end_matches('/').to_string(), cache_dir: Cache::from_env().path().clone() }
    }

    fn network(&self, why: impl ToString) -> HubError {
        HubError::Network { endpoint: self.endpoint.clone(), why: why.to_string() }
    }

    /// The repository's .gguf files with their sizes.
    pub fn list_gguf(&self, repo: &str) -> Result<Vec<RemoteFile>, HubError> {
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(rename = "type")]
            kind: String,
            path: String,
            #[serde(default)]
            size: u64,
            lfs: Option<Lfs>,
        }
        #[derive(serde::Deserialize)]
        struct Lfs {
            oid: String,
            size: u64,
        }
        let url = format!("{}/api/models/{repo}/tree/main?recursive=true", self.endpoint);
        let response = match ureq::get(&url).call() {
            Ok(r) => r,
            Err(ureq::Error::StatusCode(404 | 401)) => {
                return Err(HubError::NotFound { repo: repo.to_string(), endpoint: self.endpoint.clone() });
            }
            Err(e) => return Err(self.network(e)),
        };
        let entries: Vec<Entry> =
            response.into_body().read_json().map_err(|e| self.network(format!("unexpected listing: {e}")))?;
        let files: Vec<RemoteFile> = entries
            .into_iter()
            .filter(|e| e.kind == "file" && e.path.to_ascii_lowercase().ends_with(".gguf"))
            .map(|e| match e.lfs {
                Some(lfs) => RemoteFile { path: e.path, size: lfs.size, sha256: Some(lfs.oid) },
                None => RemoteFile { path: e.path, size: e.size, sha256: None },
            })
            .collect();
        if files.is_empty() {
            return Err(HubError::NoGguf { repo: repo.to_string() });
        }
        Ok(files)
    }

    /// Every .gguf file in the cache's model snapshots (repository, path), newest repositories'
    /// files included; what the app offers as already downloaded.
    pub fn downloaded(&self) -> Vec<(String, PathBuf)> {
        let mut found = Vec::new();
        let Ok(repos) = std::fs::read_dir(&self.cache_dir) else { return found };
        for repo in repos.flatten() {
            let name = repo.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_prefix("models--") else { continue };
            let id = id.replacen("--", "/", 1);
            let Ok(snapshots) = std::fs::read_dir(repo.path().join("snapshots")) else { continue };
            for snapshot in snapshots.flatten() {
                let Ok(files) = std::fs::read_dir(snapshot.path()) else { continue };
                for file in files.flatten() {
                    let path = file.path();
                    // A dangling link (blob removed) is not a model.
                    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) && path.is_file() {
                        found.push((id.clone(), path));
                    }
                }
            }
        }
        found.sort();
        found
    }

    /// The file in the local cache, if a verified copy is there.
    pub fn cached(&self, repo: &str, file: &RemoteFile) -> Option<PathBuf> {
        let path =
            Cache::new(self.cache_dir.clone()).repo(Repo::new(repo.to_string(), RepoType::Model)).get(&file.path)?;
        verify(&path, file).ok().map(|_| path)
    }

    /// Downloads `file` (resuming a partial download) and verifies it. `progress(done, total)`
    /// is called as bytes arrive; setting `cancel` stops the transfer, keeping what arrived.
    pub fn download(
        &self,
        repo: &str,
        file: &RemoteFile,
        progress: &mut dyn FnMut(u64, u64),
        cancel: &AtomicBool,
    ) -> Result<PathBuf, HubError> {
        if let Some(path) = self.cached(repo, file) {
            progress(file.size, file.size);
            return Ok(path);
        }
        std::fs::create_dir_all(&self.cache_dir)
            .map_err(|source| HubError::Disk { path: self.cache_dir.clone(), source })?;
        let api = ApiBuilder::new()
            .with_endpoint(self.endpoint.clone())
            .with_cache_dir(self.cache_dir.clone())
            .with_progress(false)
            .with_retries(0)
            .build()
            .map_err(|e| self.network(e))?;
        let reporter = Reporter { total: file.size, done: 0, progress, cancel };
        // A cancel unwinds out of the transfer (hf-hub offers no other way to stop it);
        // `resume_unwind` carries no panic message and the `.part` file stays for a resume.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            api.model(repo.to_string()).download_with_progress(&file.path, reporter)
        }));
        let path = match result {
            Ok(Ok(path)) => path,
            Ok(Err(e)) => return Err(self.classify(repo, &file.path, e)),
            Err(payload) if payload.is::<CancelledTransfer>() => return Err(HubError::Cancelled),
            Err(payload) => std::panic::resume_unwind(payload),
        };
        if let Err(why) = verify(&path, file) {
            // Put the bytes back where hf-hub resumes from, so nothing reads them as a model.
            let blob = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::rename(&blob, blob.with_extension("part"));
            return Err(HubError::Verify { file: file.path.clone(), why });
        }
        Ok(path)
    }

    fn classify(&self, repo: &str, file: &str, e: hf_hub::api::sync::ApiError) -> HubError {
        use hf_hub::api::sync::ApiError;
        match e {
            ApiError::IoError(source) => HubError::Disk { path: self.cache_dir.clone(), source },
            ApiError::RequestError(e) if matches!(*e, ureq::Error::StatusCode(404)) => {
                HubError::NotFound { repo: format!("{repo}/{file}"), endpoint: self.endpoint.clone() }
            }
            ApiError::RequestError(e) => self.network(e),
            other => HubError::Download { file: file.to_string(), why: other.to_string() },
        }
    }
}

/// The panic payload that carries a cancel out of hf-hub's transfer loop.
struct CancelledTransfer;

struct Reporter<'a> {
    total: u64,
    done: u64,
    progress: &'a mut dyn FnMut(u64, u64),
    cancel: &'a AtomicBool,
}

impl hf_hub::api::Progress for Reporter<'_> {
    fn init(&mut self, _size: usize, _filename: &str) {
        self.done = 0;
    }
    fn update(&mut self, size: usize) {
        if self.cancel.load(Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(CancelledTransfer));
        }
        self.done += size as u64;
        (self.progress)(self.done.min(self.total), self.total);
    }
    fn finish(&mut self) {}
}

/// Checks the size and (when known) the sha256 of a downloaded file.
fn verify(path: &Path, file: &RemoteFile) -> Result<(), String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if len != file.size {
        return Err(format!("{len} of {} bytes", file.size));
    }
    if let Some(expected) = &file.sha256 {
        let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        let got: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if &got != expected {
            return Err(format!("sha256 {got}, expected {expected}"));
        }
    }
    Ok(())
}
