//! `dllm logits`: raw logits of chosen canvas rows, for parity checks against references.

use std::path::PathBuf;

use std::io::Write;

use dllm::engine::ModelFile;

use super::load_args::FinishPackCache;
use super::output::OutputFile;

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
    // Checked before the weights load: the ids, the rows and the output path.
    let options = args.load.options();
    options.check()?;
    let file = ModelFile::open(&args.model)?;
    let n_vocab = file.config().n_vocab;
    if let Some(id) = args.ids.iter().find(|&&id| id as usize >= n_vocab) {
        anyhow::bail!("--ids: {id} is not a token of this model (its vocabulary has {n_vocab})");
    }
    if let Some(row) = rows.iter().find(|&&r| r >= args.ids.len()) {
        anyhow::bail!("--rows: {row} is past the canvas of {} ids", args.ids.len());
    }
    let mut out = OutputFile::create(&args.out, "the logits file", &args.model)?;
    let session = file.load(options, &|_| {})?;
    let _finish_cache = FinishPackCache(&session);
    let logits = session.logits(args.ids, rows.clone())?;
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    out.write_all(&bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    out.finish()?;
    eprintln!("wrote {} rows x {n_vocab} logits to {}", rows.len(), args.out.display());
    Ok(())
}
