//! The desktop app driven headless through egui_kittest: load a fixture model, type a prompt,
//! generate, and check that the grid shows the engine's answer and the chart one point per
//! step; stop mid-run; survive a corrupt file.

use crate::common;

use common::data;
use common::harness::wait_for;
use dllm::app::{Action, DllmApp};
use dllm::cuda::DeviceRequest;
use dllm::decoding::{GenerateParams, PARAMS, Param, Value};
use dllm::engine::{LoadOptions, Prompt, Session};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

fn harness() -> Harness<'static, DllmApp> {
    // Random-weight fixtures produce tokens like emoji that the bundled fonts lack; the app
    // draws a box for them (its own policy), which the harness would otherwise override.
    let mut h =
        Harness::builder().with_size([1200.0, 900.0]).allow_missing_glyphs().build_eframe(|cc| DllmApp::new(cc, None));
    // Nothing written to the user's cache directory (the pack cache has its own tests).
    h.state_mut().settings.pack_cache = false;
    h
}

/// Types `text` into the field labelled `field` and presses `button`.
fn type_and_press(h: &mut Harness<'static, DllmApp>, role: Role, field: &str, text: &str, button: &str) {
    h.get_by_role_and_label(role, field).click();
    h.run_steps(3);
    h.get_by_role_and_label(role, field).type_text(text);
    h.run_steps(3);
    h.get_by_label(button).click();
    h.run_steps(3);
}

fn load(h: &mut Harness<'static, DllmApp>, path: &str) {
    type_and_press(h, Role::TextInput, "Model file", path, "Load");
    wait_for(h, "the model to load", |a| !a.is_loading());
}

#[test]
fn generate_shows_the_engines_answer_on_the_grid() {
    let model = data("models/llada-tiny-Q8_0.gguf");
    let mut h = harness();
    {
        let s = &mut h.state_mut().settings;
        s.prompt.clear();
        s.llada.gen_length = 32;
        s.llada.steps = 16;
        s.llada.block_length = 16;
        s.llada.early_stop = false;
    }
    load(&mut h, &model);
    assert!(h.state().session.is_some(), "{:?}", h.state().error);
    h.get_by_role_and_label(Role::MultilineTextInput, "Prompt").click();
    h.run_steps(3);
    h.get_by_role_and_label(Role::MultilineTextInput, "Prompt").type_text("Tell me about the sea");
    h.run_steps(3);
    assert_eq!(h.state().settings.prompt, "Tell me about the sea");
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "the run to finish", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));

    // The same request straight through the engine API.
    let session = Session::load(&model, LoadOptions::default()).unwrap();
    let ids = session.prompt_ids(&Prompt::Chat("Tell me about the sea".into())).unwrap();
    let expected = session.generate(ids, h.state().settings.llada.clone()).unwrap().wait(|_| {}).unwrap();
    let app = h.state();
    let run = app.run.as_ref().unwrap();
    assert_eq!(run.finished.as_ref().unwrap().generated.canvas, expected.generated.canvas);
    let cells = app.canvas_cells();
    assert_eq!(cells.len(), expected.generated.canvas.len());
    for (cell, &id) in cells.iter().zip(&expected.generated.canvas) {
        let piece = session.tokenizer().piece(id);
        assert!(cell.contains(piece.trim()) || piece.trim().is_empty(), "cell {cell:?} for token {id} {piece:?}");
    }
    assert!(cells.iter().all(|c| c != "\u{2591}\u{2591}"), "no masked cell left");
    assert_eq!(run.steps.len(), 16, "one chart point per step");
    assert!(h.query_by_label_contains("16 steps").is_some(), "summary line");
    assert!(h.query_by_label(&expected.text).is_some() || expected.text.trim().is_empty(), "answer shown");

    // The run saved as an HTML replay page (tests/suite/export.rs checks its content).
    let exports = std::env::temp_dir().join(format!("dllm-app-export-{}", std::process::id()));
    h.state_mut().settings.export_dir = Some(exports.clone());
    h.get_by_label("Save as HTML").click();
    h.run_steps(2);
    let saved: Vec<std::path::PathBuf> = std::fs::read_dir(&exports).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(saved.len(), 1);
    assert!(std::fs::read_to_string(&saved[0]).unwrap().contains("<title>Tell me about the sea</title>"));
    assert!(h.query_by_label_contains(&saved[0].display().to_string()).is_some(), "the window says where");
    std::fs::remove_dir_all(&exports).ok();
}

#[test]
fn stop_ends_a_run_early_and_the_app_keeps_working() {
    let mut h = harness();
    {
        let s = &mut h.state_mut().settings;
        s.dream.gen_length = 512;
        s.dream.steps = 512;
        s.dream.temperature = 0.0;
    }
    load(&mut h, &data("models/dream-tiny-Q4_K_M.gguf"));
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "a few steps", |a| a.run.as_ref().is_some_and(|r| r.steps.len() >= 3));
    h.get_by_label("Stop").click();
    h.run_steps(3);
    wait_for(&mut h, "the stop", |a| a.run.as_ref().is_some_and(|r| !r.is_running()));
    let run = h.state().run.as_ref().unwrap();
    let finished = run.finished.as_ref().unwrap();
    assert!(finished.generated.cancelled);
    assert!(finished.generated.steps < 512);
    // Generate again: the session still works.
    h.state_mut().settings.dream.steps = 8;
    h.state_mut().settings.dream.gen_length = 8;
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "the second run", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
    assert_eq!(h.state().run.as_ref().unwrap().steps.len(), 8);
}

/// Loading another model while a run goes cancels the run and does not wait for it: the
/// window keeps drawing (the engine's own test shows the dropped session's run stopping).
#[test]
fn loading_during_a_run_cancels_it_without_freezing() {
    let mut h = harness();
    {
        let s = &mut h.state_mut().settings;
        (s.dream.gen_length, s.dream.steps, s.dream.temperature) = (512, 512, 0.0);
    }
    load(&mut h, &data("models/dream-tiny-Q4_K_M.gguf"));
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "a few steps", |a| a.run.as_ref().is_some_and(|r| r.steps.len() >= 3));
    let ctx = h.ctx.clone();
    let start = std::time::Instant::now();
    h.state_mut().apply(Action::Load(data("models/llada-tiny-Q8_0.gguf").into()), &ctx);
    h.run_steps(1);
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_millis(500), "the window waited {took:?}");
    assert!(h.state().run.is_none() && h.state().is_loading(), "the run is gone, the new model loading");
    wait_for(&mut h, "the new model", |a| !a.is_loading());
    let info = h.state().session.as_ref().expect("the new model loaded").info().clone();
    assert_eq!(info.config.family, dllm::model::Family::Llada);
    {
        let p = h.state_mut().settings.params_mut(&info);
        (p.gen_length, p.steps, p.block_length) = (8, 8, 8);
    }
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "a run on the new model", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
}

#[test]
fn a_corrupt_file_shows_an_error_and_the_app_still_works() {
    let bad = std::env::temp_dir().join(format!("dllm-app-corrupt-{}.gguf", std::process::id()));
    let bytes = std::fs::read(data("models/llada-tiny-Q4_K_M.gguf")).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let mut h = harness();
    load(&mut h, bad.to_str().unwrap());
    std::fs::remove_file(&bad).ok();
    let error = h.state().error.clone().expect("an error is shown");
    assert!(error.contains("truncated"), "{error}");
    assert!(h.query_by_label_contains("Error:").is_some());
    assert!(h.state().session.is_none());
    // Invalid settings are explained before running.
    h.state_mut().model_path.clear();
    load(&mut h, &data("models/llada-tiny-Q4_K_M.gguf"));
    assert!(h.state().session.is_some());
    h.state_mut().settings.llada.block_length = 48;
    h.run_steps(3);
    assert!(h.query_by_label_contains("must divide").is_some(), "the problem is shown before running");
}

#[test]
fn every_setting_reaches_the_engine() {
    let model = data("models/llada-tiny-Q4_K_M.gguf");
    let mut h = harness();
    load(&mut h, &model);
    {
        let s = &mut h.state_mut().settings;
        s.prompt = "settings".into();
        s.raw_prompt = true;
        let p = &mut s.llada;
        p.gen_length = 24;
        p.steps = 12;
        p.block_length = 8;
        p.temperature = 0.7;
        p.seed = 11;
        p.remasking = dllm::decoding::Remasking::Random;
        p.early_stop = false;
    }
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "the run", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
    let session = Session::load(&model, LoadOptions::default()).unwrap();
    let ids = session.prompt_ids(&Prompt::Raw("settings".into())).unwrap();
    let expected = session.generate(ids.clone(), h.state().settings.llada.clone()).unwrap().wait(|_| {}).unwrap();
    let run = h.state().run.as_ref().unwrap();
    assert_eq!(run.steps.len(), 12, "steps");
    assert_eq!(run.prompt_len, ids.len(), "raw prompt, no template");
    assert_eq!(run.steps.last().unwrap().canvas.len(), ids.len() + 24, "generated length");
    assert!(run.steps.iter().all(|s| s.committed.len() == 2), "block 8 over 3 blocks of 4 steps: 2 per step");
    assert_eq!(
        run.finished.as_ref().unwrap().generated.canvas,
        expected.generated.canvas,
        "seed, temperature, remasking"
    );
}

#[test]
fn device_and_threads_settings_apply_when_the_model_reloads() {
    let mut h = harness();
    load(&mut h, &data("models/llada-tiny-Q8_0.gguf"));
    assert_eq!(h.state().session.as_ref().unwrap().info().options, LoadOptions::default());
    {
        let s = &mut h.state_mut().settings;
        s.device = DeviceRequest::Cpu;
        s.threads = Some(1);
    }
    h.run_steps(3);
    h.get_by_label("Reload the model with these settings").click();
    h.run_steps(3);
    wait_for(&mut h, "the reload", |a| !a.is_loading());
    let info = h.state().session.as_ref().unwrap().info();
    assert_eq!(
        info.options,
        LoadOptions { threads: Some(1), device: DeviceRequest::Cpu, pack_cache: false, wide_weights: false }
    );
    assert_eq!(info.threads, 1);
    assert_eq!(info.device, "CPU, as requested");
    assert!(h.query_by_label("Reload the model with these settings").is_none(), "nothing left to apply");
}

#[test]
fn download_from_a_mock_hub_then_load() {
    use std::collections::HashMap;
    let bytes = std::fs::read(data("models/llada-tiny-Q8_0.gguf")).unwrap();
    let mock = common::mock_hub::start_mock(HashMap::from([("tiny-Q8_0.gguf".to_string(), bytes.clone())]));
    let cache = std::env::temp_dir().join(format!("dllm-app-hub-{}", std::process::id()));
    let mut h = harness();
    h.state_mut().settings.hf_endpoint = Some(mock.endpoint.clone());
    h.state_mut().settings.hf_cache = Some(cache.clone());
    h.get_by_label("Download from Hugging Face").click();
    h.run_steps(3);
    // A missing repository: a clear message, nothing loaded.
    h.get_by_role_and_label(Role::TextInput, "Repository").click();
    h.run_steps(2);
    h.get_by_role_and_label(Role::TextInput, "Repository").type_text("nobody/nothing");
    h.run_steps(2);
    h.get_by_label("List files").click();
    h.run_steps(2);
    wait_for(&mut h, "the listing", |a| !a.download.is_busy());
    assert!(h.query_by_label_contains("was not found").is_some(), "{:?}", h.state().download.message);
    // A preset fills the field with its repository and lists it (the mock knows none of them).
    let preset = dllm::hub::PRESETS[0];
    h.get_by_label(preset.model).click();
    h.run_steps(2);
    wait_for(&mut h, "the preset's listing", |a| !a.download.is_busy());
    assert_eq!(h.state().download.repo_spec, preset.spec);
    let repo = preset.spec.split(':').next().unwrap();
    let message = h.state().download.message.clone().unwrap_or_default();
    assert!(message.contains(repo) && message.contains("was not found"), "{message}");
    // The fixture repository: list, pick Q8_0, download, verify, load.
    h.state_mut().download.repo_spec = format!("{}:Q8_0", common::mock_hub::REPO);
    h.get_by_label("List files").click();
    h.run_steps(2);
    wait_for(&mut h, "the listing", |a| !a.download.is_busy());
    assert_eq!(h.state().download.files.len(), 1);
    assert!(h.query_by_label_contains("tiny-Q8_0.gguf").is_some(), "files are listed with sizes");
    h.get_by_label("Download").click();
    h.run_steps(2);
    wait_for(&mut h, "the download and load", |a| a.session.is_some() || a.error.is_some());
    let path = h.state().session.as_ref().expect("the downloaded model loads").info().path.clone();
    assert!(path.starts_with(&cache), "{}", path.display());
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(h.state().download.message.as_deref().is_some_and(|m| m.contains("verified")));
    std::fs::remove_dir_all(&cache).ok();
}

/// The demo model on the grid: mid-run the canvas shows masks and words side by side, and at
/// the end an answer of readable words.
#[test]
fn the_demo_model_fills_the_canvas_with_readable_words() {
    let mut h = harness();
    h.state_mut().settings.prompt = "Tell me a story about a cat.".into();
    load(&mut h, &format!("{}/assets/demo-model-Q8_0.gguf", env!("CARGO_MANIFEST_DIR")));
    assert!(h.query_by_label_contains("demo model trained on generated children's stories").is_some());
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "a quarter of the steps", |a| a.run.as_ref().is_some_and(|r| r.steps.len() >= 48));
    let cells = h.state().canvas_cells();
    let masked = cells.iter().filter(|c| *c == "\u{2591}\u{2591}").count();
    assert!(masked > 0 && masked < cells.len(), "a canvas part filled, part masked");
    wait_for(&mut h, "the run to finish", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
    let text = h.state().run.as_ref().unwrap().finished.as_ref().unwrap().text.clone();
    let words: Vec<&str> = text.split_whitespace().collect();
    let plain = words.iter().filter(|w| w.chars().all(|c| c.is_ascii_alphabetic() || ".,!?'\"".contains(c))).count();
    assert!(words.len() >= 20 && plain * 10 >= words.len() * 9, "words, not token debris: {text:?}");
    // Sentences, not stutter: of the sentences of four or more words, at least two thirds (and
    // five) repeat no word right after itself, and such repeats are under one word in twenty.
    // (The official sampler's own answer to this prompt has 14 such sentences of 15 and 1
    // repeat in 134 words.)
    let bare = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.chars().filter(char::is_ascii_alphabetic).collect::<String>().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let all = bare(&text);
    let repeats = all.windows(2).filter(|p| p[0] == p[1]).count();
    assert!(repeats * 20 <= all.len(), "{repeats} repeated words in {}: {text:?}", all.len());
    let sentences: Vec<Vec<String>> =
        text.split_inclusive(['.', '!', '?']).map(bare).filter(|w| w.len() >= 4).collect();
    let clean = sentences.iter().filter(|w| w.windows(2).all(|p| p[0] != p[1])).count();
    assert!(clean >= 5 && clean * 3 >= sentences.len() * 2, "{clean} clean sentences of {}: {text:?}", sentences.len());
    assert!(h.query_by_label(&text).is_some(), "the answer is shown");
}

/// The decoding menu: "Faster" sets threshold decoding with the dual cache, says it is an
/// approximation, and the run's steps are cached passes after each block's full one.
#[test]
fn the_faster_decoding_mode_runs_cached_passes() {
    let mut h = harness();
    {
        let s = &mut h.state_mut().settings;
        s.llada.gen_length = 32;
        s.llada.steps = 32;
        s.llada.block_length = 16;
        s.llada.early_stop = false;
    }
    load(&mut h, &data("models/llada-tiny-F32.gguf"));
    h.get_by_role_and_label(Role::ComboBox, "decoding").click();
    h.run_steps(3);
    h.get_by_label("Faster: threshold + cache (approximate)").click();
    h.run_steps(3);
    let p = h.state().settings.llada.clone();
    assert_eq!((p.threshold, p.cache), (Some(0.9), dllm::decoding::KvCacheMode::Dual));
    assert!(h.query_by_label_contains("approximate: cached keys/values").is_some());
    h.get_by_label("Generate").click();
    h.run_steps(3);
    wait_for(&mut h, "the run to finish", |a| a.run.as_ref().is_some_and(|r| r.finished.is_some()));
    let run = h.state().run.as_ref().unwrap();
    let full: Vec<usize> = run.steps.iter().filter(|s| !s.cached).map(|s| s.index).collect();
    assert_eq!(full.len(), 2, "one full pass per block: {full:?}");
    assert!(run.steps.iter().filter(|s| s.cached).all(|s| s.window.len() == 16), "dual cache: block-sized windows");
    assert!(h.query_by_label_contains("forward passes (").is_some(), "the chart counts the passes");
}

/// The settings `flags` stand for, as the values the app's controls send.
fn values_of(flags: &[&str], family: dllm::model::Family) -> Vec<(Param, Value)> {
    let mut out = Vec::new();
    let mut rest = flags.iter();
    while let Some(flag) = rest.next() {
        let spec = PARAMS.iter().find(|s| format!("--{}", s.flag) == *flag).unwrap();
        let text = match spec.kind {
            dllm::decoding::Kind::Switch { .. } => "",
            _ => rest.next().unwrap(),
        };
        let mut p = GenerateParams::interactive_for(family);
        p.set_text(spec.param, text).unwrap();
        out.push((spec.param, p.get(spec.param)));
    }
    out
}

/// Every setting of the engine's table has a control in the window, and what the control sends
/// reaches the engine's plan: a control that is drawn but never used fails here.
#[test]
fn every_setting_has_a_control_that_reaches_the_plan() {
    use dllm::model::Family;
    for (model, family) in [
        ("models/llada-tiny-Q8_0.gguf", Family::Llada),
        ("models/dream-tiny-Q8_0.gguf", Family::Dream),
        ("moe/models/rnd1-tiny-Q8_0.gguf", Family::Rnd1),
    ] {
        let mut h = harness();
        h.state_mut().settings.prompt = "Hello".into();
        load(&mut h, &data(model));
        h.get_by_label("Advanced settings").click();
        h.run_steps(3);
        let ctx = h.ctx.clone();
        for spec in PARAMS.iter().filter(|s| s.param.applies_to(family)) {
            let block_length = if family == Family::Llada { 16 } else { 32 };
            let fresh =
                GenerateParams { gen_length: 32, steps: 32, block_length, ..GenerateParams::interactive_for(family) };
            let info = h.state().session.as_ref().unwrap().info().clone();
            *h.state_mut().settings.params_mut(&info) = fresh;
            let (needs, flags) = crate::cli::changing_flags(spec.param, family);
            for (param, value) in values_of(&needs, family) {
                h.state_mut().apply(Action::SetParam(param, value), &ctx);
            }
            h.run_steps(3);
            assert!(h.query_all_by_label(spec.label).next().is_some(), "no control labelled '{}'", spec.label);
            let before = h.state_mut().plan().unwrap().unwrap();
            for (param, value) in values_of(&flags, family) {
                h.state_mut().apply(Action::SetParam(param, value), &ctx);
            }
            let after = h.state_mut().plan().unwrap().unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            assert_ne!(before, after, "the '{}' control does not reach the {} plan", spec.label, family.name());
        }
    }
}

/// #22: the chat view answers through the model's template (the engine's answer for the same
/// conversation), keeps the turns, saves the conversation, and a restarted app lists it and
/// opens it again; regenerate, edit last, rename, export and delete work on it.
#[test]
fn a_chat_is_answered_saved_and_back_after_a_restart() {
    let model = data("models/llada-tiny-Q8_0.gguf");
    let dir = std::env::temp_dir().join(format!("dllm-app-chats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fresh = |dir: &std::path::Path| {
        let mut h = harness();
        let s = &mut h.state_mut().settings;
        s.conversations_dir = Some(dir.to_path_buf());
        s.export_dir = Some(dir.join("exports"));
        s.llada.gen_length = 16;
        s.llada.steps = 16;
        s.llada.block_length = 16;
        s.llada.early_stop = false;
        h
    };
    let mut h = fresh(&dir);
    load(&mut h, &model);
    h.get_by_label("Chat").click();
    h.run_steps(3);
    let say = |h: &mut Harness<'static, DllmApp>, text: &str| {
        type_and_press(h, Role::MultilineTextInput, "Message", text, "Send");
        wait_for(h, "the reply", |a| !a.chat.replying && a.run.as_ref().is_some_and(|r| !r.is_running()));
    };
    say(&mut h, "Hello there");
    let turns = h.state().chat.conversation.turns.clone();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!((turns[0].role.as_str(), turns[0].content.as_str()), ("user", "Hello there"));

    // The same conversation through the engine API gives the same reply.
    let session = Session::load(&model, LoadOptions::default()).unwrap();
    let asked = vec![dllm::chat::Message::user("Hello there")];
    let ids = session.prompt_ids(&Prompt::Messages(asked)).unwrap();
    let expected = session.generate(ids, h.state().settings.llada.clone()).unwrap().wait(|_| {}).unwrap();
    assert_eq!(turns[1].content, expected.text.trim());
    assert!(h.query_by_label("Hello there").is_some(), "the turn is shown");

    say(&mut h, "And then?");
    assert_eq!(h.state().chat.conversation.turns.len(), 4);
    // Regenerate replaces the last reply; Edit last takes the message back.
    h.get_by_label("Regenerate").click();
    h.run_steps(3);
    wait_for(&mut h, "the new reply", |a| !a.chat.replying && a.run.as_ref().is_some_and(|r| !r.is_running()));
    assert_eq!(h.state().chat.conversation.turns.len(), 4);
    h.get_by_label("Edit last").click();
    h.run_steps(3);
    assert_eq!((h.state().chat.conversation.turns.len(), h.state().chat.input.as_str()), (2, "And then?"));
    let saved = h.state().settings.conversations().list();
    assert_eq!(saved.len(), 1, "one conversation saved");
    assert_eq!(saved[0].1.turns.len(), 2);
    let id = saved[0].0.clone();
    drop(h);

    // A new app (a restart) lists it and opens it.
    let mut h = fresh(&dir);
    h.get_by_label("Chat").click();
    h.run_steps(3);
    assert_eq!(h.state().chat.saved.len(), 1);
    let ctx = h.ctx.clone();
    h.state_mut().apply(Action::ChatOpen(id.clone()), &ctx);
    h.run_steps(3);
    assert_eq!(h.state().chat.conversation.turns.len(), 2);
    assert!(h.query_by_label("Hello there").is_some(), "the reopened turn is shown");
    h.state_mut().apply(Action::ChatRename("Greetings".into()), &ctx);
    assert_eq!(h.state().settings.conversations().list()[0].1.title, "Greetings");
    h.state_mut().apply(Action::ChatExport("md"), &ctx);
    let md = std::fs::read_to_string(dir.join("exports").join(format!("dllm-chat-{id}.md"))).unwrap();
    assert!(md.starts_with("# Greetings") && md.contains("**You:** Hello there"), "{md}");
    h.state_mut().apply(Action::ChatDelete(id), &ctx);
    assert!(h.state().settings.conversations().list().is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// #22: the app serves the model it has loaded (the Serve toggle), and shows each served
/// request's canvas as it denoises; turning it off stops the server.
#[test]
fn the_app_serves_its_model_and_shows_each_requests_canvas() {
    let mut h = harness();
    h.state_mut().settings.serve_port = 0;
    load(&mut h, &data("models/llada-tiny-Q8_0.gguf"));
    h.get_by_label("Serve to other tools").click();
    h.run_steps(3);
    h.get_by_label("Serve this model").click();
    h.run_steps(3);
    let addr = h.state().serving.as_ref().expect("serving").addr;
    let request = std::thread::spawn(move || {
        let body =
            serde_json::json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "temperature": 0});
        let mut response = ureq::post(format!("http://{addr}/v1/chat/completions")).send_json(body).unwrap();
        response.body_mut().read_json::<serde_json::Value>().unwrap()
    });
    wait_for(&mut h, "the served request's last step", |a| {
        a.served.lock().unwrap().as_ref().is_some_and(|s| s.step == s.steps)
    });
    let answer = request.join().unwrap();
    assert!(answer["choices"][0]["message"]["content"].is_string(), "{answer}");
    assert!(h.query_by_label_contains("step 16 of 16").is_some(), "the request's canvas is shown");
    assert!(h.query_by_label_contains(&format!("http://{addr}/v1")).is_some());
    h.get_by_label("Serve this model").click();
    h.run_steps(3);
    assert!(h.state().serving.is_none());
    // The socket closes as the server's threads let go (moments); a bounded wait says so.
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(std::time::Duration::from_secs(1))).build().into();
    let start = std::time::Instant::now();
    while agent.get(format!("http://{addr}/health")).call().is_ok() {
        assert!(start.elapsed().as_secs() < 10, "still serving after the toggle was turned off");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
