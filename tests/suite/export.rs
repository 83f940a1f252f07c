//! The HTML replay page of a run: its data replays to exactly the canvas the engine produced
//! at every step, its own script (run under Node.js with a minimal DOM) shows that canvas at
//! every slider position, it loads nothing from outside, and `dllm run --html` writes it.

use crate::common;

use std::process::Command;

use common::data;
use dllm::decoding::GenerateParams;
use dllm::engine::{LoadOptions, Prompt, Session, StepEvent};
use dllm::export::{RunRecord, html_page};

/// The JSON the page's script reads.
fn page_data(page: &str) -> serde_json::Value {
    const OPEN: &str = r#"<script id="run" type="application/json">"#;
    let start = page.find(OPEN).expect("a data block") + OPEN.len();
    let len = page[start..].find("</script>").expect("the data block ends");
    serde_json::from_str(&page[start..start + len]).expect("the data block is JSON")
}

/// The cell texts after each step, as the page's script builds them from its data.
fn replay(data: &serde_json::Value) -> Vec<Vec<String>> {
    let mut cells: Vec<String> =
        data["initial"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    let mut after = Vec::new();
    for step in data["steps"].as_array().unwrap() {
        for change in step["changes"].as_array().unwrap() {
            cells[change[0].as_u64().unwrap() as usize] = change[1].as_str().unwrap().to_string();
        }
        after.push(cells.clone());
    }
    after
}

#[test]
fn the_page_replays_every_step_of_the_run() {
    let session = Session::load(data("models/llada-tiny-Q8_0.gguf"), LoadOptions::default()).unwrap();
    let prompt = session.prompt_ids(&Prompt::Chat("Tell me about the sea".into())).unwrap();
    let params =
        GenerateParams { gen_length: 32, steps: 16, block_length: 16, early_stop: false, ..Default::default() };
    let mask = session.info().special.mask;
    let initial: Vec<u32> = prompt.iter().copied().chain(std::iter::repeat_n(mask, 32)).collect();
    let mut steps: Vec<StepEvent> = Vec::new();
    session.generate(prompt.clone(), params).unwrap().wait(|s| steps.push(s.clone())).unwrap();
    let title = "the sea </script> & <b>";
    let record = RunRecord { title, prompt_len: prompt.len(), mask, initial: &initial, steps: &steps };
    let page = html_page(session.tokenizer(), &record);

    let data = page_data(&page);
    let tk = session.tokenizer();
    let texts = |canvas: &[u32]| canvas.iter().map(|&id| tk.cell_text(id, mask)).collect::<Vec<_>>();
    assert_eq!(data["prompt_len"], prompt.len());
    assert_eq!(replay(&data).len(), 16);
    for (i, (got, step)) in replay(&data).iter().zip(&steps).enumerate() {
        assert_eq!(got, &texts(&step.canvas), "step {i}");
    }
    // Every change of a step is one of its commits, with the commit's confidence.
    for (step, page_step) in steps.iter().zip(data["steps"].as_array().unwrap()) {
        let changes = page_step["changes"].as_array().unwrap();
        assert_eq!(changes.len(), step.committed.len());
        for change in changes {
            let pos = change[0].as_u64().unwrap() as usize;
            let conf = step.committed.iter().find(|c| c.0 == pos).expect("a committed position").1;
            assert!((change[2].as_f64().unwrap() - conf as f64).abs() < 1e-6);
        }
    }
    // Self-contained, and the title cannot break out of its element.
    for outside in ["http:", "https:", "src=", "href=", "url(", "@import"] {
        assert!(!page.contains(outside), "the page refers to {outside}");
    }
    assert!(page.contains("<title>the sea &lt;/script&gt; &amp; &lt;b&gt;</title>"));
    assert_eq!(page.matches("</script>").count(), 2, "only the page's own two script elements end");

    // The page's script, driven like a user would: every slider position shows that step's
    // canvas with the step's commits outlined, and Play runs to the end.
    let Some(shown) = run_page_script(&page) else { return };
    let views = shown["views"].as_array().unwrap();
    assert_eq!(views.len(), steps.len() + 1);
    for (k, view) in views.iter().enumerate() {
        let (canvas, outlined) =
            if k == 0 { (&initial, 0) } else { (&steps[k - 1].canvas, steps[k - 1].committed.len()) };
        let cells: Vec<String> = view["cells"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().into()).collect();
        assert_eq!(cells, texts(canvas), "slider at {k}");
        assert_eq!(view["outlined"], outlined, "slider at {k}");
        assert!(view["label"].as_str().unwrap().starts_with(&format!("step {k} of 16")), "{}", view["label"]);
    }
    assert!(shown["after_play"]["label"].as_str().unwrap().starts_with("step 16 of 16"));
    assert_eq!(shown["play_button"], "Play");
}

/// Runs the page's script under Node.js (tests/data/export/run-page.js); None, reported as
/// skipped, where there is no `node`, unless `DLLM_REQUIRE_NODE` is set (CI sets it).
fn run_page_script(page: &str) -> Option<serde_json::Value> {
    let file = std::env::temp_dir().join(format!("dllm-export-page-{}.html", std::process::id()));
    std::fs::write(&file, page).unwrap();
    let out = Command::new("node").arg(data("export/run-page.js")).arg(&file).output();
    std::fs::remove_file(&file).ok();
    match out {
        Ok(out) => {
            assert!(out.status.success(), "the page's script failed: {}", String::from_utf8_lossy(&out.stderr));
            Some(serde_json::from_slice(&out.stdout).unwrap())
        }
        Err(e) if std::env::var_os("DLLM_REQUIRE_NODE").is_none() => {
            eprintln!("skipped running the page's script: no Node.js ({e})");
            None
        }
        Err(e) => panic!("DLLM_REQUIRE_NODE is set but node cannot run: {e}"),
    }
}

#[test]
fn run_writes_the_page_with_html() {
    let out = std::env::temp_dir().join(format!("dllm-export-test-{}.html", std::process::id()));
    let status = common::dllm_command()
        .args(["run", "-m", &data("models/dream-tiny-Q8_0.gguf"), "--gen", "16", "--steps", "8", "--no-early-stop"])
        .args(["--html", out.to_str().unwrap(), "Hello"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let page = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).ok();
    let data = page_data(&page);
    assert_eq!(data["steps"].as_array().unwrap().len(), 8);
    assert!(replay(&data).last().unwrap().iter().all(|c| c != "\u{2591}\u{2591}"), "no mask left after the last step");
    assert!(page.contains("<title>Hello</title>"));
}

#[test]
fn an_unwritable_page_path_fails_before_the_run() {
    let out = common::dllm_command()
        .args(["run", "-m", &data("models/llada-tiny-Q8_0.gguf"), "--gen", "16", "--steps", "8", "--block", "16"])
        .args(["--html", "/nonexistent-dir/page.html", "Hello"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot write the HTML page /nonexistent-dir/page.html"), "{err}");
    assert!(out.stdout.is_empty(), "no answer printed: the run never started");
}
