//! The parsers are total: arbitrary bytes give a value or an error, never a
//! panic (a quick in-suite complement to the fuzz targets in fuzz/).

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn config_parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = vramfit_ingest::config::parse_config(&data, "prop");
    }

    #[test]
    fn config_parser_on_json_shaped_input(
        hidden in 0u64..100_000, layers in 0u64..100_000, heads in 0u64..300, kv in 0u64..300,
        inter in 0u64..1_000_000, vocab in 0u64..10_000_000, mt in prop::sample::select(vec!["llama", "gpt2", "falcon", "mixtral", "gpt_neox", "deepseek_v3", "qwen2_moe", "nope"]),
    ) {
        let doc = format!(r#"{{"model_type":"{mt}","hidden_size":{hidden},"n_embd":{hidden},"num_hidden_layers":{layers},"n_layer":{layers},"num_attention_heads":{heads},"n_head":{heads},"num_key_value_heads":{kv},"intermediate_size":{inter},"vocab_size":{vocab},"num_local_experts":8,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":64,"kv_lora_rank":16,"qk_rope_head_dim":8,"qk_nope_head_dim":8,"v_head_dim":8,"n_routed_experts":4}}"#);
        if let Ok(spec) = vramfit_ingest::config::parse_config(doc.as_bytes(), "prop") {
            // A spec that validates always has a computable count or a clean overflow error.
            let _ = vramfit_core::ParamLayout::of(&spec).and_then(|l| l.total());
            let _ = vramfit_core::estimate(&spec, &vramfit_core::Workload::default());
        }
    }

    #[test]
    fn new_architectures_on_json_shaped_input(
        hidden in 0u64..100_000, layers in 0u64..40, big_layers in prop::sample::select(vec![0u64, 4, 1 << 40]),
        heads in 0u64..300, kv in 0u64..300, dim in 0u64..5000, image in 0u64..u64::MAX, patch in 0u64..64,
        mt in prop::sample::select(vec!["gemma3_text", "gpt_oss", "qwen3_next", "qwen3_5_text", "nemotron_h", "phi", "phi-msft", "olmo2", "granitemoe", "bert", "xlm-roberta", "deepseek_v32", "glm_moe_dsa", "kimi_k2", "minimax_m2"]),
        vision in prop::sample::select(vec!["", "gemma3", "qwen2_5_vl", "qwen3_vl", "qwen3_5"]),
    ) {
        let n = layers.max(big_layers);
        let pattern: String = (0..layers).map(|i| ["M", "*", "-", "E"][i as usize % 4]).collect();
        let types: Vec<String> = (0..layers).map(|i| format!("\"{}\"", ["full_attention", "sliding_attention", "linear_attention"][i as usize % 3])).collect();
        let text = format!(r#"{{"model_type":"{mt}","hidden_size":{hidden},"n_embd":{hidden},"num_hidden_layers":{n},"n_layer":{n},"num_attention_heads":{heads},"n_head":{heads},"num_key_value_heads":{kv},"head_dim":{dim},"intermediate_size":{dim},"vocab_size":1000,"num_local_experts":8,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":{dim},"n_routed_experts":4,"kv_lora_rank":16,"qk_rope_head_dim":8,"qk_nope_head_dim":8,"v_head_dim":8,"index_n_heads":{heads},"index_head_dim":{dim},"sliding_window":{dim},"linear_num_key_heads":{heads},"linear_num_value_heads":{kv},"linear_key_head_dim":{dim},"linear_value_head_dim":{dim},"mamba_num_heads":{heads},"mamba_head_dim":{dim},"ssm_state_size":{dim},"n_groups":{kv},"hybrid_override_pattern":"{pattern}","layer_types":[{}],"type_vocab_size":{kv}}}"#, types.join(","));
        let doc = if vision.is_empty() { text } else {
            format!(r#"{{"model_type":"{vision}","text_config":{text},"vision_config":{{"hidden_size":{hidden},"depth":{layers},"num_hidden_layers":{layers},"image_size":{image},"patch_size":{patch},"vision_use_head":false,"intermediate_size":{dim},"spatial_merge_size":{patch}}}}}"#)
        };
        if let Ok(spec) = vramfit_ingest::config::parse_config(doc.as_bytes(), "prop") {
            let _ = vramfit_core::ParamLayout::of(&spec).and_then(|l| l.total());
            let _ = vramfit_core::params::mtp_params(&spec);
            let _ = vramfit_core::estimate(&spec, &vramfit_core::Workload::default());
        }
    }

    #[test]
    fn safetensors_header_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = vramfit_ingest::safetensors::parse_header(&data, "prop");
    }
}

/// Fuzz find (ingest_config, 2026-12-03): a hidden size of 2^63 − 1 with no
/// FFN width made the derived default `4 × hidden` overflow (a panic in a debug
/// build). Every family whose FFN width defaults to 4 × hidden is refused by name.
#[test]
fn a_huge_hidden_size_without_an_ffn_width_is_refused_not_a_panic() {
    let crash = include_bytes!("../../../fuzz/seeds/ingest_config/gpt2_huge_n_embd.json");
    let e = vramfit_ingest::config::parse_config(crash, "crash.json").unwrap_err().to_string();
    assert!(e.contains("crash.json"), "{e}");
    for mt in ["gpt2", "falcon", "phi"] {
        let doc = format!(
            r#"{{"model_type":"{mt}","hidden_size":9223372036854775807,"n_embd":9223372036854775807,"num_hidden_layers":2,"n_layer":2,"num_attention_heads":8,"n_head":8,"vocab_size":1000}}"#
        );
        let e = vramfit_ingest::config::parse_config(doc.as_bytes(), "x.json").unwrap_err().to_string();
        assert!(e.contains("hidden"), "{mt}: {e}");
    }
}
