//! docs/limits.md is read off the code: every constant its table names
//! exists in the file the row gives, and its value (evaluated from the
//! source: integer literals, `<<`, `*`, `+`, `-`, parentheses, other
//! constants, `Duration::from_secs`) is the one the row documents; and
//! every constant of the code named like a limit is in the table (or in
//! this test's short list of constants that are not input limits).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `const NAME: T = EXPR;` of a source file (one line each, as
/// rustfmt writes short constants).
fn consts(src: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in src.lines() {
        let t = line.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
        let Some(rest) = t.strip_prefix("const ") else { continue };
        let Some((name, rest)) = rest.split_once(':') else { continue };
        let Some((_, expr)) = rest.split_once('=') else { continue };
        let Some(expr) = expr.trim().strip_suffix(';') else { continue };
        out.insert(name.trim().to_string(), expr.trim().to_string());
    }
    out
}

/// Every constant of the crate that holds `file`, for names the file uses
/// from elsewhere in its crate (`safetensors::MAX_HEADER_BYTES`, `MIB`).
fn crate_consts(file: &Path) -> HashMap<String, String> {
    let mut dir = file.parent().unwrap().to_path_buf();
    while !dir.join("Cargo.toml").exists() {
        dir = dir.parent().unwrap().to_path_buf();
    }
    let mut all = HashMap::new();
    let mut stack = vec![dir.join("src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                for (k, v) in consts(&std::fs::read_to_string(&p).unwrap()) {
                    all.entry(k).or_insert(v);
                }
            }
        }
    }
    // the core unit constants every crate imports
    all.entry("MIB".into()).or_insert("1 << 20".into());
    all.entry("GIB".into()).or_insert("1 << 30".into());
    all
}

struct Eval<'a> {
    toks: Vec<String>,
    pos: usize,
    local: &'a HashMap<String, String>,
    krate: &'a HashMap<String, String>,
    depth: u32,
}

fn tokens(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cs: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            let s = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_' || cs[i] == ':') {
                i += 1;
            }
            out.push(cs[s..i].iter().collect());
        } else if c == '<' && cs.get(i + 1) == Some(&'<') {
            out.push("<<".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

impl Eval<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }
    fn next(&mut self) -> String {
        self.pos += 1;
        self.toks[self.pos - 1].clone()
    }
    fn sum(&mut self) -> u128 {
        let mut v = self.shift();
        while let Some(op) = self.peek() {
            match op {
                "+" => {
                    self.next();
                    v += self.shift();
                }
                "-" => {
                    self.next();
                    v -= self.shift();
                }
                _ => break,
            }
        }
        v
    }
    fn shift(&mut self) -> u128 {
        let mut v = self.product();
        while self.peek() == Some("<<") {
            self.next();
            v <<= self.product();
        }
        v
    }
    fn product(&mut self) -> u128 {
        let mut v = self.atom();
        while self.peek() == Some("*") {
            self.next();
            v *= self.atom();
        }
        v
    }
    fn atom(&mut self) -> u128 {
        let t = self.next();
        if t == "(" {
            let v = self.sum();
            assert_eq!(self.next(), ")");
            return v;
        }
        if t == "Duration::from_secs" {
            assert_eq!(self.next(), "(");
            let v = self.sum();
            assert_eq!(self.next(), ")");
            return v;
        }
        let digits = t.replace('_', "");
        let digits = digits.trim_end_matches("u64").trim_end_matches("usize").trim_end_matches("u32");
        if let Ok(n) = digits.parse::<u128>() {
            return n;
        }
        // another constant: the last path segment, this file first, then the crate
        let name = t.rsplit("::").next().unwrap().to_string();
        let expr = self
            .local
            .get(&name)
            .or_else(|| self.krate.get(&name))
            .unwrap_or_else(|| panic!("constant {t} not found"))
            .clone();
        assert!(self.depth < 8, "constants nest too deep at {t}");
        let mut e = Eval { toks: tokens(&expr), pos: 0, local: self.local, krate: self.krate, depth: self.depth + 1 };
        let v = e.sum();
        let as_ty = e.peek().is_some();
        assert!(!as_ty || e.peek() == Some("as"), "cannot evaluate '{expr}'");
        v
    }
}

fn eval(expr: &str, local: &HashMap<String, String>, krate: &HashMap<String, String>) -> u128 {
    let mut e = Eval { toks: tokens(expr), pos: 0, local, krate, depth: 0 };
    let v = e.sum();
    assert!(e.peek().is_none() || e.peek() == Some("as"), "cannot evaluate '{expr}' past {:?}", e.peek());
    v
}

/// `16 MiB`, `4 KiB`, `256 B`, `10 s`, `65535` → the number.
fn documented(value: &str) -> u128 {
    let mut words = value.split_whitespace();
    let n: u128 = words.next().unwrap().replace(',', "").parse().unwrap_or_else(|_| panic!("value '{value}'"));
    let unit = match words.next() {
        None | Some("B") | Some("s") => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(u) => panic!("unit '{u}' in '{value}'"),
    };
    n * unit
}

/// (constant, file, documented value) of every table row.
fn rows(doc: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 5 {
            continue;
        }
        let c = cells[2];
        let (Some(name), Some(file)) = (c.split('`').nth(1), c.split_once('(').and_then(|(_, r)| r.strip_suffix(')')))
        else {
            continue;
        };
        out.push((name.to_string(), file.to_string(), cells[3].to_string()));
    }
    out
}

#[test]
fn every_constant_in_docs_limits_has_its_documented_value() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/limits.md")).unwrap();
    let rows = rows(&doc);
    assert!(rows.len() >= 50, "only {} rows read from docs/limits.md", rows.len());
    let mut wrong = Vec::new();
    for (name, file, value) in &rows {
        let path = root.join(file);
        let Ok(src) = std::fs::read_to_string(&path) else {
            wrong.push(format!("{name}: no file {file}"));
            continue;
        };
        let local = consts(&src);
        let Some(expr) = local.get(name) else {
            wrong.push(format!("{name}: not a constant of {file}"));
            continue;
        };
        let krate = crate_consts(&path);
        let actual = eval(expr, &local, &krate);
        let want = documented(value);
        if actual != want {
            wrong.push(format!("{name} ({file}): the code says {actual} ({expr}), docs/limits.md says {value}"));
        }
    }
    assert!(wrong.is_empty(), "docs/limits.md disagrees with the code:\n{}", wrong.join("\n"));
}

#[test]
fn the_evaluator_reads_the_forms_the_code_uses() {
    let mut k = HashMap::new();
    k.insert("MAX_HEADER_BYTES".to_string(), "100 << 20".to_string());
    let l = HashMap::new();
    assert_eq!(eval("2 * safetensors::MAX_HEADER_BYTES + (1 << 16)", &l, &k), 209_780_736);
    assert_eq!(eval("50_000_000", &l, &k), 50_000_000);
    assert_eq!(eval("Duration::from_secs(10)", &l, &k), 10);
    assert_eq!(eval("8_519_680 + 4 * MIB", &l, &crate_consts(&root().join("crates/core/src/runtime.rs"))), 12_713_984);
    assert_eq!(documented("16 MiB"), 16 << 20);
    assert_eq!(documented("65,535"), 65_535);
    let r = rows("| a | b | `X` (crates/f.rs) | 4 KiB | c |\n| no | table | row |");
    assert_eq!(r, [("X".to_string(), "crates/f.rs".to_string(), "4 KiB".to_string())]);
}

/// Constants named like limits that are not limits on input, each with
/// the reason: (name, file, why).
const NOT_INPUT_LIMITS: &[(&str, &str, &str)] = &[
    ("MAX_SPLIT_INPUTS", "crates/llamacpp/src/graph.rs", "ggml's GGML_SCHED_MAX_SPLIT_INPUTS, modelled"),
    ("MAX_HEADS", "crates/llamacpp/src/model.rs", "used only as max(MAX_HEADS, MAX_EMBD): the MAX_EMBD row"),
    ("MAX_GBS", "crates/hw/src/bandwidth/mod.rs", "a floating-point bound (GB/s), named in the parser's error"),
    ("MAX_PRICE", "crates/catalog/src/offers.rs", "a floating-point bound (a price), named in the parser's error"),
    ("MAX_FABRIC_GBPS", "crates/catalog/src/offers.rs", "a floating-point bound (Gb/s), named in the parser's error"),
    ("MAX_PATTERN", "crates/ingest/src/config.rs", "MAX_LAYERS + 1: the layer patterns MAX_LAYERS allows"),
    ("MAX_LIMIT_PCT", "crates/core/src/accuracy.rs", "a calibration pass mark, not an input"),
    ("DEDUP_LIMIT", "crates/diagnose/src/pickle.rs", "dicts up to this size replace duplicate keys in place: no bound"),
    ("MAX_CLOSE_NAMES", "crates/catalog/src/gpus.rs", "how many close GPU names an unknown name's error lists"),
    ("NO_LIMIT", "crates/diagnose/src/classify/other.rs", "PyTorch's SIZE_MAX as printed: no memory-fraction cap set"),
    ("MAX_CTX", "crates/llamacpp/src/model.rs", "the MAX_CTX_SIZE row (crates/llamacpp/src/options.rs) is this value"),
    ("MAX_FILE_BYTES", "crates/ingest/src/calibration/throughput.rs", "calibration/mod.rs's MAX_CASES_BYTES (its row)"),
    ("MAX_LINE_BYTES", "crates/ingest/src/calibration/throughput.rs", "calibration/mod.rs's MAX_LINE_BYTES (its row)"),
];

/// Names that look like limits: `MAX_…`, `…_LIMIT`, `…_TIMEOUT`, `…_BUDGET`.
fn looks_like_limit(name: &str) -> bool {
    name.starts_with("MAX_") || name.ends_with("_LIMIT") || name.ends_with("_TIMEOUT") || name.ends_with("_BUDGET")
}

#[test]
fn every_limit_in_the_code_is_in_docs_limits() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/limits.md")).unwrap();
    let documented: std::collections::HashSet<(String, String)> =
        rows(&doc).into_iter().map(|(name, file, _)| (name, file)).collect();
    let mut missing = Vec::new();
    let mut seen_exempt = std::collections::HashSet::new();
    // every crate but the views (report: chart layout, not input)
    let mut stack: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir() && !p.starts_with(root.join("crates/report")))
        .collect();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            for name in consts(&std::fs::read_to_string(&p).unwrap()).into_keys().filter(|n| looks_like_limit(n)) {
                if documented.contains(&(name.clone(), rel.clone())) {
                    continue;
                }
                match NOT_INPUT_LIMITS.iter().find(|(n, f, _)| *n == name && *f == rel) {
                    Some(_) => {
                        seen_exempt.insert((name, rel.clone()));
                    }
                    None => missing.push(format!("{name} ({rel})")),
                }
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "constants named like limits that docs/limits.md does not list (add a row, or, if it is not a limit on input, \
         add it with the reason to NOT_INPUT_LIMITS in this test):\n{}",
        missing.join("\n")
    );
    // an exemption for a constant that no longer exists is stale
    let stale: Vec<_> = NOT_INPUT_LIMITS
        .iter()
        .filter(|(n, f, _)| !seen_exempt.contains(&(n.to_string(), f.to_string())))
        .map(|(n, f, why)| format!("{n} ({f}): {why}"))
        .collect();
    assert!(stale.is_empty(), "NOT_INPUT_LIMITS lists constants the code no longer has:\n{}", stale.join("\n"));
}
