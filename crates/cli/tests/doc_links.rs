//! Every relative link and image in README.md and docs/*.md names a file
//! that is committed (a screenshot the README shows went missing once).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Targets of `[text](target)` and `![alt](target)`, without `#anchor` or a title.
fn link_targets(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = md;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
    }
    out
}

#[test]
fn link_targets_are_found() {
    let md = "see [a](docs/a.md#x), ![img](img/b.png \"t\"), [web](https://x.org/a), [in](#top)";
    assert_eq!(link_targets(md), ["docs/a.md", "img/b.png"]);
}

#[test]
fn every_relative_link_in_the_docs_exists() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut missing = Vec::new();
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let dir = f.parent().unwrap();
        for t in link_targets(&text) {
            checked += 1;
            if !dir.join(&t).exists() {
                missing.push(format!("{}: {t}", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(checked > 10, "only {checked} links found: the scan is broken");
    assert!(missing.is_empty(), "links to files that do not exist:\n{}", missing.join("\n"));
}
