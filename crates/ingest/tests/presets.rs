//! Every embedded preset parses through the config.json parser, and the
//! parameter counts match published or measured figures exactly.
//!
//! Sources: transformers' own count of each preset's config (meta device),
//! keras-hub's published preset counts, hand derivations per family, the
//! fake-tensor counts of shared/calibration/cases.jsonl group A, model
//! cards and safetensors indexes.

use vramfit_core::ParamLayout;
use vramfit_ingest::resolve::resolve_with_env;

fn counts(name: &str) -> (u64, u64) {
    let r = resolve_with_env(name, &|_| None).unwrap_or_else(|e| panic!("{name}: {e}"));
    let l = ParamLayout::of(&r.spec).unwrap();
    (l.total().unwrap(), l.active().unwrap())
}

/// Every embedded preset's parameter count, exactly. The figure is the
/// count transformers 5.24.0 gives when it instantiates the preset's config
/// on the meta device (`AutoModelFor…​.from_config` under
/// `torch.device("meta")`, summing `p.numel()` over `model.parameters()`;
/// encoders with `AutoModel`, phi-msft configs renamed to transformers'
/// `phi` fields), measured 2026-12-02. Where transformers registers
/// DeepSeek's router `e_score_correction_bias` as a buffer, the checkpoint
/// still stores it, so the count adds MoE layers × experts. Published
/// figures (keras-hub preset metadata, model cards, safetensors) and hand
/// derivations are checked against the same counts in the tests below.
#[test]
fn exact_counts() {
    let cases: &[(&str, u64)] = &[
        ("bge-m3", 567_754_752),
        ("deepseek-r1", 671_026_404_352 + 58 * 256),
        ("deepseek-r1-distill-qwen-7b", 7_615_616_512),
        ("deepseek-v3", 671_026_404_352 + 58 * 256),
        ("deepseek-v3.1-nvfp4", 671_026_404_352 + 58 * 256),
        ("deepseek-v3.2", 671_877_929_216 + 58 * 256),
        ("deepseek-v3.2-nvfp4", 671_877_929_216 + 58 * 256),
        ("falcon-40b", 41_303_293_952),
        ("falcon-7b", 6_921_720_704),
        ("gemma-2-27b", 27_227_128_320),
        ("gemma-2-9b", 9_241_705_984),
        ("gemma-3-12b-text", 11_766_034_176),
        ("gemma-3-1b", 999_885_952),
        ("gemma-3-27b", 27_432_406_640),
        ("gemma-3-4b", 4_300_079_472),
        ("glm-5", 743_911_199_232 + 75 * 256),
        ("glm-5-fp8", 743_911_199_232 + 75 * 256),
        ("glm-5-nvfp4", 743_911_199_232 + 75 * 256),
        ("glm-5.1", 743_911_199_232 + 75 * 256),
        ("glm-5.1-fp8", 743_911_199_232 + 75 * 256),
        ("glm-5.1-nvfp4", 743_911_199_232 + 75 * 256),
        ("gpt-oss-120b", 116_829_156_672),
        ("gpt-oss-20b", 20_914_757_184),
        ("gpt2", 124_439_808),
        ("gpt2-large", 774_030_080),
        ("gpt2-medium", 354_823_168),
        ("gpt2-xl", 1_557_611_200),
        ("granite-3.0-1b-a400m", 1_334_625_280),
        ("kimi-k2", 1_026_408_209_408 + 60 * 384),
        ("llama-2-13b", 13_015_864_320),
        ("llama-2-70b", 68_976_648_192),
        ("llama-2-7b", 6_738_415_616),
        ("llama-3-70b-instruct", 70_553_706_496),
        ("llama-3-8b-instruct", 8_030_261_248),
        ("llama-3.1-405b", 405_853_388_800),
        ("llama-3.1-70b", 70_553_706_496),
        ("llama-3.1-70b-instruct-fp8", 70_553_706_496),
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.2-1b", 1_235_814_400),
        ("llama-3.2-3b", 3_212_749_824),
        ("llama-3.3-70b-instruct", 70_553_706_496),
        // Llama 4: the Hub's safetensors BF16 parameter counts (not measured with
        // transformers here); hand-derived in crates/cli/tests/presets_2026.rs
        ("llama-4-maverick-17b-128e-instruct", 401_583_781_376),
        ("llama-4-scout-17b-16e-instruct", 108_641_793_536),
        ("mistral-7b", 7_241_732_096),
        ("minimax-m2.5", 228_689_748_992 + 62 * 256),
        ("minimax-m2.5-nvfp4", 228_689_748_992 + 62 * 256),
        ("minimax-m2.7", 228_689_748_992 + 62 * 256),
        ("mistral-nemo-12b", 12_247_782_400),
        ("mistral-small-24b-2501", 23_572_403_200),
        ("mixtral-8x22b", 140_630_071_296),
        ("mixtral-8x7b", 46_702_792_704),
        ("nemotron-3-nano-30b-a3b", 31_577_937_344 + 23 * 128),
        ("nemotron-3-nano-30b-a3b-nvfp4", 31_577_937_344 + 23 * 128),
        ("nemotron-h-56b", 56_324_350_464),
        ("olmo-2-13b", 13_716_198_400),
        ("olmo-2-7b", 7_298_617_344),
        ("phi-1", 1_418_270_720),
        ("phi-1.5", 1_418_270_720),
        ("phi-2", 2_779_683_840),
        ("phi-3-mini", 3_821_079_552),
        ("phi-4", 14_659_507_200),
        ("phi-4-mini", 3_836_021_760),
        ("pythia-6.9b", 6_857_302_016),
        ("qwen2.5-0.5b", 494_032_768),
        ("qwen2.5-14b", 14_770_033_664),
        ("qwen2.5-32b", 32_763_876_352),
        ("qwen2.5-72b", 72_706_203_648),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-vl-7b", 8_292_166_656),
        ("qwen3-0.6b", 596_049_920),
        ("qwen3-1.7b", 1_720_574_976),
        ("qwen3-14b", 14_768_307_200),
        ("qwen3-235b-a22b", 235_093_634_560),
        ("qwen3-235b-a22b-fp8", 235_093_634_560),
        ("qwen3-235b-a22b-nvfp4", 235_093_634_560),
        ("qwen3-30b-a3b", 30_532_122_624),
        ("qwen3-30b-a3b-fp8", 30_532_122_624),
        ("qwen3-32b", 32_762_123_264),
        ("qwen3-32b-fp8", 32_762_123_264),
        ("qwen3-4b", 4_022_468_096),
        ("qwen3-8b", 8_190_735_360),
        ("qwen3-coder-480b-a35b", 480_154_875_392),
        ("qwen3-coder-next-e336", 53_081_979_648),
        ("qwen3-vl-235b-a22b", 235_670_022_896),
        ("qwen3-vl-32b", 33_357_390_064),
        ("qwen3-vl-8b", 8_767_123_696),
        ("qwen3.5-122b-a10b", 122_562_817_776),
        ("qwen3.5-122b-a10b-nvfp4", 122_562_817_776),
        ("qwen3.5-27b", 27_356_728_560),
        ("qwen3.5-35b-a3b", 35_107_181_936),
        ("qwen3.5-397b-a17b", 396_802_360_816),
        ("qwen3.5-397b-a17b-nvfp4", 396_802_360_816),
        ("smollm2-360m", 361_821_120),
        ("snowflake-arctic-embed-m", 109_482_240),
        ("tinyllama-1.1b", 1_100_048_384),
    ];
    let all = vramfit_catalog::presets::builtin().unwrap();
    assert_eq!(cases.len(), all.len(), "every preset has its count here");
    for (name, want) in cases {
        assert_eq!(counts(name).0, *want, "{name}");
    }
}

/// keras-hub's preset metadata (keras-team/keras-hub@71453d08f59e,
/// `keras_hub/src/models/*/*_presets.py`, "params"): exact for the
/// equivalent Keras checkpoints. Gemma 3's Keras embeddings hold 262,144
/// token rows where the Hugging Face configs have 262,208 (64 × hidden
/// more); Llama 3.2's Keras model keeps a separate output head where the
/// Hugging Face one is tied (vocab × hidden more in Keras).
#[test]
fn keras_hub_published_counts() {
    let cases: &[(&str, u64)] = &[
        ("qwen3-0.6b", 596_049_920),
        ("qwen3-1.7b", 1_720_574_976),
        ("qwen3-4b", 4_022_468_096),
        ("qwen3-8b", 8_190_735_360),
        ("qwen3-14b", 14_768_307_200),
        ("qwen3-32b", 32_762_123_264),
        ("qwen3-32b-fp8", 32_762_123_264),
        ("qwen3-30b-a3b", 30_532_122_624),
        ("qwen3-30b-a3b-fp8", 30_532_122_624),
        ("qwen3-235b-a22b", 235_093_634_560),
        ("qwen3.5-27b", 27_356_728_560),
        ("qwen3.5-35b-a3b", 35_107_181_936),
        ("gpt-oss-20b", 20_914_757_184),
        ("gpt-oss-120b", 116_829_156_672),
        ("gemma-3-1b", 999_885_952),
        ("gemma-3-4b", 4_299_915_632 + 64 * 2560),
        ("gemma-3-12b-text", 11_765_788_416 + 64 * 3840),
        ("gemma-3-27b", 27_432_062_576 + 64 * 5376),
        ("llama-3-8b-instruct", 8_030_261_248),
        ("llama-3.2-1b", 1_498_482_688 - 128_256 * 2048),
        ("llama-3.2-3b", 3_606_752_256 - 128_256 * 3072),
        ("mistral-small-24b-2501", 23_572_403_200),
    ];
    for (name, want) in cases {
        assert_eq!(counts(name).0, *want, "{name}");
    }
}

/// The families keras-hub does not cover, derived by hand from the config
/// fields and the modeling files (each line one kind of tensor).
#[test]
fn hand_derived_counts() {
    // phi-2 (phi-msft: n_embd 2560, n_layer 32, n_inner 4·2560, vocab 51200):
    // embed 51200·2560; per layer q/k/v/dense 4·(2560² + 2560), fc1 2560·10240 + 10240,
    // fc2 10240·2560 + 2560, one LayerNorm 2·2560; final LayerNorm 2·2560; lm_head with bias
    let layer = 4 * (2560 * 2560 + 2560) + (2560 * 10240 + 10240) + (10240 * 2560 + 2560) + 2 * 2560;
    assert_eq!(counts("phi-2").0, 51200 * 2560 + 32 * layer + 2 * 2560 + (2560 * 51200 + 51200));
    assert_eq!(counts("phi-2").0, 2_779_683_840);

    // bge-m3 (XLM-RoBERTa large): word 250002·1024, positions 8194·1024, token types 1·1024,
    // embedding LayerNorm 2·1024; per layer q/k/v/out 4·(1024² + 1024), two LayerNorms 4·1024,
    // intermediate 1024·4096 + 4096, output 4096·1024 + 1024; pooler 1024² + 1024
    let layer = 4 * (1024 * 1024 + 1024) + 4 * 1024 + (1024 * 4096 + 4096) + (4096 * 1024 + 1024);
    let want = 250_002 * 1024 + 8194 * 1024 + 1024 + 2 * 1024 + 24 * layer + (1024 * 1024 + 1024);
    assert_eq!(counts("bge-m3").0, want);

    // OLMo-2 7B: Llama-shaped (MHA 32 × 128, SwiGLU 11008, untied 100352 vocab) plus
    // q_norm and k_norm over the whole 4096-wide projections, two post-norms per layer
    let layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096 + 2 * 4096;
    assert_eq!(counts("olmo-2-7b").0, 2 * 100_352 * 4096 + 32 * layer + 4096);

    // Nemotron-H-56B: 118 blocks = 54 Mamba-2, 10 attention, 54 relu² MLP, one RMSNorm each.
    // Mamba-2: d_inner 256·64 = 16384, conv_dim 16384 + 2·8·256 = 20480;
    // in_proj 8192 → 16384 + 20480 + 256, conv1d 20480·4 + 20480 bias, dt_bias/A_log/D 3·256,
    // gated norm 16384, out_proj 16384 → 8192.
    let mamba = 8192 * (16384 + 20480 + 256) + (20480 * 4 + 20480) + 3 * 256 + 16384 + 16384 * 8192;
    // attention: q 8192 → 64·128, k/v 8192 → 8·128, o 8192 → 8192
    let attn = 8192 * 8192 + 2 * 8192 * 1024 + 8192 * 8192;
    let mlp = 2 * 8192 * 32768;
    let want = 2 * 131_072 * 8192 + 54 * mamba + 10 * attn + 54 * mlp + 118 * 8192 + 8192;
    assert_eq!(counts("nemotron-h-56b").0, want);

    // Qwen3-Next (E336 derivative): 48 layers, 12 gated full attention + 36 Gated DeltaNet, all MoE.
    // gated attention: q 2048 → 2·16·256 (query + gate), k/v 2048 → 2·256, o 4096 → 2048, q/k norms 2·256;
    // Gated DeltaNet: in_proj_qkvz 2048 → 2·2048 + 2·4096, in_proj_ba 2048 → 2·32,
    // conv1d (2·2048 + 4096)·4, dt_bias/A_log 2·32, norm 128, out_proj 4096 → 2048;
    // MoE: router 2048·336, 336 experts of 3·2048·512, shared expert 3·2048·512, its gate 2048
    let attn = 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 256;
    let gdn = 2048 * (4096 + 8192) + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048;
    let moe = 2048 * 336 + 336 * 3 * 2048 * 512 + 3 * 2048 * 512 + 2048;
    let want = 2 * 151_936 * 2048 + 12 * attn + 36 * gdn + 48 * (moe + 2 * 2048) + 2048;
    assert_eq!(counts("qwen3-coder-next-e336").0, want);

    // MiniMax-M2.5: 62 layers; q 3072 → 48·128, k/v 3072 → 8·128, o back; q_norm and k_norm
    // over the whole 6144 / 1024 projections; two norms; router 3072 → 256 plus its
    // e_score_correction_bias 256 (a checkpoint tensor; a buffer in transformers);
    // 256 experts of 3·3072·1536; untied 200064 vocab
    let layer =
        3072 * 6144 + 2 * 3072 * 1024 + 6144 * 3072 + 6144 + 1024 + 2 * 3072 + 3072 * 256 + 256 + 256 * 3 * 3072 * 1536;
    assert_eq!(counts("minimax-m2.5").0, 2 * 200_064 * 3072 + 62 * layer + 3072);

    // Granite 3.0 1B-A400M: tied 49152 vocab; GQA 16/8 × 64; 32 experts of fused
    // input_linear 1024 → 2·512 and output_linear 512 → 1024; router 1024 → 32
    let layer = 2 * 1024 * 1024 + 2 * 1024 * 512 + 1024 * 32 + 32 * (1024 * 1024 + 512 * 1024) + 2 * 1024;
    assert_eq!(counts("granite-3.0-1b-a400m").0, 49_152 * 1024 + 24 * layer + 1024);

    // Qwen2.5-VL-7B's vision tower: Conv3d 3·2·14·14 → 1280 (no bias); 32 blocks of two RMSNorms,
    // qkv 1280 → 3840 and proj 1280 → 1280 with biases, gate/up 1280 → 3420 and down 3420 → 1280
    // with biases; merger RMSNorm 1280, 5120 → 5120 and 5120 → 3584 with biases
    let block =
        2 * 1280 + (1280 * 3840 + 3840) + (1280 * 1280 + 1280) + 2 * (1280 * 3420 + 3420) + (3420 * 1280 + 1280);
    let tower = 1176 * 1280 + 32 * block + 1280 + (5120 * 5120 + 5120) + (5120 * 3584 + 3584);
    assert_eq!(counts("qwen2.5-vl-7b").0, counts("deepseek-r1-distill-qwen-7b").0 + tower);
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

/// Weight bytes as the checkpoint stores them, through the same estimate a
/// user runs (the preset's own quantization_config).
fn stored_weight_bytes(name: &str) -> u64 {
    use vramfit_core::{infer::estimate_inference, Category, DType, InferenceSetup, Parallelism, RuntimeSetup};
    let spec = resolve_with_env(name, &|_| None).unwrap().spec;
    let q = spec.quantization.clone();
    let setup = InferenceSetup { weight_dtype: DType::I4, quant: q, ..InferenceSetup::default() };
    let (l, _) = estimate_inference(&spec, &setup, &Parallelism::default(), &RuntimeSetup::default()).unwrap();
    l.bytes(Category::Weights)
}

#[test]
fn mxfp4_checkpoints_byte_for_byte() {
    // gpt-oss: only the experts are MXFP4 (modules_to_not_convert: self_attn,
    // router, embed_tokens, lm_head): per expert, gate_up 2880 → 5760 is
    // 2880·5760/2 B of e2m1 blocks + 5760·90 B of E8M0 scales = 8,812,800 B, down
    // 2880 → 2880 is 4,147,200 + 259,200 = 4,406,400 B; every other parameter
    // (expert biases included) bf16.
    let expert = 8_812_800 + 4_406_400;
    let expert_params = 2880 * 5760 + 2880 * 2880;
    // gpt-oss-20b: 24 layers × 32 experts. The checkpoint's
    // model.safetensors.index.json: "total_size": 13761264768
    // (huggingface.co/openai/gpt-oss-20b, read from a public copy of that file).
    let n = 24 * 32;
    assert_eq!(stored_weight_bytes("gpt-oss-20b"), n * expert + (20_914_757_184 - n * expert_params) * 2);
    assert_eq!(stored_weight_bytes("gpt-oss-20b"), 13_761_264_768);
    // gpt-oss-120b: 36 × 128 experts → 65,248,815,744 B, the tensor bytes of
    // openai/gpt-oss-120b's safetensors files.
    let n = 36 * 128;
    assert_eq!(stored_weight_bytes("gpt-oss-120b"), n * expert + (116_829_156_672 - n * expert_params) * 2);
    assert_eq!(stored_weight_bytes("gpt-oss-120b"), 65_248_815_744);
}

#[test]
fn nvfp4_and_fp8_checkpoints_keep_what_they_exclude() {
    // nvidia/DeepSeek-V3.1-NVFP4 (hf_quant_config.json, ModelOpt): its
    // exclude_modules name q_a_proj, q_b_proj, kv_a_proj_with_mqa and kv_b_proj
    // of each of the 61 layers (and lm_head, the MTP layer 61*), so o_proj and
    // the MLPs are NVFP4: per matrix n/2 B + d_out·d_in/16 B fp8 scales + 8 B
    // of fp32 scalars.
    let nvfp4 = |d_in: u64, d_out: u64| d_in * d_out / 2 + d_out * d_in / 16 + 8;
    let mlp = |h: u64, i: u64| 2 * nvfp4(h, i) + nvfp4(i, h);
    // o_proj 128·128 → 7168; 3 dense layers (18432 wide), 58 MoE layers of 256 experts (2048) + 1 shared
    let quantized = 61 * nvfp4(16384, 7168) + 3 * mlp(7168, 18432) + 58 * (256 + 1) * mlp(7168, 2048);
    let quantized_params = 61 * 16384 * 7168 + 3 * 3 * 7168 * 18432 + 58 * 257 * 3 * 7168 * 2048;
    let total = 671_026_419_200;
    assert_eq!(stored_weight_bytes("deepseek-v3.1-nvfp4"), quantized + (total - quantized_params) * 2);
    // Qwen3-32B-FP8: 128×128 fp8 blocks with fp32 scale_inv per block, all 64
    // layers' q/k/v/o and MLP; embeddings, head and norms bf16.
    let fp8 = |d_in: u64, d_out: u64| d_in * d_out + d_in.div_ceil(128) * d_out.div_ceil(128) * 4;
    let layer = fp8(5120, 8192) + 2 * fp8(5120, 1024) + fp8(8192, 5120) + 2 * fp8(5120, 25600) + fp8(25600, 5120);
    let layer_params = 5120 * 8192 + 2 * 5120 * 1024 + 8192 * 5120 + 3 * 5120 * 25600;
    assert_eq!(stored_weight_bytes("qwen3-32b-fp8"), 64 * layer + (32_762_123_264 - 64 * layer_params) * 2);
}

#[test]
fn mtp_layers_are_counted_apart() {
    // DeepSeek-V3's MTP module (model.layers.61): one MoE decoder layer plus
    // eh_proj 14336 → 7168 and three RMSNorms; its own copies of the embedding
    // and head are not counted again. Not in the total (transformers drops it).
    let spec = resolve_with_env("deepseek-v3", &|_| None).unwrap().spec;
    assert_eq!(spec.mtp_layers, 1);
    let attn = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168;
    let moe = 7168 * 256 + 256 + 257 * 3 * 7168 * 2048;
    let layer = attn + moe + 2 * 7168;
    assert_eq!(vramfit_core::params::mtp_params(&spec).unwrap(), layer + 14336 * 7168 + 3 * 7168);
    assert!(spec.notes.iter().any(|n| n.contains("multi-token-prediction")));
}

#[test]
fn active_parameters_match_the_cards() {
    // OpenAI's gpt-oss card counts active parameters without the token
    // embedding (a lookup): 3.61B (20b) and 5.13B (120b); vramfit's active
    // count includes the 201,088 × 2,880 embedding.
    let emb = 201_088 * 2880;
    assert_eq!((counts("gpt-oss-20b").1 - emb) / 10_000_000, 360);
    assert_eq!((counts("gpt-oss-120b").1 - emb) / 10_000_000, 513);
    // Qwen3.5-35B-A3B: "3B activated"; Qwen3-235B-A22B: 22B.
    assert_eq!(counts("qwen3.5-35b-a3b").1 / 1_000_000_000, 3);
    assert_eq!(counts("qwen3-235b-a22b").1 / 1_000_000_000, 22);
}
