//! `dllm pull OWNER/REPO[:QUANT]`: download a GGUF from Hugging Face into the standard cache.

use super::output::outln;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use dllm::hub::{Hub, parse_spec, pick};
use dllm::summary::human_bytes;

#[derive(clap::Args)]
pub struct Args {
    /// Repository, optionally with the quant to pick: owner/name or owner/name:Q4_K_M; or a
    /// preset's model name (LLaDA-8B-Instruct, Dream-v0-Instruct-7B, LLaDA-MoE-7B-A1B-Instruct)
    spec: String,
    /// The exact file to download (instead of picking by quant)
    #[arg(long)]
    file: Option<String>,
    /// Only list the repository's .gguf files
    #[arg(long)]
    list: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (repo, quant) = parse_spec(&args.spec)?;
    let hub = Hub::from_env();
    let files = hub.list_gguf(&repo)?;
    if args.list {
        for f in &files {
            outln!("{}\t{}\t{}", f.path, human_bytes(f.size), f.quant().unwrap_or_default());
        }
        return Ok(());
    }
    let file = match &args.file {
        Some(name) => files
            .iter()
            .find(|f| &f.path == name)
            .ok_or_else(|| anyhow::anyhow!("{repo} has no file {name}; `dllm pull {repo} --list` shows them"))?,
        None => pick(&repo, &files, quant.as_deref())?,
    };
    let start = Instant::now();
    let mut last_percent = u64::MAX;
    let path = hub.download(
        &repo,
        file,
        &mut |done, total| {
            let percent = done * 100 / total.max(1);
            if percent != last_percent {
                last_percent = percent;
                let secs = start.elapsed().as_secs_f64().max(1e-3);
                let speed = done as f64 / secs;
                let eta = (total - done) as f64 / speed.max(1.0);
                eprint!(
                    "\r{}: {percent}% of {} ({}/s, {eta:.0} s left)   ",
                    file.path,
                    human_bytes(total),
                    human_bytes(speed as u64)
                );
                let _ = std::io::stderr().flush();
            }
        },
        &AtomicBool::new(false),
    )?;
    eprintln!();
    outln!("{}", path.display());
    Ok(())
}
