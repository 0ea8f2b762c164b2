//! The human report of `vramfit diagnose`, snapshotted (insta) for one input
//! of each kind, run from the fixtures folder so paths are relative.

use assert_cmd::Command;

fn render(rel: &str) -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../diagnose/tests/fixtures");
    let out = Command::cargo_bin("vramfit").unwrap().current_dir(dir).args(["diagnose", rel]).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn render_oom_log() {
    insta::assert_snapshot!("oom_multi_rank", render("oom/composed_multi_rank_log.txt"));
    insta::assert_snapshot!("oom_old_other_process", render("oom/pt15_reserved_residualmasking.txt"));
    insta::assert_snapshot!("oom_xla", render("oom/xla_jax13428_peakbuffers.txt"));
    insta::assert_snapshot!("oom_vllm", render("oom/vllm_10517_maxlen_tokens.txt"));
}

#[test]
fn render_summary_snapshot_script() {
    insta::assert_snapshot!("summary_01", render("memory_summary/01.txt"));
    insta::assert_snapshot!("snapshot_shared", render("snapshot/snapshot_shared.pickle"));
    insta::assert_snapshot!("script_bad", render("scripts/train_bad.py"));
}
