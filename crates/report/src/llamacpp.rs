//! `vramfit estimate <file.gguf>`: what llama.cpp allocates, per device.
//!
//! Schema 1 (docs/gguf.md): integer bytes; every buffer line carries its
//! formula, inputs and source (`explain`); `devices[].total_bytes` is the
//! sum of its lines and `host.total_bytes` likewise. Built by the CLI from
//! `vramfit_core::llamacpp::LlamaCppPlan`; the renderers here hold no
//! formulas.

use crate::estimate::ExplainInfo;
use crate::format::{bytes, params, shown, signed_bytes, thousands};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The whole document.
#[derive(Debug, Clone, Serialize)]
pub struct LlamaCppReport {
    pub schema: u32,
    pub command: &'static str,
    /// always `llama.cpp`: the engine whose allocations are modelled
    pub engine: &'static str,
    pub model: GgufModelInfo,
    pub launch: LaunchInfo,
    pub placement: PlacementInfo,
    pub devices: Vec<DeviceInfo>,
    pub host: DeviceInfo,
    pub kv: KvSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitSearch>,
    /// llama-server flags that reproduce this plan
    pub command_line: String,
    pub notes: Vec<String>,
}

/// What the file holds.
#[derive(Debug, Clone, Serialize)]
pub struct GgufModelInfo {
    pub name: String,
    pub file: String,
    pub architecture: String,
    pub gguf_version: u32,
    pub layers: u64,
    pub embedding_length: u64,
    pub vocab_size: u64,
    pub context_length: u64,
    pub params: u64,
    pub file_bytes: u64,
    /// bytes of all tensor data (Σ tensor infos)
    pub tensor_bytes: u64,
    pub tensors: u64,
    /// per ggml type: tensor count, elements and bytes
    pub tensors_by_type: BTreeMap<String, TypeCount>,
    /// sliding-window span when some layers use one
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    pub sliding_layers: u64,
    pub recurrent_layers: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experts: Option<ExpertInfo>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TypeCount {
    pub tensors: u64,
    pub elements: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExpertInfo {
    pub count: u64,
    pub used: u64,
    pub feed_forward_length: u64,
}

/// The launch being sized (llama.cpp's flag names in docs/gguf.md).
#[derive(Debug, Clone, Serialize)]
pub struct LaunchInfo {
    /// `-c` as given (0: the model's)
    pub ctx_size: u64,
    /// context after llama.cpp's padding, all sequences
    pub n_ctx: u64,
    /// cells per sequence stream
    pub n_ctx_seq: u64,
    /// cells per stream of the sliding-window cache (0: none)
    pub swa_cells: u64,
    pub parallel: u64,
    pub kv_unified: bool,
    pub batch: u64,
    pub ubatch: u64,
    pub cache_type_k: String,
    pub cache_type_v: String,
    /// resolved (`auto` becomes on or off)
    pub flash_attn: bool,
    pub n_gpu_layers: u64,
    pub tensor_split: Vec<f64>,
    pub offload_kqv: bool,
    pub mmap: bool,
}

/// Which layers sit where.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementInfo {
    /// slots on GPUs, as llama.cpp prints "offloaded X/Y layers"
    pub offloaded: u64,
    /// slots: repeating layers + the output layer
    pub slots: u64,
    /// device of the output layer
    pub output: String,
    /// runs of repeating layers on one device
    pub layers: Vec<LayerRange>,
    pub explain: ExplainInfo,
}

#[derive(Debug, Clone, Serialize)]
pub struct LayerRange {
    pub device: String,
    pub first: u64,
    pub last: u64,
}

/// One buffer on a device.
#[derive(Debug, Clone, Serialize)]
pub struct BufferLine {
    /// `model`, `kv`, `state`, `compute`, `output`, `reserve`
    pub kind: String,
    pub label: String,
    pub bytes: u64,
    pub explain: ExplainInfo,
}

/// A GPU or the host.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// `CUDA0`, … or `host`
    pub name: String,
    /// the card (catalogue name) when `--gpu` was given
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    pub buffers: Vec<BufferLine>,
    pub total_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
    /// memory − total (negative: short by)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KvSummary {
    pub k_bytes: u64,
    pub v_bytes: u64,
    /// of which the sliding-window layers
    pub swa_bytes: u64,
    /// recurrent state (Mamba/RWKV layers)
    pub state_bytes: u64,
    /// what one more token of context costs (full-attention layers)
    pub bytes_per_token: u64,
}

/// The largest offload and context that fit the given GPUs.
#[derive(Debug, Clone, Serialize)]
pub struct FitSearch {
    pub fits: bool,
    /// largest `-ngl` that fits at the requested context (None: not even 0)
    pub max_gpu_layers: Option<u64>,
    /// largest context (multiple of 256) that fits at the requested `-ngl`
    pub max_context: Option<u64>,
    /// where the context search stops: the model's trained context (at
    /// least 4096); llama.cpp itself accepts more
    pub max_context_cap: u64,
    /// the command line for the largest `-ngl`, when it differs
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpu_layers_command: Option<String>,
    pub explain: ExplainInfo,
}

impl LlamaCppReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: GgufModelInfo,
        launch: LaunchInfo,
        placement: PlacementInfo,
        devices: Vec<DeviceInfo>,
        host: DeviceInfo,
        kv: KvSummary,
        fit: Option<FitSearch>,
        command_line: String,
        notes: Vec<String>,
    ) -> Self {
        LlamaCppReport {
            schema: SCHEMA_VERSION,
            command: "estimate",
            engine: "llama.cpp",
            model,
            launch,
            placement,
            devices,
            host,
            kv,
            fit,
            command_line,
            notes,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
    }

    /// The human report; `explain` adds every buffer's formula and inputs.
    pub fn to_text(&self, explain: bool) -> String {
        let mut out = String::new();
        let m = &self.model;
        let _ = writeln!(
            out,
            "{} — {} ({} params, {} layers, embedding {}, vocab {}, trained context {})",
            shown(&m.name),
            shown(&m.architecture),
            params(m.params),
            m.layers,
            m.embedding_length,
            m.vocab_size,
            m.context_length
        );
        let types: Vec<String> = m.tensors_by_type.iter().map(|(t, c)| format!("{t} ×{}", c.tensors)).collect();
        let _ = writeln!(
            out,
            "file: {} — GGUF v{}, {} tensors, {} of weights ({})",
            shown(&m.file),
            m.gguf_version,
            m.tensors,
            bytes(m.tensor_bytes),
            types.join(", ")
        );
        if let Some(w) = m.sliding_window {
            let _ = writeln!(out, "sliding window {w} tokens on {} of {} layers", m.sliding_layers, m.layers);
        }
        if m.recurrent_layers > 0 {
            let _ = writeln!(out, "{} recurrent-state layers", m.recurrent_layers);
        }
        if let Some(e) = &m.experts {
            let _ = writeln!(
                out,
                "mixture of experts: {} experts, {} used per token, width {}",
                e.count, e.used, e.feed_forward_length
            );
        }
        let l = &self.launch;
        let _ = writeln!(
            out,
            "llama.cpp: -c {} → n_ctx {} ({} per sequence × {} sequence{}{}), -ub {}, KV {}/{}, flash attention {}, -ngl {} → {}/{} layers on GPU",
            l.ctx_size,
            l.n_ctx,
            l.n_ctx_seq,
            l.parallel,
            if l.parallel == 1 { "" } else { "s" },
            if l.swa_cells > 0 { format!("; sliding-window cache {} cells", l.swa_cells) } else { String::new() },
            l.ubatch,
            l.cache_type_k,
            l.cache_type_v,
            if l.flash_attn { "on" } else { "off" },
            l.n_gpu_layers,
            self.placement.offloaded,
            self.placement.slots
        );
        let ranges: Vec<String> = self
            .placement
            .layers
            .iter()
            .map(|r| {
                if r.first == r.last {
                    format!("{} {}", r.device, r.first)
                } else {
                    format!("{} {}–{}", r.device, r.first, r.last)
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "layers: {}; output layer: {}; token embeddings: host",
            ranges.join(", "),
            self.placement.output
        );
        out.push('\n');
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        t.set_header(vec!["device", "buffer", "size", "bytes"]);
        for d in self.devices.iter().chain(std::iter::once(&self.host)) {
            for b in &d.buffers {
                t.add_row(vec![
                    Cell::new(&d.name),
                    Cell::new(&b.label),
                    Cell::new(bytes(b.bytes)).set_alignment(CellAlignment::Right),
                    Cell::new(thousands(b.bytes)).set_alignment(CellAlignment::Right),
                ]);
            }
            let total_label = match (&d.gpu, d.memory_bytes) {
                (Some(g), Some(mem)) => format!("total ({}, {})", shown(g), bytes(mem)),
                _ if d.name == "host" => "total host RAM".to_string(),
                _ => "total".to_string(),
            };
            t.add_row(vec![
                Cell::new(&d.name),
                Cell::new(total_label),
                Cell::new(bytes(d.total_bytes)).set_alignment(CellAlignment::Right),
                Cell::new(thousands(d.total_bytes)).set_alignment(CellAlignment::Right),
            ]);
        }
        let _ = writeln!(out, "{t}");
        for d in &self.devices {
            if let (Some(fits), Some(h), Some(g)) = (d.fits, d.headroom_bytes, &d.gpu) {
                let _ = writeln!(
                    out,
                    "{} ({}): {} — {} ({})",
                    d.name,
                    shown(g),
                    if fits { "FITS" } else { "DOES NOT FIT" },
                    bytes(d.total_bytes),
                    if fits {
                        format!("{} headroom", signed_bytes(h as i128))
                    } else {
                        format!("short by {}", bytes(h.unsigned_abs()))
                    }
                );
            }
        }
        let kv = &self.kv;
        let _ = writeln!(
            out,
            "KV cache: K {} + V {}{}{}; {} per token of context",
            bytes(kv.k_bytes),
            bytes(kv.v_bytes),
            if kv.swa_bytes > 0 { format!(" (sliding-window layers {})", bytes(kv.swa_bytes)) } else { String::new() },
            if kv.state_bytes > 0 { format!("; recurrent state {}", bytes(kv.state_bytes)) } else { String::new() },
            bytes(kv.bytes_per_token)
        );
        if let Some(f) = &self.fit {
            let _ = writeln!(
                out,
                "largest -ngl that fits: {}; largest context that fits at this -ngl: {}{}",
                f.max_gpu_layers.map(|n| n.to_string()).unwrap_or_else(|| "none (not even -ngl 0)".into()),
                f.max_context.map(|n| n.to_string()).unwrap_or_else(|| "none".into()),
                if f.max_context.is_some_and(|c| c + 256 > f.max_context_cap) {
                    " (the search stops at the trained context; more may fit)"
                } else {
                    ""
                }
            );
            if let Some(c) = &f.max_gpu_layers_command {
                let _ = writeln!(out, "  {}", shown(c));
            }
        }
        let _ = writeln!(out, "command: {}", shown(&self.command_line));
        for n in self.model.notes.iter().chain(&self.notes) {
            let _ = writeln!(out, "note: {}", shown(n));
        }
        if explain {
            out.push_str("\nHow each number was computed:\n");
            crate::estimate::write_explain(&mut out, "[placement]", &self.placement.explain);
            for d in self.devices.iter().chain(std::iter::once(&self.host)) {
                for b in &d.buffers {
                    let head = format!("[{}] {} = {} ({} B)", d.name, b.label, bytes(b.bytes), thousands(b.bytes));
                    crate::estimate::write_explain(&mut out, &head, &b.explain);
                }
            }
            if let Some(f) = &self.fit {
                crate::estimate::write_explain(&mut out, "[fit search]", &f.explain);
            }
        } else {
            out.push_str("(--explain shows the formula, inputs and source behind every number)\n");
        }
        out
    }
}
