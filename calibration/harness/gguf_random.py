#!/usr/bin/env python3
"""Write GGUF files at real architectures' dimensions for llama.cpp start-up logs.

The header (metadata and tensor infos) is written with llama.cpp's own
gguf-py (PYTHONPATH=<llama.cpp>/gguf-py); the tensor data is not written
but the file is extended to its full length (a sparse file of zeros).
llama.cpp's memory log lines (model, KV and compute buffers) depend on the
tensor shapes and types only, never on the weight values, and a zero-filled
file loads (llama_model_loader checks only that every tensor lies inside
the file). The vocabulary is `tokenizer.ggml.model = "none"` with
`<arch>.vocab_size` tokens: llama_vocab::load (src/llama-vocab.cpp) then
adds that many dummy tokens, so n_vocab (and the logits) is the model's.

Each model's dimensions are its Hugging Face config.json as vramfit's
catalogue copies it (crates/catalog/data/presets.json, `source` of each
preset). Tensor names and shapes follow llama.cpp's load_arch_tensors
(src/models/<arch>.cpp) at ggml-org/llama.cpp@0c1e57098 (b11312).

Usage: gguf_random.py MODEL OUT.gguf [--header OUT.header]
  MODEL: qwen3-0.6b | qwen3-0.6b-q4_0 | gemma-3-1b | qwen3-30b-a3b-q4_0 | qwen3.5-27b-q4_0 | gpt-oss-20b-mxfp4
         | qwen3.6-35b-a3b-q4_0 | qwen3-30b-a3b-8l-q4_0 | gemma-4-e2b-q8_0 | gemma-4-26b-a4b-q4_0
         | qwen3.5-27b-mtp-q4_0 | qwen3.5-35b-a3b-mtp-q4_0 (with their MTP block)
  --header writes the header alone (what vramfit reads) beside the file.
"""
import argparse
import os
import sys

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType as T, GGML_QUANT_SIZES

# Hugging Face config.json figures (crates/catalog/data/presets.json):
MODELS = {
    # Qwen/Qwen3-0.6B: hidden 1024, 28 layers, 16 heads, 8 KV heads, head_dim 128,
    # intermediate 3072, vocab 151936, 40960 positions, tied embeddings
    "qwen3-0.6b": dict(arch="qwen3", n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128,
                       n_ff=3072, n_vocab=151936, n_ctx_train=40960, tied=True, wtype=T.F16,
                       rope=1e6),
    # the same, every matrix Q4_0 (as `llama-quantize --pure ... Q4_0` writes it): on an x86-64
    # host the CPU backend repacks them (CPU_REPACK, ggml-cpu repack.cpp)
    "qwen3-0.6b-q4_0": dict(arch="qwen3", n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128,
                            n_ff=3072, n_vocab=151936, n_ctx_train=40960, tied=True, wtype=T.Q4_0,
                            rope=1e6),
    # google/gemma-3-1b-it: hidden 1152, 26 layers, 4 heads, 1 KV head, head_dim 256,
    # intermediate 6912, vocab 262144, 32768 positions, sliding window 512 every
    # layer but each 6th (llama.cpp load_swa_pattern(ml, 6)), tied embeddings
    "gemma-3-1b": dict(arch="gemma3", n_layer=26, n_embd=1152, n_head=4, n_head_kv=1, head_dim=256,
                       n_ff=6912, n_vocab=262144, n_ctx_train=32768, tied=True, wtype=T.F16,
                       rope=1e6, swa=512, rope_swa=1e4, post_norms=True),
    # Qwen/Qwen3-30B-A3B: hidden 2048, 48 layers, 32 heads, 4 KV heads, head_dim 128,
    # 128 experts, 8 used, moe_intermediate 768, vocab 151936, untied head
    "qwen3-30b-a3b-q4_0": dict(arch="qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4,
                               head_dim=128, n_ff=6144, n_vocab=151936, n_ctx_train=40960, tied=False,
                               wtype=T.Q4_0, rope=1e6, experts=(128, 8, 768)),
    # Qwen/Qwen3.5-27B (text_config): hidden 5120, 64 layers, every 4th full attention
    # (24 heads, 4 KV heads, head_dim 256, gated query), the others gated delta-net
    # (16 key heads and 48 value heads of 128, conv kernel 4), intermediate 17408,
    # vocab 248320, partial rotary 0.25 (64 dims), mrope sections [11, 11, 10];
    # the MTP layer is left out (no nextn_predict_layers key: llama.cpp loads the trunk)
    "qwen3.5-27b-q4_0": dict(arch="qwen35", n_layer=64, n_embd=5120, n_head=24, n_head_kv=4, head_dim=256,
                             n_ff=17408, n_vocab=248320, n_ctx_train=262144, tied=False, wtype=T.Q4_0,
                             rope=1e7, gated_q=True, post_attn_norm=True,
                             delta_net=dict(conv=4, k_heads=16, v_heads=48, head=128, interval=4)),
    # openai/gpt-oss-20b: hidden 2880, 24 layers alternating sliding window 128 and full
    # (llama.cpp load_swa_pattern(ml, 2)), 64 heads, 8 KV heads, head_dim 64, attention
    # biases and sinks, 32 experts of 2880, 4 used, vocab 201088, 131072 positions;
    # experts MXFP4 as released (the config's quantization_config), the rest f16/f32
    "gpt-oss-20b-mxfp4": dict(arch="gpt-oss", n_layer=24, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64,
                              n_ff=2880, n_vocab=201088, n_ctx_train=131072, tied=False, wtype=T.F16,
                              rope=150000.0, swa=128, experts=(32, 4, 2880), exp_type=T.MXFP4,
                              oss=True),
    # Qwen/Qwen3.6-35B-A3B (text_config; the same shapes as Qwen/Qwen3.5-35B-A3B, whose config.json
    # the catalogue copies: crates/catalog/data/presets.json "qwen3.5-35b-a3b"): hidden 2048,
    # 40 layers, every 4th full attention (16 heads, 2 KV heads, head_dim 256, gated query), the
    # others gated delta-net (16 key heads and 32 value heads of 128, conv kernel 4), 256 experts
    # of 512, 8 used, one shared expert of 512, vocab 248320, 262144 positions; the MTP layer is
    # left out (llama.cpp builds the trunk without it). For published CUDA logs of this model
    # (calibration/data/published/llamacpp.jsonl): a stand-in at the real shapes, every matrix
    # Q4_0 (the logged files are unsloth's mixed UD quants: only KV, state, output and compute
    # figures are compared, none of which depends on the weight types)
    "qwen3.6-35b-a3b-q4_0": dict(arch="qwen35moe", n_layer=40, n_embd=2048, n_head=16, n_head_kv=2,
                                 head_dim=256, n_ff=512, n_vocab=248320, n_ctx_train=262144, tied=False,
                                 wtype=T.Q4_0, rope=1e7, gated_q=True, post_attn_norm=True,
                                 experts=(256, 8, 512), shexp=512,
                                 delta_net=dict(conv=4, k_heads=16, v_heads=32, head=128, interval=4)),
    # Qwen/Qwen3-30B-A3B with its 48 layers CUT TO 8 (every per-layer tensor keeps its real
    # shape; embeddings and head unchanged): the full file's CPU_REPACK copy of its Q4_0
    # experts (17 GB) does not fit beside the mapped file in this machine's 24 GiB, 8 layers'
    # (2.7 GB) does. Only to measure the repack rule on 3-D expert stacks.
    "qwen3-30b-a3b-8l-q4_0": dict(arch="qwen3moe", n_layer=8, n_embd=2048, n_head=32, n_head_kv=4,
                                  head_dim=128, n_ff=6144, n_vocab=151936, n_ctx_train=40960, tied=False,
                                  wtype=T.Q4_0, rope=1e6, experts=(128, 8, 768)),
    # google/gemma-4-E2B(-it) text_config: hidden 1536, 35 layers, 8 heads, 1 KV head,
    # head_dim 256 (sliding) / global_head_dim 512 (full), layer_types 4 sliding + 1 full
    # (x7), sliding_window 512, intermediate 6144 with use_double_wide_mlp (the 20 KV-shared
    # layers 12288: convert_hf_to_gguf Gemma4Model.set_gguf_parameters), num_kv_shared_layers
    # 20, hidden_size_per_layer_input 256, vocab 262144, 131072 positions, final softcap 30,
    # rope 1e6 full (partial 0.25, "proportional") / 1e4 sliding, tied embeddings.
    # Q8_0 as convert_hf_to_gguf.py --outtype q8_0 writes it: every 2-D .weight Q8_0,
    # 1-D tensors and norms F32 (conversion/base.py prepare_tensors)
    "gemma-4-e2b-q8_0": dict(arch="gemma4", n_layer=35, n_embd=1536, n_head=8, n_head_kv=1, head_dim=512,
                             head_dim_swa=256, n_ff=6144, n_vocab=262144, n_ctx_train=131072, tied=True,
                             wtype=T.Q8_0, rope=1e6, rope_swa=1e4, swa=512,
                             swa_layers=[(il % 5) < 4 for il in range(35)], kv_shared=20, double_wide=True,
                             per_layer=256, softcap=30.0),
    # google/gemma-4-26B-A4B(-it) text_config: hidden 2816, 30 layers, 16 heads, 8 KV heads
    # (sliding, head_dim 256) / num_global_key_value_heads 2 (full, global_head_dim 512),
    # attention_k_eq_v (full layers have no v_proj), layer_types 5 sliding + 1 full (x5),
    # sliding_window 1024, intermediate 2112 (the dense MLP every layer keeps), 128 experts,
    # top_k 8, moe_intermediate 704 (experts.gate_up_proj fused: ffn_gate_up_exps), vocab
    # 262144, 262144 positions, no per-layer embeddings, no KV sharing, tied embeddings.
    # Q4_0 on every matrix (as `llama-quantize --pure ... Q4_0`), router/norms/scales F32
    "gemma-4-26b-a4b-q4_0": dict(arch="gemma4", n_layer=30, n_embd=2816, n_head=16, n_head_kv=2, head_dim=512,
                                 head_dim_swa=256, n_head_kv_swa=8, n_ff=2112, n_vocab=262144,
                                 n_ctx_train=262144, tied=True, wtype=T.Q4_0, rope=1e6, rope_swa=1e4,
                                 swa=1024, swa_layers=[(il % 6) < 5 for il in range(30)], kv_shared=0,
                                 k_eq_v=True, experts=(128, 8, 704), per_layer=0, softcap=30.0),
}


def gemma4_tensors(m):
    """llama_model_gemma4::load_arch_tensors (src/models/gemma4.cpp, b11312), in the
    converter's order: rope_freqs (generate_extra_tensors) first, then the checkpoint's."""
    e, v, w = m["n_embd"], m["n_vocab"], m["wtype"]
    nl, ple = m["n_layer"], m["per_layer"]
    first_shared = nl - m["kv_shared"]
    out = [("rope_freqs.weight", [m["head_dim"] // 2], T.F32),  # full layers' proportional rope
           ("token_embd.weight", [e, v], w)]
    if ple:
        out.append(("per_layer_token_embd.weight", [ple * nl, v], w))
    for il in range(nl):
        p = f"blk.{il}."
        sliding = m["swa_layers"][il]
        hd = m["head_dim_swa"] if sliding else m["head_dim"]
        kvh = m.get("n_head_kv_swa", m["n_head_kv"]) if sliding else m["n_head_kv"]
        q, kv = m["n_head"] * hd, kvh * hd
        ff = m["n_ff"] * (2 if m.get("double_wide") and il >= first_shared else 1)
        out += [
            (p + "attn_norm.weight", [e], T.F32),
            (p + "layer_output_scale.weight", [1], T.F32),
            (p + "ffn_down.weight", [ff, e], w),
            (p + "ffn_gate.weight", [e, ff], w),
            (p + "ffn_up.weight", [e, ff], w),
        ]
        if ple:
            out += [(p + "inp_gate.weight", [e, ple], w), (p + "proj.weight", [ple, e], w)]
        out += [(p + "post_attention_norm.weight", [e], T.F32), (p + "post_ffw_norm.weight", [e], T.F32)]
        if ple:
            out.append((p + "post_norm.weight", [e], T.F32))
        out.append((p + "ffn_norm.weight", [e], T.F32))
        if "experts" in m:
            n_exp, _, eff = m["experts"]
            out += [
                (p + "ffn_gate_inp.weight", [e, n_exp], T.F32),   # router.proj (F32 in every file)
                (p + "ffn_gate_inp.scale", [e], T.F32),           # router.scale
                (p + "ffn_down_exps.scale", [n_exp], T.F32),      # router.per_expert_scale
                (p + "ffn_gate_up_exps.weight", [e, 2 * eff, n_exp], w),
                (p + "ffn_down_exps.weight", [eff, e, n_exp], w),
                (p + "pre_ffw_norm_2.weight", [e], T.F32),
                (p + "post_ffw_norm_1.weight", [e], T.F32),
                (p + "post_ffw_norm_2.weight", [e], T.F32),
            ]
        # the KV-shared layers keep their k/v projections in the checkpoint (loaded,
        # TENSOR_NOT_REQUIRED, unused); a full layer with attention_k_eq_v has no v_proj
        out += [(p + "attn_k_norm.weight", [hd], T.F32), (p + "attn_k.weight", [e, kv], w),
                (p + "attn_output.weight", [q, e], w), (p + "attn_q_norm.weight", [hd], T.F32),
                (p + "attn_q.weight", [e, q], w)]
        if not (m.get("k_eq_v") and not sliding):
            out.append((p + "attn_v.weight", [e, kv], w))
    out.append(("output_norm.weight", [e], T.F32))
    if ple:
        out += [("per_layer_model_proj.weight", [e, ple * nl], w), ("per_layer_proj_norm.weight", [ple], T.F32)]
    return out


def gemma4_keys(wr, a, m):
    """The keys convert_hf_to_gguf Gemma4Model.set_gguf_parameters writes beyond the common ones."""
    nl = m["n_layer"]
    wr.add_shared_kv_layers(m["kv_shared"])
    wr.add_embedding_length_per_layer_input(m["per_layer"])
    wr.add_sliding_window_pattern(m["swa_layers"])
    wr.add_key_length_swa(m["head_dim_swa"])
    wr.add_value_length_swa(m["head_dim_swa"])
    wr.add_rope_dimension_count(m["head_dim"])
    wr.add_rope_dimension_count_swa(m["head_dim_swa"])
    wr.add_final_logit_softcapping(m["softcap"])
    if m.get("double_wide"):
        first_shared = nl - m["kv_shared"]
        wr.add_feed_forward_length([m["n_ff"] * (1 if il < first_shared else 2) for il in range(nl)])
    if "n_head_kv_swa" in m:
        wr.add_head_count_kv([m["n_head_kv_swa"] if s else m["n_head_kv"] for s in m["swa_layers"]])


def nbytes(ty, ne):
    block, size = GGML_QUANT_SIZES[ty]
    n = 1
    for d in ne:
        n *= d
    assert ne[0] % block == 0, (ty, ne)
    return n // block * size


def moe_ffn(m, p, e, w):
    """The routed experts (and the shared expert, `shexp`) of one layer
    (llama_model_qwen3moe / llama_model_qwen35moe ::load_arch_tensors)."""
    n_exp, _, eff = m["experts"]
    # the routers stay f32 (llama-quantize never quantizes ffn_gate_inp)
    out = [
        (p + "ffn_gate_inp.weight", [e, n_exp], T.F32),
        (p + "ffn_gate_exps.weight", [e, eff, n_exp], w),
        (p + "ffn_down_exps.weight", [eff, e, n_exp], w),
        (p + "ffn_up_exps.weight", [e, eff, n_exp], w),
    ]
    if "shexp" in m:
        sh = m["shexp"]
        out += [
            (p + "ffn_gate_inp_shexp.weight", [e], T.F32),
            (p + "ffn_gate_shexp.weight", [e, sh], w),
            (p + "ffn_up_shexp.weight", [e, sh], w),
            (p + "ffn_down_shexp.weight", [sh, e], w),
        ]
    return out


def tensors(m):
    """(name, ne (ggml order), type) in the converter's order."""
    if m["arch"] == "gemma4":
        return gemma4_tensors(m)
    e, d, v, ff = m["n_embd"], m["head_dim"], m["n_vocab"], m["n_ff"]
    q, kv = m["n_head"] * d, m["n_head_kv"] * d
    w = m["wtype"]
    out = [("token_embd.weight", [e, v], w)]
    for il in range(m["n_layer"]):
        p = f"blk.{il}."
        dn = m.get("delta_net")
        if dn and (il + 1) % dn["interval"] != 0:
            # llama_model_qwen35::load_arch_tensors, recurrent (linear attention) layer
            kd, vd = dn["k_heads"] * dn["head"], dn["v_heads"] * dn["head"]
            out += [
                (p + "attn_norm.weight", [e], T.F32),
                (p + "attn_qkv.weight", [e, 2 * kd + vd], w),
                (p + "attn_gate.weight", [e, vd], w),
                (p + "ssm_conv1d.weight", [dn["conv"], 2 * kd + vd], T.F32),
                (p + "ssm_dt.bias", [dn["v_heads"]], T.F32),
                (p + "ssm_a", [dn["v_heads"]], T.F32),
                (p + "ssm_beta.weight", [e, dn["v_heads"]], w if e % 256 == 0 else T.F16),
                (p + "ssm_alpha.weight", [e, dn["v_heads"]], w if e % 256 == 0 else T.F16),
                (p + "ssm_norm.weight", [dn["head"]], T.F32),
                (p + "ssm_out.weight", [vd, e], w),
                (p + "post_attention_norm.weight", [e], T.F32),
            ]
            if "experts" in m:
                out += moe_ffn(m, p, e, w)
            else:
                out += [
                    (p + "ffn_gate.weight", [e, ff], w),
                    (p + "ffn_up.weight", [e, ff], w),
                    (p + "ffn_down.weight", [ff, e], w),
                ]
            continue
        if m.get("oss"):
            # llama_model_openai_moe::load_arch_tensors
            n_exp, _, eff = m["experts"]
            xt = m["exp_type"]
            out += [
                (p + "attn_norm.weight", [e], T.F32),
                (p + "post_attention_norm.weight", [e], T.F32),
                (p + "attn_q.weight", [e, q], w), (p + "attn_q.bias", [q], T.F32),
                (p + "attn_k.weight", [e, kv], w), (p + "attn_k.bias", [kv], T.F32),
                (p + "attn_v.weight", [e, kv], w), (p + "attn_v.bias", [kv], T.F32),
                (p + "attn_output.weight", [q, e], w), (p + "attn_output.bias", [e], T.F32),
                (p + "attn_sinks.weight", [m["n_head"]], T.F32),
                (p + "ffn_gate_inp.weight", [e, n_exp], T.F32), (p + "ffn_gate_inp.bias", [n_exp], T.F32),
                (p + "ffn_gate_exps.weight", [e, eff, n_exp], xt), (p + "ffn_gate_exps.bias", [eff, n_exp], T.F32),
                (p + "ffn_down_exps.weight", [eff, e, n_exp], xt), (p + "ffn_down_exps.bias", [e, n_exp], T.F32),
                (p + "ffn_up_exps.weight", [e, eff, n_exp], xt), (p + "ffn_up_exps.bias", [eff, n_exp], T.F32),
            ]
            continue
        out += [
            (p + "attn_norm.weight", [e], T.F32),
            (p + "attn_q.weight", [e, 2 * q if m.get("gated_q") else q], w),
            (p + "attn_k.weight", [e, kv], w),
            (p + "attn_v.weight", [e, kv], w),
            (p + "attn_output.weight", [q, e], w),
            (p + "attn_q_norm.weight", [d], T.F32),
            (p + "attn_k_norm.weight", [d], T.F32),
        ]
        if m.get("post_attn_norm"):
            # qwen35: post_attention_norm is the FFN's input norm (no ffn_norm)
            out.append((p + "post_attention_norm.weight", [e], T.F32))
        else:
            out.append((p + "ffn_norm.weight", [e], T.F32))
        if m.get("post_norms"):
            out += [(p + "post_attention_norm.weight", [e], T.F32), (p + "post_ffw_norm.weight", [e], T.F32)]
        if "experts" in m:
            out += moe_ffn(m, p, e, w)
        else:
            out += [
                (p + "ffn_gate.weight", [e, ff], w),
                (p + "ffn_up.weight", [e, ff], w),
                (p + "ffn_down.weight", [ff, e], w),
            ]
    out.append(("output_norm.weight", [e], T.F32))
    if not m["tied"]:
        out.append(("output.weight", [e, v], w))
    return out


def header_keys(wr, m, block_count, nextn=None, n_ff=None):
    """The metadata every file here carries, in the order the converter writes it:
    the trunk's hyperparameters, then the architecture's own (sliding window,
    Gemma 4, experts, gated delta-net). `nextn`: nextn_predict_layers of a file
    with its MTP block; `n_ff`: feed_forward_length when it is not m["n_ff"]."""
    a = m["arch"]
    wr.add_uint32(f"{a}.block_count", block_count)
    if nextn is not None:
        wr.add_uint32(f"{a}.nextn_predict_layers", nextn)
    wr.add_uint32(f"{a}.context_length", m["n_ctx_train"])
    wr.add_uint32(f"{a}.embedding_length", m["n_embd"])
    if not m.get("double_wide"):
        wr.add_uint32(f"{a}.feed_forward_length", m["n_ff"] if n_ff is None else n_ff)
    wr.add_uint32(f"{a}.attention.head_count", m["n_head"])
    if "n_head_kv_swa" not in m:
        wr.add_uint32(f"{a}.attention.head_count_kv", m["n_head_kv"])
    wr.add_uint32(f"{a}.attention.key_length", m["head_dim"])
    wr.add_uint32(f"{a}.attention.value_length", m["head_dim"])
    wr.add_float32(f"{a}.rope.freq_base", m["rope"])
    wr.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    wr.add_uint32(f"{a}.vocab_size", m["n_vocab"])
    if "swa" in m:
        wr.add_uint32(f"{a}.attention.sliding_window", m["swa"])
        if "rope_swa" in m:
            wr.add_float32(f"{a}.rope.freq_base_swa", m["rope_swa"])
    if a == "gemma4":
        gemma4_keys(wr, a, m)
    if "experts" in m:
        n_exp, used, eff = m["experts"]
        wr.add_uint32(f"{a}.expert_count", n_exp)
        wr.add_uint32(f"{a}.expert_used_count", used)
        wr.add_uint32(f"{a}.expert_feed_forward_length", eff)
    if "shexp" in m:
        wr.add_uint32(f"{a}.expert_shared_feed_forward_length", m["shexp"])
    if "delta_net" in m:
        dn = m["delta_net"]
        wr.add_uint32(f"{a}.ssm.conv_kernel", dn["conv"])
        wr.add_uint32(f"{a}.ssm.inner_size", dn["v_heads"] * dn["head"])
        wr.add_uint32(f"{a}.ssm.state_size", dn["head"])
        wr.add_uint32(f"{a}.ssm.time_step_rank", dn["v_heads"])
        wr.add_uint32(f"{a}.ssm.group_count", dn["k_heads"])
        wr.add_uint32(f"{a}.full_attention_interval", dn["interval"])
        wr.add_uint32(f"{a}.rope.dimension_count", m["head_dim"] // 4)
        wr.add_array(f"{a}.rope.dimension_sections", [11, 11, 10, 0])
    wr.add_string("tokenizer.ggml.model", "none")


def write_file(wr, tensor_list, path, header_path=None):
    """Tensor infos, header, then the file extended to its full length without
    writing the data (a sparse file of zeros); `header_path`: the header alone."""
    total = 0
    for tname, ne, ty in tensor_list:
        nb = nbytes(ty, ne)
        wr.add_tensor_info(tname, list(reversed(ne)), np.dtype(np.float16), nb, raw_dtype=ty)
        total += nb + (-nb % 32)
    wr.write_header_to_file(path)
    wr.write_kv_data_to_file()
    wr.write_ti_data_to_file()
    wr.close()
    head = os.path.getsize(path)
    data_start = head + (-head % 32)  # general.alignment: 32 (GGUF_DEFAULT_ALIGNMENT)
    with open(path, "r+b") as f:
        f.truncate(data_start + total)
    if header_path:
        with open(path, "rb") as f, open(header_path, "wb") as h:
            h.write(f.read(head))
    print(f"{path}: header {head} B, file {data_start + total} B")


def write(name, path, header_path=None):
    m = MODELS[name]
    wr = GGUFWriter(path, m["arch"])
    wr.add_name(name)
    header_keys(wr, m, m["n_layer"])
    write_file(wr, tensors(m), path, header_path)


# --- MTP (llama-server --spec-type draft-mtp) ---
# A model file that carries its multi-token-prediction block, as the current
# converter writes it (conversion/qwen.py `_QwenMtpMixin`): block_count is
# num_hidden_layers + mtp_num_hidden_layers, `<arch>.nextn_predict_layers`
# says how many of the last blocks are the MTP head, and the Hugging Face
# `mtp.*` tensors become `blk.<n_layer>.*` (mtp.fc -> nextn.eh_proj,
# pre_fc_norm_embedding -> nextn.enorm, pre_fc_norm_hidden -> nextn.hnorm,
# mtp.norm -> nextn.shared_head_norm; mtp.layers.0.* the decoder block).
# Shapes: llama_model_qwen35::load_arch_tensors `load_block_mtp`
# (src/models/qwen35.cpp, b11312): a full-attention block with the gated
# query, no nextn.embed_tokens / shared_head_head (the config's
# mtp_use_dedicated_embeddings is false: the MTP graph uses token_embd and
# output). The block's tensors come last in the file (the checkpoint's
# `mtp.*` names sort after `model.*` and `lm_head`).
# Qwen/Qwen3.5-27B config.json: text_config.mtp_num_hidden_layers = 1.
MTP_MODELS = {"qwen3.5-27b-mtp-q4_0": ("qwen3.5-27b-q4_0", 1)}


def mtp_tensors(m, n_mtp):
    e, d, ff = m["n_embd"], m["head_dim"], m["n_ff"]
    q, kv, w = m["n_head"] * d, m["n_head_kv"] * d, m["wtype"]
    out = []
    for il in range(m["n_layer"], m["n_layer"] + n_mtp):
        p = f"blk.{il}."
        out += [
            (p + "attn_norm.weight", [e], T.F32),
            (p + "attn_q.weight", [e, 2 * q], w),
            (p + "attn_k.weight", [e, kv], w),
            (p + "attn_v.weight", [e, kv], w),
            (p + "attn_output.weight", [q, e], w),
            (p + "attn_q_norm.weight", [d], T.F32),
            (p + "attn_k_norm.weight", [d], T.F32),
            (p + "post_attention_norm.weight", [e], T.F32),
            (p + "ffn_gate.weight", [e, ff], w),
            (p + "ffn_up.weight", [e, ff], w),
            (p + "ffn_down.weight", [ff, e], w),
            (p + "nextn.eh_proj.weight", [2 * e, e], w),
            (p + "nextn.enorm.weight", [e], T.F32),
            (p + "nextn.hnorm.weight", [e], T.F32),
            (p + "nextn.shared_head_norm.weight", [e], T.F32),
        ]
    return out


def write_mtp(name, path, header_path=None):
    """write() for a file with its MTP block: the trunk of MODELS[base], then the block."""
    base, n_mtp = MTP_MODELS[name]
    m = MODELS[base]
    wr = GGUFWriter(path, m["arch"])
    wr.add_name(name)
    header_keys(wr, m, m["n_layer"] + n_mtp, nextn=n_mtp)
    write_file(wr, tensors(m) + mtp_tensors(m, n_mtp), path, header_path)


# Qwen/Qwen3.5-35B-A3B (text_config): hidden 2048, 40 layers, every 4th full
# attention (16 heads, 2 KV heads, head_dim 256, gated query), the others gated
# delta-net (16 key heads, 32 value heads of 128, conv kernel 4); every layer's
# FFN 256 routed experts of 512 (8 used) plus a shared expert of 512 with its
# sigmoid gate; vocab 248320, untied head; mtp_num_hidden_layers 1. Shapes:
# llama_model_qwen35moe::load_arch_tensors (src/models/qwen35moe.cpp, b11312).
QWEN35MOE_MTP = dict(arch="qwen35moe", n_layer=40, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
                     n_vocab=248320, n_ctx_train=262144, wtype=T.Q4_0, rope=1e7, experts=(256, 8, 512),
                     shexp=512, delta_net=dict(conv=4, k_heads=16, v_heads=32, head=128, interval=4), n_mtp=1)


def qwen35moe_tensors(m):
    e, d, v, w = m["n_embd"], m["head_dim"], m["n_vocab"], m["wtype"]
    q, kv = m["n_head"] * d, m["n_head_kv"] * d
    n_exp, _, eff = m["experts"]
    sh, dn = m["shexp"], m["delta_net"]
    out = [("token_embd.weight", [e, v], w)]
    moe = lambda p: [
        (p + "ffn_gate_inp.weight", [e, n_exp], T.F32),
        (p + "ffn_gate_exps.weight", [e, eff, n_exp], w),
        (p + "ffn_up_exps.weight", [e, eff, n_exp], w),
        (p + "ffn_down_exps.weight", [eff, e, n_exp], w),
        (p + "ffn_gate_inp_shexp.weight", [e], T.F32),
        (p + "ffn_gate_shexp.weight", [e, sh], w),
        (p + "ffn_up_shexp.weight", [e, sh], w),
        (p + "ffn_down_shexp.weight", [sh, e], w),
    ]
    attn = lambda p: [
        (p + "attn_norm.weight", [e], T.F32),
        (p + "attn_q.weight", [e, 2 * q], w),
        (p + "attn_k.weight", [e, kv], w),
        (p + "attn_v.weight", [e, kv], w),
        (p + "attn_output.weight", [q, e], w),
        (p + "attn_q_norm.weight", [d], T.F32),
        (p + "attn_k_norm.weight", [d], T.F32),
        (p + "post_attention_norm.weight", [e], T.F32),
    ]
    for il in range(m["n_layer"]):
        p = f"blk.{il}."
        if (il + 1) % dn["interval"] != 0:
            kd, vd = dn["k_heads"] * dn["head"], dn["v_heads"] * dn["head"]
            out += [
                (p + "attn_norm.weight", [e], T.F32),
                (p + "attn_qkv.weight", [e, 2 * kd + vd], w),
                (p + "attn_gate.weight", [e, vd], w),
                (p + "ssm_conv1d.weight", [dn["conv"], 2 * kd + vd], T.F32),
                (p + "ssm_dt.bias", [dn["v_heads"]], T.F32),
                (p + "ssm_a", [dn["v_heads"]], T.F32),
                (p + "ssm_beta.weight", [e, dn["v_heads"]], w),
                (p + "ssm_alpha.weight", [e, dn["v_heads"]], w),
                (p + "ssm_norm.weight", [dn["head"]], T.F32),
                (p + "ssm_out.weight", [vd, e], w),
                (p + "post_attention_norm.weight", [e], T.F32),
            ] + moe(p)
        else:
            out += attn(p) + moe(p)
    out += [("output_norm.weight", [e], T.F32), ("output.weight", [e, v], w)]
    for il in range(m["n_layer"], m["n_layer"] + m["n_mtp"]):
        p = f"blk.{il}."
        out += attn(p) + moe(p) + [
            (p + "nextn.eh_proj.weight", [2 * e, e], w),
            (p + "nextn.enorm.weight", [e], T.F32),
            (p + "nextn.hnorm.weight", [e], T.F32),
            (p + "nextn.shared_head_norm.weight", [e], T.F32),
        ]
    return out


def write_qwen35moe_mtp(path, header_path=None):
    m = QWEN35MOE_MTP
    wr = GGUFWriter(path, m["arch"])
    wr.add_name("qwen3.5-35b-a3b-mtp-q4_0")
    # every FFN is a MoE: the converter writes feed_forward_length 0
    header_keys(wr, m, m["n_layer"] + m["n_mtp"], nextn=m["n_mtp"], n_ff=0)
    write_file(wr, qwen35moe_tensors(m), path, header_path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(MODELS) + sorted(MTP_MODELS) + ["qwen3.5-35b-a3b-mtp-q4_0"])
    ap.add_argument("out")
    ap.add_argument("--header")
    args = ap.parse_args()
    if args.model in MTP_MODELS:
        write_mtp(args.model, args.out, args.header)
    elif args.model == "qwen3.5-35b-a3b-mtp-q4_0":
        write_qwen35moe_mtp(args.out, args.header)
    else:
        write(args.model, args.out, args.header)
    sys.exit(0)
