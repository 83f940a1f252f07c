//! `dllm cache list|verify|clear`: the packed-weight files dllm keeps between loads
//! (`cpu::pack_cache`), one per model and the size of the model.

use super::output::outln;
use std::path::PathBuf;

use dllm::cpu::pack_cache;
use dllm::summary::human_bytes;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// The cache folder [default: the `packed` folder of dllm's cache directory]
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Each cache file: its size and the model it was packed from
    List,
    /// Check every region of every cache file against its checksum (loads do this too, and
    /// repack a damaged file)
    Verify,
    /// Remove every cache file (the next load of each model packs it again)
    Clear,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = args.dir.unwrap_or_else(dllm::paths::pack_cache_dir);
    let files = pack_cache::list(&dir);
    match args.action {
        Action::List => {
            for f in &files {
                let model = f.model.as_ref().map_or("(model not recorded)".into(), |m| {
                    let gone = if m.exists() { "" } else { " (gone)" };
                    format!("{}{gone}", m.display())
                });
                let old = if f.current_format { "" } else { " [older dllm's format, replaced at the next load]" };
                outln!("{}\t{}\t{model}{old}", f.path.display(), human_bytes(f.bytes));
            }
            let total: u64 = files.iter().map(|f| f.bytes).sum();
            eprintln!("{} cache files, {} in {}", files.len(), human_bytes(total), dir.display());
        }
        Action::Verify => {
            let mut damaged = 0;
            for f in &files {
                match pack_cache::verify(&f.path) {
                    Ok(regions) => outln!("ok\t{}\t{regions} regions", f.path.display()),
                    Err(why) => {
                        damaged += 1;
                        outln!("DAMAGED\t{}\t{why}", f.path.display());
                    }
                }
            }
            if damaged > 0 {
                anyhow::bail!(
                    "{damaged} of {} cache files are damaged or outdated; the next load of their model repacks them, \
                     or `dllm cache clear` removes all",
                    files.len()
                );
            }
            eprintln!("{} cache files verified in {}", files.len(), dir.display());
        }
        Action::Clear => {
            let (count, bytes) =
                pack_cache::clear(&dir).map_err(|e| anyhow::anyhow!("cannot clear {}: {e}", dir.display()))?;
            eprintln!("removed {count} cache files ({}) from {}", human_bytes(bytes), dir.display());
        }
    }
    Ok(())
}
