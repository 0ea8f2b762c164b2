//! An in-process fake Hugging Face Hub for tests (std only, no network
//! beyond 127.0.0.1): two HTTP servers, the Hub and a CDN on another port.
//!
//! The Hub serves `/{org}/{name}/resolve/{rev}/{file}` the way
//! huggingface.co does (as huggingface_hub's `hf_raise_for_status` reads
//! it): `X-Repo-Commit` and `ETag` on every file answer; `*.safetensors`
//! files answered with a 302 to the CDN carrying `X-Linked-Etag` and
//! `X-Linked-Size`; errors with `X-Error-Code` (`RepoNotFound` as 401 for an
//! anonymous caller and 404 otherwise, `GatedRepo` 401/403,
//! `RevisionNotFound` and `EntryNotFound` 404). Both servers honour
//! `Range: bytes=a-b` (206 + `Content-Range`, 416 past the end). Every
//! request is logged (server, path, range, whether it carried a token) so
//! tests can prove what was and was not fetched.
//!
//! Shared by crates/ingest and crates/cli tests (`#[path]` include).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The token the fake Hub accepts for gated repos.
pub const GOOD_TOKEN: &str = "hf_goodtoken123";

/// One repo on the fake Hub.
#[derive(Clone, Default)]
pub struct Repo {
    pub commit: String,
    /// other revisions (branch or tag → commit) and their files
    pub revisions: BTreeMap<String, (String, BTreeMap<String, Vec<u8>>)>,
    pub files: BTreeMap<String, Vec<u8>>,
    pub gated: bool,
    /// answer the first `slow_requests` requests after `delay`
    pub delay: Duration,
    pub slow_requests: usize,
    /// the CDN answers range requests for this repo with the whole file (200)
    pub cdn_ignores_range: bool,
    /// the Hub omits X-Repo-Commit (a server that is not a Hub)
    pub no_commit_header: bool,
    /// a missing file is a bare 404, without X-Error-Code or X-Repo-Commit
    /// (a mirror that serves the files it has as a plain file server)
    pub bare_404: bool,
    /// the Hub refuses every request with a 400 whose X-Error-Message and
    /// body quote the request's Authorization header (a hostile or broken
    /// endpoint echoing the token)
    pub echo_authorization: bool,
}

impl Repo {
    pub fn new(commit: &str) -> Repo {
        Repo { commit: commit.into(), ..Repo::default() }
    }
    pub fn file(mut self, name: &str, bytes: Vec<u8>) -> Repo {
        self.files.insert(name.into(), bytes);
        self
    }
}

/// A logged request.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    /// "hub" or "cdn"
    pub server: &'static str,
    pub path: String,
    pub range: Option<(u64, u64)>,
    pub authorization: Option<String>,
    /// bytes of body sent
    pub sent: u64,
}

#[derive(Default)]
struct State {
    repos: Mutex<BTreeMap<String, Repo>>,
    log: Mutex<Vec<Logged>>,
    served: Mutex<BTreeMap<String, usize>>,
}

/// The two servers.
pub struct FakeHub {
    pub url: String,
    pub cdn_url: String,
    state: Arc<State>,
    calls: Arc<AtomicUsize>,
}

impl FakeHub {
    pub fn start() -> FakeHub {
        let state = Arc::new(State::default());
        let hub = TcpListener::bind("127.0.0.1:0").expect("bind");
        let cdn = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://127.0.0.1:{}", hub.local_addr().unwrap().port());
        let cdn_url = format!("http://127.0.0.1:{}", cdn.local_addr().unwrap().port());
        let calls = Arc::new(AtomicUsize::new(0));
        for (listener, server) in [(hub, "hub"), (cdn, "cdn")] {
            let state = state.clone();
            let cdn_url = cdn_url.clone();
            let calls = calls.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let state = state.clone();
                    let cdn_url = cdn_url.clone();
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::thread::spawn(move || {
                        let _ = handle(stream, server, &state, &cdn_url);
                    });
                }
            });
        }
        FakeHub { url, cdn_url, state, calls }
    }

    pub fn add(&self, id: &str, repo: Repo) {
        self.state.repos.lock().unwrap().insert(id.into(), repo);
    }

    pub fn log(&self) -> Vec<Logged> {
        self.state.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.state.log.lock().unwrap().clear();
    }

    /// Connections accepted so far (both servers).
    pub fn connections(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// A safetensors file: `tensors` of (name, dtype, shape) laid out in order,
/// the header padded with spaces to at least `min_header` bytes, and the
/// data section filled with zeros.
pub fn safetensors_file(tensors: &[(&str, &str, &[u64])], min_header: usize) -> Vec<u8> {
    let bits = |d: &str| match d {
        "F32" | "I32" => 32,
        "F16" | "BF16" => 16,
        "I8" | "U8" | "F8_E4M3" => 8,
        _ => panic!("dtype {d}"),
    };
    let mut off = 0u64;
    let mut entries = Vec::new();
    for (name, dtype, shape) in tensors {
        let n: u64 = shape.iter().product();
        let bytes = n * bits(dtype) / 8;
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        entries.push(format!(
            r#""{name}":{{"dtype":"{dtype}","shape":[{}],"data_offsets":[{off},{}]}}"#,
            dims.join(","),
            off + bytes
        ));
        off += bytes;
    }
    let mut header = format!(r#"{{"__metadata__":{{"format":"pt"}},{}}}"#, entries.join(","));
    while header.len() < min_header {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + off as usize, 0);
    out
}

/// The 40-hex commit used by tests for a short tag.
pub fn commit(tag: &str) -> String {
    let mut s: String = tag.bytes().map(|b| format!("{:02x}", b)).collect();
    while s.len() < 40 {
        s.push('0');
    }
    s.truncate(40);
    s
}

fn handle(mut stream: TcpStream, server: &'static str, state: &State, cdn_url: &str) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let range = headers.get("range").and_then(|r| {
        let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
        Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
    });
    let authorization = headers.get("authorization").cloned();
    let reply = if server == "hub" {
        hub_reply(&path, authorization.as_deref(), state, cdn_url)
    } else {
        cdn_reply(&path, state)
    };
    let (status, mut extra, body, delay, ignores_range) = reply;
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    let (status, mut extra, body) = match (status, range) {
        (200, Some((a, b))) if !ignores_range => {
            let len = body.len() as u64;
            if a >= len {
                (416, vec![("Content-Range".to_string(), format!("bytes */{len}"))], Vec::new())
            } else {
                let b = b.min(len - 1);
                extra.push(("Content-Range".into(), format!("bytes {a}-{b}/{len}")));
                (206, extra, body[a as usize..=b as usize].to_vec())
            }
        }
        _ => (status, extra, body),
    };
    extra.push(("Content-Length".into(), body.len().to_string()));
    extra.push(("Connection".into(), "close".into()));
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (k, v) in &extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    state.log.lock().unwrap().push(Logged { server, path, range, authorization, sent: body.len() as u64 });
    stream.write_all(head.as_bytes())?;
    // big bodies may be cut off by the client: ignore write errors
    let _ = stream.write_all(&body);
    let _ = stream.flush();
    // drain so the client sees a clean close
    let _ = reader.read(&mut [0u8; 1]);
    Ok(())
}

type Reply = (u16, Vec<(String, String)>, Vec<u8>, Duration, bool);

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Status",
    }
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    (
        status,
        vec![("X-Error-Code".into(), code.into()), ("X-Error-Message".into(), message.into())],
        Vec::new(),
        Duration::ZERO,
        false,
    )
}

fn hub_reply(path: &str, auth: Option<&str>, state: &State, cdn_url: &str) -> Reply {
    // /{org}/{name}/resolve/{rev}/{file}
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if parts.len() < 5 || parts[2] != "resolve" {
        return error(404, "", "not a resolve URL");
    }
    let id = format!("{}/{}", parts[0], parts[1]);
    let rev = parts[3].replace("%2F", "/");
    let file = parts[4].to_string();
    let repos = state.repos.lock().unwrap();
    let Some(repo) = repos.get(&id) else {
        return if auth.is_some() {
            error(404, "RepoNotFound", "Repository not found")
        } else {
            error(401, "RepoNotFound", "Invalid username or password.")
        };
    };
    let delay = {
        let mut served = state.served.lock().unwrap();
        let n = served.entry(id.clone()).or_insert(0);
        *n += 1;
        if *n <= repo.slow_requests {
            repo.delay
        } else {
            Duration::ZERO
        }
    };
    let with_delay = |mut r: Reply| {
        r.3 = delay;
        r
    };
    if repo.echo_authorization {
        let quoted = format!("bad request: Authorization: {}", auth.unwrap_or("(none)"));
        let mut r = error(400, "", &quoted);
        r.2 = quoted.into_bytes();
        return with_delay(r);
    }
    if repo.gated && auth != Some(&format!("Bearer {GOOD_TOKEN}")) {
        let status = if auth.is_some() { 403 } else { 401 };
        return with_delay(error(status, "GatedRepo", "Access to model is restricted."));
    }
    let (commit, files) = if rev == repo.commit || rev == "main" {
        (repo.commit.clone(), &repo.files)
    } else if let Some((c, f)) = repo.revisions.get(&rev) {
        (c.clone(), f)
    } else if let Some((_, (c, f))) = repo.revisions.iter().find(|(_, (c, _))| *c == rev) {
        (c.clone(), f)
    } else {
        return with_delay(error(404, "RevisionNotFound", "Invalid rev id"));
    };
    let mut headers = Vec::new();
    if !repo.no_commit_header {
        headers.push(("X-Repo-Commit".to_string(), commit.clone()));
    }
    let Some(bytes) = files.get(&file) else {
        if repo.bare_404 {
            return with_delay((404, Vec::new(), b"Not Found".to_vec(), Duration::ZERO, false));
        }
        let mut r = error(404, "EntryNotFound", "Entry not found");
        r.1.extend(headers);
        return with_delay(r);
    };
    // LFS files (weights): the Hub answers with a redirect to its CDN
    if file.ends_with(".safetensors") || file.ends_with(".gguf") {
        headers.push(("X-Linked-Etag".into(), format!("\"{}\"", lfs_etag(bytes))));
        headers.push(("X-Linked-Size".into(), bytes.len().to_string()));
        headers.push(("ETag".into(), "\"hub-side-etag\"".into()));
        headers.push(("Location".into(), format!("{cdn_url}/blobs/{id}/{commit}/{file}?sig=abc")));
        return (302, headers, Vec::new(), delay, false);
    }
    headers.push(("ETag".into(), format!("\"{}\"", lfs_etag(bytes))));
    (200, headers, bytes.clone(), delay, false)
}

/// A stand-in for a content hash: distinct per content, hex.
fn lfs_etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}{:08x}", bytes.len())
}

fn cdn_reply(path: &str, state: &State) -> Reply {
    // /blobs/{org}/{name}/{commit}/{file}?sig=…
    let path = path.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if parts.len() < 5 || parts[0] != "blobs" {
        return error(404, "", "no such blob");
    }
    let id = format!("{}/{}", parts[1], parts[2]);
    let repos = state.repos.lock().unwrap();
    let Some(repo) = repos.get(&id) else { return error(404, "", "no such blob") };
    let files = if parts[3] == repo.commit {
        &repo.files
    } else {
        match repo.revisions.values().find(|(c, _)| c == parts[3]) {
            Some((_, f)) => f,
            None => return error(404, "", "no such blob"),
        }
    };
    match files.get(parts[4]) {
        Some(b) => {
            (200, vec![("ETag".into(), "\"cdn-etag\"".into())], b.clone(), Duration::ZERO, repo.cdn_ignores_range)
        }
        None => error(404, "", "no such blob"),
    }
}

/// A tiny Llama config: 202,048 parameters (hand count: embeddings and
/// lm_head 1000 × 64 each; per layer q/o 64 × 64, k/v 32 × 64 (2 kv heads ×
/// head_dim 16), gate/up/down 3 × 64 × 128, two norms of 64; final norm 64).
pub const TINY_CONFIG: &str = r#"{"model_type":"llama","architectures":["LlamaForCausalLM"],"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"vocab_size":1000,"max_position_embeddings":2048,"tie_word_embeddings":false,"torch_dtype":"bfloat16"}"#;
pub const TINY_PARAMS: u64 = 202_048;

/// A tensor to lay out: (name, safetensors dtype, shape).
pub type Tensor = (String, &'static str, Vec<u64>);

/// The tiny Llama's tensors (BF16) for the given layers, plus the
/// embeddings (`first`) and the final norm and lm_head (`last`).
pub fn tiny_tensors(layers: std::ops::Range<u32>, first: bool, last: bool) -> Vec<Tensor> {
    let mut t: Vec<Tensor> = Vec::new();
    if first {
        t.push(("model.embed_tokens.weight".into(), "BF16", vec![1000, 64]));
    }
    for l in layers {
        let p = format!("model.layers.{l}");
        for (n, s) in [
            ("self_attn.q_proj.weight", vec![64, 64]),
            ("self_attn.k_proj.weight", vec![32, 64]),
            ("self_attn.v_proj.weight", vec![32, 64]),
            ("self_attn.o_proj.weight", vec![64, 64]),
            ("mlp.gate_proj.weight", vec![128, 64]),
            ("mlp.up_proj.weight", vec![128, 64]),
            ("mlp.down_proj.weight", vec![64, 128]),
            ("input_layernorm.weight", vec![64]),
            ("post_attention_layernorm.weight", vec![64]),
        ] {
            t.push((format!("{p}.{n}"), "BF16", s));
        }
    }
    if last {
        t.push(("model.norm.weight".into(), "BF16", vec![64]));
        t.push(("lm_head.weight".into(), "BF16", vec![1000, 64]));
    }
    t
}

/// [`safetensors_file`] for owned tensor lists.
pub fn st_file(tensors: &[Tensor], min_header: usize) -> Vec<u8> {
    let refs: Vec<(&str, &str, &[u64])> = tensors.iter().map(|(n, d, s)| (n.as_str(), *d, s.as_slice())).collect();
    safetensors_file(&refs, min_header)
}

/// An index naming, for each shard, the tensors it holds.
pub fn index_json(shards: &[(&str, &[Tensor])]) -> Vec<u8> {
    let mut map = Vec::new();
    for (file, tensors) in shards {
        for (n, _, _) in tensors.iter() {
            map.push(format!(r#""{n}":"{file}""#));
        }
    }
    format!(r#"{{"metadata":{{"total_size":0}},"weight_map":{{{}}}}}"#, map.join(",")).into_bytes()
}
