//! The options of every command that loads a model for inference.

use dllm::engine::LoadOptions;

#[derive(clap::Args)]
pub struct LoadArgs {
    /// Compute threads [default: physical cores; at most four per logical CPU]
    #[arg(long, value_parser = threads)]
    threads: Option<usize>,
    /// Where the forward pass runs: auto (a capable NVIDIA GPU with room, else the CPU), cpu or cuda
    #[arg(long, default_value = "auto")]
    device: dllm::cuda::DeviceRequest,
    /// Pack the CPU weights in memory at every load instead of keeping them in a cache file
    /// (one per model, the size of the model, in the cache directory's `packed` folder)
    #[arg(long)]
    no_pack_cache: bool,
    /// Faster weights (CPU, AVX2 and AVX-VNNI): expand Q4_K weights to a byte each at load, so
    /// that no step unpacks them; Q4_K matrices take 1.84x the memory (a Q4_K_M model about
    /// 1.6x its file), the results are the same
    #[arg(long)]
    wide_weights: bool,
}

/// A thread count, refused at once when it is 0 or past `dllm::engine::max_threads`.
fn threads(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    let max = dllm::engine::max_threads();
    if n == 0 || n > max {
        return Err(format!("give 1 to {max} (four per logical CPU of this machine)"));
    }
    Ok(n)
}

impl LoadArgs {
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            threads: self.threads,
            device: self.device,
            pack_cache: !self.no_pack_cache,
            wide_weights: self.wide_weights,
        }
    }
}

/// Held while a command runs: when it ends, on every path (an error and a closed output pipe
/// included), waits for the pack cache file its load started, so that the file is finished
/// rather than abandoned half written, and says if it could not be written.
pub struct FinishPackCache<'a>(pub &'a dllm::engine::Session);

impl Drop for FinishPackCache<'_> {
    fn drop(&mut self) {
        finish_pack_cache(self.0);
    }
}

pub fn finish_pack_cache(session: &dllm::engine::Session) {
    match &session.info().prepared {
        dllm::model::Preparation::PackedWritingCache(path) => {
            eprintln!("finishing the pack cache for faster loads: {}", path.display());
        }
        damaged @ dllm::model::Preparation::RepackedDamagedCache { .. } => eprintln!("warning: {damaged}"),
        _ => {}
    }
    if let Some(Err(e)) = session.wait_for_pack_cache() {
        eprintln!("warning: the packed weights were not cached ({e}); the next load packs them again");
    }
}
