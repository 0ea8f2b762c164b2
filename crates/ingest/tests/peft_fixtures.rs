//! PEFT adapter_config.json files written by peft 0.21.2 (fixtures/peft/SOURCES.md).

use vramfit_core::train::LoraTargets;
use vramfit_ingest::peft::parse_adapter_config;

fn load(name: &str) -> vramfit_ingest::peft::AdapterConfig {
    let path = format!("{}/tests/fixtures/peft/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_adapter_config(&std::fs::read(&path).unwrap(), &path).unwrap()
}

#[test]
fn qv_rank_8() {
    let a = load("01_lora_qv_r8.json");
    assert_eq!(a.lora.rank, 8);
    assert_eq!(a.lora.alpha, 16.0);
    assert_eq!(a.lora.dropout, 0.05);
    let LoraTargets::Modules(mut m) = a.lora.targets else { panic!("expected a module list") };
    m.sort();
    assert_eq!(m, ["q_proj", "v_proj"]);
    assert_eq!(a.base_model.as_deref(), Some("TinyLlama/TinyLlama-1.1B-Chat-v1.0"));
}

#[test]
fn all_linear_with_modules_to_save_noted() {
    let a = load("02_lora_all_linear_r16.json");
    assert_eq!(a.lora.rank, 16);
    assert_eq!(a.lora.targets, LoraTargets::AllLinear);
    assert!(a.notes.iter().any(|n| n.contains("modules_to_save") && n.contains("lm_head")), "{:?}", a.notes);
}

#[test]
fn regex_targets_and_dora_noted() {
    let a = load("03_lora_dora_regex.json");
    assert_eq!(a.lora.rank, 32);
    // a string is PEFT's regular expression, resolved against the model's full module names
    let LoraTargets::Regex(re) = a.lora.targets else { panic!("expected a regex") };
    assert_eq!(re, ".*\\.(q_proj|k_proj|v_proj|o_proj)");
    assert!(a.notes.iter().any(|n| n.contains("DoRA")), "{:?}", a.notes);
}

#[test]
fn bad_adapter_configs_name_the_field() {
    for (doc, field) in [
        (r#"{"peft_type": "PREFIX_TUNING", "r": 8}"#, "peft_type"),
        (r#"{"r": 0, "target_modules": ["q_proj"]}"#, "'r'"),
        (r#"{"r": 8, "target_modules": [1]}"#, "target_modules"),
        (r#"{"r": 8, "lora_dropout": 1.5}"#, "lora_dropout"),
        (r#"{"lora_alpha": 8}"#, "'r'"),
    ] {
        let e = parse_adapter_config(doc.as_bytes(), "adapter_config.json").unwrap_err().to_string();
        assert!(e.contains(field.trim_matches('\'')) && e.contains("adapter_config.json"), "{doc}: {e}");
    }
    assert!(parse_adapter_config(b"not json", "a.json").is_err());
}
