//! A local OpenAI-compatible HTTP server over one loaded model (`dllm serve`, and the app's
//! Serve toggle): `/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/health` and
//! `/dllm/status`, with streaming of every denoising step.
//!
//! The HTTP stack is tiny_http: a small synchronous server (a handful of crates, seconds to
//! build on two cores, where an async stack such as axum brings tokio and a hundred crates),
//! which fits a server whose work is one model running one request at a time. Each request
//! gets a thread; the engine runs their generations one after another, and at most `queue`
//! wait (more get 503 with Retry-After). It binds loopback unless given an API key, and checks
//! the bearer token when it has one.

mod api;
mod completion;
mod settings;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::engine::{EngineError, Prompt, Session};
use api::ApiError;
use completion::{Job, Kind};

/// How the server listens and admits requests.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub host: String,
    /// 0 picks a free port (the bound address says which).
    pub port: u16,
    pub api_key: Option<String>,
    /// Requests that may wait while one runs.
    pub queue: usize,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { host: "127.0.0.1".into(), port: 8080, api_key: None, queue: 8, max_body: 1 << 20 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to serve on {0} without --api-key: anyone who can reach this address could use the model; give an API key or bind 127.0.0.1"
    )]
    OpenWithoutKey(String),
    #[error("'{0}' is not an IP address to bind (for example 127.0.0.1 or 0.0.0.0)")]
    BadHost(String),
    #[error("cannot listen on {addr}: {why}")]
    Bind { addr: String, why: String },
}

/// Counts the status endpoint reports.
#[derive(Debug, Default)]
pub struct Status {
    pub served: AtomicU64,
    pub cancelled: AtomicU64,
    pub rejected: AtomicU64,
    /// Completion requests admitted and not yet answered (running and waiting).
    pub admitted: AtomicUsize,
}

/// One step of a served request, for a window that shows the requests' canvases.
#[derive(Debug, Clone)]
pub struct ServedStep {
    pub request: String,
    /// 1-based, of `steps` planned (or at most).
    pub step: usize,
    pub steps: usize,
    pub prompt_len: usize,
    pub canvas: Vec<u32>,
}

/// Called on a request's thread after each of its steps.
pub type Observer = Arc<dyn Fn(&ServedStep) + Send + Sync>;

/// What every request handler reads.
pub struct Shared {
    pub session: Arc<Session>,
    pub model_name: String,
    pub options: ServeOptions,
    pub status: Status,
    pub observer: Option<Observer>,
    next_id: AtomicU64,
}

/// A server running on its own threads; dropping it stops listening (requests already
/// admitted finish on their threads).
pub struct RunningServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    server: Option<Arc<tiny_http::Server>>,
    listener: Option<std::thread::JoinHandle<()>>,
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // The listening thread ends once unblocked; when it and this handle have let go of
        // the server, tiny_http closes the socket.
        if let Some(server) = self.server.take() {
            server.unblock();
        }
        if let Some(listener) = self.listener.take() {
            let _ = listener.join();
        }
    }
}

impl ServeOptions {
    /// The address to bind: refused when it is not loopback and there is no API key. Checked
    /// before a model loads.
    pub fn check(&self) -> Result<SocketAddr, ServeError> {
        let ip: IpAddr = match self.host.as_str() {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            host => host.parse().map_err(|_| ServeError::BadHost(host.to_string()))?,
        };
        if !ip.is_loopback() && self.api_key.is_none() {
            return Err(ServeError::OpenWithoutKey(self.host.clone()));
        }
        Ok(SocketAddr::new(ip, self.port))
    }
}

/// Binds and starts serving `session` (named `model_name` in the API); `observer`, when
/// given, sees every step of every request.
pub fn start(
    session: Arc<Session>,
    model_name: String,
    options: ServeOptions,
    observer: Option<Observer>,
) -> Result<RunningServer, ServeError> {
    let addr = options.check()?;
    let server =
        tiny_http::Server::http(addr).map_err(|e| ServeError::Bind { addr: addr.to_string(), why: e.to_string() })?;
    let addr = server.server_addr().to_ip().unwrap_or(addr);
    let server = Arc::new(server);
    let shared = Arc::new(Shared {
        session,
        model_name,
        options,
        status: Status::default(),
        observer,
        next_id: AtomicU64::new(1),
    });
    let (listener, state) = (server.clone(), shared.clone());
    let listening = std::thread::Builder::new()
        .name("dllm-serve".into())
        .spawn(move || {
            for request in listener.incoming_requests() {
                let state = state.clone();
                let spawned =
                    std::thread::Builder::new().name("dllm-request".into()).spawn(move || handle(request, &state));
                if let Err(e) = spawned {
                    eprintln!("dllm serve: cannot start a request thread: {e}");
                }
            }
        })
        .map_err(|e| ServeError::Bind { addr: addr.to_string(), why: e.to_string() })?;
    Ok(RunningServer { addr, shared, server: Some(server), listener: Some(listening) })
}

fn header(request: &tiny_http::Request, name: &'static str) -> Option<String> {
    request.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str().to_owned())
}

/// Writes the response head (status `status`, `headers`) to the request's connection and
/// hands back the writer for the body.
///
/// Every answer closes its connection (`Connection: close`, written here because tiny_http
/// refuses that header on its own responses). tiny_http serves each open connection on a
/// thread of a pool that hands a new connection to a busy thread in a race, so an idle
/// keep-alive connection could hold a new client's request until the idle one closed: four
/// concurrent openai clients sometimes waited out their timeout.
fn answer_head(
    request: tiny_http::Request,
    status: u16,
    headers: &[(&str, String)],
) -> std::io::Result<Box<dyn Write + Send>> {
    let reason = tiny_http::StatusCode(status).default_reason_phrase();
    let mut head = format!("HTTP/1.1 {status} {reason}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = request.into_writer();
    out.write_all(head.as_bytes())?;
    Ok(out)
}

fn respond(request: tiny_http::Request, status: u16, body: &Value, extra: &[(&str, String)]) {
    let body = body.to_string();
    let mut headers =
        vec![("Content-Type", "application/json".to_string()), ("Content-Length", body.len().to_string())];
    headers.extend(extra.iter().cloned());
    let _ = answer_head(request, status, &headers).and_then(|mut out| {
        out.write_all(body.as_bytes())?;
        out.flush()
    });
}

fn fail(request: tiny_http::Request, e: &ApiError) {
    respond(request, e.status, &e.body(), &[]);
}

/// An engine error as an API error: settings and prompts are the client's to fix (400), the
/// rest the server's (500).
pub(crate) fn engine_error(e: EngineError) -> ApiError {
    match &e {
        EngineError::Invalid(p) => ApiError::invalid(e.to_string(), Some(p.param.spec().name)),
        EngineError::EmptyPrompt | EngineError::PromptTooLong { .. } | EngineError::Template(_) => {
            ApiError::invalid(e.to_string(), Some("messages"))
        }
        EngineError::Model(m) if matches!(**m, crate::model::ModelError::TokenOutOfRange { .. }) => {
            ApiError::invalid(e.to_string(), Some("prompt"))
        }
        _ => ApiError::new(500, "server_error", None, e.to_string()),
    }
}

fn handle(request: tiny_http::Request, shared: &Shared) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    let method = request.method().as_str().to_ascii_uppercase();
    if path == "/health" && method == "GET" {
        let body = json!({"status": "ok", "model": shared.model_name});
        return respond(request, 200, &body, &[]);
    }
    if let Some(key) = &shared.options.api_key {
        let given = header(&request, "Authorization");
        if given.as_deref().and_then(|h| h.strip_prefix("Bearer ")).map(str::trim) != Some(key.as_str()) {
            let e = ApiError::new(
                401,
                "invalid_request_error",
                Some("invalid_api_key"),
                "a missing or wrong API key; send 'Authorization: Bearer KEY'",
            );
            return fail(request, &e);
        }
    }
    match (method.as_str(), path.as_str()) {
        ("GET", "/v1/models") => {
            let info = shared.session.info();
            let model = json!({"id": shared.model_name, "object": "model", "created": 0, "owned_by": "dllm",
                "dllm": {"architecture": info.config.architecture, "context_length": info.config.context_length}});
            respond(request, 200, &json!({"object": "list", "data": [model]}), &[]);
        }
        ("GET", "/dllm/status") => {
            let s = &shared.status;
            let admitted = s.admitted.load(Ordering::Relaxed);
            let body = json!({
                "model": shared.model_name,
                "served": s.served.load(Ordering::Relaxed),
                "cancelled": s.cancelled.load(Ordering::Relaxed),
                "rejected": s.rejected.load(Ordering::Relaxed),
                "running": admitted.min(1),
                "waiting": admitted.saturating_sub(1),
                "queue": shared.options.queue,
            });
            respond(request, 200, &body, &[]);
        }
        ("POST", "/v1/chat/completions") => complete(request, shared, Kind::Chat),
        ("POST", "/v1/completions") => complete(request, shared, Kind::Text),
        (_, "/v1/models" | "/dllm/status" | "/v1/chat/completions" | "/v1/completions") => {
            let e = ApiError::new(405, "invalid_request_error", None, format!("{method} is not allowed on {path}"));
            fail(request, &e)
        }
        _ => {
            let e = ApiError::new(
                404,
                "invalid_request_error",
                Some("unknown_url"),
                format!(
                    "no endpoint {path}; dllm serves /v1/models, /v1/chat/completions, /v1/completions, /health and /dllm/status"
                ),
            );
            fail(request, &e)
        }
    }
}

/// Reads the body, at most `max_body` bytes.
fn read_body(request: &mut tiny_http::Request, max_body: usize) -> Result<Value, ApiError> {
    let too_big = || {
        ApiError::new(
            413,
            "invalid_request_error",
            Some("request_too_large"),
            format!("the body is larger than {max_body} bytes"),
        )
    };
    if request.body_length().is_some_and(|n| n > max_body) {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    request
        .as_reader()
        .take(max_body as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ApiError::invalid(format!("cannot read the body: {e}"), None))?;
    if bytes.len() > max_body {
        return Err(too_big());
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(format!("the body is not valid JSON: {e}"), None))
}

/// Releases an admitted request's place when its answer is done, however it ends.
struct Admitted<'a>(&'a Status);

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::Relaxed);
    }
}

fn complete(mut request: tiny_http::Request, shared: &Shared, kind: Kind) {
    let body = match read_body(&mut request, shared.options.max_body) {
        Ok(body) => body,
        Err(e) => return fail(request, &e),
    };
    let job = match prepare(&body, shared, kind) {
        Ok(job) => job,
        Err(e) => return fail(request, &e),
    };
    // One runs, `queue` wait; the rest are told to come back.
    let status = &shared.status;
    if status.admitted.fetch_add(1, Ordering::Relaxed) > shared.options.queue {
        status.admitted.fetch_sub(1, Ordering::Relaxed);
        status.rejected.fetch_add(1, Ordering::Relaxed);
        let e = ApiError::new(
            503,
            "server_busy",
            Some("queue_full"),
            format!("the server is busy: one request runs and {} wait; try again shortly", shared.options.queue),
        );
        return respond(request, 503, &e.body(), &[("Retry-After", "2".into())]);
    }
    let _admitted = Admitted(status);
    let (id, started) = (job.id.clone(), std::time::Instant::now());
    if job.request.stream {
        let headers = [("Content-Type", "text/event-stream".to_string()), ("Cache-Control", "no-cache".to_string())];
        let Ok(mut out) = answer_head(request, 200, &headers).and_then(|mut out| out.flush().map(|()| out)) else {
            return;
        };
        match job.stream(shared, &mut out) {
            Ok(true) => {
                status.served.fetch_add(1, Ordering::Relaxed);
                eprintln!("[{id}] streamed in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
            }
            Ok(false) => {}
            Err(e) => {
                // The head is sent: the error goes as an event.
                let _ = write!(out, "data: {}\n\n", e.body());
                eprintln!("[{id}] failed: {}", e.message);
            }
        }
    } else {
        match job.answer_whole(shared) {
            Ok(body) => {
                status.served.fetch_add(1, Ordering::Relaxed);
                eprintln!("[{id}] answered in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
                respond(request, 200, &body, &[]);
            }
            Err(e) => fail(request, &e),
        }
    }
}

/// A request read and checked against the model: its prompt ids (old turns dropped to fit)
/// and settings.
fn prepare(body: &Value, shared: &Shared, kind: Kind) -> Result<Job, ApiError> {
    let request = api::read_request(body, matches!(kind, Kind::Chat))?;
    let info = shared.session.info();
    let family = info.config.family;
    let defaults = crate::decoding::GenerateParams { early_stop: true, ..info.defaults.clone() };
    let params = settings::params_for(family, &defaults, &request.settings)?;
    let room = info.config.context_length.saturating_sub(params.gen_length);
    let encoder = shared.session.prompt_encoder();
    let (prompt, dropped_turns) = match (&request.messages, &request.prompt) {
        (Some(messages), _) => encoder.fit(messages, room).map_err(engine_error)?,
        (None, Some(text)) => {
            let ids = encoder.encode(&Prompt::Raw(text.clone())).map_err(engine_error)?;
            (ids, 0)
        }
        (None, None) => return Err(ApiError::invalid("no prompt", None)),
    };
    shared.session.plan(&params, prompt.len()).map_err(engine_error)?;
    let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let id = match kind {
        Kind::Chat => format!("chatcmpl-dllm-{n}"),
        Kind::Text => format!("cmpl-dllm-{n}"),
    };
    Ok(Job { kind, id, prompt, params, request, dropped_turns })
}
