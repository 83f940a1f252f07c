//! A local mock of the Hugging Face API on 127.0.0.1 for download tests: the repository tree
//! listing, the revision of `main`, and `resolve` with Range requests, with faults on demand,
//! hostile ones included (a server is not trusted). Each connection gets its own thread, so a
//! stalled transfer does not block the next request.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

pub const REPO: &str = "dllm-test/tiny-GGUF";
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// How the mock misbehaves.
#[derive(Default, Clone)]
pub struct Faults {
    /// Close the connection after this many body bytes on the next full transfer.
    pub cut_next_transfer_at: Option<usize>,
    /// List this sha256 instead of the real one.
    pub wrong_sha: bool,
    /// List the file's digest as this string.
    pub listed_oid: Option<String>,
    /// List one more .gguf file under this name.
    pub extra_listed_name: Option<String>,
    /// Answer this as the commit (revision and X-Repo-Commit).
    pub commit: Option<String>,
    /// Send this ETag with every file.
    pub etag: Option<String>,
    /// Send this many body bytes, then hold the connection open without a byte more.
    pub stall_after: Option<usize>,
    /// Answer every request for a range that does not start at 0 with 416.
    pub refuse_ranges: bool,
    /// Answer file requests with a redirect that has no Location.
    pub redirect_without_location: bool,
    /// Flip a byte of every body sent.
    pub corrupt_bodies: bool,
}

pub struct MockHub {
    pub endpoint: String,
    pub faults: Arc<Mutex<Faults>>,
    /// Start offsets of the body requests received (Range: bytes=N-).
    pub ranges: Arc<Mutex<Vec<usize>>>,
    /// The revisions the file requests named (`/resolve/REV/...`).
    pub revisions: Arc<Mutex<Vec<String>>>,
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

pub fn start_mock(files: HashMap<String, Vec<u8>>) -> MockHub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let hub = MockHub {
        endpoint,
        faults: Arc::new(Mutex::new(Faults::default())),
        ranges: Arc::new(Mutex::new(Vec::new())),
        revisions: Arc::new(Mutex::new(Vec::new())),
    };
    let (faults, ranges, revisions) = (hub.faults.clone(), hub.ranges.clone(), hub.revisions.clone());
    let files = Arc::new(files);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (faults, ranges, revisions, files) = (faults.clone(), ranges.clone(), revisions.clone(), files.clone());
            std::thread::spawn(move || serve(stream, &faults, &ranges, &revisions, &files));
        }
    });
    hub
}

fn serve(
    mut stream: TcpStream,
    faults: &Mutex<Faults>,
    ranges: &Mutex<Vec<usize>>,
    revisions: &Mutex<Vec<String>>,
    files: &HashMap<String, Vec<u8>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let (mut range_start, mut range_end) = (None, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            let (a, b) = v.trim().split_once('-').unwrap();
            range_start = a.parse::<usize>().ok();
            range_end = b.parse::<usize>().ok();
        }
    }
    let f = faults.lock().unwrap().clone();
    let commit = f.commit.clone().unwrap_or_else(|| COMMIT.to_string());
    let path = request_line.split_whitespace().nth(1).unwrap_or("").to_string();
    let resolve = format!("/{REPO}/resolve/");
    if path == format!("/api/models/{REPO}/tree/main?recursive=true") {
        let mut entries: Vec<serde_json::Value> = files
            .iter()
            .map(|(name, bytes)| {
                let sha = match (&f.listed_oid, f.wrong_sha) {
                    (Some(oid), _) => oid.clone(),
                    (None, true) => sha256_hex(b"something else"),
                    (None, false) => sha256_hex(bytes),
                };
                serde_json::json!({"type": "file", "path": name, "size": 135, "lfs": {"oid": sha, "size": bytes.len()}})
            })
            .chain([serde_json::json!({"type": "file", "path": "README.md", "size": 10})])
            .collect();
        if let Some(name) = &f.extra_listed_name {
            entries.push(serde_json::json!({"type": "file", "path": name, "size": 10}));
        }
        respond(&mut stream, "200 OK", &[], serde_json::to_string(&entries).unwrap().as_bytes());
    } else if path == format!("/api/models/{REPO}/revision/main") {
        let body = serde_json::json!({"sha": commit, "siblings": []});
        respond(&mut stream, "200 OK", &[], body.to_string().as_bytes());
    } else if let Some((rev, bytes)) = path
        .strip_prefix(&resolve)
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(rev, name)| files.get(name).map(|b| (rev.to_string(), b)))
    {
        revisions.lock().unwrap().push(rev);
        if f.redirect_without_location {
            return respond(&mut stream, "302 Found", &[], b"");
        }
        let start = range_start.unwrap_or(0);
        if f.refuse_ranges && start > 0 {
            return respond(&mut stream, "416 Range Not Satisfiable", &[], b"");
        }
        let end = range_end.unwrap_or(bytes.len() - 1).min(bytes.len() - 1);
        let etag = f.etag.clone().unwrap_or_else(|| format!("\"{}\"", sha256_hex(bytes)));
        let mut body = bytes[start..=end].to_vec();
        if f.corrupt_bodies {
            body[0] ^= 0x55;
        }
        let body = &body[..];
        ranges.lock().unwrap().push(start);
        let cut = faults.lock().unwrap().cut_next_transfer_at.take();
        // Promise the whole body in the head, then send what the fault allows.
        let head = format!(
            "HTTP/1.1 206 Partial Content\r\nConnection: close\r\nContent-Length: {}\r\nETag: {etag}\r\nX-Repo-Commit: {commit}\r\nContent-Range: bytes {start}-{end}/{}\r\n\r\n",
            body.len(),
            bytes.len()
        );
        let _ = stream.write_all(head.as_bytes());
        match (cut, f.stall_after) {
            (Some(n), _) => {
                let _ = stream.write_all(&body[..n.min(body.len())]);
            }
            (None, Some(n)) => {
                let _ = stream.write_all(&body[..n.min(body.len())]);
                let _ = stream.flush();
                std::thread::sleep(Duration::from_secs(120));
            }
            (None, None) => {
                let _ = stream.write_all(body);
            }
        }
    } else {
        respond(&mut stream, "404 Not Found", &[], b"{\"error\":\"Repository not found\"}");
    }
}
