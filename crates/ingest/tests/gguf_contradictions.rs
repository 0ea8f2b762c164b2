//! GGUF headers that contradict their own tensors are refused naming the
//! metadata key, as llama.cpp refuses them at load ("missing tensor",
//! "wrong shape", its load_hparams asserts), instead of becoming an
//! impossible estimate (issue 25 item 8). Files of the shapes llama.cpp's
//! converters write — dense and MoE Llama, Qwen2-MoE with a shared expert,
//! Phi-3's fused gate and up, GPT-NeoX's fused QKV, Gemma 3, Mamba, Mamba-2,
//! RWKV-6, LFM2 — still load.

use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::GgmlType::{self, F32, Q4K};

fn complete(w: &GgufWriter) -> GgufHeader {
    let bytes = w.to_bytes();
    match parse(&bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    }
}

fn loads(w: &GgufWriter) -> vramfit_llamacpp::LlamaModel {
    model_from_header(&complete(w), "x").unwrap_or_else(|e| panic!("refused a consistent file: {e}"))
}

/// The refusal of `w`: the key it names and the message.
fn refused(w: &GgufWriter) -> (String, String) {
    match model_from_header(&complete(w), "x") {
        Err(e @ ModelError::Contradicts { .. }) => {
            let ModelError::Contradicts { key, .. } = &e else { unreachable!() };
            (key.clone(), e.to_string())
        }
        Err(e) => panic!("refused, but not as a contradiction: {e}"),
        Ok(m) => panic!("accepted: {} layers, {:?} experts", m.n_layer, m.experts),
    }
}

fn u32v(v: u64) -> WValue {
    WValue::U32(v as u32)
}

fn u64v(v: u64) -> WValue {
    WValue::U64(v)
}

fn llama() -> Shape {
    Shape::llama(4, 256, 8, 2, 512, 64)
}

#[test]
fn consistent_files_load() {
    loads(&writer(&llama()));
    loads(&writer(&Shape { experts: Some((8, 2, 256)), ..llama() }));
    let mut gemma = llama();
    gemma.arch = "gemma3";
    gemma.sliding_window = Some(512);
    gemma.kv_heads_per_layer = Some(vec![2, 2, 1, 2]);
    loads(&writer(&gemma));
    // expert width absent: taken from the expert tensors (not from feed_forward_length)
    let w = writer(&Shape { experts: Some((8, 2, 256)), ..llama() }).unset("llama.expert_feed_forward_length");
    assert_eq!(loads(&w).experts.unwrap().ff, 256);
}

#[test]
fn no_tensors_at_all() {
    let w = writer(&llama()).retain_tensors(|_| false);
    let (key, msg) = refused(&w);
    assert_eq!(key, "tensor_count", "{msg}");
    assert!(msg.contains("missing tensor 'token_embd.weight'"), "{msg}");
}

#[test]
fn fewer_layers_of_tensors_than_the_block_count() {
    let w = writer(&llama()).set("llama.block_count", u32v(8));
    let (key, msg) = refused(&w);
    assert_eq!(key, "llama.block_count", "{msg}");
    assert!(msg.contains("4 of those layers") && msg.contains("layer 4"), "{msg}");
    // a layer in the middle missing
    let w = writer(&llama()).retain_tensors(|n| !n.starts_with("blk.2."));
    assert!(refused(&w).1.contains("layer 2"));
}

#[test]
fn kv_heads_above_the_heads_or_against_the_k_projection() {
    let w = writer(&llama()).set("llama.attention.head_count_kv", u32v(128));
    let (key, msg) = refused(&w);
    assert_eq!(key, "llama.attention.head_count_kv", "{msg}");
    assert!(msg.contains("multiple of head_count_kv"), "{msg}");
    // a divisor of the heads, but not what attn_k holds: the 4× KV cache it would imply is refused
    let w = writer(&llama()).set("llama.attention.head_count_kv", u32v(8));
    let (key, msg) = refused(&w);
    assert_eq!(key, "llama.attention.head_count_kv", "{msg}");
    assert!(msg.contains("'blk.0.attn_k.weight'") && msg.contains("wrong shape"), "{msg}");
    // heads against attn_q
    let w = writer(&llama()).set("llama.attention.head_count", u32v(16)).set("llama.attention.key_length", u32v(32));
    assert_eq!(refused(&w).0, "llama.attention.head_count");
}

#[test]
fn ffn_width_of_2_40() {
    let w = writer(&llama()).set("llama.feed_forward_length", u64v(1 << 40));
    let (key, msg) = refused(&w);
    assert_eq!(key, "llama.feed_forward_length", "{msg}");
    assert!(msg.contains("'blk.0.ffn_down.weight'") && msg.contains("1099511627776"), "{msg}");
    // 0 where the tensors have a width: the FFN would vanish from the estimate
    let w = writer(&llama()).set("llama.feed_forward_length", u32v(0));
    assert_eq!(refused(&w).0, "llama.feed_forward_length");
}

#[test]
fn expert_counts_above_the_tensors() {
    let moe = || writer(&Shape { experts: Some((8, 2, 256)), ..llama() });
    let (key, msg) = refused(&moe().set("llama.expert_count", u32v(1000)));
    assert_eq!(key, "llama.expert_count", "{msg}");
    assert!(msg.contains("1000 experts") && msg.contains("wrong shape"), "{msg}");
    let (key, msg) = refused(&moe().set("llama.expert_used_count", u32v(9)));
    assert_eq!(key, "llama.expert_used_count", "{msg}");
    assert!(msg.contains("n_expert_used <= n_expert"), "{msg}");
    let (key, _) = refused(&moe().set("llama.expert_used_count", u32v(0)));
    assert_eq!(key, "llama.expert_used_count");
    let (key, _) = refused(&moe().set("llama.expert_feed_forward_length", u64v(1 << 40)));
    assert_eq!(key, "llama.expert_feed_forward_length");
    // experts declared, none in the file
    let w = writer(&llama()).set("llama.expert_count", u32v(8)).set("llama.expert_used_count", u32v(2));
    let (key, msg) = refused(&w);
    assert_eq!(key, "llama.expert_count", "{msg}");
    // experts used without experts
    let w = writer(&llama()).set("llama.expert_used_count", u32v(2));
    assert_eq!(refused(&w).0, "llama.expert_used_count");
}

/// Qwen2-MoE: routed experts and one shared expert of its own width.
fn qwen2moe(shared_ff: u64) -> GgufWriter {
    let s = Shape { arch: "qwen2moe", experts: Some((8, 2, 256)), ..llama() };
    let mut w = writer(&s)
        .set("qwen2moe.expert_shared_count", u32v(1))
        .set("qwen2moe.expert_shared_feed_forward_length", u64v(shared_ff));
    for il in 0..4 {
        let p = |t: &str| format!("blk.{il}.{t}");
        w = w
            .tensor(&p("ffn_gate_shexp.weight"), Q4K, &[256, 512])
            .tensor(&p("ffn_up_shexp.weight"), Q4K, &[256, 512])
            .tensor(&p("ffn_down_shexp.weight"), Q4K, &[512, 256]);
    }
    w
}

#[test]
fn shared_experts_match_their_tensors() {
    let m = loads(&qwen2moe(512));
    assert_eq!(m.experts.unwrap().shared_ff, 512);
    let (key, msg) = refused(&qwen2moe(1 << 40));
    assert_eq!(key, "qwen2moe.expert_shared_feed_forward_length", "{msg}");
    let w = qwen2moe(512).retain_tensors(|n| !n.contains("shexp"));
    assert_eq!(refused(&w).0, "qwen2moe.expert_shared_count");
    let (key, msg) = refused(&qwen2moe(1 << 40).set("qwen2moe.expert_shared_count", u64v(1 << 40)));
    assert_eq!(key, "qwen2moe.expert_shared_count", "{msg}");
}

#[test]
fn fused_projections_are_checked_as_fused() {
    // Phi-3: gate and up in one ffn_up of 2·n_ff rows, no ffn_down checked against it
    let s = Shape { arch: "phi3", ..llama() };
    let mut w = writer(&s).retain_tensors(|n| !n.contains("ffn_gate") && !n.contains("ffn_up"));
    for il in 0..4 {
        w = w.tensor(&format!("blk.{il}.ffn_up.weight"), Q4K, &[256, 1024]);
    }
    let m = loads(&w);
    assert!(m.gated_ffn);
    // GPT-NeoX: one attn_qkv of (heads + 2 kv heads) × head size rows
    let s = Shape { arch: "gptneox", ..Shape::llama(2, 256, 8, 8, 1024, 64) };
    let mut w =
        writer(&s).retain_tensors(|n| !n.contains("attn_q.") && !n.contains("attn_k.") && !n.contains("attn_v."));
    for il in 0..2 {
        w = w.tensor(&format!("blk.{il}.attn_qkv.weight"), Q4K, &[256, 768]);
    }
    assert!(loads(&w).fused_qkv);
    let (key, msg) = refused(&w.set("gptneox.attention.head_count_kv", u32v(2)));
    assert_eq!(key, "gptneox.attention.head_count_kv", "{msg}");
    assert!(msg.contains("attn_qkv"), "{msg}");
}

/// A model of `n_layer` layers of `arch` with these keys and per-layer tensors.
fn recurrent_model(arch: &str, keys: &[(&str, WValue)], layer: &[(&str, &[u64])]) -> GgufWriter {
    let n_layer = 2u64;
    let mut w = GgufWriter::new()
        .kv("general.architecture", WValue::Str(arch.into()))
        .kv(&format!("{arch}.block_count"), u32v(n_layer))
        .kv(&format!("{arch}.context_length"), u32v(1 << 20))
        .kv(&format!("{arch}.embedding_length"), u32v(256))
        .tensor("token_embd.weight", GgmlType::Q6K, &[256, 512])
        .tensor("output_norm.weight", F32, &[256]);
    for (k, v) in keys {
        w = w.kv(&format!("{arch}.{k}"), v.clone());
    }
    for il in 0..n_layer {
        for (name, ne) in layer {
            let ty = if ne.len() == 1 || ne[0] % 256 != 0 { F32 } else { Q4K };
            w = w.tensor(&format!("blk.{il}.{name}"), ty, ne);
        }
    }
    w
}

/// Mamba (llama.cpp LLM_ARCH_MAMBA tensors): d_inner 512, d_state 16, d_conv 4, dt_rank 16.
fn mamba(keys: &[(&str, WValue)]) -> GgufWriter {
    let mut all = vec![
        ("ssm.conv_kernel", u32v(4)),
        ("ssm.inner_size", u32v(512)),
        ("ssm.state_size", u32v(16)),
        ("ssm.time_step_rank", u32v(16)),
    ];
    for (k, v) in keys {
        all.retain(|(a, _)| a != k);
        all.push((k, v.clone()));
    }
    recurrent_model(
        "mamba",
        &all,
        &[
            ("attn_norm.weight", &[256]),
            ("ssm_in.weight", &[256, 1024]),
            ("ssm_conv1d.weight", &[4, 512]),
            ("ssm_conv1d.bias", &[512]),
            ("ssm_x.weight", &[512, 48]),
            ("ssm_dt.weight", &[16, 512]),
            ("ssm_dt.bias", &[512]),
            ("ssm_a", &[16, 512]),
            ("ssm_d", &[512]),
            ("ssm_out.weight", &[512, 256]),
        ],
    )
}

/// Mamba-2 (LLM_ARCH_MAMBA2): d_inner 512, d_state 64, 1 group, 8 heads.
fn mamba2(keys: &[(&str, WValue)]) -> GgufWriter {
    let mut all = vec![
        ("ssm.conv_kernel", u32v(4)),
        ("ssm.inner_size", u32v(512)),
        ("ssm.state_size", u32v(64)),
        ("ssm.group_count", u32v(1)),
        ("ssm.time_step_rank", u32v(8)),
    ];
    for (k, v) in keys {
        all.retain(|(a, _)| a != k);
        all.push((k, v.clone()));
    }
    recurrent_model(
        "mamba2",
        &all,
        &[
            ("attn_norm.weight", &[256]),
            ("ssm_in.weight", &[256, 2 * 512 + 2 * 64 + 8]),
            ("ssm_conv1d.weight", &[4, 512 + 2 * 64]),
            ("ssm_conv1d.bias", &[512 + 2 * 64]),
            ("ssm_dt.bias", &[8]),
            ("ssm_a", &[1, 8]),
            ("ssm_d", &[1, 8]),
            ("ssm_norm.weight", &[512, 1]),
            ("ssm_out.weight", &[512, 256]),
        ],
    )
}

/// RWKV-6 (LLM_ARCH_RWKV6): head size 64, FFN 896.
fn rwkv6(head_size: u64) -> GgufWriter {
    recurrent_model(
        "rwkv6",
        &[("wkv.head_size", u64v(head_size)), ("feed_forward_length", u32v(896)), ("time_mix_extra_dim", u32v(32))],
        &[
            ("attn_norm.weight", &[256]),
            ("attn_norm_2.weight", &[256]),
            ("time_mix_w1.weight", &[256, 160]),
            ("time_mix_w2.weight", &[32, 256, 5]),
            ("time_mix_first.weight", &[64, 4]),
            ("time_mix_key.weight", &[256, 256]),
            ("time_mix_value.weight", &[256, 256]),
            ("time_mix_receptance.weight", &[256, 256]),
            ("time_mix_gate.weight", &[256, 256]),
            ("time_mix_output.weight", &[256, 256]),
            ("channel_mix_key.weight", &[256, 896]),
            ("channel_mix_value.weight", &[896, 256]),
            ("channel_mix_receptance.weight", &[256, 256]),
        ],
    )
}

/// LFM2 (LLM_ARCH_LFM2): layer 0 short convolution (l_cache 3), layer 1 attention.
fn lfm2(l_cache: u64) -> GgufWriter {
    let mut w = recurrent_model(
        "lfm2",
        &[
            ("shortconv.l_cache", u64v(l_cache)),
            ("feed_forward_length", u32v(512)),
            ("attention.head_count", u32v(8)),
            ("attention.head_count_kv", WValue::Array(ValueType::I32, vec![WValue::I32(0), WValue::I32(2)])),
        ],
        &[
            ("attn_norm.weight", &[256]),
            ("ffn_norm.weight", &[256]),
            ("ffn_gate.weight", &[256, 512]),
            ("ffn_up.weight", &[256, 512]),
            ("ffn_down.weight", &[512, 256]),
        ],
    );
    w = w
        .tensor("blk.0.shortconv.conv.weight", F32, &[3, 256])
        .tensor("blk.0.shortconv.in_proj.weight", Q4K, &[256, 768])
        .tensor("blk.0.shortconv.out_proj.weight", Q4K, &[256, 256])
        .tensor("blk.1.attn_q.weight", Q4K, &[256, 256])
        .tensor("blk.1.attn_k.weight", Q4K, &[256, 64])
        .tensor("blk.1.attn_v.weight", Q4K, &[256, 64])
        .tensor("blk.1.attn_output.weight", Q4K, &[256, 256]);
    w
}

#[test]
fn recurrent_models_load() {
    let m = loads(&mamba(&[]));
    let st = m.layers[0].recurrent.unwrap();
    // llama_hparams::n_embd_r = (d_conv − 1) · d_inner, n_embd_s = d_state · d_inner
    assert_eq!((st.r, st.s), (3 * 512, 16 * 512));
    let st = loads(&mamba2(&[])).layers[0].recurrent.unwrap();
    assert_eq!((st.r, st.s), (3 * (512 + 2 * 64), 64 * 512));
    let st = loads(&rwkv6(64)).layers[0].recurrent.unwrap();
    assert_eq!((st.r, st.s), (2 * 256, 256 * 64));
    let m = loads(&lfm2(3));
    assert_eq!(m.layers[0].recurrent.unwrap().r, 2 * 256);
    assert!(m.layers[1].has_kv() && m.layers[1].recurrent.is_none());
}

#[test]
fn recurrent_sizes_of_2_40() {
    for (w, want) in [
        (mamba(&[("ssm.state_size", u64v(1 << 40))]), "mamba.ssm.state_size"),
        (mamba(&[("ssm.inner_size", u64v(1 << 40))]), "mamba.ssm.inner_size"),
        (mamba(&[("ssm.conv_kernel", u64v(1 << 40))]), "mamba.ssm.conv_kernel"),
        (mamba2(&[("ssm.group_count", u64v(1 << 40))]), "mamba2.ssm.group_count"),
        (mamba2(&[("ssm.state_size", u64v(1 << 40)), ("ssm.group_count", u32v(0))]), "mamba2.ssm.state_size"),
        (mamba(&[("ssm.state_size", u64v(1 << 40)), ("ssm.inner_size", u64v(1 << 40))]), "mamba.ssm.state_size"),
        (rwkv6(1 << 40), "rwkv6.wkv.head_size"),
        (lfm2(1 << 40), "lfm2.shortconv.l_cache"),
    ] {
        let (key, msg) = refused(&w);
        assert_eq!(key, want, "{msg}");
    }
    // consistent with the conv tensor, but a state larger than the layer's weights
    let w = mamba2(&[("ssm.state_size", u64v(1 << 20)), ("ssm.group_count", u32v(0)), ("ssm.inner_size", u32v(640))])
        .retain_tensors(|n| !n.contains("ssm_out"));
    let (key, msg) = refused(&w);
    assert!(key.starts_with("mamba2.ssm."), "{key}: {msg}");
    assert!(msg.contains("more than the layer's own"), "{msg}");
}
