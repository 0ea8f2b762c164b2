//! The fuzz targets on a stable toolchain, for `.ci/run`: replays a
//! target's committed corpus (`fuzz/seeds/TARGET/`), then feeds it mutated
//! and random inputs for a fixed time. No coverage guidance (that is what
//! nightly `cargo fuzz run` adds); the same target bodies
//! (`vramfit_fuzz::TARGETS`) and the same rules: a panic, or one input that
//! runs longer than `--timeout`, fails the run and leaves the input in
//! `--artifacts`. Deterministic for a given `--seed`, so a failure
//! reproduces with the seed it prints.
//!
//! It stops at `--runs` executions or after `--seconds`, whichever comes
//! first (20 s when neither is given; no time limit when only `--runs` is),
//! and says how far it got every 60 s on stderr.
//!
//! ```text
//! fuzz_stable TARGET [--seconds N] [--runs N] [--seed N] [--corpus DIR]… [--artifacts DIR] [--timeout S] [--max-len N]
//! fuzz_stable --list
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a long run says how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(60);

struct Options {
    target: String,
    seconds: Option<u64>,
    runs: Option<u64>,
    seed: u64,
    corpus: Vec<PathBuf>,
    artifacts: PathBuf,
    timeout: u64,
    max_len: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: fuzz_stable TARGET [--seconds N] [--runs N] [--seed N] [--corpus DIR]... [--artifacts DIR] [--timeout S] [--max-len N]\n       fuzz_stable --list"
    );
    std::process::exit(2)
}

fn parse_args() -> Options {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        target: String::new(),
        seconds: None,
        runs: None,
        seed: 0,
        corpus: Vec::new(),
        artifacts: PathBuf::from("fuzz/artifacts"),
        timeout: 10,
        max_len: 64 << 10,
    };
    let num = |v: Option<String>| -> u64 { v.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()) };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--list" => {
                for (n, _) in vramfit_fuzz::TARGETS {
                    println!("{n}");
                }
                std::process::exit(0)
            }
            "--seconds" => o.seconds = Some(num(args.next())),
            "--runs" => o.runs = Some(num(args.next())),
            "--seed" => o.seed = num(args.next()),
            "--timeout" => o.timeout = num(args.next()),
            "--max-len" => o.max_len = num(args.next()) as usize,
            "--corpus" => o.corpus.push(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--artifacts" => o.artifacts = PathBuf::from(args.next().unwrap_or_else(|| usage())),
            t if !t.starts_with('-') && o.target.is_empty() => o.target = t.to_string(),
            _ => usage(),
        }
    }
    if o.target.is_empty() {
        usage()
    }
    if o.seed == 0 {
        o.seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
    }
    o
}

/// xorshift64*: small, fast, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Values that sit on boundaries parsers get wrong.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    7,
    8,
    16,
    255,
    256,
    4096,
    65535,
    65536,
    i32::MAX as u64,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    i64::MAX as u64,
    1 << 63,
    u64::MAX,
];
/// Text fragments the text parsers branch on.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1e999",
    b"NaN",
    b"inf",
    b"18446744073709551616",
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"null",
    b"true",
    b"\n",
    b"\r\n",
    b"\t",
    b"\x1b[4m",
    b"<",
    b">",
    b"</",
    b"=",
    b"MiB",
    b"GiB",
    b" ",
    b"\xef\xbb\xbf",
];

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.next() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                data.drain(a..b);
            }
            4 if len > 0 => {
                // duplicate a range (repetition, deep nesting)
                let a = rng.below(len);
                let b = (a + 1 + rng.below(256)).min(len);
                let chunk = data[a..b].to_vec();
                let at = rng.below(len + 1);
                for _ in 0..1 + rng.below(8) {
                    data.splice(at..at, chunk.iter().copied());
                }
            }
            5 if len >= 8 => {
                // an interesting integer, little-endian, 1/2/4/8 bytes wide
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let w = [1, 2, 4, 8][rng.below(4)];
                let i = rng.below(len - w + 1);
                data[i..i + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
            6 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let i = rng.below(len + 1);
                data.splice(i..i, t.iter().copied());
            }
            7 if !other.is_empty() => {
                // splice a piece of another input
                let a = rng.below(other.len());
                let b = (a + 1 + rng.below(512)).min(other.len());
                let i = rng.below(len + 1);
                data.splice(i..i, other[a..b].iter().copied());
            }
            8 if len > 0 => {
                // decimal digits over a number in text
                let i = rng.below(len);
                let s = INTERESTING[rng.below(INTERESTING.len())].to_string();
                let end = (i + s.len()).min(len);
                data.splice(i..end, s.bytes());
            }
            9 if len > 1 => data.truncate(rng.below(len)),
            _ => data.push(rng.next() as u8),
        }
    }
    data.truncate(max_len);
}

fn load_corpus(dirs: &[PathBuf], max_len: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else { continue };
        let mut files: Vec<PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
        files.sort();
        for f in files {
            if let Ok(b) = std::fs::read(&f) {
                out.push((f.display().to_string(), b.into_iter().take(max_len.max(1 << 20)).collect()));
            }
        }
    }
    out
}

fn save(artifacts: &Path, kind: &str, target: &str, data: &[u8]) -> PathBuf {
    let _ = std::fs::create_dir_all(artifacts);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
    let p = artifacts.join(format!("{kind}-{target}-{h:016x}"));
    let _ = std::fs::write(&p, data);
    p
}

fn main() {
    let o = parse_args();
    let Some(f) = vramfit_fuzz::target(&o.target) else {
        eprintln!("fuzz_stable: unknown target '{}' (--list lists them)", o.target);
        std::process::exit(2)
    };
    let corpus = load_corpus(&o.corpus, o.max_len);

    // watchdog: one input running longer than --timeout fails the run
    let current: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let started_ms = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicBool::new(false));
    let clock = Instant::now();
    {
        let (current, started_ms, busy) = (current.clone(), started_ms.clone(), busy.clone());
        let (artifacts, target, timeout) = (o.artifacts.clone(), o.target.clone(), o.timeout);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = clock.elapsed().as_millis() as u64;
            if busy.load(Ordering::SeqCst) && now.saturating_sub(started_ms.load(Ordering::SeqCst)) > timeout * 1000 {
                let data = current.lock().map(|d| d.clone()).unwrap_or_default();
                let p = save(&artifacts, "timeout", &target, &data);
                eprintln!("fuzz_stable {target}: one input ran longer than {timeout} s; saved to {}", p.display());
                std::process::exit(1);
            }
        });
    }
    let run = |data: &[u8]| -> bool {
        if let Ok(mut c) = current.lock() {
            c.clear();
            c.extend_from_slice(data);
        }
        started_ms.store(clock.elapsed().as_millis() as u64, Ordering::SeqCst);
        busy.store(true, Ordering::SeqCst);
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(data))).is_ok();
        busy.store(false, Ordering::SeqCst);
        ok
    };
    let fail = |data: &[u8], what: &str| -> ! {
        let p = save(&o.artifacts, "crash", &o.target, data);
        eprintln!("fuzz_stable {}: panic on {what}; input saved to {} (seed {})", o.target, p.display(), o.seed);
        std::process::exit(1)
    };

    // 1. the corpus as it is
    for (name, data) in &corpus {
        if !run(data) {
            fail(data, &format!("corpus file {name}"));
        }
    }
    // 2. mutated and random inputs until the time or run budget is spent
    let mut rng = Rng(o.seed);
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let start = Instant::now();
    let seconds = match (o.seconds, o.runs) {
        (Some(s), _) => Some(s),
        (None, Some(_)) => None,
        (None, None) => Some(20),
    };
    let deadline = seconds.map(|s| start + Duration::from_secs(s));
    let mut next_report = start + PROGRESS_EVERY;
    let mut execs: u64 = corpus.len() as u64;
    loop {
        let now = Instant::now();
        if o.runs.is_some_and(|r| execs >= r) || deadline.is_some_and(|d| now >= d) {
            break;
        }
        if now >= next_report {
            let secs = clock.elapsed().as_secs_f64();
            eprintln!(
                "fuzz_stable {}: {execs} executions in {secs:.0} s ({:.0}/s), no failure so far",
                o.target,
                execs as f64 / secs.max(1e-9)
            );
            next_report = now + PROGRESS_EVERY;
        }
        let pick = rng.below(4);
        let mut data = if pick == 0 || (corpus.is_empty() && pool.is_empty()) {
            (0..rng.below(256)).map(|_| rng.next() as u8).collect()
        } else if pick == 1 && !pool.is_empty() {
            pool[rng.below(pool.len())].clone()
        } else if !corpus.is_empty() {
            corpus[rng.below(corpus.len())].1.clone()
        } else {
            pool[rng.below(pool.len())].clone()
        };
        let other: &[u8] = if corpus.is_empty() { &[] } else { &corpus[rng.below(corpus.len())].1 };
        mutate(&mut rng, &mut data, other, o.max_len);
        if !run(&data) {
            fail(&data, &format!("mutated input #{execs}"));
        }
        execs += 1;
        if pool.len() < 256 {
            pool.push(data);
        } else {
            let i = rng.below(pool.len());
            pool[i] = data;
        }
    }
    let secs = clock.elapsed().as_secs_f64();
    println!(
        "fuzz_stable {}: {} corpus inputs, {execs} executions in {secs:.1} s ({:.0}/s), seed {}, no failure",
        o.target,
        corpus.len(),
        execs as f64 / secs.max(1e-9),
        o.seed
    );
}
