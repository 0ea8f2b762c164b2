//! Granite 4 (`granitemoehybrid`) and Falcon-H1 (`falcon_h1`) from their
//! config.json, and their llama.cpp GGUF archs (`granitehybrid`,
//! `falcon-h1`): parameter counts, KV bytes per token and recurrent state
//! per sequence, each hand-worked from the module shapes of the source
//! cited beside it (issue 22, "Architectures still refused").

use serde_json::json;
use vramfit_core::infer::kv_geometry;
use vramfit_core::{DType, Family, Mixer, ModelSpec, ParamLayout};
use vramfit_ingest::config::parse_config;
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::model::LlamaModel;
use vramfit_llamacpp::{plan, LlamaCppOptions};

fn parse(v: serde_json::Value) -> ModelSpec {
    parse_config(v.to_string().as_bytes(), "config.json").unwrap_or_else(|e| panic!("refused: {e}"))
}

fn counts(s: &ModelSpec) -> (u64, u64) {
    let l = ParamLayout::of(s).unwrap();
    (l.total().unwrap(), l.active().unwrap())
}

/// A small Granite 4 hybrid MoE config, written with the keys the released
/// granite-4.0-h-* configs use (`GraniteMoeHybridConfig`).
fn granite(experts: u64) -> serde_json::Value {
    json!({
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 256, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "shared_intermediate_size": 256,
        "num_local_experts": experts, "num_experts_per_tok": 2,
        "vocab_size": 1000, "tie_word_embeddings": true,
        "layer_types": ["mamba", "mamba", "mamba", "attention"],
        "mamba_n_heads": 8, "mamba_d_head": "auto", "mamba_n_groups": 1,
        "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
        "mamba_conv_bias": true, "mamba_proj_bias": false,
        "position_embedding_type": "nope",
        "embedding_multiplier": 12, "attention_multiplier": 0.015625,
        "residual_multiplier": 0.22, "logits_scaling": 8,
        "torch_dtype": "bfloat16"
    })
}

/// Granite 4 parameters, after transformers' `GraniteMoeHybridDecoderLayer`
/// (modeling_granitemoehybrid.py): `mamba` (BambaMixer) or `self_attn`,
/// `shared_mlp` always, `block_sparse_moe` when num_local_experts > 0, two
/// RMSNorms per layer. By hand (hidden 256):
/// - embeddings 1000 × 256 = 256,000 (tied: no head); final norm 256;
///   layer norms 4 × 2 × 256 = 2,048
/// - attention (1 layer): q 256·256 + k 256·128 + v 256·128 + o 256·256 = 196,608
/// - Mamba (3 layers): d_inner = 2 × 256 = 512, 8 heads of 64;
///   conv_dim = 512 + 2·1·16 = 544; in_proj 256 × (512 + 544 + 8) = 272,384;
///   conv1d 544 × 4 + 544 bias = 2,720; dt_bias, A_log, D 3 × 8 = 24;
///   gated norm 512; out_proj 512 × 256 = 131,072 → 406,712 × 3 = 1,220,136
/// - MoE (4 layers): router 256 × 8 = 2,048; experts 8 × (256 × 2·128 +
///   128 × 256) = 786,432; shared_mlp 256 × 2·256 + 256 × 256 = 196,608
///   → 985,088 × 4 = 3,940,352
///
/// Total 5,615,400; active: 2 of 8 experts, 4 × 6 × 98,304 = 2,359,296 fewer
/// → 3,256,104.
#[test]
fn granite4_hybrid_moe_counts_by_hand() {
    let s = parse(granite(8));
    assert_eq!(s.family, Family::GraniteMoeHybrid);
    let mixers: Vec<Mixer> = s.layer_pattern.iter().map(|l| l.mixer).collect();
    assert_eq!(mixers, vec![Mixer::Mamba2, Mixer::Mamba2, Mixer::Mamba2, Mixer::Attention]);
    assert_eq!(counts(&s), (5_615_400, 3_256_104));
    let names = ParamLayout::of(&s).unwrap().linear_module_names();
    for n in ["in_proj", "out_proj", "q_proj", "input_linear", "output_linear"] {
        assert!(names.iter().any(|m| m == n), "{n} in {names:?}");
    }
}

/// Dense Granite 4 (`num_local_experts` 0, as granite-4.0-h-micro): no
/// `block_sparse_moe`, the shared_mlp alone: 5,615,400 − 4 × (2,048 +
/// 786,432) = 2,461,480, every parameter active.
#[test]
fn granite4_dense_hybrid_keeps_only_the_shared_mlp() {
    let s = parse(granite(0));
    assert!(s.moe.is_none());
    assert_eq!(counts(&s), (2_461_480, 2_461_480));
}

/// Granite 4 cache (vLLM MambaSpec / transformers
/// `HybridMambaAttentionDynamicCache`): K/V in the one attention layer,
/// 2 kv heads × 64 × 2 (K, V) × 2 B = 512 B per token; each of the 3 Mamba
/// layers keeps conv 544 × (4 − 1) × 2 B = 3,264 B and SSM 8 × 64 × 16 × 2 B
/// = 16,384 B → 19,648 × 3 = 58,944 B per sequence (bf16 state).
#[test]
fn granite4_kv_and_state_by_hand() {
    let g = kv_geometry(&parse(granite(8)), DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 512);
    let st = g.state.unwrap();
    assert_eq!((st.layers, st.bytes_per_sequence), (3, 58_944));
}

/// A mamba_d_head that does not multiply to d_inner is refused by name, as
/// GraniteMoeHybridConfig raises.
#[test]
fn granite4_inconsistent_mamba_heads_are_refused() {
    let mut c = granite(8);
    c["mamba_d_head"] = json!(48);
    let e = parse_config(c.to_string().as_bytes(), "config.json").unwrap_err().to_string();
    assert!(e.contains("mamba_d_head"), "{e}");
    let mut c = granite(8);
    c["layer_types"] = json!(["mamba", "attention"]);
    let e = parse_config(c.to_string().as_bytes(), "config.json").unwrap_err().to_string();
    assert!(e.contains("layer_types"), "{e}");
}

/// A small Falcon-H1 config with the keys the released tiiuae/Falcon-H1-*
/// configs use (`FalconH1Config`).
fn falcon_h1(rms_norm: bool) -> serde_json::Value {
    json!({
        "architectures": ["FalconH1ForCausalLM"],
        "model_type": "falcon_h1",
        "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "intermediate_size": 512, "vocab_size": 1000, "tie_word_embeddings": false,
        "mamba_d_ssm": 384, "mamba_n_heads": 6, "mamba_d_head": 64,
        "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
        "mamba_conv_bias": true, "mamba_proj_bias": false, "projectors_bias": false,
        "mamba_rms_norm": rms_norm, "mamba_norm_before_gate": false,
        "key_multiplier": 1.0, "ssm_multipliers": [1.0, 1.0, 1.0, 1.0, 1.0],
        "mlp_multipliers": [1.0, 1.0], "torch_dtype": "bfloat16"
    })
}

/// Falcon-H1 parameters, after transformers' `FalconH1DecoderLayer`
/// (modeling_falcon_h1.py): `self_attn` and `mamba` (FalconH1Mixer) side by
/// side, `feed_forward` (gate, up, down), `input_layernorm` and
/// `pre_ff_layernorm`. By hand (hidden 256):
/// - embed 256,000 + lm_head 256,000 (untied) + final_layernorm 256
/// - per layer: attention 196,608 (as above); Mamba d_inner = mamba_d_ssm
///   384, conv_dim 384 + 2·16 = 416, in_proj 256 × (384 + 416 + 6) = 206,336,
///   conv1d 416 × 4 + 416 = 2,080, dt_bias/A_log/D 18, no gated norm
///   (mamba_rms_norm false), out_proj 384 × 256 = 98,304 → 306,738;
///   MLP 3 × 256 × 512 = 393,216; norms 512 → 897,074
///
/// Total 512,256 + 2 × 897,074 = 2,306,404; with mamba_rms_norm the gated
/// norm adds 2 × 384 = 768.
#[test]
fn falcon_h1_counts_by_hand() {
    let s = parse(falcon_h1(false));
    assert_eq!(s.family, Family::FalconH1);
    assert!(s.layer_pattern.iter().all(|l| l.mixer == Mixer::AttentionMamba2));
    assert_eq!(counts(&s), (2_306_404, 2_306_404));
    assert_eq!(counts(&parse(falcon_h1(true))).0, 2_306_404 + 768);
}

/// Falcon-H1 keeps BOTH caches in every layer (vLLM `FalconH1DecoderLayer`
/// registers an attention layer and a MambaMixer2 per layer): K/V 2 layers ×
/// 2 kv heads × 64 × 2 × 2 B = 1,024 B per token; state per layer conv
/// 416 × 3 × 2 B = 2,496 + SSM 6 × 64 × 16 × 2 B = 12,288 → 14,784 × 2 =
/// 29,568 B per sequence.
#[test]
fn falcon_h1_kv_and_state_in_every_layer() {
    let s = parse(falcon_h1(false));
    let g = kv_geometry(&s, DType::F16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 1_024);
    let st = g.state.unwrap();
    assert_eq!((st.layers, st.bytes_per_sequence), (2, 29_568));
    // a d_ssm the heads do not divide is refused by name (FalconH1Config raises)
    let mut c = falcon_h1(false);
    c["mamba_n_heads"] = json!(5);
    let e = parse_config(c.to_string().as_bytes(), "config.json").unwrap_err().to_string();
    assert!(e.contains("mamba_n_heads"), "{e}");
}

fn load(w: &GgufWriter) -> LlamaModel {
    let bytes = w.to_bytes();
    let h = match parse_gguf(&bytes) {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    };
    model_from_header(&h, "x").unwrap_or_else(|e| panic!("refused: {e}"))
}

fn parse_gguf(bytes: &[u8]) -> Parsed {
    vramfit_ingest::gguf::parse(bytes, bytes.len() as u64).unwrap()
}

fn ssm_keys(w: GgufWriter, arch: &str) -> GgufWriter {
    let u = |v: u32| WValue::U32(v);
    w.kv(&format!("{arch}.ssm.conv_kernel"), u(4))
        .kv(&format!("{arch}.ssm.inner_size"), u(1536))
        .kv(&format!("{arch}.ssm.state_size"), u(128))
        .kv(&format!("{arch}.ssm.group_count"), u(1))
        .kv(&format!("{arch}.ssm.time_step_rank"), u(24))
}

/// llama.cpp `llama_model::create_memory` (src/llama-model.cpp): for
/// `falcon-h1` both layer filters return true, so every layer has a KV
/// cache AND a recurrent state. Regression (issue 22): the GGUF reader gave
/// Falcon-H1 layers K/V only. At -c 4096 -np 1, f16: 4 layers × 2 kv heads ×
/// 128 × 2 B × 4096 cells × (K + V) = 16 MiB; state per layer n_embd_r =
/// (4 − 1) × (1536 + 2·1·128) = 5,376 and n_embd_s = 128 × 1536 = 196,608
/// f32 values (llama_hparams::n_embd_r/s) → 4 × 201,984 × 4 B.
#[test]
fn falcon_h1_gguf_layers_keep_kv_and_state() {
    let s = Shape { arch: "falcon-h1", ..Shape::llama(4, 1024, 8, 2, 2816, 1000) };
    let m = load(&ssm_keys(writer(&s), "falcon-h1"));
    for (il, l) in m.layers.iter().enumerate() {
        assert!(l.has_kv() && l.recurrent.is_some(), "layer {il}");
    }
    let opts = LlamaCppOptions { ctx_size: 4096, gpus: vec![], n_gpu_layers: Some(0), ..Default::default() };
    let p = plan(&m, &opts).unwrap();
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, 4 * 2 * 128 * 2 * 4096 * 2);
    assert_eq!(p.kv.state_bytes, 4 * (5_376 + 196_608) * 4);
}

/// `granitehybrid`: the loader marks a layer recurrent when its
/// head_count_kv is 0 (llama_model::load_hparams, LLM_ARCH_GRANITE_HYBRID,
/// src/llama-model.cpp) and the hybrid memory's default filters split the
/// layers: attention layers get K/V only, Mamba layers the state only.
#[test]
fn granitehybrid_gguf_splits_layers_by_kv_heads() {
    let s = Shape {
        arch: "granitehybrid",
        kv_heads_per_layer: Some(vec![0, 0, 0, 2]),
        ..Shape::llama(4, 1024, 8, 2, 2816, 1000)
    };
    let m = load(&ssm_keys(writer(&s), "granitehybrid"));
    let kinds: Vec<(bool, bool)> = m.layers.iter().map(|l| (l.has_kv(), l.recurrent.is_some())).collect();
    assert_eq!(kinds, vec![(false, true), (false, true), (false, true), (true, false)]);
    let opts = LlamaCppOptions { ctx_size: 4096, gpus: vec![], n_gpu_layers: Some(0), ..Default::default() };
    let p = plan(&m, &opts).unwrap();
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, 2 * 128 * 2 * 4096 * 2);
    assert_eq!(p.kv.state_bytes, 3 * (5_376 + 196_608) * 4);
}

/// Training: Falcon-H1's Mamba branch runs beside attention, so its saved
/// tensors come on top of the attention-shaped layer. The same config read
/// as a Llama (the attention + gated MLP of the layer, no Mamba) differs by
/// exactly the branch: in_proj input 256 + zxbcdt (384 + 416 + 6) + out_x
/// 384 = 1,446 values per token × 2 B (bf16 default) = 2,892 B per layer
/// (mamba_ssm `MambaSplitConv1dScanCombinedFn.forward` save_for_backward;
/// FalconH1Mixer scales its input by ssm_in_multiplier first).
#[test]
fn falcon_h1_training_activations_add_the_mamba_branch() {
    use vramfit_core::train::{TrainModel, TrainSetup};
    let falcon = parse(falcon_h1(false));
    let mut twin = falcon_h1(false);
    twin["model_type"] = json!("llama");
    let twin = parse(twin);
    let setup = TrainSetup::default();
    let (a, b) = (TrainModel::new(&falcon, &setup).unwrap().act, TrainModel::new(&twin, &setup).unwrap().act);
    let per_value = setup.precision.compute_dtype().bytes().unwrap();
    assert_eq!(a.layer_split - b.layer_split, per_value * 1_446);
    assert_eq!((a.layer_rep, a.layer_kv), (b.layer_rep, b.layer_kv));
}
