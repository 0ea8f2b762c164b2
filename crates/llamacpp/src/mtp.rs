//! llama-server's `--spec-type draft-mtp` on the target's own NextN layers
//! (no `-md`): what it loads and allocates beyond the plain launch, read
//! from llama.cpp b11312 (ggml-org/llama.cpp@0c1e57098).
//!
//! * The NextN layers' weights: `common_model_params_to_llama` sets
//!   `mparams.load_mtp` when draft-mtp is asked for (common/common.cpp), so
//!   the loader creates them without `TENSOR_SKIP`
//!   (`llama_model_qwen35::load_arch_tensors`: `mtp_flags = !ml.load_mtp ?
//!   TENSOR_SKIP : 0`); they join the model buffer of their layer's device
//!   (`load_tensors: CPU_Mapped model buffer size` grows by their bytes).
//! * A second context over the same model (`common_speculative_init_result`,
//!   common/speculative.cpp: "creating MTP draft context against the target
//!   model"): `ctx_type = LLAMA_CONTEXT_TYPE_MTP`, `n_ctx = llama_n_ctx(ctx_tgt)`,
//!   the target's `-b`, `-ub`, `-np`, `--kv-unified`, `-fa`, `n_rs_seq = 0`,
//!   `n_outputs_max = -np` and the draft cache types (f16 by default:
//!   `common_params_speculative_draft::cache_type_k/v`,
//!   `common_base_params_to_speculative`). Its memory
//!   (`llama_model::create_memory`, src/llama-model.cpp) is a plain
//!   `llama_kv_cache` holding only the NextN layers ("Dense MTP heads use a
//!   plain attention KV cache instead of the hybrid wrapper"; filter
//!   `il >= hparams.n_layer()`), its reserve graph is the MTP head
//!   (`LLM_GRAPH_TYPE_DECODER_MTP`, `llama_model_qwen35::graph_mtp`) at
//!   `min(n_ctx, n_ubatch)` tokens with `n_outputs_max` rows of logits, and
//!   it has its own output buffer (`output_reserve(n_seq_max)`).
//! * The target keeps `1 + n_draft` logits rows per slot
//!   (`server_output_limits`, already in [`crate::build::reserved_outputs`])
//!   and, for the hybrid architectures that roll back their recurrent
//!   state, `n_rs_seq = draft.n_max` snapshots of it
//!   (`common_params_speculative::need_n_rs_seq`, common/common.h;
//!   `llama_memory_recurrent`: `n_rows = mem_size * (1 + n_rs_seq)`).
//! * At the first decode the target's output buffer grows by its NextN
//!   embeddings, `n_embd × n_batch` f32 (`output_reserve`: "unmasked: nextn
//!   row exists for every token in the batch"; `llama_set_embeddings_nextn
//!   (ctx_tgt, true, false)` in `common_speculative_impl_draft_mtp`).
//!
//! Imports no module that imports it but `plan` (which calls it).

use crate::compute::{ComputeBuffers, ComputeSetup};
use crate::graph::Device;
use crate::kv::{kv_cache, CacheOptions, ContextSize};
use crate::lines::{DeviceMemory, LineKind, MemoryLine};
use crate::model::{LlamaModel, Slot, TensorInfo};
use crate::placement::Placement;
use vramfit_core::units::{add, product, sum};
use vramfit_core::{CoreError, Explanation};

/// First build known to have `--spec-type draft-mtp`: ggml-org/llama.cpp
/// PR #22673 "llama + spec: MTP Support" (merged 2026-05-15/16), first in
/// release b9180 (users pointing at it on 2026-05-17:
/// lmstudio-ai/lmstudio-bug-tracker#1924 "release version b9180",
/// IIIIIllllIIIIIlllll/llama.cpp-hub#20 "llama.cpp B9180已经支持MTP").
/// Before it llama-server has no such type ("unknown speculative type").
pub const DRAFT_MTP: u64 = 9180;

/// Architectures whose NextN layers vramfit sets apart
/// (`vramfit_ingest`'s `NEXTN_SKIPPED`) and whose MTP head it builds:
/// (architecture, the head's graph is replicated op for op). qwen35:
/// `llama_model_qwen35::graph_mtp`; qwen35moe:
/// `llama_model_qwen35moe::graph_mtp`, the same with its MoE FFN (the
/// shared expert's sigmoid gate, an `[n_embd] → 1` row, left out); both
/// measured on b11312 within 0.02 %. glm4moe
/// (`llama_model_glm4_moe::graph_mtp`) shares the shape without the gated
/// query, with attention biases: flagged approximate, not measured.
pub const MTP_ARCHS: &[(&str, bool)] = &[("qwen35", true), ("qwen35moe", true), ("glm4moe", false)];

/// `llm_arch_supports_rs_rollback` (src/llama-arch.cpp), by
/// `general.architecture` name (`LLM_ARCH_NAMES`): these keep
/// `n_rs_seq` snapshots of their recurrent state for speculative
/// decoding; the others clamp `n_rs_seq` to 0 (`llama_context` constructor).
pub const RS_ROLLBACK_ARCHS: &[&str] = &[
    "kimi-k3",
    "qwen35",
    "qwen35moe",
    "qwen4exp",
    "deepseek4",
    "glm5-next",
    "nemotron_h",
    "nemotron_h_moe",
    "lfm2",
    "lfm2moe",
    "bailingmoe3",
];

/// `n_rs_seq` of the target context: `draft.n_max` when a type that
/// rolls back the state is asked for (draft-mtp, draft-eagle3,
/// draft-dflash, draft-dspark: `need_n_rs_seq`, common/common.h) and the
/// architecture supports it, else 0.
pub fn n_rs_seq(model: &LlamaModel, types: &[crate::companion::SpecType], draft_n_max: u64) -> u64 {
    use crate::companion::SpecType as S;
    let rolls = types.iter().any(|t| matches!(t, S::DraftMtp | S::DraftEagle3 | S::DraftDflash | S::DraftDspark));
    if rolls && RS_ROLLBACK_ARCHS.contains(&model.arch.as_str()) {
        draft_n_max
    } else {
        0
    }
}

/// [`add_rs_snapshots`] for a launch: its spec types in effect (`-md`
/// alone meant draft-simple where `draft_auto`) and `--spec-draft-n-max`.
/// Returns `n_rs_seq` (0 when the model keeps no recurrent state).
pub fn launch_rs_snapshots(
    kv: &mut crate::kv::KvCache,
    model: &LlamaModel,
    opts: &crate::options::LlamaCppOptions,
    draft_auto: bool,
    notes: &mut Vec<String>,
) -> Result<u64, CoreError> {
    let spec = &opts.companions.speculative;
    let types = spec.effective(opts.companions.draft.is_some(), draft_auto);
    let n = n_rs_seq(model, &types, spec.draft_n_max);
    match add_rs_snapshots(kv, n)? {
        Some(note) => {
            notes.push(note);
            Ok(n)
        }
        None => Ok(0),
    }
}

/// Multiply the recurrent-state buffers by `1 + n_rs_seq`
/// (`llama_memory_recurrent::llama_memory_recurrent`: `n_rows = mem_size *
/// (1 + n_rs_seq)` rows of R and S per layer).
pub fn add_rs_snapshots(kv: &mut crate::kv::KvCache, n_rs_seq: u64) -> Result<Option<String>, CoreError> {
    if n_rs_seq == 0 || kv.state_bytes == 0 {
        return Ok(None);
    }
    let times = add("recurrent snapshots", n_rs_seq, 1)?;
    kv.state_bytes = product("recurrent state", &[kv.state_bytes, times])?;
    for b in kv.buffers.iter_mut().filter(|b| b.kind == crate::kv::CacheKind::Rs) {
        b.bytes = product("recurrent state", &[b.bytes, times])?;
        b.explain = b.explain.clone().term("× (1 + n_rs_seq)", times).note(
            "speculative rollback snapshots: n_rs_seq = --spec-draft-n-max (need_n_rs_seq, common/common.h), logged as '… seqs  N rs_seq'",
        );
    }
    Ok(Some(format!(
        "speculative decoding with a drafter that rolls back: the recurrent state is kept {times} times (1 + n_rs_seq = 1 + --spec-draft-n-max, llama_memory_recurrent; llama.cpp logs 'n_rs_seq = {n_rs_seq}'); the gated delta-net's output then holds {times} state snapshots per sequence: Qwen3.5's layers are rebuilt op for op with them (measured on b11312 at -np 4: Qwen3.5-27B and Qwen3.5-35B-A3B within 0.1 %, docs/gguf.md), other recurrent layers' approximation counts them only in part"
    )))
}

/// Draft-mtp on the target's own NextN layers is asked for: `--spec-type`
/// holds draft-mtp and no `-md` is given. Checks the build and the file,
/// naming `--spec-type`.
pub fn on_target(model: &LlamaModel, opts: &crate::options::LlamaCppOptions) -> Result<bool, CoreError> {
    let spec = &opts.companions.speculative;
    if !spec.types.contains(&crate::companion::SpecType::DraftMtp) || opts.companions.draft.is_some() {
        return Ok(false);
    }
    if let Some(b) = opts.build.filter(|&b| b < DRAFT_MTP) {
        return Err(CoreError::invalid(
            "spec-type",
            format!("draft-mtp does not exist in llama.cpp b{b}: it came with PR #22673, first in b{DRAFT_MTP}"),
        ));
    }
    let Some(n) = &model.nextn else {
        return Err(CoreError::invalid(
            "spec-type",
            format!(
                "draft-mtp drafts with the model's own NextN (MTP) layers, and this {} file has none vramfit models (no nextn_predict_layers, or an architecture other than {})",
                model.arch,
                arch_names()
            ),
        ));
    };
    if !MTP_ARCHS.iter().any(|(a, _)| *a == model.arch) || n.layers.is_empty() {
        return Err(CoreError::invalid(
            "spec-type",
            format!("draft-mtp: vramfit models the MTP head of {} only, not {}", arch_names(), model.arch),
        ));
    }
    Ok(true)
}

fn arch_names() -> String {
    MTP_ARCHS.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ")
}

/// The model as `load_mtp` loads it: the trunk plus the NextN layers'
/// tensors. llama.cpp assigns devices over `n_layer_all + 1` slots
/// (`i_gpu_start = n_layer_all + 1 − n_gpu_layers`, `load_tensors`), the
/// NextN layer being the last before the output: on a GPU with the output
/// whenever two or more slots are offloaded, else on the host.
pub fn with_nextn_weights(model: &LlamaModel, n_gpu_layers: Option<u64>) -> LlamaModel {
    let mut m = model.clone();
    if let Some(n) = &model.nextn {
        let on_gpu = nextn_offloaded(n_gpu_layers);
        m.tensors.extend(n.tensors.iter().map(|t| TensorInfo {
            // a layer past the trunk's is placed with the output
            slot: if on_gpu { t.slot } else { Slot::Input },
            ..t.clone()
        }));
    }
    m
}

/// `-ngl` (None: all) reaches the NextN layer: it is the slot before the
/// output among llama.cpp's `n_layer_all + 1` (a CPU-only launch places
/// nothing on a GPU whatever this says).
fn nextn_offloaded(n_gpu_layers: Option<u64>) -> bool {
    n_gpu_layers.is_none_or(|n| n >= 2)
}

/// The MTP context's view of the model: the NextN layers as its layers
/// (`blk.{n_layer + i}` renamed `blk.{i}`), the token embedding, the output
/// norm and head of the target.
fn head_model(model: &LlamaModel) -> LlamaModel {
    let n = model.nextn.as_ref().map(|n| (n.layers.clone(), n.tensors.clone())).unwrap_or_default();
    let first = model.n_layer;
    let mut tensors: Vec<TensorInfo> =
        n.1.into_iter()
            .filter_map(|t| {
                let Slot::Layer(il) = t.slot else { return None };
                let rest = t.name.split_once('.').and_then(|(_, r)| r.split_once('.')).map(|(_, r)| r.to_string())?;
                let i = il.checked_sub(first)?;
                Some(TensorInfo { name: format!("blk.{i}.{rest}"), slot: Slot::Layer(i), ..t })
            })
            .collect();
    tensors.extend(model.tensors.iter().filter(|t| !matches!(t.slot, Slot::Layer(_))).cloned());
    LlamaModel { n_layer: n.0.len() as u32, layers: n.0, tensors, nextn: None, notes: Vec::new(), ..model.clone() }
}

/// What the MTP context is planned with.
pub struct MtpSetup<'a> {
    /// the target's context (the MTP context takes its `n_ctx`, `-np`, unified-ness)
    pub size: ContextSize,
    /// the target's placement: the NextN layer goes with its output
    pub placement: &'a Placement,
    /// `-ngl` as given (None: all)
    pub n_gpu_layers: Option<u64>,
    /// the target's reserve setup (tokens, flash attention, offload, build rules)
    pub compute: ComputeSetup,
    pub n_parallel: u64,
    pub n_batch: u64,
    pub host_prefix: &'static str,
}

/// The MTP context's KV, compute and output buffers, and the target's
/// NextN embeddings, as lines labelled `MTP: …` on the target's devices.
pub fn context_lines(model: &LlamaModel, s: &MtpSetup) -> Result<(Vec<(Device, MemoryLine)>, String), CoreError> {
    let head = head_model(model);
    // the NextN layer's device: the output's (or the host below -ngl 2), or
    // where an -ot pattern sends its attention weights (the head's view
    // renames its tensors, so the patterns are applied here, by the file's names)
    let slot_dev = if nextn_offloaded(s.n_gpu_layers) { s.placement.output } else { Device::Cpu };
    let dev = model
        .nextn
        .as_ref()
        .and_then(|n| {
            n.tensors.iter().find(|t| t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_qkv.weight"))
        })
        .and_then(|t| s.placement.overrides.device_of(&t.name))
        .unwrap_or(slot_dev);
    let placement = Placement {
        layers: vec![dev; head.layers.len()],
        output: s.placement.output,
        offloaded: 0,
        host_expert_layers: 0,
        overrides: Default::default(),
        explain: Explanation::new("the NextN layer on its device"),
    };
    let opt = CacheOptions {
        type_k: crate::ggml::GgmlType::F16,
        type_v: crate::ggml::GgmlType::F16,
        flash_attn: s.compute.flash_attn,
        offload_kqv: s.compute.offload_kqv,
        n_parallel: s.n_parallel,
        v_less: false,
    };
    let kv = kv_cache(&head, &placement, s.size, opt)?;
    // n_outputs_max = n_parallel (common_base_params_to_speculative), at most the micro-batch
    let n_outputs = s.n_parallel.clamp(1, s.compute.n_tokens.max(1));
    // the MTP context: n_rs_seq = 0, no recurrent layer
    let setup = ComputeSetup { n_outputs, v_less: false, embd_input: false, rs_snapshots: 0, ..s.compute };
    let compute = crate::compute::mtp_head_buffers(&head, &placement, setup)?;
    let mut lines = Vec::new();
    for c in &kv.buffers {
        lines.push((
            c.device,
            MemoryLine {
                kind: LineKind::Kv,
                label: format!("MTP: {} KV buffer", buft(c.device, "CPU")),
                bytes: c.bytes,
                explain: c.explain.clone().note("the MTP context's own llama_kv_cache over the NextN layer(s) only (create_memory: filter il >= n_layer()), f16 (the draft cache types' default); logged after 'creating MTP draft context' as 'llama_kv_cache: … KV buffer size' and '(N cells, 1 layers, …)'"),
            },
        ));
    }
    lines.extend(compute_lines(&compute, s, n_outputs));
    lines.extend(output_lines(model, s)?);
    let note = format!(
        "--spec-type draft-mtp: llama-server loads the {} NextN layer(s) ({} tensors, {:.2} MiB, in the model buffer) and builds an MTP context over them (common_speculative_init_result: 'creating MTP draft context against the target model'): its KV cache of {} cells × {} stream(s), its compute buffer (the MTP head at {} tokens, {} output rows) and its output buffer, labelled 'MTP: …'; the target's NextN embeddings ({} × {} f32) join its output buffer at the first decode",
        head.layers.len(),
        model.nextn.as_ref().map_or(0, |n| n.tensors.len()),
        model.nextn.as_ref().map_or(0, |n| n.tensors.iter().fold(0u64, |a, t| a.saturating_add(t.bytes))) as f64
            / vramfit_core::units::MIB as f64,
        s.size.n_ctx_seq,
        s.size.streams,
        s.compute.n_tokens,
        n_outputs,
        model.n_embd,
        s.n_batch
    );
    Ok((lines, note))
}

fn buft(d: Device, host: &str) -> String {
    match d {
        Device::Gpu(i) => format!("CUDA{i}"),
        Device::Cpu => host.to_string(),
    }
}

fn compute_lines(c: &ComputeBuffers, s: &MtpSetup, n_outputs: u64) -> Vec<(Device, MemoryLine)> {
    c.buffers
        .iter()
        .map(|b| {
            let mut e = Explanation::new("peak of ggml's graph allocator over the MTP head's reserve graph (LLM_GRAPH_TYPE_DECODER_MTP): hnorm/enorm, concat, eh_proj, one attention + FFN block against the MTP KV cache, shared-head norm, logits of n_outputs_max rows")
                .term("micro-batch tokens", s.compute.n_tokens)
                .term("output rows (n_outputs_max = -np)", n_outputs)
                .term("KV cells attended", s.size.n_ctx_seq)
                .note("llama_model_qwen35::graph_mtp (src/models/qwen35.cpp); logged after 'creating MTP draft context' as 'sched_reserve: … compute buffer size'");
            if let Some(a) = &c.approximate {
                e = e.note(format!("approximate: {a}"));
            }
            (
                b.device,
                MemoryLine {
                    kind: LineKind::Compute,
                    label: format!("MTP: {} compute buffer", buft(b.device, s.host_prefix)),
                    bytes: b.bytes,
                    explain: e,
                },
            )
        })
        .collect()
}

/// The MTP context's output buffer (`output_reserve(n_seq_max)`: logits of
/// `n_vocab × max(1, -np)` f32) and the target's NextN embeddings
/// (`n_embd × n_batch` f32, unmasked, allocated at the first decode), both
/// in host memory.
fn output_lines(model: &LlamaModel, s: &MtpSetup) -> Result<Vec<(Device, MemoryLine)>, CoreError> {
    let logits = product("MTP output buffer", &[model.n_vocab, s.n_parallel.max(1), 4])?;
    let nextn = product("NextN embeddings", &[model.n_embd, s.n_batch, 4])?;
    Ok(vec![
        (
            Device::Cpu,
            MemoryLine {
                kind: LineKind::Output,
                label: format!("MTP: {} output buffer", s.host_prefix),
                bytes: logits,
                explain: Explanation::new("n_vocab × max(1, parallel) × 4 B (the MTP context's logits)")
                    .term("n_vocab", model.n_vocab)
                    .term("sequences", s.n_parallel)
                    .note("llama_context::output_reserve(n_seq_max), logged 'llama_context: … output buffer size' after 'creating MTP draft context'"),
            },
        ),
        (
            Device::Cpu,
            MemoryLine {
                kind: LineKind::Output,
                label: "MTP: target NextN embeddings (output buffer growth)".into(),
                bytes: nextn,
                explain: Explanation::new("n_embd × n_batch × 4 B: the target's hidden state before the output norm for every token of a batch (unmasked), read by the MTP head")
                    .term("n_embd", model.n_embd)
                    .term("n_batch", s.n_batch)
                    .note("llama_context::output_reserve: embd_nextn.size = n_embd_out × n_batch when unmasked; allocated at the first decode after llama_set_embeddings_nextn(ctx_tgt, true, false), not in the start-up log"),
            },
        ),
    ])
}

/// Put `lines` on their devices (a GPU the plan does not have: the host),
/// before each device's reserve line, and recompute the totals.
pub fn push(
    gpus: &mut [DeviceMemory],
    host: &mut DeviceMemory,
    lines: Vec<(Device, MemoryLine)>,
) -> Result<(), CoreError> {
    for (d, l) in lines {
        let dev = match d {
            Device::Gpu(i) if (i as usize) < gpus.len() => &mut gpus[i as usize],
            _ => &mut *host,
        };
        let at = dev.lines.iter().position(|x| x.kind == LineKind::Reserve).unwrap_or(dev.lines.len());
        dev.lines.insert(at, l);
        dev.total_bytes = sum("device total", &dev.lines.iter().map(|x| x.bytes).collect::<Vec<_>>())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::companion::{Companions, SpecType, Speculative};
    use crate::ggml::GgmlType;
    use crate::model::{slot_of, GraphFamily, LayerHparams, NextnLayers, RecurrentState};
    use crate::options::LlamaCppOptions;
    use crate::plan::plan;

    fn t(name: &str, ty: GgmlType, ne: &[u64], offset: &mut u64) -> TensorInfo {
        let bytes = ty.nbytes(ne).unwrap();
        let info = TensorInfo { name: name.into(), slot: slot_of(name), ty, ne: ne.to_vec(), bytes, offset: *offset };
        *offset += bytes.next_multiple_of(32);
        info
    }

    /// A Qwen3.5-shaped model, n_embd 64: layer 0 a gated-delta-net layer
    /// (state r 96 + s 1024 values per sequence), layer 1 attention (4 heads
    /// of 16, 2 KV heads), and one NextN layer (blk.2) of the same attention
    /// with the gated query (attn_q 2 × 64 wide), f16 matrices, f32 norms.
    fn qwen35_with_mtp() -> LlamaModel {
        let (e, f16, f32) = (64, GgmlType::F16, GgmlType::F32);
        let mut off = 0;
        let mut tensors = vec![t("token_embd.weight", f16, &[e, 32], &mut off)];
        for (n, ne) in [("attn_norm.weight", vec![e]), ("ssm_out.weight", vec![e, e])] {
            tensors.push(t(&format!("blk.0.{n}"), if ne.len() == 1 { f32 } else { f16 }, &ne, &mut off));
        }
        for (n, ne) in
            [("attn_q.weight", vec![e, 2 * e]), ("attn_k.weight", vec![e, 32]), ("attn_v.weight", vec![e, 32])]
        {
            tensors.push(t(&format!("blk.1.{n}"), f16, &ne, &mut off));
        }
        tensors.push(t("output_norm.weight", f32, &[e], &mut off));
        tensors.push(t("output.weight", f16, &[e, 32], &mut off));
        let mut nextn = Vec::new();
        for (n, ne) in [
            ("attn_norm.weight", vec![e]),
            ("attn_q.weight", vec![e, 2 * e]),
            ("attn_k.weight", vec![e, 32]),
            ("attn_v.weight", vec![e, 32]),
            ("attn_output.weight", vec![e, e]),
            ("attn_q_norm.weight", vec![16]),
            ("attn_k_norm.weight", vec![16]),
            ("post_attention_norm.weight", vec![e]),
            ("ffn_gate.weight", vec![e, 128]),
            ("ffn_up.weight", vec![e, 128]),
            ("ffn_down.weight", vec![128, e]),
            ("nextn.eh_proj.weight", vec![2 * e, e]),
            ("nextn.enorm.weight", vec![e]),
            ("nextn.hnorm.weight", vec![e]),
            ("nextn.shared_head_norm.weight", vec![e]),
        ] {
            nextn.push(t(&format!("blk.2.{n}"), if ne.len() == 1 { f32 } else { f16 }, &ne, &mut off));
        }
        let attn = LayerHparams {
            n_head: 4,
            n_head_kv: 2,
            head_dim_k: 16,
            head_dim_v: 16,
            n_ff: 128,
            sliding: false,
            recurrent: None,
            kv_from: None,
        };
        let rec = LayerHparams { n_head_kv: 0, recurrent: Some(RecurrentState { r: 96, s: 1024 }), ..attn.clone() };
        LlamaModel {
            name: "q".into(),
            arch: "qwen35".into(),
            n_layer: 2,
            n_embd: e,
            n_vocab: 32,
            n_ctx_train: 4096,
            layers: vec![rec, attn.clone()],
            n_swa: 0,
            experts: None,
            causal: true,
            family: GraphFamily::Sequential,
            fused_qkv: false,
            qk_norm: true,
            gated_ffn: true,
            tied_output: false,
            mla: false,
            tensors,
            notes: Vec::new(),
            nextn: Some(NextnLayers { layers: vec![attn], tensors: nextn }),
        }
    }

    fn launch(types: Vec<SpecType>, np: u64, build: Option<u64>) -> LlamaCppOptions {
        LlamaCppOptions {
            ctx_size: 256,
            parallel: np,
            build,
            companions: Companions {
                speculative: Speculative { types, ..Speculative::default() },
                ..Companions::default()
            },
            ..LlamaCppOptions::default()
        }
    }

    fn line(p: &crate::plan::LlamaCppPlan, label: &str) -> u64 {
        p.host.lines.iter().find(|l| l.label == label).map(|l| l.bytes).unwrap_or_else(|| panic!("no '{label}'"))
    }

    /// draft-mtp on a CPU-only launch, -c 256, hand-worked (llama.cpp b11312):
    /// * weights (`load_mtp`): the NextN tensors join the model buffer:
    ///   f16 attn_q 64·128·2 = 16,384, attn_k and attn_v 64·32·2 = 4,096
    ///   each, attn_output 64·64·2 = 8,192, q/k norms 16·4 = 64 each, five
    ///   f32 norms 64·4 = 256 each (1,280), ffn gate, up, down 64·128·2 =
    ///   16,384 each (49,152), eh_proj 128·64·2 = 16,384: 99,712 B in all;
    /// * the MTP context's KV (`llama_kv_cache` over the NextN layer only):
    ///   (K + V) 2 heads × 16 × 2 B = 128 B per cell × 256 cells = 32,768 B at
    ///   -np 1; at -np 2, 2 streams of pad(256 / 2, 256) = 256 cells: 65,536 B;
    /// * its output buffer (`output_reserve(n_seq_max)`): 32 × np × 4 = 128 / 256 B;
    /// * the target's NextN embeddings: n_embd 64 × n_batch min(2048, 256) × 4 = 65,536 B;
    /// * the target's recurrent state (`n_rs_seq = 3`, need_n_rs_seq):
    ///   (96 + 1024) × 4 B × np × (1 + 3) = 17,920 B at -np 1.
    #[test]
    fn draft_mtp_on_the_targets_nextn_layer_hand_worked() {
        let m = qwen35_with_mtp();
        let plain = plan(&m, &launch(vec![], 1, None)).unwrap();
        let mtp = plan(&m, &launch(vec![SpecType::DraftMtp], 1, None)).unwrap();
        let model = |p: &crate::plan::LlamaCppPlan| p.host.bytes(LineKind::Model);
        assert_eq!(model(&mtp) - model(&plain), 99_712);
        assert_eq!(line(&mtp, "MTP: CPU KV buffer"), 32_768);
        assert_eq!(line(&mtp, "MTP: CPU output buffer"), 128);
        assert_eq!(line(&mtp, "MTP: target NextN embeddings (output buffer growth)"), 65_536);
        assert!(line(&mtp, "MTP: CPU compute buffer") > 0);
        assert_eq!(plain.host.bytes(LineKind::State), 4_480);
        assert_eq!(mtp.host.bytes(LineKind::State), 17_920);
        // the target's own KV is unchanged: the NextN layer has no cache there
        assert_eq!(mtp.kv.k_bytes + mtp.kv.v_bytes, plain.kv.k_bytes + plain.kv.v_bytes);
        let two = plan(&m, &launch(vec![SpecType::DraftMtp], 2, None)).unwrap();
        assert_eq!(line(&two, "MTP: CPU KV buffer"), 65_536);
        assert_eq!(line(&two, "MTP: CPU output buffer"), 256);
        // draft-eagle3 (with -md) rolls back the state too; ngram-mod does not
        assert_eq!(n_rs_seq(&m, &[SpecType::DraftEagle3], 5), 5);
        assert_eq!(n_rs_seq(&m, &[SpecType::NgramMod], 5), 0);
        assert_eq!(n_rs_seq(&LlamaModel { arch: "llama".into(), ..m }, &[SpecType::DraftMtp], 3), 0);
    }

    /// llama.cpp places layers over `n_layer_all + 1` slots (`load_tensors`:
    /// `i_gpu_start = n_layer_all + 1 − n_gpu_layers`), the NextN layer just
    /// before the output: -ngl 2 or more puts it (weights, MTP KV) on the
    /// GPU with the output, -ngl 1 leaves it on the host.
    #[test]
    fn the_nextn_layer_follows_the_slot_before_the_output() {
        let m = qwen35_with_mtp();
        let on = |ngl: Option<u64>| LlamaCppOptions {
            gpus: vec![crate::options::GpuSlot { name: "g".into(), memory_bytes: None }],
            n_gpu_layers: ngl,
            ..launch(vec![SpecType::DraftMtp], 1, None)
        };
        let all = plan(&m, &on(None)).unwrap();
        assert!(all.gpus[0].lines.iter().any(|l| l.label == "MTP: CUDA0 KV buffer" && l.bytes == 32_768));
        let one = plan(&m, &on(Some(1))).unwrap();
        assert_eq!(line(&one, "MTP: CPU KV buffer"), 32_768);
        assert!(!one.gpus[0].lines.iter().any(|l| l.label.contains("KV")));
        // the 99,712 B of NextN weights stay on the host at -ngl 1
        let host_model = |p: &crate::plan::LlamaCppPlan| p.host.bytes(LineKind::Model);
        let no_mtp = plan(&m, &LlamaCppOptions { companions: Companions::default(), ..on(Some(1)) }).unwrap();
        assert_eq!(host_model(&one) - host_model(&no_mtp), 99_712);
    }

    /// Before b9180 (PR #22673) draft-mtp does not exist; a file without
    /// NextN layers has nothing to draft with: both refused naming --spec-type.
    #[test]
    fn draft_mtp_is_refused_before_its_build_and_without_nextn_layers() {
        let m = qwen35_with_mtp();
        let e = plan(&m, &launch(vec![SpecType::DraftMtp], 1, Some(DRAFT_MTP - 1))).unwrap_err().to_string();
        assert!(e.contains("spec-type") && e.contains("b9179") && e.contains("b9180"), "{e}");
        assert!(plan(&m, &launch(vec![SpecType::DraftMtp], 1, Some(DRAFT_MTP))).is_ok());
        let bare = LlamaModel { nextn: None, ..m };
        let e = plan(&bare, &launch(vec![SpecType::DraftMtp], 1, None)).unwrap_err().to_string();
        assert!(e.contains("spec-type") && e.contains("NextN"), "{e}");
    }
}
