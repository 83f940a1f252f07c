//! Downloads against a local mock of the Hugging Face API on 127.0.0.1, started by the test:
//! listing with sizes, progress to 100%, verification, resume after an interrupted transfer,
//! cancel, a 404, and a corrupt transfer that must never be offered as a model.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mock_hub::{COMMIT, MockHub, REPO, start_mock};
use dllm::engine::{LoadOptions, Session};
use dllm::hub::{Hub, HubError, PRESETS, RemoteFile, parse_spec, pick};

fn fixture() -> (String, Vec<u8>) {
    ("tiny-Q8_0.gguf".to_string(), std::fs::read(common::data("models/llada-tiny-Q8_0.gguf")).unwrap())
}

fn hub(mock: &MockHub) -> (Hub, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    (Hub::new(&mock.endpoint, dir.0.join("cache")), dir)
}

/// A mock serving the fixture, a hub with a fresh cache, the repository's listing and the
/// fixture's bytes.
fn served() -> (MockHub, Hub, tempdir::Dir, Vec<RemoteFile>, Vec<u8>) {
    let (name, bytes) = fixture();
    let mock = start_mock(HashMap::from([(name, bytes.clone())]));
    let (hub, dir) = hub(&mock);
    let files = hub.list_gguf(REPO).unwrap();
    (mock, hub, dir, files, bytes)
}

mod tempdir {
    /// A fresh directory under the system temp dir, removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("dllm-hub-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn download_reaches_100_percent_verifies_and_loads() {
    let (name, bytes) = fixture();
    let mock = start_mock(HashMap::from([(name.clone(), bytes.clone())]));
    let (hub, _dir) = hub(&mock);
    let files = hub.list_gguf(REPO).unwrap();
    assert_eq!(files.len(), 1, "README.md is not offered");
    let file = pick(REPO, &files, Some("q8_0")).unwrap();
    assert_eq!((file.size, file.quant().as_deref()), (bytes.len() as u64, Some("Q8_0")));
    let mut last = (0, 0);
    let path = hub.download(REPO, file, &mut |done, total| last = (done, total), &AtomicBool::new(false)).unwrap();
    assert_eq!(last, (bytes.len() as u64, bytes.len() as u64), "progress reaches 100%");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let p = path.to_string_lossy();
    assert!(p.contains("models--dllm-test--tiny-GGUF") && p.contains(COMMIT), "standard cache layout: {p}");
    assert_eq!(hub.cached(REPO, file).as_deref(), Some(path.as_path()));
    assert_eq!(hub.downloaded(), vec![(REPO.to_string(), path.clone())], "offered as already downloaded");
    let session = Session::load(&path, LoadOptions { threads: Some(1), ..Default::default() }).unwrap();
    assert_eq!(session.info().config.n_layer, 2);
}

#[test]
fn an_interrupted_download_resumes_where_it_stopped() {
    let (mock, hub, _dir, files, bytes) = served();
    mock.faults.lock().unwrap().cut_next_transfer_at = Some(700_000);
    let first = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false));
    assert!(first.is_err(), "a cut transfer is an error, not a model");
    assert!(hub.cached(REPO, &files[0]).is_none());
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let ranges = mock.ranges.lock().unwrap().clone();
    assert_eq!(ranges.first(), Some(&0));
    assert!(
        ranges.last().is_some_and(|&r| r >= 700_000 && r < bytes.len()),
        "resumed from the partial file: {ranges:?}"
    );
}

#[test]
fn cancel_stops_and_a_later_download_resumes() {
    let (_mock, hub, _dir, files, bytes) = served();
    let cancel = AtomicBool::new(false);
    let calls = AtomicUsize::new(0);
    let err = hub
        .download(
            REPO,
            &files[0],
            &mut |done, _| {
                if done > 0 && calls.fetch_add(1, Ordering::Relaxed) == 2 {
                    cancel.store(true, Ordering::Relaxed);
                }
            },
            &cancel,
        )
        .unwrap_err();
    assert!(matches!(err, HubError::Cancelled), "{err}");
    assert!(hub.cached(REPO, &files[0]).is_none());
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_corrupt_transfer_is_never_offered_as_a_model() {
    let (name, bytes) = fixture();
    let mock = start_mock(HashMap::from([(name, bytes)]));
    mock.faults.lock().unwrap().wrong_sha = true;
    let (hub, _dir) = hub(&mock);
    let files = hub.list_gguf(REPO).unwrap();
    let err = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err, HubError::Verify { .. }), "{err}");
    assert!(err.to_string().contains("sha256") && err.to_string().contains(&files[0].path), "{err}");
    assert!(hub.cached(REPO, &files[0]).is_none());
}

/// Every file under `dir`, links included (not followed).
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(tree(&path));
        }
        out.push(path);
    }
    out.sort();
    out
}

/// #23.1: the ETag, commit, digest and file names a server sends never become a path outside
/// the cache. Before, an ETag of `"../../../../<file>"` overwrote that file through hf-hub.
#[test]
fn a_hostile_server_cannot_write_outside_the_cache() {
    let (name, bytes) = fixture();
    let mock = start_mock(HashMap::from([(name, bytes.clone())]));
    let (hub, dir) = hub(&mock);
    let victim = dir.0.join("precious.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let outside = || {
        let mut t = tree(&dir.0);
        t.retain(|p| !p.starts_with(&hub.cache_dir));
        t
    };
    let before = outside();

    // An ETag naming the victim: ignored (blobs are named by the verified sha256).
    mock.faults.lock().unwrap().etag = Some(format!("\"../../../../../../../..{}\"", victim.display()));
    let files = hub.list_gguf(REPO).unwrap();
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");

    // A commit id that climbs out.
    let fresh = Hub::new(&mock.endpoint, dir.0.join("cache2"));
    mock.faults.lock().unwrap().commit = Some("../../../../escaped".into());
    let err = fresh.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err, HubError::Untrusted { .. }) && err.to_string().contains(&mock.endpoint), "{err}");
    mock.faults.lock().unwrap().commit = None;

    // Listed names that are absolute or climb out, and a digest that is not one.
    for name in [format!("{}/abs.gguf", dir.0.display()), "../../escape.gguf".into(), "a/../../b.gguf".into()] {
        mock.faults.lock().unwrap().extra_listed_name = Some(name.clone());
        let err = hub.list_gguf(REPO).unwrap_err();
        assert!(matches!(err, HubError::Untrusted { .. }) && err.to_string().contains(&mock.endpoint), "{name}: {err}");
    }
    mock.faults.lock().unwrap().extra_listed_name = None;
    mock.faults.lock().unwrap().listed_oid = Some("../../../../x".into());
    assert!(matches!(hub.list_gguf(REPO), Err(HubError::Untrusted { .. })));
    // A forged RemoteFile is checked by download too.
    let forged = RemoteFile { path: "../../../escape.gguf".into(), size: 1, sha256: None };
    assert!(matches!(
        fresh.download(REPO, &forged, &mut |_, _| {}, &AtomicBool::new(false)),
        Err(HubError::Untrusted { .. })
    ));

    assert_eq!(outside(), before, "nothing was written outside the cache");
    assert!(!dir.0.join("escaped").exists() && !std::env::temp_dir().join("escape.gguf").exists());
}

/// #23.1: repository ids that are paths are refused before any request.
#[test]
fn repository_ids_that_climb_out_are_refused() {
    for bad in ["../..", "owner/..", "../name", "owner/.", "a/b--c", "owner/na..me"] {
        assert!(matches!(parse_spec(bad), Err(HubError::BadRepoId(_))), "{bad}");
        let hub = Hub::new("http://127.0.0.1:9", std::env::temp_dir().join("dllm-never-created"));
        assert!(matches!(hub.list_gguf(bad), Err(HubError::BadRepoId(_))), "{bad}");
    }
}

/// #23.1: a redirect without a Location is an error value, not a panic in the transfer.
#[test]
fn a_redirect_without_location_is_an_error() {
    let (mock, hub, _dir, files, _) = served();
    mock.faults.lock().unwrap().redirect_without_location = true;
    let err = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(err.to_string().contains(&files[0].path), "{err}");
}

/// #23.2: after a transfer that fails verification, the next try downloads the file anew
/// (it used to fail for ever with "http status: 416").
#[test]
fn after_a_failed_verification_the_next_try_succeeds() {
    let (mock, hub, _dir, files, bytes) = served();
    // The listed digest is right; the bytes the server sends are not.
    mock.faults.lock().unwrap().corrupt_bodies = true;
    let err = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err, HubError::Verify { .. }) && err.to_string().contains(&files[0].path), "{err}");
    mock.faults.lock().unwrap().corrupt_bodies = false;
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

/// #23.2: a server that refuses the resume (416) gets one fresh start.
#[test]
fn a_refused_resume_starts_once_more_from_zero() {
    let (mock, hub, _dir, files, bytes) = served();
    mock.faults.lock().unwrap().cut_next_transfer_at = Some(300_000);
    assert!(hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).is_err());
    mock.faults.lock().unwrap().refuse_ranges = true;
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(*mock.ranges.lock().unwrap(), vec![0, 0], "the refused resume was not counted as a transfer");
    assert!(mock.revisions.lock().unwrap().iter().all(|r| r == COMMIT), "pinned to the listed commit");
}

/// #23.2: a server that sends 4 KiB and stops is reported as stalled, naming the file, and
/// the 4 KiB are resumed from.
#[test]
fn a_stalled_transfer_times_out_and_resumes() {
    let (mock, mut hub, _dir, files, bytes) = served();
    hub.stall_timeout = Duration::from_secs(1);
    mock.faults.lock().unwrap().stall_after = Some(4096);
    let err = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&files[0].path) && text.contains("sent nothing for 1 s") && text.contains("4096 of"),
        "{text}"
    );
    mock.faults.lock().unwrap().stall_after = None;
    let path = hub.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert_eq!(*mock.ranges.lock().unwrap(), vec![0, 4096]);
}

/// #23.2: Cancel returns at once while the server sends nothing (the transfer thread ends on
/// its own at its next read).
#[test]
fn cancel_does_not_wait_for_bytes() {
    let (mock, hub, _dir, files, _) = served();
    mock.faults.lock().unwrap().stall_after = Some(4096);
    let cancel = AtomicBool::new(false);
    let started = Instant::now();
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            cancel.store(true, Ordering::Relaxed);
        });
        hub.download(REPO, &files[0], &mut |_, _| {}, &cancel).unwrap_err()
    });
    assert!(matches!(err, HubError::Cancelled), "{err}");
    // The stall timeout is 30 s; returning well before it shows the cancel did not wait.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // Its thread still waits on the silent server; a new download waits for it, up to the
    // stall timeout, then says so.
    let mut impatient = hub.clone();
    impatient.stall_timeout = Duration::from_millis(500);
    let again = impatient.download(REPO, &files[0], &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(again, HubError::Busy { .. }) && again.to_string().contains(&files[0].path), "{again}");
}

#[test]
fn missing_repos_and_bad_ids_have_clear_errors() {
    let mock = start_mock(HashMap::new());
    let (hub, _dir) = hub(&mock);
    let err = hub.list_gguf("nobody/nothing").unwrap_err();
    assert!(matches!(err, HubError::NotFound { .. }) && err.to_string().contains("nobody/nothing"), "{err}");
    assert!(matches!(parse_spec("just-a-name"), Err(HubError::BadRepoId(_))));
    assert!(matches!(parse_spec("a/b:"), Err(HubError::BadRepoId(_))));
    assert_eq!(parse_spec("owner/repo:Q6_K").unwrap(), ("owner/repo".to_string(), Some("Q6_K".to_string())));
    let offline = Hub::new("http://127.0.0.1:9", std::env::temp_dir().join("dllm-offline-cache"));
    let err = offline.list_gguf("owner/repo").unwrap_err();
    assert!(matches!(err, HubError::Network { .. }) && err.to_string().contains("cannot reach"), "{err}");
    let file = RemoteFile { path: "m.gguf".into(), size: 10, sha256: None };
    let err = offline.download("owner/repo", &file, &mut |_, _| {}, &AtomicBool::new(false)).unwrap_err();
    assert!(err.to_string().contains("cannot reach") && !err.to_string().contains("disk"), "not a disk error: {err}");
}

/// Each preset is a valid spec, its model name stands for it, and its quant picks the right
/// file among the names its repository uses.
#[test]
fn presets_resolve_to_their_repository_and_quant() {
    // File names as published in the repositories (llama.cpp's converter names them).
    let listings = [
        ["LLaDA-8B-Instruct.Q4_K_S.gguf", "LLaDA-8B-Instruct.Q4_K_M.gguf", "LLaDA-8B-Instruct.Q8_0.gguf"],
        [
            "Dream-org_Dream-v0-Instruct-7B-Q4_K_S.gguf",
            "Dream-org_Dream-v0-Instruct-7B-Q4_K_M.gguf",
            "Dream-org_Dream-v0-Instruct-7B-Q8_0.gguf",
        ],
        [
            "LLaDA-MoE-7B-A1B-Instruct.IQ4_XS.gguf",
            "LLaDA-MoE-7B-A1B-Instruct.Q4_K_M.gguf",
            "LLaDA-MoE-7B-A1B-Instruct.Q8_0.gguf",
        ],
    ];
    for (preset, names) in PRESETS.iter().zip(listings) {
        let (repo, quant) = parse_spec(preset.spec).unwrap();
        assert_eq!(parse_spec(&preset.model.to_lowercase()).unwrap(), (repo.clone(), quant.clone()));
        assert_eq!(quant.as_deref(), Some("Q4_K_M"));
        let files: Vec<RemoteFile> =
            names.iter().map(|n| RemoteFile { path: n.to_string(), size: 1, sha256: None }).collect();
        assert_eq!(pick(&repo, &files, quant.as_deref()).unwrap().path, names[1]);
    }
    // The i-quant tiers (mradermacher's imatrix repositories name them `.i1-IQ...`).
    let quant = |name: &str| RemoteFile { path: name.into(), size: 1, sha256: None }.quant();
    assert_eq!(quant("LLaDA-8B-Instruct.i1-IQ4_XS.gguf").as_deref(), Some("IQ4_XS"));
    assert_eq!(quant("m.i1-IQ3_XXS.gguf").as_deref(), Some("IQ3_XXS"));
    assert_eq!(quant("m.i1-IQ3_XS.gguf").as_deref(), Some("IQ3_XS"));
    assert_eq!(quant("m.Q2_K_S.gguf").as_deref(), Some("Q2_K_S"));
}
