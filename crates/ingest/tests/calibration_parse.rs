//! The calibration case reader: every embedded case parses into the right
//! workload; bad lines are errors naming file:line and the field.

use vramfit_core::train::{AttentionImpl, Checkpointing, Precision, TrainKind};
use vramfit_core::Task;
use vramfit_ingest::calibration::{embedded, parse_cases, Group};

#[test]
fn embedded_sets_parse_with_their_workloads() {
    let cases = embedded().unwrap();
    let count = |g| cases.iter().filter(|c| c.group == g).count();
    assert_eq!(count(Group::A), 6);
    assert_eq!(count(Group::B), 3);
    assert!(count(Group::C) >= 29 + 8);
    let c = cases.iter().find(|c| c.id == "C_tinyllama-1.1b_b_amp_bf16_b1_s4096_eager_ckpt0").unwrap();
    let Some(w) = &c.workload else { panic!() };
    let Task::Train(t) = &w.task else { panic!() };
    assert_eq!(
        (t.precision, t.attention, t.checkpointing, t.batch, t.seq),
        (Precision::AmpBf16, AttentionImpl::Eager, Checkpointing::None, 1, 4096)
    );
    assert!(t.first_step && t.foreach);
    let l = cases.iter().find(|c| c.id == "V_tinyllama_lora_qv_r16_b4_s512").unwrap();
    let Task::Train(t) = &l.workload.as_ref().unwrap().task else { panic!() };
    assert_eq!(t.kind, TrainKind::Lora);
    assert_eq!(t.lora.rank, 16);
    assert_eq!(t.base_dtype, Some(vramfit_core::DType::BF16));
}

#[test]
fn bad_lines_name_file_line_and_field() {
    let good = embedded().unwrap();
    assert!(!good.is_empty());
    for (doc, needle) in [
        ("{", "not valid JSON"),
        ("[]", "(line)"),
        (r#"{"id": "x", "group": "Z_other", "arch": {}}"#, "group"),
        (r#"{"id": "x", "group": "C_train"}"#, "arch"),
        (
            r#"{"id": "x", "group": "C_train", "arch": {"family": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}, "batch": 1, "seq": 8, "dtype_setup": "weird", "optimizer": "adamw"}"#,
            "dtype_setup",
        ),
        (
            r#"{"id": "x", "group": "C_train", "arch": {"family": "llama", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}, "batch": -1, "seq": 8}"#,
            "batch",
        ),
    ] {
        let e = parse_cases(&format!("\n{doc}"), "cases.jsonl").map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(needle), "{doc}: {e}");
        assert!(e.contains("cases.jsonl:2"), "{doc}: {e}");
    }
}
