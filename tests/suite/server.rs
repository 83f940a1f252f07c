//! `dllm serve` (#22), started as a process on the bundled demo model: the API's shape and
//! errors over plain HTTP, the queue, the bind rules, and (when Python's `openai` package is
//! installed, as CI installs it) a real OpenAI client (`tests/data/server/openai_client.py`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use serde_json::{Value, json};

/// A `dllm serve` process on a free port, killed on drop.
struct Served {
    child: Child,
    base: String,
}

impl Served {
    fn start(extra: &[&str]) -> Served {
        let mut child =
            common::dllm_command().args(["serve", "--port", "0"]).args(extra).stderr(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines.next().expect("serve printed its address").unwrap();
            if let Some(rest) = line.split("on http://").nth(1) {
                break format!("http://{}", rest.split_whitespace().next().unwrap());
            }
        };
        // Keep reading its log so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Served { child, base }
    }

    fn post(&self, path: &str, body: &str, key: Option<&str>) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut req = agent.post(format!("{}{path}", self.base)).header("Content-Type", "application/json");
        if let Some(k) = key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let mut response = req.send(body).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_json().unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut response = agent.get(format!("{}{path}", self.base)).call().unwrap();
        (response.status().as_u16(), response.body_mut().read_json().unwrap_or(Value::Null))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CHAT: &str = r#"{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":32,"temperature":0}"#;

#[test]
fn the_api_answers_and_its_errors_are_openai_shaped() {
    let s = Served::start(&[]);
    assert_eq!(s.get("/health").0, 200);
    let (status, models) = s.get("/v1/models");
    assert_eq!((status, &models["data"][0]["id"]), (200, &json!("dllm-demo")));

    let (status, body) = s.post("/v1/chat/completions", CHAT, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert!(body["choices"][0]["message"]["content"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    assert!(body["usage"]["completion_tokens"].as_u64().is_some_and(|n| n > 0 && n <= 32), "{body}");

    let (status, body) = s.post("/v1/completions", r#"{"prompt":"Once upon a time","max_tokens":16,"steps":8}"#, None);
    assert_eq!((status, &body["object"]), (200, &json!("text_completion")), "{body}");
    assert_eq!(body["dllm"]["steps"], 8, "the extension field reached the sampler: {body}");

    let bad: [(&str, &str, u16, Option<&str>); 6] = [
        ("/v1/chat/completions", "{not json", 400, None),
        ("/v1/chat/completions", r#"{"messages":"hello"}"#, 400, Some("messages")),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}"#,
            400,
            Some("temperature"),
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000}"#,
            400,
            Some("gen_length"),
        ),
        ("/v1/chat/completions", r#"{"messages":[{"role":"user","content":"hi"}],"alg":"entropy"}"#, 400, Some("alg")),
        ("/v1/nothing", "{}", 404, None),
    ];
    for (path, body, want, param) in bad {
        let (status, answer) = s.post(path, body, None);
        assert_eq!(status, want, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
        assert!(answer["error"]["type"].is_string(), "{answer}");
        if let Some(p) = param {
            assert_eq!(answer["error"]["param"], p, "{answer}");
        }
    }
    // Oversized bodies are refused by their length.
    let huge = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#, "x".repeat(2 << 20));
    assert_eq!(s.post("/v1/chat/completions", &huge, None).0, 413);
    // A prompt that cannot fit beside the answer, however many turns are dropped.
    let long = format!(r#"{{"messages":[{{"role":"user","content":"{}"}}],"max_tokens":32}}"#, "story ".repeat(400));
    let (status, answer) = s.post("/v1/chat/completions", &long, None);
    assert!(status == 400 && answer["error"]["message"].as_str().unwrap().contains("does not fit"), "{answer}");
}

/// Old turns that no longer fit are dropped, and the answer says how many.
#[test]
fn a_conversation_too_long_for_the_context_loses_its_oldest_turns() {
    let s = Served::start(&[]);
    let turn = "Once upon a time there was a little girl who liked to play in the park with her friends. ";
    let mut messages = vec![json!({"role": "system", "content": "Tell stories."})];
    for i in 0..6 {
        messages.push(json!({"role": "user", "content": format!("{turn}{i}")}));
        messages.push(json!({"role": "assistant", "content": turn}));
    }
    messages.push(json!({"role": "user", "content": "And then?"}));
    let body = json!({"messages": messages, "max_tokens": 64, "temperature": 0}).to_string();
    let (status, answer) = s.post("/v1/chat/completions", &body, None);
    assert_eq!(status, 200, "{answer}");
    let dropped = answer["dllm"]["dropped_turns"].as_u64().unwrap();
    assert!(dropped > 0 && dropped < 13, "{answer}");
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() + 64 <= 256, "{answer}");
}

/// With `--queue 0`, a request that comes while one runs is told to come back.
#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let s = Served::start(&["--queue", "0"]);
    let slow = r#"{"messages":[{"role":"user","content":"Once"}],"max_tokens":192,"steps":192}"#;
    std::thread::scope(|scope| {
        let first = scope.spawn(|| s.post("/v1/chat/completions", slow, None));
        // Until the status shows it running.
        let start = std::time::Instant::now();
        while s.get("/dllm/status").1["running"] != 1 && start.elapsed().as_secs() < 30 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let response = agent.post(format!("{}/v1/chat/completions", s.base)).send(CHAT).unwrap();
        assert_eq!(response.status().as_u16(), 503);
        assert!(response.headers().get("retry-after").is_some());
        assert_eq!(first.join().unwrap().0, 200);
    });
    assert_eq!(s.get("/dllm/status").1["rejected"], 1);
}

/// Another address than loopback needs a key, refused before the model loads; with a key,
/// requests without it get 401.
#[test]
fn binding_beyond_loopback_needs_a_key_and_the_key_is_checked() {
    let out = common::dllm_command().args(["serve", "--host", "0.0.0.0", "--port", "0"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("without --api-key"), "{err}");
    let s = Served::start(&["--api-key", "sesame"]);
    assert_eq!(s.post("/v1/chat/completions", CHAT, None).0, 401);
    let (status, body) = s.post("/v1/chat/completions", CHAT, Some("wrong"));
    assert_eq!((status, &body["error"]["code"]), (401, &json!("invalid_api_key")));
    assert_eq!(s.post("/v1/chat/completions", CHAT, Some("sesame")).0, 200);
    assert_eq!(s.get("/health").0, 200, "health needs no key");
}

/// The official `openai` Python package against the server (see the script's header).
#[test]
fn the_openai_python_client_works_against_it() {
    let has_openai =
        std::process::Command::new("python3").args(["-c", "import openai"]).output().is_ok_and(|o| o.status.success());
    if !has_openai {
        assert!(
            std::env::var("DLLM_REQUIRE_OPENAI").is_err(),
            "DLLM_REQUIRE_OPENAI is set but python3 cannot import openai"
        );
        eprintln!("skipped: python3 with the openai package is not installed (pip install openai)");
        return;
    }
    let (open, keyed) = (Served::start(&[]), Served::start(&["--api-key", "sesame"]));
    let out = std::process::Command::new("python3")
        .arg(common::data("server/openai_client.py"))
        .args([format!("{}/v1", open.base), format!("{}/dllm/status", open.base), format!("{}/v1", keyed.base)])
        .arg("sesame")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("disconnect cancels: ok") && stdout.contains("api key: ok"), "{stdout}");
}
