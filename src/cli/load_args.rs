//! The options of every command that loads a model for inference.

use dllm::engine::LoadOptions;

#[derive(clap::Args)]
pub struct LoadArgs {
    /// Compute threads [default: physical cores]
    #[arg(long)]
    threads: Option<usize>,
    /// Where the forward pass runs: auto (a capable NVIDIA GPU with room, else the CPU), cpu or cuda
    #[arg(long, default_value = "auto")]
    device: dllm::cuda::DeviceRequest,
    /// Pack the CPU weights in memory at every load instead of keeping them in a cache file
    /// (one per model, the size of the model, in the cache directory's `packed` folder)
    #[arg(long)]
    no_pack_cache: bool,
}

impl LoadArgs {
    pub fn options(&self) -> LoadOptions {
        LoadOptions { threads: self.threads, device: self.device, pack_cache: !self.no_pack_cache }
    }
}

/// Before a command exits: waits for the pack cache file its load started, so that the next
/// load finds it (an unfinished one is thrown away), and says if it could not be written.
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
