//! `dllm serve`: the model over a local OpenAI-compatible HTTP API (`dllm::server`).

use std::path::PathBuf;
use std::sync::Arc;

use dllm::engine::ModelFile;
use dllm::server::{ServeOptions, start};

#[derive(clap::Args)]
pub struct Args {
    /// GGUF model file [default: the built-in demo model]
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Address to listen on; another than loopback needs --api-key
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free one; the address is printed)
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Require `Authorization: Bearer KEY` on every request but /health
    #[arg(long, env = "DLLM_API_KEY")]
    api_key: Option<String>,
    /// Requests that may wait while one runs (more are answered 503 with Retry-After)
    #[arg(long, default_value_t = 8)]
    queue: usize,
    #[command(flatten)]
    load: super::load_args::LoadArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = ServeOptions {
        host: args.host,
        port: args.port,
        api_key: args.api_key,
        queue: args.queue,
        ..Default::default()
    };
    options.check()?;
    let model = match args.model {
        Some(path) => path,
        None => dllm::demo::path().map_err(anyhow::Error::msg)?,
    };
    let load = args.load.options();
    load.check()?;
    let file = ModelFile::open(&model)?;
    let session = Arc::new(file.load(load, &|_| {})?);
    let name = if session.info().is_demo {
        "dllm-demo".to_string()
    } else {
        model.file_stem().map_or("model".into(), |s| s.to_string_lossy().into_owned())
    };
    let server = start(session.clone(), name.clone(), options, None)?;
    eprintln!("dllm serve: {name} on http://{} (OpenAI base URL http://{}/v1); Ctrl-C stops", server.addr, server.addr);
    super::load_args::finish_pack_cache(&session);
    // Serves until the process is stopped.
    loop {
        std::thread::park();
    }
}
