//! Real DeepSpeed configs (tests/fixtures/deepspeed, sources in index.json).

use vramfit_core::Offload;
use vramfit_ingest::deepspeed::{parse_deepspeed, DsValue};

fn load(name: &str) -> vramfit_ingest::deepspeed::DeepSpeedConfig {
    let path = format!("{}/tests/fixtures/deepspeed/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_deepspeed(&std::fs::read(&path).unwrap(), &path).unwrap()
}

#[test]
fn zero2_legacy_cpu_offload_fp16() {
    let c = load("01_zero2_cpu_offload_fp16.json");
    assert_eq!(c.zero_stage, DsValue::Set(2));
    assert_eq!(c.offload_optimizer, DsValue::Set(Offload::Cpu));
    assert_eq!(c.fp16, DsValue::Set(true));
    assert_eq!(c.train_batch_size, DsValue::Set(4));
    assert_eq!(c.grad_accum, DsValue::Set(1));
    assert!(c.notes.iter().any(|n| n.contains("legacy \"cpu_offload\"")), "{:?}", c.notes);
    assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
}

#[test]
fn zero2_auto_values_are_explained() {
    let c = load("02_zero2_offload_optimizer_auto.json");
    assert_eq!(c.zero_stage, DsValue::Set(2));
    assert_eq!(c.offload_optimizer, DsValue::Set(Offload::Cpu));
    assert_eq!(c.micro_batch, DsValue::Auto);
    assert_eq!(c.grad_accum, DsValue::Auto);
    assert_eq!(c.bf16, DsValue::Auto);
    assert_eq!(c.fp16, DsValue::Auto);
    for k in ["train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16.enabled", "fp16.enabled"] {
        assert!(c.notes.iter().any(|n| n.starts_with(k) && n.contains("\"auto\"")), "{k}: {:?}", c.notes);
    }
}

#[test]
fn zero3_bf16_with_optimizer() {
    let c = load("03_zero3_bf16.json");
    assert_eq!(c.zero_stage, DsValue::Set(3));
    assert_eq!(c.bf16, DsValue::Set(true));
    assert_eq!(c.micro_batch, DsValue::Set(1));
    assert_eq!(c.optimizer_type.as_deref(), Some("AdamW"));
    assert_eq!(c.offload_optimizer, DsValue::Absent);
    assert!(c.unknown_keys.is_empty(), "{:?}", c.unknown_keys);
}

fn offloads_everything(f: &str) {
    let c = load(f);
    assert_eq!(c.zero_stage, DsValue::Set(3), "{f}");
    assert_eq!(c.offload_optimizer, DsValue::Set(Offload::Cpu), "{f}");
    assert_eq!(c.offload_param, DsValue::Set(Offload::Cpu), "{f}");
    assert!(c.unknown_keys.is_empty(), "{f}: {:?}", c.unknown_keys);
}

#[test]
fn zero3_offload_everything_auto() {
    offloads_everything("04_zero3_offload_optimizer_param_auto.json");
}

#[test]
fn zero3_offload_everything_bf16() {
    offloads_everything("05_zero3_bf16_cpuoffload_all.json");
}

#[test]
fn unknown_keys_are_reported_not_ignored() {
    let c = parse_deepspeed(
        br#"{"zero_optimization": {"stage": 1, "stage4_magic": true}, "bf16": {"enabled": true}, "my_key": 1}"#,
        "x.json",
    )
    .unwrap();
    assert_eq!(c.unknown_keys, ["my_key", "zero_optimization.stage4_magic"]);
}

#[test]
fn bad_values_name_the_field() {
    for (doc, field) in [
        (r#"{"zero_optimization": {"stage": 4}}"#, "zero_optimization.stage"),
        (r#"{"train_micro_batch_size_per_gpu": -1}"#, "train_micro_batch_size_per_gpu"),
        (r#"{"bf16": {"enabled": "yes"}}"#, "bf16.enabled"),
        (
            r#"{"zero_optimization": {"offload_optimizer": {"device": "gpu"}}}"#,
            "zero_optimization.offload_optimizer.device",
        ),
    ] {
        let e = parse_deepspeed(doc.as_bytes(), "ds.json").unwrap_err().to_string();
        assert!(e.contains(field) && e.contains("ds.json"), "{doc}: {e}");
    }
    assert!(parse_deepspeed(b"[1]", "ds.json").is_err());
    assert!(parse_deepspeed(b"{", "ds.json").unwrap_err().to_string().contains("not valid JSON"));
    assert!(parse_deepspeed(br#"{"bf16": {"enabled": true}, "fp16": {"enabled": true}}"#, "ds.json").is_err());
    let big = vec![b' '; (1 << 20) + 1];
    assert!(parse_deepspeed(&big, "ds.json").unwrap_err().to_string().contains("too large"));
}

/// ZeRO++ hpZ and MiCS hold more per GPU than plain ZeRO-3 (Wang et al. 2023
/// §3.2: hpZ's secondary 16-bit parameter partition over the node; MiCS:
/// states sharded over its group only): hpZ's group is read (and modelled by
/// the CLI, `--hpz`), MiCS is said, neither ignored silently
/// (`DeepSpeedZeroConfig`, deepspeed/runtime/zero/config.py).
#[test]
fn hpz_is_read_and_mics_said_not_modelled() {
    let text = br#"{"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8, "mics_shard_size": 8}}"#;
    let c = parse_deepspeed(text, "ds.json").unwrap();
    assert_eq!(c.zero_stage, DsValue::Set(3));
    // hpZ is modelled now (--hpz): read, not noted as left out
    assert_eq!(c.hpz_partition, DsValue::Set(8));
    assert!(!c.notes.iter().any(|n| n.contains("zero_hpz_partition_size")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.contains("mics_shard_size 8") && n.contains("--dp-replicate")), "{:?}", c.notes);
    // 1 is plain ZeRO-3 (hpZ off), and so is 0 (DeepSpeedZeroConfig: int ≥ 0, used when > 1)
    for (v, want) in [("1", 1), ("0", 1)] {
        let text = format!(r#"{{"zero_optimization": {{"stage": 3, "zero_hpz_partition_size": {v}}}}}"#);
        let plain = parse_deepspeed(text.as_bytes(), "ds.json").unwrap();
        assert_eq!(plain.hpz_partition, DsValue::Set(want));
        assert!(plain.notes.is_empty(), "{:?}", plain.notes);
    }
    // not an integer: refused naming the key
    let e = parse_deepspeed(br#"{"zero_optimization": {"stage": 3, "zero_hpz_partition_size": "auto"}}"#, "ds.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("zero_hpz_partition_size"), "{e}");
}

/// DeepSpeed AutoEP's section (deepspeed/module_inject/auto_ep_config.py
/// `parse_autoep_config`: `enabled` default false, `autoep_size` default 1):
/// read into `autoep_size` only when enabled, no longer listed as an unknown
/// key; an expert-tensor split (not modelled) is said; a size that is not a
/// positive integer is refused naming the key.
#[test]
fn autoep_section_is_read_when_enabled() {
    let c = parse_deepspeed(
        br#"{"zero_optimization": {"stage": 1}, "expert_parallel": {"enabled": true, "autoep_size": 8, "preset_model": "mixtral", "expert_tensor_parallel_size": 2}}"#,
        "ds.json",
    )
    .unwrap();
    assert_eq!(c.autoep_size, DsValue::Set(8));
    assert!(!c.unknown_keys.iter().any(|k| k.contains("expert_parallel")), "{:?}", c.unknown_keys);
    assert!(c.notes.iter().any(|n| n.starts_with("expert_parallel.expert_tensor_parallel_size 2")), "{:?}", c.notes);
    let off = parse_deepspeed(br#"{"expert_parallel": {"enabled": false, "autoep_size": 8}}"#, "ds.json").unwrap();
    assert_eq!(off.autoep_size, DsValue::Absent);
    let default_size = parse_deepspeed(br#"{"expert_parallel": {"enabled": true}}"#, "ds.json").unwrap();
    assert_eq!(default_size.autoep_size, DsValue::Set(1));
    for bad in [r#"{"expert_parallel": {"enabled": true, "autoep_size": 0}}"#, r#"{"expert_parallel": 8}"#] {
        let e = parse_deepspeed(bad.as_bytes(), "ds.json").unwrap_err().to_string();
        assert!(e.contains("expert_parallel") || e.contains("autoep_size"), "{e}");
    }
}
