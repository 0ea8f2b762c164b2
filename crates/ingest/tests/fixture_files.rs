//! Fixture-driven tests, one per file (datatest-stable), so the first
//! failure does not hide the rest; a file added to a fixture folder is
//! tested without touching this file:
//! - every real config.json in tests/fixtures/configs (`NN_*.json`, listed
//!   in its index.json with a source) → parsed → one snapshot of the
//!   ModelSpec (`fixture_files__config_<file stem>.snap`), and the parameter
//!   count the model card states where it is verified below;
//! - every DeepSpeed config and PEFT adapter config parses with no unknown
//!   keys and is listed in its folder's index.json / SOURCES.md.

use std::path::Path;
use vramfit_core::ParamLayout;

/// Parameter counts checked exactly (0: not checked).
const PARAMS: &[(&str, u64)] = &[
    ("01_llama-3.1-8b.json", 8_030_261_248),
    ("02_llama-2-7b-arch.json", 6_738_415_616),
    ("03_mistral-7b-arch.json", 7_241_732_096),
    ("04_mixtral-8x7b.json", 46_702_792_704),
    ("05_qwen2.5-7b-instruct.json", 7_615_616_512),
    ("06_qwen3-30b-a3b.json", 30_532_122_624),
    ("07_gemma-2-9b-arch.json", 9_241_705_984),
    ("08_phi-3-mini-4k.json", 3_821_079_552),
    ("09_deepseek-v3.json", 671_026_419_200),
    ("10_gpt2-official-2019.json", 124_439_808),
    ("11_gpt2-124m-arch.json", 124_439_808),
    ("12_falcon-7b-arch.json", 6_921_720_704),
    ("13_pythia-6.9b.json", 6_857_302_016),
    // with its vision tower; transformers 5.24 instantiated from this config on the meta device: 8,767,123,696
    ("14_qwen3-vl-8b-instruct.json", 8_767_123_696),
    // the checkpoint's count; transformers 5.24 (meta device) agrees except where
    // it registers DeepSeek-style `e_score_correction_bias` as a buffer
    // (MoE layers × experts fewer: GLM-5 75 × 256, Nemotron-3-Nano 23 × 128)
    ("15_gpt-oss-20b.json", 20_914_757_184),
    ("16_qwen3.5-35b-a3b.json", 35_107_181_936),
    ("17_nemotron-h-56b.json", 56_324_350_464),
    ("18_deepseek-v3.2.json", 671_877_944_064),
    ("19_glm-5.json", 743_911_199_232 + 75 * 256),
    ("20_nemotron-3-nano-30b-a3b.json", 31_577_937_344 + 23 * 128),
];

fn file_name(path: &Path) -> String {
    path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string()
}

fn listed(dir: &Path, name: &str) -> bool {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let index = read("index.json");
    let in_index = serde_json::from_str::<serde_json::Value>(&index).is_ok_and(|v| v["files"][name].is_object());
    in_index || read("SOURCES.md").contains(&format!("`{name}`"))
}

fn config(path: &Path, bytes: Vec<u8>) -> datatest_stable::Result<()> {
    let name = file_name(path);
    let dir = path.parent().ok_or("no parent")?;
    assert!(listed(dir, &name), "{name}: not listed in configs/index.json with its source");
    let spec = vramfit_ingest::config::parse_config(&bytes, &name)?;
    let stem = name.trim_end_matches(".json");
    insta::assert_json_snapshot!(format!("config_{stem}"), spec);
    let want = PARAMS.iter().find(|(f, _)| *f == name).map(|&(_, p)| p);
    assert!(want.is_some(), "{name}: add it to PARAMS (its model-card parameter count, or 0)");
    if let Some(p) = want.filter(|&p| p > 0) {
        assert_eq!(ParamLayout::of(&spec)?.total()?, p, "{name}: parameter count");
    }
    Ok(())
}

fn deepspeed(path: &Path, bytes: Vec<u8>) -> datatest_stable::Result<()> {
    let name = file_name(path);
    assert!(listed(path.parent().ok_or("no parent")?, &name), "{name}: not listed in deepspeed/index.json");
    let c = vramfit_ingest::deepspeed::parse_deepspeed(&bytes, &name)?;
    assert!(c.unknown_keys.is_empty(), "{name}: unknown keys {:?}", c.unknown_keys);
    Ok(())
}

fn peft(path: &Path, bytes: Vec<u8>) -> datatest_stable::Result<()> {
    let name = file_name(path);
    assert!(listed(path.parent().ok_or("no parent")?, &name), "{name}: not listed in peft/SOURCES.md");
    let a = vramfit_ingest::peft::parse_adapter_config(&bytes, &name)?;
    assert!(a.lora.rank > 0, "{name}: rank");
    Ok(())
}

datatest_stable::harness! {
    { test = config, root = "tests/fixtures/configs", pattern = r"^\d\d_.*\.json$" },
    { test = deepspeed, root = "tests/fixtures/deepspeed", pattern = r"^\d\d_.*\.json$" },
    { test = peft, root = "tests/fixtures/peft", pattern = r"^\d\d_.*\.json$" },
}
