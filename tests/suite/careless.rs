//! Careless commands (#23 items 4, 7 and 10): an output path that is the model, a closed or
//! full standard output, and flags that are wrong. Each gets a clear answer, no panic, and
//! nothing is lost: not the model, not the pack cache being written.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::data;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dllm-careless-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn dllm_in(cache: &Path, args: &[&str]) -> (bool, String, String) {
    let out = common::dllm_command().env("XDG_CACHE_HOME", cache).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const QUICK: [&str; 7] = ["--gen", "8", "--steps", "4", "--block", "8", "--raw"];

/// `--trace MODEL` used to truncate the model to 0 bytes (then SIGBUS); `logits --out MODEL`
/// overwrote it and reported success. Now each is refused before anything is written, by
/// file identity, so a link to the model is caught too.
#[test]
fn an_output_path_that_is_the_model_is_refused_and_the_model_survives() {
    let dir = temp_dir("same-file");
    let model = dir.join("model.gguf");
    std::fs::copy(data("models/llada-tiny-Q8_0.gguf"), &model).unwrap();
    let link = dir.join("link.gguf");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&model, &link).unwrap();
    #[cfg(not(unix))]
    std::fs::copy(&model, &link).unwrap();
    let before = std::fs::read(&model).unwrap();
    let m = model.to_string_lossy().into_owned();
    let l = link.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        [&["run", "-m", &m, "--trace", &m][..], &QUICK, &["hi"]].concat(),
        [&["run", "-m", &m, "--html", &l][..], &QUICK, &["hi"]].concat(),
        vec!["logits", "-m", &m, "--ids", "1,2,3", "--out", &m],
        vec!["bench", "-m", &m, "--runs", "1", "--json", &l],
    ];
    for args in cases {
        let (ok, _, err) = dllm_in(&dir, &args);
        assert!(!ok && err.contains("is the model file itself"), "{args:?}: {err}");
        assert_eq!(std::fs::read(&model).unwrap(), before, "{args:?} changed the model");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Outputs appear whole under their name or not at all: a finished run leaves the trace and no
/// temporary; a folder that does not exist fails before the load.
#[test]
fn outputs_are_written_whole_or_not_at_all() {
    let dir = temp_dir("whole");
    let trace = dir.join("trace.jsonl");
    let model = data("models/llada-tiny-Q8_0.gguf");
    let t = trace.to_string_lossy().into_owned();
    let (ok, _, err) = dllm_in(&dir, &[&["run", "-m", &model, "--trace", &t][..], &QUICK, &["hi"]].concat());
    assert!(ok, "{err}");
    let lines = std::fs::read_to_string(&trace).unwrap();
    assert!(lines.lines().last().is_some_and(|l| l.contains("\"done\":true")), "{lines}");
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.starts_with(".dllm-output-")), "a temporary was left: {names:?}");
    let missing = dir.join("no-such-folder").join("t.jsonl");
    let (ok, _, err) =
        dllm_in(&dir, &[&["run", "-m", &model, "--trace", &missing.to_string_lossy()][..], &QUICK, &["hi"]].concat());
    assert!(!ok && err.contains("cannot write the trace") && err.contains("No such file"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `dllm inspect X | head -1` and `dllm run ... | true` used to panic with a backtrace (and
/// `run` could abandon the pack cache half written). The reader is gone before dllm writes
/// here: the command ends quietly and the pack cache file is complete.
#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    let cache = temp_dir("pipe");
    let model = data("models/llada-tiny-Q4_K_M.gguf");
    let commands: [Vec<&str>; 3] = [
        vec!["inspect", &model],
        vec!["tokenize", "-m", &model, "hello world, hello"],
        [&["run", "-m", &model][..], &QUICK, &["hi"]].concat(),
    ];
    for args in commands {
        let mut child = common::dllm_command()
            .env("XDG_CACHE_HOME", &cache)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("panicked"), "{args:?}: {:?} {err}", out.status);
    }
    let packed: Vec<String> = std::fs::read_dir(cache.join("dllm").join("packed"))
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if dllm::cpu::active_isa().is_x86_simd() {
        assert!(packed.len() == 1 && packed[0].ends_with(".dllmpack"), "the cache was finished: {packed:?}");
    }
    std::fs::remove_dir_all(&cache).ok();
}

/// A full disk behind standard output is an error message, not a panic.
#[test]
#[cfg(target_os = "linux")]
fn a_full_standard_output_is_an_error_message() {
    let model = data("models/llada-tiny-Q8_0.gguf");
    for args in [vec!["inspect", &model[..]], vec!["tokenize", "-m", &model, "hello"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = common::dllm_command().args(&args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("writing to standard output failed") && !err.contains("panicked"),
            "{err}"
        );
    }
}

/// Flags are checked before the weights load: a wrong one costs no load, and so leaves no pack
/// cache file; `--threads 10000` and `bench --runs 0` are refused at once; a missing file
/// says why.
#[test]
fn wrong_flags_are_refused_before_the_model_loads() {
    let cache = temp_dir("flags");
    let model = data("models/llada-tiny-Q4_K_M.gguf");
    let cases: [(Vec<&str>, &str); 6] = [
        (
            [&["run", "-m", &model, "--steps", "7", "--gen", "64", "--block", "32"][..], &["hi"]].concat(),
            "multiple of the number of blocks",
        ),
        (vec!["run", "-m", &model, "--threads", "10000", "hi"], "four per logical CPU"),
        (vec!["bench", "-m", &model, "--runs", "0"], "give 1 to 1000 runs"),
        (
            vec!["logits", "-m", &model, "--ids", "1,999999", "--out", "/tmp/never-written"],
            "is not a token of this model",
        ),
        (vec!["logits", "-m", &model, "--ids", "1,2", "--rows", "5", "--out", "/tmp/never-written"], "past the canvas"),
        (vec!["run", "-m", "/no/such/model.gguf", "hi"], "No such file or directory"),
    ];
    for (args, says) in cases {
        let (ok, _, err) = dllm_in(&cache, &args);
        assert!(!ok && err.contains(says) && !err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!cache.join("dllm").join("packed").exists(), "a refused command loaded the model");
    assert!(!Path::new("/tmp/never-written").exists());
    std::fs::remove_dir_all(&cache).ok();
}
