//! The pack cache (`cpu::pack_cache`): the first load packs in memory and writes the cache
//! file, the next maps it and computes bit-identical logits; a cache for another version of the
//! file, a damaged one or one that cannot be written is never used, and the model runs anyway.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::data;
use dllm::cpu::{CpuLoadOptions, active_isa, widens_weights};
use dllm::forward::CpuModel;
use dllm::forward::Forward;
use dllm::gguf::GgufFile;
use dllm::model::Preparation;
use dllm::quant::GgmlType;

/// A fresh folder in the temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dllm-pack-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn load(model: &Path, cache: Option<&Path>) -> CpuModel {
    let options = CpuLoadOptions { pack_cache: cache, wide_weights: false };
    CpuModel::load_with(Arc::new(GgufFile::open(model).unwrap()), options, &|_| {}).unwrap()
}

/// The faster-weights mode widens every packed Q4_K matrix (on the 256-bit paths) (plain LLaDA, Dream, and the MoE
/// experts, whose products run through `matmul_experts`) and changes no logit: the wide kernels
/// sum the same integers in the same order. From the pack cache too.
#[test]
fn wide_weights_widen_the_q4_k_matrices_and_give_the_same_logits() {
    if !packs_here() {
        return;
    }
    let cache = temp_dir("wide");
    for file in ["models/llada-tiny-Q4_K_M", "models/dream-tiny-Q4_K_M", "moe/models/llada-moe-tiny-Q4_K_M"] {
        let model = PathBuf::from(data(&format!("{file}.gguf")));
        let mut normal = load(&model, None);
        let want = logits(&mut normal);
        for cache in [None, Some(cache.as_path()), Some(cache.as_path())] {
            let options = CpuLoadOptions { pack_cache: cache, wide_weights: true };
            let mut wide = CpuModel::load_with(Arc::new(GgufFile::open(&model).unwrap()), options, &|_| {}).unwrap();
            if let Some(write) = wide.take_pack_cache_write() {
                write.join().unwrap().unwrap();
            }
            let widened = |m: &CpuModel| {
                let q4_k = m.weights().products().filter(|w| w.packed.as_ref().is_some_and(|p| p.ty == GgmlType::Q4_K));
                q4_k.map(|w| w.packed.as_ref().is_some_and(|p| p.wide)).collect::<Vec<bool>>()
            };
            let (before, after) = (widened(&normal), widened(&wide));
            assert!(!before.is_empty() && before.iter().all(|w| !w), "{file}: packed Q4_K matrices, none wide");
            // On AVX-512 VNNI the normal layout keeps its 512-bit kernels.
            let widens = widens_weights(active_isa());
            assert!(after.len() == before.len() && after.iter().all(|&w| w == widens), "{file}: Q4_K wide: {widens}");
            assert_eq!(logits(&mut wide), want, "{file}, cache {cache:?}");
        }
    }
}

fn logits(m: &mut CpuModel) -> Vec<f32> {
    let n_vocab = m.config().n_vocab as u32;
    let canvas: Vec<u32> = (0..48u32).map(|i| (i * 37 + 11) % n_vocab).collect();
    let rows: Vec<usize> = (0..48).collect();
    let mut out = Vec::new();
    m.forward(&canvas, &rows, &mut out).unwrap();
    out
}

/// Loads with the cache and waits for the cache file; returns the model and the file.
fn load_and_cache(model: &Path, cache: &Path) -> (CpuModel, PathBuf) {
    let mut m = load(model, Some(cache));
    let Preparation::PackedWritingCache(path) = m.prepared().clone() else {
        panic!("expected a fresh pack, got: {}", m.prepared())
    };
    let written = m.take_pack_cache_write().expect("a cache write").join().unwrap();
    assert_eq!(written, Ok(path.clone()));
    (m, path)
}

fn packs_here() -> bool {
    let packs = active_isa().is_x86_simd();
    if !packs {
        eprintln!("skipped: the {} path reads weights as mapped (nothing to pack)", active_isa().name());
    }
    packs
}

#[test]
fn a_second_load_maps_the_cache_and_computes_the_same_logits() {
    if !packs_here() {
        return;
    }
    let cache = temp_dir("reuse");
    // Q4_K with Q6_K, and Q8_0: every packed layout.
    for file in ["llada-tiny-Q4_K_M", "dream-tiny-Q8_0"] {
        let model = PathBuf::from(data(&format!("models/{file}.gguf")));
        let want = logits(&mut load(&model, None));
        let (mut first, path) = load_and_cache(&model, &cache);
        assert!(path.starts_with(&cache) && path.exists(), "{}", path.display());
        assert_eq!(logits(&mut first), want, "{file}: the load that wrote the cache");

        let mut second = load(&model, Some(&cache));
        assert_eq!(second.prepared(), &Preparation::FromPackCache(path.clone()), "{file}");
        assert!(second.take_pack_cache_write().is_none(), "{file}: nothing to write on a hit");
        assert_eq!(logits(&mut second), want, "{file}: the load from the cache");
    }
    // One file per model, no temporaries left.
    let names: Vec<String> =
        std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".dllmpack")), "{names:?}");
    std::fs::remove_dir_all(&cache).ok();
}

/// What is done to a cache file, and how.
type Spoil<'a> = (&'a str, &'a dyn Fn(&Path));

#[test]
fn a_damaged_cache_or_one_for_another_version_of_the_file_is_rebuilt() {
    if !packs_here() {
        return;
    }
    let dir = temp_dir("stale");
    let cache = dir.join("cache");
    // A copy of the model whose modification time the test can change.
    let model = dir.join("model.gguf");
    std::fs::copy(data("models/llada-tiny-Q4_K_M.gguf"), &model).unwrap();
    let want = logits(&mut load(&model, None));

    let damage: [Spoil; 3] = [
        ("one byte short", &|p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(f.metadata().unwrap().len() - 1).unwrap();
        }),
        ("a changed header", &|p| {
            let mut bytes = std::fs::read(p).unwrap();
            bytes[60] ^= 1;
            std::fs::write(p, bytes).unwrap();
        }),
        ("the model file modified since", &|_| {
            let f = std::fs::OpenOptions::new().write(true).open(&model).unwrap();
            f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60)).unwrap();
        }),
    ];
    for (what, spoil) in damage {
        let _ = std::fs::remove_dir_all(&cache);
        let (_, path) = load_and_cache(&model, &cache);
        spoil(&path);
        // Rebuilt, not used: the load packs again and rewrites the file, which then serves.
        let (mut rebuilt, again) = load_and_cache(&model, &cache);
        assert_eq!(again, path, "{what}");
        assert_eq!(logits(&mut rebuilt), want, "{what}");
        let mut hit = load(&model, Some(&cache));
        assert_eq!(hit.prepared(), &Preparation::FromPackCache(path), "{what}");
        assert_eq!(logits(&mut hit), want, "{what}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unwritable_cache_directory_leaves_the_model_running_and_says_where() {
    if !packs_here() {
        return;
    }
    let dir = temp_dir("unwritable");
    // A regular file where the cache directory should be: nothing can be created under it.
    let blocker = dir.join("not-a-directory");
    std::fs::write(&blocker, b"").unwrap();
    let model = PathBuf::from(data("models/dream-tiny-Q8_0.gguf"));
    let want = logits(&mut load(&model, None));
    let mut m = load(&model, Some(&blocker.join("packed")));
    assert!(matches!(m.prepared(), Preparation::PackedWritingCache(_)), "{}", m.prepared());
    let err = m.take_pack_cache_write().unwrap().join().unwrap().unwrap_err();
    assert!(err.contains("not-a-directory"), "{err}");
    assert_eq!(logits(&mut m), want);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn temporaries_of_ended_processes_are_removed_and_live_ones_kept() {
    if !packs_here() {
        return;
    }
    let cache = temp_dir("abandoned");
    let model = PathBuf::from(data("models/dream-tiny-Q8_0.gguf"));
    let (_, path) = load_and_cache(&model, &cache);
    let temporary = |pid: u32| PathBuf::from(format!("{}.tmp-{pid}-0", path.display()));
    // Above the kernel's largest process id (2^22), so no process has it.
    let (ended, live) = (temporary(4_194_304 + 7), temporary(std::process::id()));
    std::fs::write(&ended, b"partial").unwrap();
    std::fs::write(&live, b"being written").unwrap();
    std::fs::remove_file(&path).unwrap();
    load_and_cache(&model, &cache);
    if cfg!(target_os = "linux") {
        assert!(!ended.exists(), "the ended process's temporary is removed");
    }
    assert!(live.exists(), "a running process's temporary is kept");
    std::fs::remove_dir_all(&cache).ok();
}

/// The command line keeps the cache in the cache directory's `packed` folder, and
/// `--no-pack-cache` writes nothing.
#[test]
fn dllm_run_writes_the_cache_unless_told_not_to() {
    if !packs_here() {
        return;
    }
    let home = temp_dir("cli");
    let run = |extra: &[&str]| {
        let out = common::dllm_command()
            .env("XDG_CACHE_HOME", &home)
            .args([
                "run",
                "-m",
                &data("models/llada-tiny-Q4_K_M.gguf"),
                "--gen",
                "8",
                "--steps",
                "4",
                "--block",
                "8",
                "--raw",
            ])
            .args(extra)
            .arg("Hello")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let packed = home.join("dllm").join("packed");
    run(&["--no-pack-cache"]);
    assert!(!packed.exists(), "--no-pack-cache wrote {}", packed.display());
    run(&[]);
    let files: Vec<_> = std::fs::read_dir(&packed).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(files.len() == 1 && files[0].extension().is_some_and(|e| e == "dllmpack"), "{files:?}");
    std::fs::remove_dir_all(&home).ok();
}

/// Writing a cache removes the caches of model files that no longer exist, and keeps the
/// others.
#[test]
fn the_cache_of_a_deleted_model_is_removed_when_another_is_written() {
    if !packs_here() {
        return;
    }
    let dir = temp_dir("gone");
    let cache = dir.join("cache");
    let (kept, gone) = (dir.join("kept.gguf"), dir.join("gone.gguf"));
    std::fs::copy(data("models/dream-tiny-Q8_0.gguf"), &kept).unwrap();
    std::fs::copy(data("models/dream-tiny-Q8_0.gguf"), &gone).unwrap();
    let (_, kept_cache) = load_and_cache(&kept, &cache);
    let (_, gone_cache) = load_and_cache(&gone, &cache);
    std::fs::remove_file(&gone).unwrap();
    // A third model's first load writes its cache and tidies the folder.
    let third = PathBuf::from(data("models/llada-tiny-Q4_K_M.gguf"));
    let (_, third_cache) = load_and_cache(&third, &cache);
    assert!(!gone_cache.exists(), "the deleted model's cache is removed");
    assert!(kept_cache.exists() && third_cache.exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// #23.3: 64 flipped bytes inside a packed region (the header intact) used to change every
/// later answer silently. Now the load finds the region by its checksum, packs again, says so,
/// computes the right logits and rewrites the file, which the next load uses.
#[test]
fn flipped_bytes_in_the_packed_weights_are_found_and_repacked() {
    if !packs_here() {
        return;
    }
    let dir = temp_dir("flipped");
    let cache = dir.join("cache");
    let model = PathBuf::from(data("models/llada-tiny-Q4_K_M.gguf"));
    let want = logits(&mut load(&model, None));
    let (_, path) = load_and_cache(&model, &cache);
    let mut bytes = std::fs::read(&path).unwrap();
    for b in &mut bytes[8192..8192 + 64] {
        *b ^= 0xa5;
    }
    std::fs::write(&path, &bytes).unwrap();

    let mut repacked = load(&model, Some(&cache));
    match repacked.prepared().clone() {
        Preparation::RepackedDamagedCache { path: p, why } => {
            assert_eq!(p, path);
            assert!(why.contains("fails its checksum"), "{why}");
        }
        other => panic!("the damage went unnoticed: {other}"),
    }
    assert_eq!(logits(&mut repacked), want);
    assert_eq!(repacked.take_pack_cache_write().expect("a rewrite").join().unwrap(), Ok(path.clone()));
    let mut hit = load(&model, Some(&cache));
    assert_eq!(hit.prepared(), &Preparation::FromPackCache(path), "the rewritten file serves");
    assert_eq!(logits(&mut hit), want);
    std::fs::remove_dir_all(&dir).ok();
}

/// #23.3: `dllm cache list|verify|clear` over a folder with one good and one damaged file.
#[test]
fn dllm_cache_lists_verifies_and_clears() {
    if !packs_here() {
        return;
    }
    let dir = temp_dir("command");
    let cache = dir.join("cache");
    let (good_model, bad_model) = (dir.join("good.gguf"), dir.join("bad.gguf"));
    std::fs::copy(data("models/dream-tiny-Q8_0.gguf"), &good_model).unwrap();
    std::fs::copy(data("models/dream-tiny-Q8_0.gguf"), &bad_model).unwrap();
    let (_, good) = load_and_cache(&good_model, &cache);
    let (_, bad) = load_and_cache(&bad_model, &cache);
    let mut bytes = std::fs::read(&bad).unwrap();
    let last = bytes.len() - 200;
    bytes[last] ^= 1;
    std::fs::write(&bad, &bytes).unwrap();
    let cache_arg = cache.to_string_lossy().into_owned();
    let dllm = |action: &str| {
        let out = common::dllm_command().args(["cache", action, "--dir", &cache_arg]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, list, _) = dllm("list");
    assert!(
        ok && list.contains(&*good_model.to_string_lossy()) && list.contains(&*bad_model.to_string_lossy()),
        "{list}"
    );
    let (ok, verified, err) = dllm("verify");
    assert!(!ok, "a damaged file fails the command: {verified}");
    assert!(verified.contains(&format!("ok\t{}", good.display())), "{verified}");
    assert!(verified.contains(&format!("DAMAGED\t{}", bad.display())) && err.contains("1 of 2"), "{verified}{err}");
    let (ok, _, err) = dllm("clear");
    assert!(ok && err.contains("removed 2 cache files"), "{err}");
    assert!(pack_cache_files(&cache).is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

fn pack_cache_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).collect()
}
