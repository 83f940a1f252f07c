//! The bundled demo model (assets/demo-model-Q8_0.gguf, trained by tools/demo-model): what
//! `dllm` and `dllm run` use when no model is given, so a fresh install works offline.
//!
//! The file is compiled into the binary and written once to the user's cache directory, where
//! it is memory-mapped like any other model. It is written to a temporary file and renamed, so
//! an interrupted write never leaves a partial file under the final name.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::decoding::GenerateParams;

pub const BYTES: &[u8] = include_bytes!("../assets/demo-model-Q8_0.gguf");

/// `general.name` of the demo model, by which the app recognises it.
pub const NAME: &str = "dllm demo: children's stories";

/// What the app and the CLI say about it.
pub const ABOUT: &str = "a 5.6 M-parameter demo model trained on generated children's stories";

/// The first 16 hex digits of the bundled file's sha256, which name its cached copy.
fn short_hash() -> String {
    Sha256::digest(BYTES).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The demo model's file, written to the cache directory if it is not there yet.
pub fn path() -> Result<PathBuf, String> {
    path_in(&crate::paths::cache_dir())
}

/// The demo model's file in `dir`, written there if missing or different from the bundled
/// bytes. The copy is compared whole (a few megabytes, read in milliseconds), so a damaged copy
/// of the right size is replaced too.
pub fn path_in(dir: &Path) -> Result<PathBuf, String> {
    let target = dir.join(format!("demo-model-{}.gguf", short_hash()));
    if std::fs::read(&target).is_ok_and(|bytes| bytes == BYTES) {
        return Ok(target);
    }
    let fail = |what: &str, e: std::io::Error| {
        format!("cannot write the demo model to {}: {what}: {e}; free some space or set XDG_CACHE_HOME", dir.display())
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("creating the directory", e))?;
    // A temporary file in the same directory, removed if anything fails, renamed when whole.
    let mut partial = tempfile::Builder::new()
        .prefix(".demo-model-")
        .tempfile_in(dir)
        .map_err(|e| fail("creating a temporary file", e))?;
    partial.write_all(BYTES).and_then(|()| partial.as_file().sync_all()).map_err(|e| fail("writing", e))?;
    partial.persist(&target).map_err(|e| fail("renaming", e.error))?;
    Ok(target)
}

/// Settings that suit the demo model: room for a whole story (its training stories average 177
/// tokens; a shorter canvas makes it cram one in and stutter), one token per step, in blocks of 32.
pub fn params() -> GenerateParams {
    GenerateParams {
        gen_length: 192,
        steps: 192,
        block_length: 32,
        ..GenerateParams::defaults_for(crate::model::Family::Llada)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cached_copy_is_the_bundled_file_and_is_reused() {
        let dir = std::env::temp_dir().join(format!("dllm-demo-test-{}", std::process::id()));
        let first = path_in(&dir).unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), BYTES);
        let again = path_in(&dir).unwrap();
        assert_eq!(first, again);
        // A truncated copy (say, from a full disk) is replaced, not used.
        std::fs::write(&first, &BYTES[..100]).unwrap();
        assert_eq!(std::fs::read(path_in(&dir).unwrap()).unwrap(), BYTES);
        // So is one of the right size with a flipped byte.
        let mut damaged = BYTES.to_vec();
        damaged[BYTES.len() / 2] ^= 0xff;
        std::fs::write(&first, &damaged).unwrap();
        assert_eq!(std::fs::read(path_in(&dir).unwrap()).unwrap(), BYTES);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
