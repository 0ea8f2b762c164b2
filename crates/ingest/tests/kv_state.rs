//! KV cache and recurrent state of each attention kind, hand-worked on the
//! embedded presets (their config.json through the same parser as a user's
//! file). Every figure below is written out from the config's fields.

use vramfit_core::infer::{estimate_inference, kv_geometry, sliding_tokens};
use vramfit_core::{Category, DType, InferenceSetup, Ledger, ModelSpec, Parallelism, RuntimeSetup, SlidingWindowCache};
use vramfit_ingest::resolve::resolve_with_env;

fn preset(name: &str) -> ModelSpec {
    resolve_with_env(name, &|_| None).unwrap_or_else(|e| panic!("{name}: {e}")).spec
}

fn run(spec: &ModelSpec, context: u64, policy: SlidingWindowCache) -> Ledger {
    let setup = InferenceSetup {
        context,
        batch: 1,
        concurrency: 1,
        kv_dtype: DType::F16,
        weight_dtype: DType::BF16,
        quant: None,
        sliding_window_cache: policy,
        ..InferenceSetup::default()
    };
    estimate_inference(spec, &setup, &Parallelism::default(), &RuntimeSetup::default()).unwrap().0
}

fn entry(l: &Ledger, starts: &str) -> u64 {
    let found: Vec<_> = l.entries.iter().filter(|e| e.label.starts_with(starts)).collect();
    assert_eq!(
        found.len(),
        1,
        "one entry starting '{starts}': {:?}",
        l.entries.iter().map(|e| &e.label).collect::<Vec<_>>()
    );
    found[0].bytes
}

#[test]
fn gemma3_27b_sliding_and_global_layers() {
    // 62 layers, sliding_window_pattern 6 (Gemma3TextConfig default): layers
    // 5, 11, …, 59 are global (10), the other 52 slide over 1024 tokens.
    // 16 kv heads × head_dim 128 × 2 (K, V) × 2 B = 8,192 B per layer per token.
    let s = preset("gemma-3-27b");
    let per_layer = 2 * 16 * 128 * 2;
    assert_eq!(per_layer, 8_192);
    let g = kv_geometry(&s, DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 10 * per_layer);
    let sw = g.sliding.as_ref().unwrap();
    assert_eq!((sw.layers, sw.window, sw.bytes_per_token), (52, 1024, 52 * per_layer));

    // 32,768 tokens, blocks of 16. Global layers: 10 × 8,192 × 32,768 = 2,684,354,560 B.
    let l = run(&s, 32_768, SlidingWindowCache::Window);
    assert_eq!(entry(&l, "KV cache, full-attention layers"), 2_684_354_560);
    // Window (vLLM hybrid manager, transformers DynamicSlidingWindowLayer):
    // ceil(1024/16) + 1 = 65 blocks = 1,040 tokens; 52 × 8,192 × 1,040 = 443,023,360 B.
    assert_eq!(entry(&l, "KV cache, sliding-window layers"), 443_023_360);
    assert_eq!(l.bytes(Category::KvCache), 3_127_377_920);

    // Full (no hybrid manager): every layer keeps 32,768 tokens:
    // 62 × 8,192 × 32,768 = 16,642,998,272 B — 5.3× the window-aware figure.
    let full = run(&s, 32_768, SlidingWindowCache::Full);
    assert_eq!(full.bytes(Category::KvCache), 16_642_998_272);

    // llama.cpp iSWA: pad(min(32,768, 1,024 + 512), 256) = 1,536 cells:
    // 52 × 8,192 × 1,536 = 654,311,424 B.
    let cpp = run(&s, 32_768, SlidingWindowCache::LlamaCpp { ubatch: 512 });
    assert_eq!(entry(&cpp, "KV cache, sliding-window layers"), 654_311_424);

    // A context shorter than the window keeps only its own blocks.
    assert_eq!(sliding_tokens(1024, 100, 16, SlidingWindowCache::Window).unwrap(), 112);
}

#[test]
fn gpt_oss_alternating_window_and_sinks() {
    // gpt-oss-120b: 36 layers, layer_types alternate sliding (128) / full: 18 each.
    // 8 kv heads × 64 × 2 × 2 B = 2,048 B per layer per token. Sinks are
    // parameters (one logit per head), not cache.
    let s = preset("gpt-oss-120b");
    let l = run(&s, 131_072, SlidingWindowCache::Window);
    // 18 × 2,048 × 131,072 = 4,831,838,208 B
    assert_eq!(entry(&l, "KV cache, full-attention layers"), 4_831_838_208);
    // ceil(128/16) + 1 = 9 blocks = 144 tokens: 18 × 2,048 × 144 = 5,308,416 B
    assert_eq!(entry(&l, "KV cache, sliding-window layers"), 5_308_416);
    assert!(s.attention_sinks);
}

#[test]
fn qwen35_gated_deltanet_state_is_fixed_per_sequence() {
    // Qwen3.5-27B: 64 layers, 16 full attention (every 4th), 48 Gated DeltaNet.
    // Full: 4 kv heads × 256 × 2 × 2 B = 4,096 B per layer per token → 65,536 B.
    // Gated DeltaNet (vLLM gated_delta_net_state_shape): conv_dim = 2·16·128 + 48·128
    // = 10,240 channels × (4 − 1) columns × 2 B (bf16) = 61,440 B; recurrent state
    // 48 heads × 128 × 128 × 4 B (mamba_ssm_dtype float32) = 3,145,728 B;
    // 3,207,168 B per layer × 48 = 153,944,064 B per sequence.
    let s = preset("qwen3.5-27b");
    let g = kv_geometry(&s, DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 65_536);
    let st = g.state.as_ref().unwrap();
    assert_eq!((st.layers, st.bytes_per_sequence), (48, 153_944_064));
    let short = run(&s, 1024, SlidingWindowCache::Window);
    let long = run(&s, 262_144, SlidingWindowCache::Window);
    assert_eq!(entry(&short, "recurrent state"), 153_944_064);
    assert_eq!(entry(&long, "recurrent state"), 153_944_064, "the state does not grow with the context");
    assert_eq!(entry(&long, "KV cache, full-attention layers"), 65_536 * 262_144);
    // TP 4 splits value heads and conv channels: 2,560 × 3 × 2 + 12 × 128 × 128 × 4 = 801,792 B per layer
    let g4 = kv_geometry(&s, DType::F16, DType::BF16, 4, 1).unwrap();
    assert_eq!(g4.state.unwrap().bytes_per_sequence, 48 * 801_792);
}

#[test]
fn nemotron_h_mamba2_state() {
    // Nemotron-H-56B: 118 blocks, 54 Mamba-2 (M), 10 attention (*), 54 MLP (-).
    // Attention: 8 kv heads × 128 × 2 × 2 B = 4,096 B per layer per token → 40,960 B.
    // Mamba-2: d_inner = 256 heads × 64 = 16,384; conv_dim = 16,384 + 2·8·256 = 20,480;
    // conv state 20,480 × 3 × 2 B = 122,880 B; SSM state 256 × 64 × 256 × 2 B (no
    // mamba_ssm_cache_dtype in this config: bf16) = 8,388,608 B → 8,511,488 B per layer,
    // × 54 = 459,620,352 B per sequence.
    let s = preset("nemotron-h-56b");
    let g = kv_geometry(&s, DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 40_960);
    let st = g.state.unwrap();
    assert_eq!((st.layers, st.bytes_per_sequence), (54, 459_620_352));
    // Nemotron-3-Nano fixes the SSM state at float32 (mamba_ssm_cache_dtype):
    // 23 Mamba layers of 64 heads × 64 × 128 × 4 B = 2,097,152 B SSM + conv
    // (4,096 + 2·8·128 = 6,144) × 3 × 2 B = 36,864 B → 2,134,016 × 23 = 49,082,368 B
    let nano = kv_geometry(&preset("nemotron-3-nano-30b-a3b"), DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(nano.state.unwrap().bytes_per_sequence, 49_082_368);
    // 6 attention layers × 2 kv heads × 128 × 2 × 2 B = 6,144 B per token
    assert_eq!(nano.bytes_per_token, 6_144);
}

#[test]
fn mla_latent_and_sparse_indexer() {
    // DeepSeek-V3: 61 layers × (512 + 64) × 2 B = 70,272 B per token.
    let v3 = kv_geometry(&preset("deepseek-r1"), DType::BF16, DType::BF16, 1, 1).unwrap();
    assert_eq!(v3.bytes_per_token, 70_272);
    // DeepSeek-V3.2 adds the indexer's fp8 key (128 B) and fp32 scale (4 B) per
    // layer: 61 × (1,152 + 132) = 78,324 B per token.
    let v32 = kv_geometry(&preset("deepseek-v3.2"), DType::BF16, DType::BF16, 1, 1).unwrap();
    assert_eq!(v32.bytes_per_token, 78_324);
    // With an fp8 cache, sparse MLA is vLLM's fp8_ds_mla layout: 512 fp8 + 4 fp32
    // scales + 64 × 2 B rope = 656 B, plus the indexer's 132 B: 61 × 788 = 48,068 B.
    let fp8 = kv_geometry(&preset("deepseek-v3.2"), DType::F8, DType::BF16, 1, 1).unwrap();
    assert_eq!(fp8.bytes_per_token, 48_068);
    // dense MLA in fp8 is the plain latent: 61 × 576 = 35,136 B
    assert_eq!(kv_geometry(&preset("deepseek-r1"), DType::F8, DType::BF16, 1, 1).unwrap().bytes_per_token, 35_136);
    // TP does not split the latent.
    assert_eq!(kv_geometry(&preset("deepseek-r1"), DType::BF16, DType::BF16, 8, 1).unwrap().bytes_per_token, 70_272);
}

#[test]
fn encoders_have_no_kv_cache() {
    let s = preset("bge-m3");
    let l = run(&s, 8192, SlidingWindowCache::Window);
    assert_eq!(entry(&l, "KV cache (none: encoder-only model)"), 0);
    assert_eq!(l.bytes(Category::KvCache), 0);
}

#[test]
fn pipeline_stages_take_the_worst_layer_mix() {
    // Gemma 3 27B over PP 2: stages of 31 layers; layers 0–30 hold 5 global
    // layers (5, 11, 17, 23, 29), layers 31–61 hold 5 (35, 41, 47, 53, 59).
    let s = preset("gemma-3-27b");
    let g = kv_geometry(&s, DType::F16, DType::BF16, 1, 2).unwrap();
    assert_eq!(g.bytes_per_token, 5 * 8_192);
    assert_eq!(g.sliding.unwrap().layers, 26);
}
