//! `dllm logits`: raw logits of chosen canvas rows, for parity checks against references.

use std::path::PathBuf;

use dllm::engine::Session;

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
    #[command(flatten)]
    load: super::load_args::LoadArgs,
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
    let session = Session::load(&args.model, args.load.options())?;
    let n_vocab = session.info().config.n_vocab;
    let logits = session.logits(args.ids, rows.clone())?;
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&args.out, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    eprintln!("wrote {} rows x {n_vocab} logits to {}", rows.len(), args.out.display());
    super::load_args::finish_pack_cache(&session);
    Ok(())
}
