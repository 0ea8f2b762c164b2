//! Every embedded preset parses through the config.json parser, and the
//! parameter counts match published or measured figures exactly.
//!
//! Sources: shared/calibration/cases.jsonl group A (fake-tensor counts:
//! llama-2-7b/13b, mistral-7b, qwen2.5-7b, gpt2 at 2048 positions,
//! tinyllama); model cards / safetensors index `total_size` ÷ 2 for the rest
//! (Pythia's card table states 6,857,302,016).

use vramfit_core::ParamLayout;
use vramfit_ingest::resolve::resolve_with_env;

fn counts(name: &str) -> (u64, u64) {
    let r = resolve_with_env(name, &|_| None).unwrap_or_else(|e| panic!("{name}: {e}"));
    let l = ParamLayout::of(&r.spec).unwrap();
    (l.total().unwrap(), l.active().unwrap())
}

#[test]
fn exact_counts() {
    let cases: &[(&str, u64)] = &[
        ("llama-2-7b", 6_738_415_616),
        ("llama-2-13b", 13_015_864_320),
        ("llama-2-70b", 68_976_648_192),
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
        ("llama-3.1-405b", 405_853_388_800),
        ("mistral-7b", 7_241_732_096),
        ("mixtral-8x7b", 46_702_792_704),
        ("qwen2.5-0.5b", 494_032_768),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-72b", 72_706_203_648),
        ("gemma-2-9b", 9_241_705_984),
        ("gemma-2-27b", 27_227_128_320),
        ("phi-3-mini", 3_821_079_552),
        ("gpt2", 124_439_808),
        ("falcon-7b", 6_921_720_704),
        ("pythia-6.9b", 6_857_302_016),
        ("tinyllama-1.1b", 1_100_048_384),
        ("deepseek-v3", 671_026_419_200),
    ];
    for (name, want) in cases {
        assert_eq!(counts(name).0, *want, "{name}");
    }
}

#[test]
fn moe_active_parameters() {
    // Mixtral: 2 of 8 experts per token; card: 12.9B active.
    let (t, a) = counts("mixtral-8x7b");
    assert_eq!(a, 12_879_925_248);
    assert!(a < t);
    // Qwen3-30B-A3B card: 30.5B total, 3.3B activated.
    let (t, a) = counts("qwen3-30b-a3b");
    assert_eq!((t / 100_000_000, a / 100_000_000), (305, 33));
    // DeepSeek-V3 card: 671B total, 37B activated.
    let (_, a) = counts("deepseek-v3");
    assert_eq!(a / 1_000_000_000, 37);
}

#[test]
fn every_preset_parses_and_has_a_source() {
    let all = vramfit_catalog::presets::builtin().unwrap();
    assert!(all.len() >= 25);
    for p in &all {
        assert!(!p.source.is_empty(), "{} has no source", p.name);
        let (t, a) = counts(&p.name);
        assert!(t > 0 && a <= t, "{}", p.name);
    }
}

/// A preset that names a copy in this repo (`in this repo: <path>`) must
/// point at a file that exists and holds the same values for every field
/// the preset keeps (issue 15: sources printed `shared/...` paths that do
/// not exist in the repository).
#[test]
fn sources_point_at_files_in_this_repo_with_the_same_fields() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for p in vramfit_catalog::presets::builtin().unwrap() {
        assert!(p.source.starts_with("huggingface.co/"), "{}: source must name the Hub repo: {}", p.name, p.source);
        let Some((_, path)) = p.source.split_once("in this repo: ") else { continue };
        let path = path.split_whitespace().next().unwrap();
        let text = std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{}: {path}: {e}", p.name));
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (k, v) in p.config.as_object().unwrap() {
            assert_eq!(file.get(k), Some(v), "{}: field {k} differs from {path}", p.name);
        }
        checked += 1;
    }
    assert!(checked >= 13, "only {checked} presets cite a file in this repo");
}
