//! Hostile local model inputs through the real binary (issue 15): special
//! files as config.json, refs/main or a shard are refused without blocking
//! or reading forever; a shard that is not safetensors says so without
//! echoing its bytes or printing a wrapped size; tensor data missing,
//! overlapping or past the end of the file is reported, never "headers
//! match exactly"; presets cite sources that exist in this repository.

mod common;
use common::{run, vramfit};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":128,"vocab_size":100,"tie_word_embeddings":true}"#;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-inputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mkfifo(p: &Path) -> bool {
    std::process::Command::new("mkfifo").arg(p).status().map(|s| s.success()).unwrap_or(false)
}

/// Exit 2 within a few seconds (never a hang), returning stderr.
fn refused(args: &[&str], env: Option<(&str, &Path)>) -> String {
    let t = Instant::now();
    let mut c = vramfit();
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    let o = c.args(args).timeout(Duration::from_secs(20)).output().unwrap();
    let se = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{args:?}: {se}");
    assert!(t.elapsed() < Duration::from_secs(10), "took {:?}", t.elapsed());
    se
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_not_read() {
    use std::os::unix::fs::symlink;
    // /dev/zero as config.json
    let d = dir("devzero");
    symlink("/dev/zero", d.join("config.json")).unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("config.json: is a character device, not a regular file"), "{se}");
    // a FIFO as config.json: refused before it is opened (opening would block)
    let d = dir("fifo");
    if mkfifo(&d.join("config.json")) {
        let se = refused(&["estimate", d.join("config.json").to_str().unwrap()], None);
        assert!(se.contains("FIFO"), "{se}");
    }
    // /dev/zero and a FIFO as a shard
    let d = dir("shard");
    std::fs::write(d.join("config.json"), CONFIG).unwrap();
    symlink("/dev/zero", d.join("model.safetensors")).unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("model.safetensors: is a character device"), "{se}");
    // /dev/zero and a FIFO as the HF cache's refs/main
    let home = dir("hfhome");
    let repo = home.join("hub/models--acme--x");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots/0123abcd")).unwrap();
    std::fs::write(repo.join("snapshots/0123abcd/config.json"), CONFIG).unwrap();
    symlink("/dev/zero", repo.join("refs/main")).unwrap();
    let se = refused(&["estimate", "acme/x"], Some(("HF_HOME", &home)));
    assert!(se.contains("refs/main: is a character device"), "{se}");
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    if mkfifo(&repo.join("refs/main")) {
        let se = refused(&["estimate", "acme/x"], Some(("HF_HOME", &home)));
        assert!(se.contains("refs/main: is a FIFO"), "{se}");
    }
}

#[cfg(unix)]
#[test]
fn a_shard_linked_to_a_text_file_is_not_a_safetensors_file() {
    let d = dir("passwd");
    std::fs::write(d.join("config.json"), CONFIG).unwrap();
    let text = d.join("notes.txt");
    std::fs::write(&text, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    std::os::unix::fs::symlink(&text, d.join("model.safetensors")).unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("model.safetensors: safetensors header: not a safetensors file"), "{se}");
    let as_len = u64::from_le_bytes(*b"root:x:0").to_string();
    assert!(!se.contains(&as_len) && !se.contains("root:x") && !se.contains("18446744073709551"), "{se}");
    // a file shorter than the length field
    std::fs::remove_file(d.join("model.safetensors")).unwrap();
    std::fs::write(d.join("model.safetensors"), b"abc").unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("not a safetensors file: 3 bytes") && !se.contains("18446744073709551"), "{se}");
}

fn st(header: &str, data: usize) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.resize(v.len() + data, 0);
    v
}

#[test]
fn tensor_data_missing_overlapping_or_past_the_end_is_reported() {
    let d = dir("offsets");
    std::fs::write(d.join("config.json"), CONFIG).unwrap();
    let h = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}"#;
    // the data section holds 20 of the 32 bytes promised: truncated
    std::fs::write(d.join("model.safetensors"), st(h, 20)).unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("tensor 'b' ends at byte 32 of the data section, past the end of the file (20 bytes"), "{se}");
    // overlapping tensors
    let h = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}"#;
    std::fs::write(d.join("model.safetensors"), st(h, 24)).unwrap();
    let se = refused(&["estimate", d.to_str().unwrap()], None);
    assert!(se.contains("overlap"), "{se}");
    // a consistent file still reads, with its honest verdict
    let h = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
    std::fs::write(d.join("model.safetensors"), st(h, 16)).unwrap();
    let (so, _) = run(&["estimate", d.to_str().unwrap(), "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(&so).unwrap();
    assert_eq!(v["model"]["checkpoint"]["params"], 4);
    assert!(v["model"]["checkpoint"]["verdict"].as_str().unwrap().starts_with("MISMATCH"), "{v}");
}

#[test]
fn preset_sources_name_the_hub_repo_and_a_path_in_this_repo() {
    let (so, _) = run(&["estimate", "mistral-7b", "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(&so).unwrap();
    let src = v["model"]["source"].as_str().unwrap();
    assert!(!src.contains("shared/"), "{src}");
    let path = src.split("in this repo: ").nth(1).unwrap().trim_end_matches(')');
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(root.join(path).is_file(), "{path}");
}
