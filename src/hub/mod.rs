//! Getting GGUF models from Hugging Face (or any endpoint that speaks its API, such as a mirror
//! or a local test server): list a repository's .gguf files with sizes, download one into the
//! standard Hugging Face cache with progress, resume and cancel, and verify it before use.
//!
//! The cache is hf-hub's (its location from `HF_HOME`, its layout
//! `models--owner--repo/{blobs,snapshots/<commit>,refs/main}`, shared with other tools), but
//! the transfer is ours (`transfer`): hf-hub 0.5 builds paths from the server's ETag, commit
//! and file names unchecked, cannot time out a stalled read, and cannot be cancelled between
//! reads. Every value a server sends is checked (`names`) before it becomes a path, every
//! download is verified (its size, and its sha256 when the hub lists one), and a file that
//! fails is deleted, never returned as a model.

mod names;
mod transfer;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hf_hub::Cache;
use sha2::{Digest, Sha256};

pub use names::is_repo_id;

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
        "'{0}' is not a repository id; write it as owner/name (letters, digits, '-', '_', '.'; no '--' or '..'), optionally followed by :QUANT (for example owner/model-GGUF:Q4_K_M)"
    )]
    BadRepoId(String),
    #[error("{repo} was not found on {endpoint}: check the name (private repositories are not supported)")]
    NotFound { repo: String, endpoint: String },
    #[error("cannot reach {endpoint}: {why}; check the network connection (or HF_ENDPOINT)")]
    Network { endpoint: String, why: String },
    #[error(
        "refusing {what} sent by {endpoint}: it is not a valid {expected}, and dllm builds paths in the cache from it"
    )]
    Untrusted { endpoint: String, what: String, expected: &'static str },
    #[error("{repo} holds no .gguf file")]
    NoGguf { repo: String },
    #[error("{repo} has no .gguf file for {quant}; it has: {available}")]
    NoQuant { repo: String, quant: String, available: String },
    #[error("the download of {file} failed: {why}")]
    Download { file: String, why: String },
    #[error("{file} arrived corrupt ({why}); it was deleted, run the download again to fetch it anew")]
    Verify { file: String, why: String },
    #[error("writing {} failed: {source}{}", path.display(), disk_hint(source))]
    Disk { path: PathBuf, source: std::io::Error },
    #[error("a cancelled download of {file} is still closing; try again in a few seconds")]
    Busy { file: String },
    #[error("download cancelled; run it again to resume")]
    Cancelled,
}

/// The advice a failed write earns: only a full disk is called one.
fn disk_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::StorageFull => "; the disk is full, free some space and run the download again to resume",
        std::io::ErrorKind::PermissionDenied => "; check the permissions of the cache directory (HF_HOME)",
        _ => "",
    }
}

/// Splits `owner/repo` or `owner/repo:QUANT`; a preset's model name stands for its spec.
pub fn parse_spec(spec: &str) -> Result<(String, Option<String>), HubError> {
    let spec = PRESETS.iter().find(|p| p.model.eq_ignore_ascii_case(spec.trim())).map_or(spec, |p| p.spec);
    let (repo, quant) = match spec.trim().split_once(':') {
        Some((r, q)) => (r, Some(q.to_string())),
        None => (spec.trim(), None),
    };
    if is_repo_id(repo) && quant.as_deref() != Some("") {
        Ok((repo.to_string(), quant))
    } else {
        Err(HubError::BadRepoId(spec.to_string()))
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
    /// The longest wait for a connection, an answer or the next bytes before a transfer is
    /// called stalled.
    pub stall_timeout: Duration,
}

/// The partial files some transfer thread of this process is still writing. A cancelled
/// transfer's thread ends at its next read, after the caller has moved on.
static WRITING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Marks a partial file as being written for as long as it lives.
struct Writing(PathBuf);

impl Writing {
    fn claim(part: &Path) -> Option<Writing> {
        let mut set = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(part.to_path_buf()).then(|| Writing(part.to_path_buf()))
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.0);
    }
}

enum Progress {
    Bytes(u64),
    Done(Result<(), HubError>),
}

impl Hub {
    /// 30 s without a byte is a stall: generous for a slow link, short enough to tell.
    pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);

    pub fn new(endpoint: &str, cache_dir: PathBuf) -> Hub {
        Hub { endpoint: endpoint.trim_end_matches('/').to_string(), cache_dir, stall_timeout: Self::STALL_TIMEOUT }
    }

    /// `HF_ENDPOINT` (default huggingface.co) and the standard cache (`HF_HOME`/hub, by default
    /// ~/.cache/huggingface/hub).
    pub fn from_env() -> Hub {
        let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.to_string());
        Hub::new(&endpoint, Cache::from_env().path().clone())
    }

    fn network(&self, why: impl ToString) -> HubError {
        HubError::Network { endpoint: self.endpoint.clone(), why: why.to_string() }
    }

    fn untrusted(&self, what: String, expected: &'static str) -> HubError {
        HubError::Untrusted { endpoint: self.endpoint.clone(), what, expected }
    }

    fn check_repo(repo: &str) -> Result<(), HubError> {
        if is_repo_id(repo) { Ok(()) } else { Err(HubError::BadRepoId(repo.to_string())) }
    }

    /// GETs a JSON document of the hub's API; 404 and 401 mean the repository is not there.
    fn api_json<T: serde::de::DeserializeOwned>(&self, repo: &str, url: &str) -> Result<T, HubError> {
        let response = transfer::agent(self.stall_timeout).get(url).call().map_err(|e| self.network(e))?;
        match response.status().as_u16() {
            200 => {}
            404 | 401 => return Err(HubError::NotFound { repo: repo.to_string(), endpoint: self.endpoint.clone() }),
            status => return Err(self.network(format!("HTTP status {status} for {url}"))),
        }
        response.into_body().read_json().map_err(|e| self.network(format!("unexpected answer to {url}: {e}")))
    }

    /// The repository's .gguf files with their sizes. A listed name that is not a plain
    /// relative path, or a digest that is not one, refuses the whole listing.
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
        Self::check_repo(repo)?;
        let url = format!("{}/api/models/{repo}/tree/main?recursive=true", self.endpoint);
        let entries: Vec<Entry> = self.api_json(repo, &url)?;
        let mut files = Vec::new();
        for e in entries.into_iter().filter(|e| e.kind == "file" && e.path.to_ascii_lowercase().ends_with(".gguf")) {
            if !names::is_repo_file_path(&e.path) {
                return Err(self.untrusted(format!("the file name {:?}", e.path), "relative file name"));
            }
            files.push(match e.lfs {
                Some(lfs) if !names::is_sha256(&lfs.oid) => {
                    return Err(self.untrusted(format!("the sha256 {:?} of {}", lfs.oid, e.path), "sha256"));
                }
                Some(lfs) => RemoteFile { path: e.path, size: lfs.size, sha256: Some(lfs.oid) },
                None => RemoteFile { path: e.path, size: e.size, sha256: None },
            });
        }
        if files.is_empty() {
            return Err(HubError::NoGguf { repo: repo.to_string() });
        }
        Ok(files)
    }

    /// The commit `main` points at now; downloads are pinned to it.
    fn main_commit(&self, repo: &str) -> Result<String, HubError> {
        #[derive(serde::Deserialize)]
        struct Revision {
            sha: String,
        }
        let url = format!("{}/api/models/{repo}/revision/main", self.endpoint);
        let revision: Revision = self.api_json(repo, &url)?;
        if !names::is_commit(&revision.sha) {
            return Err(self.untrusted(format!("the commit id {:?}", revision.sha), "commit id (40 hex digits)"));
        }
        Ok(revision.sha)
    }

    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.cache_dir.join(format!("models--{}", repo.replace('/', "--")))
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

    /// The file in the local cache, if a verified copy is there. The cache's `refs/main` may
    /// have been written by another tool or an older dllm, so it is checked like a server's word.
    pub fn cached(&self, repo: &str, file: &RemoteFile) -> Option<PathBuf> {
        if !is_repo_id(repo) || !names::is_repo_file_path(&file.path) {
            return None;
        }
        let dir = self.repo_dir(repo);
        let commit = std::fs::read_to_string(dir.join("refs").join("main")).ok()?;
        let commit = commit.trim();
        let path = dir.join("snapshots").join(names::is_commit(commit).then_some(commit)?).join(&file.path);
        verify(&path, file).ok().map(|_| path)
    }

    /// Downloads `file` (resuming a partial download) and verifies it. `progress(done, total)`
    /// is called as bytes arrive. Setting `cancel` returns [`HubError::Cancelled`] within a
    /// tenth of a second, whether or not bytes are arriving; what arrived is kept.
    pub fn download(
        &self,
        repo: &str,
        file: &RemoteFile,
        progress: &mut dyn FnMut(u64, u64),
        cancel: &AtomicBool,
    ) -> Result<PathBuf, HubError> {
        Self::check_repo(repo)?;
        if !names::is_repo_file_path(&file.path) {
            return Err(self.untrusted(format!("the file name {:?}", file.path), "relative file name"));
        }
        if let Some(sha) = file.sha256.as_deref().filter(|s| !names::is_sha256(s)) {
            return Err(self.untrusted(format!("the sha256 {sha:?} of {}", file.path), "sha256"));
        }
        if let Some(path) = self.cached(repo, file) {
            progress(file.size, file.size);
            return Ok(path);
        }
        let commit = self.main_commit(repo)?;
        let dir = self.repo_dir(repo);
        let blobs = dir.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(|source| HubError::Disk { path: blobs.clone(), source })?;
        // Named by the listed digest, else by the file's name: a resume finds it either way.
        let stem = match &file.sha256 {
            Some(sha) => sha.clone(),
            None => format!("unlisted-{}", sha256_hex(format!("{repo}/{}", file.path).as_bytes())),
        };
        let part = blobs.join(format!("{stem}.part"));
        let writing = self.claim(&part, &file.path, cancel)?;
        let target = transfer::Target {
            url: format!("{}/{repo}/resolve/{commit}/{}", self.endpoint, file.path),
            part: part.clone(),
            size: file.size,
            file: file.path.clone(),
            endpoint: self.endpoint.clone(),
            stall: self.stall_timeout,
        };
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let spawned = std::thread::Builder::new().name("dllm-hub-transfer".into()).spawn(move || {
            let bytes = tx.clone();
            let result = target.fetch(&thread_stop, &|done| {
                let _ = bytes.send(Progress::Bytes(done));
            });
            // Released before the caller hears of the end, so that it can start again at once.
            drop(writing);
            let _ = tx.send(Progress::Done(result));
        });
        spawned
            .map_err(|e| HubError::Download { file: file.path.clone(), why: format!("cannot start a thread: {e}") })?;
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Progress::Bytes(done)) => progress(done.min(file.size), file.size),
                Ok(Progress::Done(result)) => {
                    result?;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(HubError::Download { file: file.path.clone(), why: "the transfer thread died".into() });
                }
            }
            if cancel.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
                return Err(HubError::Cancelled);
            }
        }
        let digest = match verify(&part, file) {
            Ok(digest) => digest,
            Err(why) => {
                // Complete but wrong: not a prefix of the right file, so nothing to resume.
                let _ = std::fs::remove_file(&part);
                return Err(HubError::Verify { file: file.path.clone(), why });
            }
        };
        self.install(&dir, &part, &digest, &commit, &file.path)
    }

    /// Claims the partial file for a new transfer, waiting (up to the stall timeout, and
    /// while not cancelled) for a cancelled transfer's thread to let go of it.
    fn claim(&self, part: &Path, file: &str, cancel: &AtomicBool) -> Result<Writing, HubError> {
        let start = std::time::Instant::now();
        loop {
            if let Some(writing) = Writing::claim(part) {
                return Ok(writing);
            }
            if cancel.load(Ordering::Relaxed) {
                return Err(HubError::Cancelled);
            }
            if start.elapsed() > self.stall_timeout {
                return Err(HubError::Busy { file: file.to_string() });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Moves a verified partial file to `blobs/<sha256>` and links it as
    /// `snapshots/<commit>/<file>`, with `refs/main` naming the commit, as hf-hub lays it out.
    fn install(&self, dir: &Path, part: &Path, digest: &str, commit: &str, file: &str) -> Result<PathBuf, HubError> {
        let disk = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HubError::Disk { path, source }
        };
        let blob = dir.join("blobs").join(digest);
        let snapshot = dir.join("snapshots").join(commit).join(file);
        // Every part was checked (`names`); this is the rule they serve, checked as a whole.
        let inside = |p: &Path| {
            p.starts_with(&self.cache_dir)
                && p.strip_prefix(&self.cache_dir)
                    .is_ok_and(|rest| rest.components().all(|c| matches!(c, std::path::Component::Normal(_))))
        };
        if !inside(&blob) || !inside(&snapshot) {
            return Err(self.untrusted(format!("a path ({}) outside the cache", snapshot.display()), "cache path"));
        }
        std::fs::rename(part, &blob).map_err(disk(&blob))?;
        let parent = snapshot.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(disk(parent))?;
        let _ = std::fs::remove_file(&snapshot);
        // Relative, as hf-hub writes it: the cache can move.
        let up = "../".repeat(2 + file.matches('/').count());
        link_or_copy(Path::new(&format!("{up}blobs/{digest}")), &blob, &snapshot).map_err(disk(&snapshot))?;
        let refs = dir.join("refs");
        std::fs::create_dir_all(&refs).map_err(disk(&refs))?;
        std::fs::write(refs.join("main"), commit).map_err(disk(&refs))?;
        Ok(snapshot)
    }
}

#[cfg(unix)]
fn link_or_copy(relative: &Path, _blob: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(relative, link)
}

/// Windows needs a privilege for symbolic links; a hard link (same volume) or a copy serves.
#[cfg(not(unix))]
fn link_or_copy(_relative: &Path, blob: &Path, link: &Path) -> std::io::Result<()> {
    std::fs::hard_link(blob, link).or_else(|_| std::fs::copy(blob, link).map(|_| ()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks the size and (when listed) the sha256 of a downloaded file; returns its sha256.
fn verify(path: &Path, file: &RemoteFile) -> Result<String, String> {
    let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if len != file.size {
        return Err(format!("{len} of {} bytes", file.size));
    }
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
    match &file.sha256 {
        Some(expected) if &got != expected => Err(format!("sha256 {got}, expected {expected}")),
        _ => Ok(got),
    }
}
