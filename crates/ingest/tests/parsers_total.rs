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
    fn safetensors_header_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = vramfit_ingest::safetensors::parse_header(&data, "prop");
    }
}
