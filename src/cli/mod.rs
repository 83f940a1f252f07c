//! The `dllm` command line: thin wrappers over the library.

mod inspect;
mod tokenize;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "dllm", version, about = "Run diffusion language models (LLaDA, Dream) from GGUF files")]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a GGUF file: architecture, hyperparameters, tensors, tokenizer
    Inspect(inspect::Args),
    /// Split text into token ids with the model's tokenizer
    Tokenize(tokenize::Args),
}

pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Inspect(a)) => inspect::run(a),
        Some(Command::Tokenize(a)) => tokenize::run(a),
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(())
        }
    }
}
