//! What a command writes: standard output that may be a closed pipe or a full disk, and output
//! files that must never be the model they were computed from.
//!
//! Output files are checked before the model loads and written under a temporary name beside
//! the target, renamed over it once complete: a failed or interrupted command leaves no partial
//! file under the name, and `--trace MODEL.gguf` can no longer truncate the model it is mapping.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// A write to standard output failed; a closed pipe (`dllm inspect X | head -1`) ends the
/// command quietly, anything else (a full disk) is reported.
#[derive(Debug, thiserror::Error)]
#[error("writing to standard output failed")]
pub struct StdoutError(#[from] pub std::io::Error);

/// `println!` that returns a [`StdoutError`] instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::cli::output::StdoutError)?;
    }};
}
pub(crate) use outln;

/// Whether `error` is standard output closed by its reader.
pub fn is_closed_pipe(error: &anyhow::Error) -> bool {
    error.downcast_ref::<StdoutError>().is_some_and(|e| e.0.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Two paths name the same file (same device and inode, through links too).
fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
    }
}

/// An output file being written.
pub struct OutputFile {
    path: PathBuf,
    what: &'static str,
    temp: std::io::BufWriter<tempfile::NamedTempFile>,
}

impl OutputFile {
    /// Checks `path` (not the model, not a folder, its folder writable) and opens its
    /// temporary twin. `what` names it in messages ("the trace").
    pub fn create(path: &Path, what: &'static str, model: &Path) -> anyhow::Result<OutputFile> {
        if same_file(path, model) {
            bail!(
                "{what} {} is the model file itself; writing it would destroy the model: choose another path",
                path.display()
            );
        }
        if path.is_dir() {
            bail!("{what} {} is a folder; give a file name", path.display());
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let temp = tempfile::Builder::new()
            .prefix(".dllm-output-")
            .tempfile_in(dir)
            .with_context(|| format!("cannot write {what} {}", path.display()))?;
        Ok(OutputFile { path: path.to_path_buf(), what, temp: std::io::BufWriter::new(temp) })
    }

    /// Flushes the file to disk and gives it its name.
    pub fn finish(self) -> anyhow::Result<()> {
        let fail =
            |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot write {} {}: {e}", self.what, self.path.display());
        let temp = self.temp.into_inner().map_err(|e| fail(&e.error()))?;
        temp.as_file().sync_all().map_err(|e| fail(&e))?;
        temp.persist(&self.path).map_err(|e| fail(&e.error))?;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.temp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.temp.flush()
    }
}
