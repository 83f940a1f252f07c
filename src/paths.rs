//! Where dllm keeps files it writes for itself.

use std::path::PathBuf;

/// dllm's folder in the user's cache directory (XDG_CACHE_HOME, else ~/.cache, else the
/// temporary directory): the demo model's copy, compiled GPU kernels, packed CPU weights.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("dllm")
}

/// Where the CPU's packed weights are kept between loads (`cpu::pack_cache`): one file per
/// model, the size of the model.
pub fn pack_cache_dir() -> PathBuf {
    cache_dir().join("packed")
}
