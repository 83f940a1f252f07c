//! Packed weights kept on disk, so that only the first load of a model pays for packing.
//!
//! Why: packing needs a fresh copy of the weights, and on the virtual machines this runs on,
//! fresh anonymous memory is the slow part of a load, not the packing: populating 4.9 GB of it
//! took 9.5 s here, mapping the same amount of a file already in the page cache 0.4-0.9 s. So
//! after the first load packs in memory, a background thread writes the packed matrices to
//! one file in the cache directory, and later loads map that file read-only.
//!
//! A cache file is trusted only under its final name, only with the expected header and only
//! when every region's checksum holds. It is written under a temporary name, flushed to disk,
//! then renamed, so an interrupted write never looks complete; the header names the source file
//! (length, modification time, device, inode) and fingerprints the layout (format version and
//! every matrix's type, shape and offset). Any difference, or a file of the wrong length, means:
//! pack again and rewrite. The bytes themselves are checked too: a trailer holds each region's
//! offset, length and XXH3-64, verified at every load (in parallel, a fraction of a second for
//! 5 GB), because a flipped byte in packed weights changes answers without any other sign.
//! There is one cache file per model path, so a changed model replaces its old cache, and the
//! header records that path, so that writing a cache removes those of models that are gone.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::kernels::repack::{Packed, PackedBytes, packed_len};
use crate::gguf::GgufFile;
use crate::quant::GgmlType;

const MAGIC: &[u8; 8] = b"DLLMPACK";
/// Bumped whenever a packed layout (`cpu::kernels::repack`) or this header changes, which invalidates
/// every cache.
const FORMAT_VERSION: u32 = 3;
/// Where the header keeps the region count (u32) and the end of the regions (u64).
const REGION_COUNT_AT: usize = 12;
const DATA_END_AT: usize = 64;
/// Where the header keeps the model file's path: its length (u16) then its bytes.
const SOURCE_PATH_AT: usize = 72;
/// Header bytes; regions start page-aligned after it.
const HEADER: usize = 4096;
const ALIGN: usize = 4096;
/// One trailer entry: a region's offset, length and XXH3-64, each a little-endian u64.
const ENTRY: usize = 24;

/// A cache file being written: joins to its path, or to why it could not be written.
pub type CacheWrite = JoinHandle<Result<PathBuf, String>>;

/// One matrix to pack: its type, shape and where its data starts in the source file.
#[derive(Debug, Clone, Copy)]
pub struct MatrixSpec {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub source_offset: u64,
}

/// The cache file of one model: where it lives and what its header must say.
pub struct PackCache {
    path: PathBuf,
    header: Vec<u8>,
    /// Byte range of each matrix's packed data in the file.
    regions: Vec<(usize, usize)>,
    /// Where the regions end and the trailer starts.
    data_end: usize,
}

/// Why a cache file was not used.
#[derive(Debug, PartialEq)]
pub enum CacheMiss {
    /// None there, or one for another file, version of it or layout: pack and write one.
    NoValidFile,
    /// Right header, wrong bytes: the file was damaged after it was written.
    Damaged(String),
}

impl PackCache {
    /// The cache file in `dir` for the matrices `specs` of `gguf`, or None for a model that is
    /// not a mapped file (nothing to key a cache on).
    pub fn for_model(dir: &Path, gguf: &GgufFile, specs: &[MatrixSpec]) -> Option<PackCache> {
        let id = gguf.identity()?;
        let source = std::fs::canonicalize(gguf.path()).unwrap_or_else(|_| gguf.path().to_path_buf());
        let stem = source.file_stem().map_or("model".into(), |s| s.to_string_lossy().into_owned());
        let name = format!("{stem}-{:016x}.dllmpack", fnv1a(source.to_string_lossy().as_bytes()));

        let mut regions = Vec::with_capacity(specs.len());
        let mut at = HEADER;
        let mut layout = Vec::new();
        layout.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        for s in specs {
            let len = packed_len(s.ty, s.n_in, s.n_out);
            regions.push((at, len));
            at = (at + len).div_ceil(ALIGN) * ALIGN;
            for v in [s.ty.id() as u64, s.n_in as u64, s.n_out as u64, s.source_offset] {
                layout.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        header.extend_from_slice(&(specs.len() as u32).to_le_bytes());
        header.extend_from_slice(&id.len.to_le_bytes());
        header.extend_from_slice(&id.modified_ns.to_le_bytes());
        header.extend_from_slice(&id.device.to_le_bytes());
        header.extend_from_slice(&id.inode.to_le_bytes());
        header.extend_from_slice(&fnv1a(&layout).to_le_bytes());
        header.extend_from_slice(&(at as u64).to_le_bytes());
        debug_assert_eq!(header.len(), SOURCE_PATH_AT);
        debug_assert_eq!(header[REGION_COUNT_AT..REGION_COUNT_AT + 4], (specs.len() as u32).to_le_bytes());
        debug_assert_eq!(header[DATA_END_AT..DATA_END_AT + 8], (at as u64).to_le_bytes());
        // The model file's path, so that the cache of a model that is gone can be removed (a
        // path too long for the header is left out, and that cache is kept).
        let path = source.to_string_lossy();
        if path.len() <= HEADER - SOURCE_PATH_AT - 2 {
            header.extend_from_slice(&(path.len() as u16).to_le_bytes());
            header.extend_from_slice(path.as_bytes());
        }
        header.resize(HEADER, 0);
        Some(PackCache { path: dir.join(name), header, regions, data_end: at })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> usize {
        self.data_end + ENTRY * self.regions.len()
    }

    /// The packed matrices from a valid cache file, mapped read-only (and populated, so the
    /// first step does not take the page faults), every region's checksum verified.
    pub fn read(&self, specs: &[MatrixSpec]) -> Result<Vec<Packed>, CacheMiss> {
        let miss = |_| CacheMiss::NoValidFile;
        let mut file = File::open(&self.path).map_err(miss)?;
        if file.metadata().map_err(miss)?.len() != self.len() as u64 {
            return Err(CacheMiss::NoValidFile);
        }
        let mut header = vec![0u8; HEADER];
        file.read_exact(&mut header).map_err(miss)?;
        if header != self.header {
            return Err(CacheMiss::NoValidFile);
        }
        // SAFETY: mapped read-only. dllm replaces cache files by renaming a new file over them,
        // which leaves this mapping on the old file; another program truncating the file while
        // it is mapped is outside what any mmap reader can defend against (as for the GGUF).
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(miss)?;
        let entries = trailer(&map, self.data_end, self.regions.len()).map_err(CacheMiss::Damaged)?;
        if entries.iter().map(|e| (e.0, e.1)).ne(self.regions.iter().copied()) {
            return Err(CacheMiss::Damaged("its table of regions does not match its header".into()));
        }
        check_regions(&map, &entries).map_err(CacheMiss::Damaged)?;
        let map = Arc::new(map);
        let packed = specs
            .iter()
            .zip(&self.regions)
            .map(|(s, &(at, len))| Packed::new(s.ty, s.n_in, s.n_out, PackedBytes::Shared(map.clone(), at..at + len)))
            .collect();
        Ok(packed)
    }

    /// Writes `packed` (the matrices of `specs`, in order) to the cache file on a background
    /// thread: under a temporary name, flushed, then renamed. The handle tells how it went;
    /// dropping it leaves the thread running (a process that exits before it ends leaves a
    /// temporary file, removed by the next write).
    pub fn write_in_background(self, packed: Vec<Arc<Packed>>) -> CacheWrite {
        std::thread::spawn(move || {
            let tmp = self.write_temporary(&packed).map_err(|e| format!("{}: {e}", self.path.display()))?;
            std::fs::rename(&tmp, &self.path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("{}: {e}", self.path.display())
            })?;
            Ok(self.path)
        })
    }

    fn write_temporary(&self, packed: &[Arc<Packed>]) -> std::io::Result<PathBuf> {
        let dir = self.path.parent().expect("cache files live in a directory");
        std::fs::create_dir_all(dir)?;
        remove_abandoned_temporaries(&self.path);
        remove_caches_of_missing_models(dir);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = temporary_name(&self.path, std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let written = (|| {
            let mut file = std::io::BufWriter::with_capacity(1 << 20, File::create_new(&tmp)?);
            file.write_all(&self.header)?;
            let mut at = HEADER;
            for (p, &(start, len)) in packed.iter().zip(&self.regions) {
                assert_eq!(p.bytes().len(), len, "packed matrix of an unexpected size");
                file.write_all(&vec![0u8; start - at])?;
                file.write_all(p.bytes())?;
                at = start + len;
            }
            file.write_all(&vec![0u8; self.data_end - at])?;
            for (p, &(start, len)) in packed.iter().zip(&self.regions) {
                for v in [start as u64, len as u64, xxh3_64(p.bytes())] {
                    file.write_all(&v.to_le_bytes())?;
                }
            }
            file.into_inner().map_err(|e| e.into_error())?.sync_all()
        })();
        match written {
            Ok(()) => Ok(tmp),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// The trailer of a mapped cache file whose regions end at `data_end`: (offset, length, hash)
/// per region, each range checked to lie among the regions.
fn trailer(map: &[u8], data_end: usize, count: usize) -> Result<Vec<(usize, usize, u64)>, String> {
    let table = map.get(data_end..).filter(|t| t.len() == count * ENTRY).ok_or("its table of regions is cut short")?;
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    table
        .chunks_exact(ENTRY)
        .map(|e| {
            let (at, len) = (word(&e[..8]) as usize, word(&e[8..16]) as usize);
            match at.checked_add(len) {
                Some(end) if at >= HEADER && end <= data_end => Ok((at, len, word(&e[16..]))),
                _ => Err(format!("its table of regions names bytes {at}+{len}, outside its data")),
            }
        })
        .collect()
}

/// Hashes every region (in parallel: the work is memory-bound and splits evenly) and names
/// the first that fails.
fn check_regions(map: &[u8], entries: &[(usize, usize, u64)]) -> Result<(), String> {
    let bad = entries.par_iter().position_first(|&(at, len, hash)| xxh3_64(&map[at..at + len]) != hash);
    match bad {
        Some(i) => Err(format!(
            "region {} of {} (bytes {}..{}) fails its checksum",
            i + 1,
            entries.len(),
            entries[i].0,
            entries[i].0 + entries[i].1
        )),
        None => Ok(()),
    }
}

/// A cache file as `dllm cache list` shows it.
#[derive(Debug, Clone)]
pub struct CacheFile {
    pub path: PathBuf,
    pub bytes: u64,
    /// The model it was packed from, when its header records one.
    pub model: Option<PathBuf>,
    /// Whether the header is this version's (older versions are never used, only removed).
    pub current_format: bool,
}

/// The cache files in `dir` (those of dllm's format, current or old), by name.
pub fn list(dir: &Path) -> Vec<CacheFile> {
    let mut found: Vec<CacheFile> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "dllmpack"))
        .filter_map(|e| {
            let path = e.path();
            let mut header = vec![0u8; HEADER];
            File::open(&path).and_then(|mut f| f.read_exact(&mut header)).ok()?;
            (&header[..8] == MAGIC).then(|| CacheFile {
                bytes: e.metadata().map_or(0, |m| m.len()),
                model: recorded_model(&header),
                current_format: header[8..12] == FORMAT_VERSION.to_le_bytes(),
                path,
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Checks a cache file on its own: this version's header, its length, and every region's
/// checksum. Returns the number of regions checked.
pub fn verify(path: &Path) -> Result<usize, String> {
    let file = File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    // SAFETY: read-only mapping of a file only dllm writes, by rename (see `PackCache::read`).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot map it: {e}"))?;
    let header = map.get(..HEADER).ok_or("it is shorter than its header")?;
    if &header[..8] != MAGIC || header[8..12] != FORMAT_VERSION.to_le_bytes() {
        return Err("it is not a pack cache file of this dllm version (the next load replaces it)".into());
    }
    let count = u32::from_le_bytes(header[REGION_COUNT_AT..REGION_COUNT_AT + 4].try_into().expect("4 bytes")) as usize;
    let data_end = u64::from_le_bytes(header[DATA_END_AT..DATA_END_AT + 8].try_into().expect("8 bytes")) as usize;
    if count.checked_mul(ENTRY).and_then(|t| t.checked_add(data_end)) != Some(map.len()) {
        return Err(format!("{} bytes long, not the length its header gives", map.len()));
    }
    let entries = trailer(&map, data_end, count)?;
    check_regions(&map, &entries)?;
    Ok(count)
}

/// Removes every cache file in `dir` and the temporaries of writes; returns files and bytes
/// removed.
pub fn clear(dir: &Path) -> std::io::Result<(usize, u64)> {
    let mut removed = (0, 0);
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        other => other?,
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".dllmpack") || name.contains(".dllmpack.tmp-") {
            let bytes = entry.metadata().map_or(0, |m| m.len());
            std::fs::remove_file(entry.path())?;
            removed = (removed.0 + 1, removed.1 + bytes);
        }
    }
    Ok(removed)
}

/// The model path a header records, if any.
fn recorded_model(header: &[u8]) -> Option<PathBuf> {
    let len = u16::from_le_bytes([header[SOURCE_PATH_AT], header[SOURCE_PATH_AT + 1]]) as usize;
    let source = header.get(SOURCE_PATH_AT + 2..SOURCE_PATH_AT + 2 + len).filter(|s| !s.is_empty())?;
    Some(PathBuf::from(&*String::from_utf8_lossy(source)))
}

/// Written by hand rather than with `tempfile`: the name carries the writer's process id, so
/// that a later write can tell a temporary abandoned by a killed process (which it removes)
/// from one a running process is still writing (which it leaves alone).
fn temporary_name(path: &Path, pid: u32, n: u64) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{pid}-{n}"));
    PathBuf::from(name)
}

/// Removes temporary files of `path` left by processes that no longer run (Linux only: other
/// systems keep them until the cache directory is cleared).
fn remove_abandoned_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let prefix = format!("{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file_name.strip_prefix(&prefix) else { continue };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if cfg!(target_os = "linux") && pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes the cache files in `dir` whose header names a model file that no longer exists
/// (deleted or moved), so that the folder does not keep gigabytes for models that are gone.
/// Files of other formats or without a recorded path are left alone.
fn remove_caches_of_missing_models(dir: &Path) {
    for cache in list(dir) {
        if cache.model.is_some_and(|model| !model.exists()) {
            let _ = std::fs::remove_file(&cache.path);
        }
    }
}

/// FNV-1a, 64-bit: a stable hash for file names and the layout fingerprint (std's hasher may
/// change between Rust releases, which would orphan every cache file).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
