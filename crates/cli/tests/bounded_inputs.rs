//! Every file flag goes through the one bounded reader (vramfit-input):
//! `/dev/zero`, a symlink to it, a FIFO and a directory are refused at once
//! with exit 2 naming the file and its kind; a file over its input kind's
//! cap (docs/limits.md) is refused naming the cap. Each case runs under a
//! timeout: reading `/dev/zero` until memory runs out, or blocking on a
//! FIFO, fails the test instead of hanging it.
#![cfg(unix)]

mod common;

use common::vramfit;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-cli-bounded-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fifo(dir: &Path) -> PathBuf {
    let p = dir.join("fifo");
    let ok = std::process::Command::new("mkfifo").arg(&p).status().expect("mkfifo runs").success();
    assert!(ok, "mkfifo");
    p
}

/// Each file flag with the arguments around it (the file goes last).
fn file_flags() -> Vec<Vec<&'static str>> {
    vec![
        vec!["estimate", "llama-2-7b", "--task", "train", "--deepspeed"],
        vec!["estimate", "llama-2-7b", "--task", "lora", "--adapter-config"],
        vec!["plan", "llama-2-7b", "--catalog"],
        vec!["calibrate", "--cases"],
        vec!["check", "--xml"],
        vec!["mig", "profiles", "--gpu", "a100-40gb", "--lgip"],
        vec!["estimate"], // a model path (config.json)
    ]
}

fn refused(args: &[&str], path: &Path, kind: &str) {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.push(path.display().to_string());
    let out = vramfit().args(&all).timeout(Duration::from_secs(20)).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{all:?} (killed by the timeout if None)\n{stderr}");
    assert!(stderr.contains(&path.display().to_string()) && stderr.contains(kind), "{all:?}\n{stderr}");
}

#[test]
fn devices_fifos_and_directories_are_refused_by_every_file_flag() {
    let dir = temp("special");
    let link = dir.join("zero-link");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let fifo = fifo(&dir);
    for args in file_flags() {
        refused(&args, Path::new("/dev/zero"), "a character device");
        refused(&args, &link, "a character device");
        refused(&args, &fifo, "a FIFO");
    }
    // a directory where a file is expected (a model directory is a model, not an error)
    for args in file_flags().into_iter().filter(|a| a.len() > 1) {
        refused(&args, &dir, "a directory");
    }
}

#[test]
fn a_file_over_its_cap_is_refused_naming_the_cap() {
    let dir = temp("caps");
    // caps: DeepSpeed and adapter configs 1 MiB, catalogues 4 MiB (docs/limits.md)
    for (args, size, cap) in [
        (vec!["estimate", "llama-2-7b", "--task", "train", "--deepspeed"], (1 << 20) + 1, "1048576-byte"),
        (vec!["estimate", "llama-2-7b", "--task", "lora", "--adapter-config"], (1 << 20) + 1, "1048576-byte"),
        (vec!["plan", "llama-2-7b", "--catalog"], (4 << 20) + 1, "4194304-byte"),
    ] {
        let p = dir.join(format!("big-{}", args.len()));
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(size).unwrap(); // a sparse file: the cap is on what is read
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.push(p.display().to_string());
        let out = vramfit().args(&all).timeout(Duration::from_secs(20)).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}\n{stderr}");
        assert!(stderr.contains(cap) && stderr.contains(&p.display().to_string()), "{all:?}\n{stderr}");
    }
}

#[test]
fn a_binary_catalogue_is_named_not_utf8() {
    let dir = temp("enc");
    let p = dir.join("bin.toml");
    std::fs::write(&p, [0x00u8, 0xff, 0xfe, 0x00, 0x80]).unwrap();
    let out = vramfit().args(["plan", "llama-2-7b", "--catalog"]).arg(&p).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--catalog") && stderr.contains("not UTF-8 text"), "{stderr}");
}

#[test]
fn a_mig_service_model_path_is_read_through_the_same_reader() {
    let dir = temp("mig");
    let fifo = fifo(&dir);
    for (p, kind) in [(Path::new("/dev/zero"), "a character device"), (fifo.as_path(), "a FIFO")] {
        let spec = format!("rag={}", p.display());
        let out = vramfit()
            .args(["mig", "plan", "--gpu", "a100-40gb", "--service", &spec])
            .timeout(Duration::from_secs(20))
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}\n{stderr}");
        assert!(stderr.contains("--service rag=") && stderr.contains(kind), "{stderr}");
    }
}
