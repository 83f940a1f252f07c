//! Where dllm keeps files it writes for itself.

use std::path::PathBuf;

/// dllm's folder in the user's cache directory (on Linux XDG_CACHE_HOME, else ~/.cache; the
/// platform's own elsewhere; the temporary directory when there is none): the demo model's
/// copy, compiled GPU kernels, packed CPU weights.
pub fn cache_dir() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("dllm")
}

/// Where the app saves replay pages unless told otherwise: `dllm-runs` in the home folder.
pub fn default_export_dir() -> PathBuf {
    dirs::home_dir().unwrap_or_else(std::env::temp_dir).join("dllm-runs")
}

/// Where the CPU's packed weights are kept between loads (`cpu::pack_cache`): one file per
/// model, the size of the model.
pub fn pack_cache_dir() -> PathBuf {
    cache_dir().join("packed")
}

/// Where the app keeps saved conversations: `dllm/conversations` in the user's data directory
/// (on Linux XDG_DATA_HOME, else ~/.local/share).
pub fn conversations_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(std::env::temp_dir).join("dllm").join("conversations")
}
