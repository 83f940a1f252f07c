//! How a backend made the weights ready for its kernels at load: what a front end reports
//! next to the load time, since it explains most of it.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preparation {
    /// The kernels read the weights as mapped from the file (no packed kernels on this path).
    Mapped,
    /// Packed into the kernels' layout in memory.
    PackedInMemory,
    /// Packed in memory, and being written to this pack cache file for the next load.
    PackedWritingCache(PathBuf),
    /// Mapped from this pack cache file, written by an earlier load.
    FromPackCache(PathBuf),
    /// The pack cache file failed its checksums (`why`): packed in memory again, and the file
    /// being rewritten.
    RepackedDamagedCache { path: PathBuf, why: String },
    /// Uploaded to the GPU.
    Uploaded,
}

impl Preparation {
    /// A few words for tables and result files (no paths).
    pub fn short(&self) -> &'static str {
        match self {
            Preparation::Mapped => "mapped",
            Preparation::PackedInMemory => "packed",
            Preparation::PackedWritingCache(_) => "packed, caching",
            Preparation::FromPackCache(_) => "pack cache",
            Preparation::RepackedDamagedCache { .. } => "packed, cache repaired",
            Preparation::Uploaded => "uploaded",
        }
    }
}

impl std::fmt::Display for Preparation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Preparation::Mapped => write!(f, "weights read as mapped from the file"),
            Preparation::PackedInMemory => write!(f, "weights packed in memory"),
            Preparation::PackedWritingCache(p) => {
                write!(f, "weights packed in memory; writing {} for the next load", p.display())
            }
            Preparation::FromPackCache(p) => write!(f, "packed weights mapped from {}", p.display()),
            Preparation::RepackedDamagedCache { path, why } => write!(
                f,
                "the pack cache {} was damaged ({why}): weights packed in memory again, the file being rewritten",
                path.display()
            ),
            Preparation::Uploaded => write!(f, "weights uploaded to the GPU"),
        }
    }
}
