//! `dllm logits`: raw logits of chosen canvas rows, for parity checks against references.

use std::path::PathBuf;

use dllm::engine::{LoadOptions, Session};

#[derive(clap::Args)]
pub struct Args {
    /// GGUF model file
    #[arg(short, long)]
    model: PathBuf,
    /// The canvas: token ids separated by commas
    #[arg(long, value_delimiter = ',', required = true)]
    ids: Vec<u32>,
    /// Rows to output: "all" or positions separated by commas
    #[arg(long, default_value = "all")]
    rows: String,
    /// Output file: little-endian f32, [rows x vocab], row-major, no Dream shift
    #[arg(long)]
    out: PathBuf,
    /// Compute threads [default: physical cores]
    #[arg(long)]
    threads: Option<usize>,
    /// Where the forward pass runs: auto (a capable NVIDIA GPU with room, else the CPU), cpu or cuda
    #[arg(long, default_value = "auto")]
    device: dllm::cuda::DeviceRequest,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let rows: Vec<usize> = if args.rows == "all" {
        (0..args.ids.len()).collect()
    } else {
        args.rows
            .split(',')
            .map(|r| r.trim().parse().map_err(|_| anyhow::anyhow!("--rows: '{r}' is not a position")))
            .collect::<anyhow::Result<_>>()?
    };
    let session = Session::load(&args.model, LoadOptions { threads: args.threads, device: args.device })?;
    let n_vocab = session.info().config.n_vocab;
    let logits = session.logits(args.ids, rows.clone())?;
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&args.out, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    eprintln!("wrote {} rows x {n_vocab} logits to {}", rows.len(), args.out.display());
    Ok(())
}
