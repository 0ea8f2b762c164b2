//! The shape of the workspace's code, checked so it does not drift back:
//!
//! - Import circles between the files of a crate: file A using something of
//!   file B (a `use` or a path through `crate::`, `super::` or `self::`)
//!   while B uses, directly or through other files, something of A. A circle
//!   means neither file can be read, tested or moved without the other;
//!   issue 20 untangled `ladder → search → report → ladder` and
//!   `search ↔ rank` in the planner, which keeps none. The workspace keeps at
//!   most four, each listed and explained in docs/CONTRIBUTING.md.
//! - No function of product code longer than 120 lines.
//!
//! Test code (`#[cfg(test)] mod tests`, `tests.rs`) is not counted: it may
//! use anything and be as long as its table.
//!
//! Items the crate root re-exports (`pub use search::MemKey` in lib.rs) are
//! followed to the file that defines them, so `use crate::MemKey` counts as
//! a use of search.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file as a module: its path from the crate root (`[]` for
/// lib.rs, `["emit"]` for emit.rs or emit/mod.rs) and its text without
/// comments and test modules.
struct Module {
    path: Vec<String>,
    file: String,
    code: String,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` → `[a, b]`; `src/a/mod.rs` → `[a]`; `src/lib.rs` → `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
        parts.pop();
    }
    parts
}

/// The code without `//` comments and
/// `#[cfg(test)]` items (a test module is cut to its closing brace).
fn strip(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    let mut out = String::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        // the item ends at its `;` (a `mod tests;` declaration) or its matching brace
        let open = after.find('{');
        let semi = after.find(';');
        let end = match (open, semi) {
            (Some(o), Some(s)) if s < o => s + 1,
            (Some(o), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[o..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = o + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        // keep the lines, so line numbers stay those of the file
        out.push_str(&"\n".repeat(after[..end].matches('\n').count()));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Expand a `use` tree (`a::{b, c::{d, self}}`) into full paths.
fn expand_use(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let mut base = prefix.to_vec();
        base.extend(head);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], &base, out);
    } else if !tree.is_empty() {
        let mut p = prefix.to_vec();
        let tree = tree.split(" as ").next().unwrap_or(tree);
        p.extend(tree.split("::").map(str::trim).filter(|s| !s.is_empty() && *s != "self").map(String::from));
        out.push(p);
    }
}

/// Every path the code names through `crate::`, `super::` or `self::`, as
/// written (first segment kept).
fn referenced_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` statements, with their groups
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        let after = &rest[i + 4..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = after.find(';') else { break };
        let tree = after[..end].trim();
        if tree.starts_with("crate::") || tree.starts_with("super::") || tree.starts_with("self::") {
            expand_use(tree, &[], &mut out);
        }
    }
    // paths in expressions and types: `super::rank::better(…)`, `crate::search::Scored`
    let bytes = code.as_bytes();
    for kw in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(kw) {
            let at = from + k;
            from = at + kw.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':') {
                continue;
            }
            let tail: String =
                code[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
            let p: Vec<String> = tail.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            if p.len() > 1 {
                out.push(p);
            }
        }
    }
    out
}

struct Crate {
    modules: Vec<Module>,
    /// module path → index
    index: BTreeMap<Vec<String>, usize>,
    /// (module, name) → the path a `pub use` there re-exports
    reexports: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Crate {
    fn load(src: &Path) -> Crate {
        let mut files = Vec::new();
        rs_files(src, &mut files);
        let mut modules = Vec::new();
        for f in files {
            let name = f.strip_prefix(src).unwrap().to_string_lossy().into_owned();
            if name == "tests.rs" || name.ends_with("/tests.rs") {
                continue; // `#[cfg(test)] mod tests;`
            }
            let text = std::fs::read_to_string(&f).unwrap();
            modules.push(Module { path: module_path(src, &f), file: name, code: strip(&text) });
        }
        let index = modules.iter().enumerate().map(|(i, m)| (m.path.clone(), i)).collect();
        let mut reexports = BTreeMap::new();
        for m in &modules {
            let mut rest = m.code.as_str();
            while let Some(i) = rest.find("pub use ") {
                let after = &rest[i + 8..];
                rest = after;
                let Some(end) = after.find(';') else { break };
                let mut paths = Vec::new();
                expand_use(after[..end].trim(), &[], &mut paths);
                for p in paths {
                    if let Some(last) = p.last() {
                        let abs = absolute(&m.path, &p);
                        reexports.insert((m.path.clone(), last.clone()), abs);
                    }
                }
            }
        }
        Crate { modules, index, reexports }
    }

    /// The file a path (absolute, from the crate root) lands in: the longest
    /// prefix that is a module; an item re-exported there is followed.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<usize> {
        let mut k = abs.len();
        while k > 0 && !self.index.contains_key(&abs[..k]) {
            k -= 1;
        }
        let module = abs[..k].to_vec();
        if k < abs.len() && depth < 8 {
            if let Some(target) = self.reexports.get(&(module.clone(), abs[k].clone())) {
                let mut t = target.clone();
                t.extend(abs[k + 1..].iter().cloned());
                return self.resolve(&t, depth + 1);
            }
        }
        self.index.get(&module).copied()
    }

    /// Edges file → file (a file's uses of itself and of the crate root's
    /// own items are not edges).
    fn edges(&self) -> BTreeMap<usize, BTreeSet<usize>> {
        let mut g: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for (i, m) in self.modules.iter().enumerate() {
            let set = g.entry(i).or_default();
            if m.path.is_empty() {
                continue; // lib.rs declares and re-exports every module: the root, not a user
            }
            for p in referenced_paths(&m.code) {
                let abs = absolute(&m.path, &p);
                if let Some(j) = self.resolve(&abs, 0) {
                    if j != i && !self.modules[j].path.is_empty() {
                        set.insert(j);
                    }
                }
            }
        }
        g
    }
}

/// `crate::a::b` / `super::a` / `self::a` written in module `at`, from the crate root.
fn absolute(at: &[String], p: &[String]) -> Vec<String> {
    let mut base: Vec<String> = match p.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") => at.to_vec(),
        Some("super") => {
            let mut b = at.to_vec();
            let mut it = p.iter().peekable();
            while it.peek().map(|s| s.as_str()) == Some("super") {
                b.pop();
                it.next();
            }
            b.extend(it.cloned());
            return b;
        }
        _ => return p.to_vec(),
    };
    base.extend(p[1..].iter().cloned());
    base
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(g: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct T<'a> {
        g: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: BTreeMap<usize, usize>,
        low: BTreeMap<usize, usize>,
        stack: Vec<usize>,
        on: BTreeSet<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let succ: Vec<usize> = t.g.get(&v).map(|s| s.iter().copied().collect()).unwrap_or_default();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(&v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(&v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[&v] == t.index[&v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for &v in g.keys() {
        if !t.index.contains_key(&v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn circles_in(src: &Path) -> Vec<Vec<String>> {
    let c = Crate::load(src);
    circles(&c.edges()).into_iter().map(|comp| comp.into_iter().map(|i| c.modules[i].file.clone()).collect()).collect()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every crate's `src` folder (the workspace's crates and the Python extension).
fn source_roots() -> Vec<(String, PathBuf)> {
    let mut roots: Vec<(String, PathBuf)> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| (format!("crates/{}", p.file_name().unwrap().to_string_lossy()), p.join("src")))
        .collect();
    roots.push(("python".into(), workspace().join("python/src")));
    roots.sort();
    roots
}

#[test]
fn plan_crate_has_no_import_circle() {
    let src = workspace().join("crates/plan/src");
    let found = circles_in(&src);
    assert!(found.is_empty(), "import circles between files of crates/plan/src: {found:?}");
}

/// `crates/cli: lib.rs ↔ serve/mod.rs`-style names of every circle found.
fn workspace_circles() -> Vec<String> {
    let mut out = Vec::new();
    for (name, src) in source_roots() {
        for c in circles_in(&src) {
            out.push(format!("{name}: {}", c.join(" ↔ ")));
        }
    }
    out
}

#[test]
fn at_most_four_import_circles_each_explained_in_contributing() {
    let found = workspace_circles();
    let doc = std::fs::read_to_string(workspace().join("docs/CONTRIBUTING.md")).unwrap();
    let section =
        doc.split("## Import circles").nth(1).expect("docs/CONTRIBUTING.md has an \"## Import circles\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let undocumented: Vec<&String> = found.iter().filter(|c| !section.contains(&format!("`{c}`"))).collect();
    assert!(
        undocumented.is_empty(),
        "import circles not listed (as `crate: a.rs ↔ b.rs`) under \"## Import circles\" in docs/CONTRIBUTING.md: {undocumented:#?}"
    );
    let listed = section.lines().filter(|l| l.starts_with("- `")).count();
    assert_eq!(
        listed,
        found.len(),
        "docs/CONTRIBUTING.md lists {listed} circles, the code has {}: {found:#?}",
        found.len()
    );
    assert!(found.len() <= 4, "{} import circles (at most 4): {found:#?}", found.len());
}

/// Longest function allowed in product code, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 120;

/// `(lines, name, line number)` of every function in `code` (already stripped of tests and comments).
fn function_lengths(code: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub ")
            .or_else(|| t.strip_prefix("pub(crate) "))
            .or_else(|| t.strip_prefix("pub(super) "))
            .unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let t = t.strip_prefix("unsafe ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // the body: from the first `{` before any `;` to its matching brace
        let (mut depth, mut started) = (0i64, false);
        let mut end = None;
        'scan: for (k, l) in lines.iter().enumerate().skip(n) {
            let mut in_str = false;
            let mut prev = ' ';
            // a brace as a char literal is not a block
            let l = l.replace("'{'", "").replace("'}'", "");
            for c in l.chars() {
                if c == '"' && prev != '\\' {
                    in_str = !in_str;
                } else if !in_str {
                    match c {
                        '{' => {
                            depth += 1;
                            started = true;
                        }
                        '}' => depth -= 1,
                        ';' if !started => break 'scan,
                        _ => {}
                    }
                }
                prev = c;
            }
            if started && depth <= 0 {
                end = Some(k);
                break;
            }
        }
        if let Some(e) = end {
            out.push((e - n + 1, name, n + 1));
        }
    }
    out
}

#[test]
fn no_product_function_over_120_lines() {
    let mut long = Vec::new();
    for (name, src) in source_roots() {
        let mut files = Vec::new();
        rs_files(&src, &mut files);
        for f in files {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            if rel == "tests.rs" || rel.ends_with("/tests.rs") {
                continue;
            }
            let code = strip(&std::fs::read_to_string(&f).unwrap());
            for (len, func, line) in function_lengths(&code) {
                if len > MAX_FN_LINES {
                    long.push(format!("{name}/src/{rel}:{line} fn {func}: {len} lines"));
                }
            }
        }
    }
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines (split them): {long:#?}");
}

#[test]
fn the_length_check_counts_a_function_to_its_closing_brace() {
    let code = "fn short() {\n    let s = \"}\";\n}\nfn decl();\npub fn long() {\n    if x {\n        y();\n    }\n}\n";
    let found = function_lengths(code);
    assert_eq!(found, vec![(3, "short".to_string(), 1), (5, "long".to_string(), 5)]);
}

#[test]
fn the_checker_finds_a_circle_and_follows_reexports() {
    let dir = std::env::temp_dir().join(format!("vramfit-circles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n");
    // a → b through a grouped use, b → c through the root's re-export, c → a in an expression
    write("a.rs", "use super::{b::{self, Other}, };\npub fn f() {}\n");
    write("b.rs", "use crate::Thing; // uses c\npub struct Other;\n");
    write("c.rs", "pub struct Thing;\nfn g() { super::a::f() }\n#[cfg(test)]\nmod tests { use crate::b::Other; }\n");
    let found = circles_in(&dir);
    assert_eq!(found, vec![vec!["a.rs".to_string(), "b.rs".to_string(), "c.rs".to_string()]]);
    // break it: c no longer calls a (a comment does not count)
    write("c.rs", "pub struct Thing;\n// super::a::f()\n");
    assert!(circles_in(&dir).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
