//! A local mock of the Hugging Face API on 127.0.0.1 for download tests: the repository tree
//! listing and `resolve` with Range requests, as hf-hub 0.5 uses them, with faults on demand.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

pub const REPO: &str = "dllm-test/tiny-GGUF";
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// How the mock misbehaves.
#[derive(Default)]
pub struct Faults {
    /// Close the connection after this many body bytes on the next full transfer.
    pub cut_next_transfer_at: Option<usize>,
    /// List this sha256 instead of the real one.
    pub wrong_sha: bool,
}

pub struct MockHub {
    pub endpoint: String,
    pub faults: Arc<Mutex<Faults>>,
    /// Start offsets of the body requests received (Range: bytes=N-).
    pub ranges: Arc<Mutex<Vec<usize>>>,
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

pub fn start_mock(files: HashMap<String, Vec<u8>>) -> MockHub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let faults = Arc::new(Mutex::new(Faults::default()));
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let (f, r) = (faults.clone(), ranges.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut range_start = None;
            let mut range_end = None;
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
            let path = request_line.split_whitespace().nth(1).unwrap_or("").to_string();
            let respond =
                |stream: &mut std::net::TcpStream, status: &str, headers: &[(String, String)], body: &[u8]| {
                    let mut head =
                        format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
                    for (k, v) in headers {
                        head.push_str(&format!("{k}: {v}\r\n"));
                    }
                    head.push_str("\r\n");
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(body);
                };
            let tree = format!("/api/models/{REPO}/tree/main?recursive=true");
            let resolve = format!("/{REPO}/resolve/main/");
            if path == tree {
                let wrong = f.lock().unwrap().wrong_sha;
                let entries: Vec<serde_json::Value> = files
                    .iter()
                    .map(|(name, bytes)| {
                        let sha = if wrong { sha256_hex(b"something else") } else { sha256_hex(bytes) };
                        serde_json::json!({"type": "file", "path": name, "size": 135, "lfs": {"oid": sha, "size": bytes.len()}})
                    })
                    .chain([serde_json::json!({"type": "file", "path": "README.md", "size": 10})])
                    .collect();
                respond(&mut stream, "200 OK", &[], serde_json::to_string(&entries).unwrap().as_bytes());
            } else if let Some(name) = path.strip_prefix(&resolve).and_then(|n| files.get(n).map(|b| (n, b))) {
                let (_, bytes) = name;
                let start = range_start.unwrap_or(0);
                let end = range_end.unwrap_or(bytes.len() - 1).min(bytes.len() - 1);
                let headers = vec![
                    ("ETag".to_string(), format!("\"{}\"", sha256_hex(bytes))),
                    ("X-Repo-Commit".to_string(), COMMIT.to_string()),
                    ("Content-Range".to_string(), format!("bytes {start}-{end}/{}", bytes.len())),
                ];
                let body = &bytes[start..=end];
                let is_probe = range_end == Some(0);
                if !is_probe {
                    r.lock().unwrap().push(start);
                }
                let cut = if is_probe { None } else { f.lock().unwrap().cut_next_transfer_at.take() };
                match cut {
                    Some(n) => {
                        // Promise the whole body, send part of it, hang up.
                        let head = format!(
                            "HTTP/1.1 206 Partial Content\r\nConnection: close\r\nContent-Length: {}\r\nETag: \"{}\"\r\nX-Repo-Commit: {COMMIT}\r\nContent-Range: bytes {start}-{end}/{}\r\n\r\n",
                            body.len(),
                            sha256_hex(bytes),
                            bytes.len()
                        );
                        let _ = stream.write_all(head.as_bytes());
                        let _ = stream.write_all(&body[..n.min(body.len())]);
                    }
                    None => respond(&mut stream, "206 Partial Content", &headers, body),
                }
            } else {
                respond(&mut stream, "404 Not Found", &[], b"{\"error\":\"Repository not found\"}");
            }
        }
    });
    MockHub { endpoint, faults, ranges }
}
