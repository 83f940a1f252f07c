//! The `dllm` command line: thin wrappers over the library.

mod bench;
mod cache;
mod chat;
mod inspect;
mod load_args;
mod logits;
pub(crate) mod output;
mod param_args;
mod pull;
mod run;
mod serve;
mod tokenize;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dllm",
    version,
    about = "Run diffusion language models (LLaDA, Dream) from GGUF files. With no command, opens the desktop app."
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command: open the desktop app with this model loading [default: the built-in
    /// demo model]
    #[arg(short, long)]
    model: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a GGUF file: architecture, hyperparameters, tensors, tokenizer
    Inspect(inspect::Args),
    /// Split text into token ids with the model's tokenizer
    Tokenize(tokenize::Args),
    /// Generate an answer with the model's official sampler
    Run(Box<run::Args>),
    /// Write the raw logits of canvas rows to a file (parity checks)
    Logits(logits::Args),
    /// Download a GGUF from Hugging Face (HF_ENDPOINT to use another endpoint)
    Pull(pull::Args),
    /// Measure ms per step, tokens/s, startup, memory and efficiency against the int8 peak
    Bench(bench::Args),
    /// List, verify or clear the packed-weight cache files
    Cache(cache::Args),
    /// A conversation with the model in the terminal (/system, /reset, /save FILE)
    Chat(chat::Args),
    /// Serve the model over a local OpenAI-compatible HTTP API, streaming every denoising step
    Serve(serve::Args),
}

pub use output::is_closed_pipe;

pub fn main() -> anyhow::Result<()> {
    let process_start = std::time::Instant::now();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Inspect(a)) => inspect::run(a),
        Some(Command::Tokenize(a)) => tokenize::run(a),
        Some(Command::Run(a)) => run::run(*a),
        Some(Command::Logits(a)) => logits::run(a),
        Some(Command::Bench(a)) => bench::run(a, process_start),
        Some(Command::Pull(a)) => pull::run(a),
        Some(Command::Cache(a)) => cache::run(a),
        Some(Command::Serve(a)) => serve::run(a),
        Some(Command::Chat(a)) => chat::run(a),
        None => {
            let model = match cli.model {
                Some(path) => Some(path),
                None => dllm::demo::path().map_err(|e| eprintln!("dllm: {e}")).ok(),
            };
            open_app(model)
        }
    }
}

#[cfg(feature = "app")]
fn open_app(model: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    dllm::app::run(model)
}

#[cfg(not(feature = "app"))]
fn open_app(_model: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    anyhow::bail!(
        "this dllm was built without the desktop app (cargo feature `app`); run a command instead, \
         for example `dllm run -m MODEL.gguf \"your prompt\"` (see `dllm --help`)"
    )
}
