//! One file's bytes from a hub into `blobs/<id>.part`, on a thread of its own.
//!
//! The rules, each from a failure seen against real or hostile servers:
//! - Only a strict prefix of the file is resumed (`Range: bytes=N-`); a `.part` as long as the
//!   file or longer is not a prefix and is deleted. A server that answers the range with 416
//!   or with another range gets one fresh start, never an endless string of failed resumes.
//! - No read waits longer than the stall timeout, so a server that sends 4 KiB and stops is an
//!   error that says so, and the partial file is kept for a resume.
//! - Never more than the listed size is written, whatever the server sends.
//! - A cancel is seen between reads; the caller does not wait for it (see `Hub::download`).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::HubError;

/// Where one transfer reads from and writes to.
pub struct Target {
    pub url: String,
    pub part: PathBuf,
    pub size: u64,
    /// The repository file, for messages.
    pub file: String,
    pub endpoint: String,
    pub stall: Duration,
}

/// An HTTP client whose every wait is bounded by `stall`; status codes are answers, not errors.
pub fn agent(stall: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(stall))
        .timeout_recv_response(Some(stall))
        .timeout_per_read(Some(stall))
        .build()
        .into()
}

impl Target {
    /// Transfers the rest of the file into `part`, calling `report(bytes_in_part)` as it grows.
    pub fn fetch(&self, stop: &AtomicBool, report: &dyn Fn(u64)) -> Result<(), HubError> {
        let agent = agent(self.stall);
        let mut restarted = false;
        loop {
            let mut have = std::fs::metadata(&self.part).map_or(0, |m| m.len());
            if have >= self.size && have > 0 {
                self.remove_part()?;
                have = 0;
            }
            let mut request = agent.get(&self.url);
            if have > 0 {
                request = request.header("Range", format!("bytes={have}-"));
            }
            let response = request.call().map_err(|e| self.failed(e.into_io(), have))?;
            let start = match response.status().as_u16() {
                200 => 0,
                206 if range_start(&response) == Some(have) => have,
                206 | 416 if !restarted => {
                    // The partial file does not match what the server has: start once more.
                    restarted = true;
                    self.remove_part()?;
                    continue;
                }
                404 => return Err(self.refused("404: the file is not in the repository at this commit")),
                status => return Err(self.refused(&format!("HTTP status {status}"))),
            };
            report(start);
            return self.write_body(response.into_body().into_reader(), start, stop, report);
        }
    }

    fn write_body(
        &self,
        mut body: impl Read,
        start: u64,
        stop: &AtomicBool,
        report: &dyn Fn(u64),
    ) -> Result<(), HubError> {
        let disk = |source| HubError::Disk { path: self.part.clone(), source };
        let mut out = OpenOptions::new()
            .create(true)
            .write(true)
            .append(start > 0)
            .truncate(start == 0)
            .open(&self.part)
            .map_err(disk)?;
        let mut done = start;
        let mut buf = vec![0u8; 1 << 18];
        while done < self.size {
            if stop.load(Ordering::Relaxed) {
                return Err(HubError::Cancelled);
            }
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n.min((self.size - done) as usize),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.failed(e, done)),
            };
            out.write_all(&buf[..n]).map_err(disk)?;
            done += n as u64;
            report(done);
        }
        out.flush().map_err(disk)?;
        if done < self.size {
            return Err(self.failed(std::io::ErrorKind::UnexpectedEof.into(), done));
        }
        Ok(())
    }

    fn remove_part(&self) -> Result<(), HubError> {
        match std::fs::remove_file(&self.part) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(HubError::Disk { path: self.part.clone(), source: e })
            }
            _ => Ok(()),
        }
    }

    fn refused(&self, why: &str) -> HubError {
        HubError::Download { file: self.file.clone(), why: format!("{} answered {why}", self.endpoint) }
    }

    /// A network failure with `done` bytes kept: a stall, a cut connection or no connection.
    fn failed(&self, e: std::io::Error, done: u64) -> HubError {
        let timed_out = e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|x| x.downcast_ref::<ureq::Error>())
                .is_some_and(|x| matches!(x, ureq::Error::Timeout(_)));
        let kept = if done > 0 {
            format!("{done} of {} bytes are kept; run the download again to resume", self.size)
        } else {
            "run the download again".to_string()
        };
        let why = if timed_out {
            format!("{} sent nothing for {} s; {kept}", self.endpoint, self.stall.as_secs_f64())
        } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("{} closed the connection early; {kept}", self.endpoint)
        } else {
            format!("cannot reach {} ({e}); check the network connection (or HF_ENDPOINT); {kept}", self.endpoint)
        };
        HubError::Download { file: self.file.clone(), why }
    }
}

/// The first byte of a 206 answer's `Content-Range: bytes START-END/TOTAL`.
fn range_start(response: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let value = response.headers().get("content-range")?.to_str().ok()?;
    value.strip_prefix("bytes ")?.split_once('-')?.0.trim().parse().ok()
}
