//! `vramfit estimate <file.gguf>`: what llama.cpp allocates, per device.
//!
//! Schema 1 (docs/gguf.md): integer bytes; every buffer line carries its
//! formula, inputs and source (`explain`); `devices[].total_bytes` is the
//! sum of its lines and `host.total_bytes` likewise. Built from the
//! engine's values (`vramfit_llamacpp`: the model, the launch
//! options, the plan and the fit search) by [`LlamaCppReport::of`] and the
//! `of`/`From` constructors of each part; the renderers hold no formulas
//! and the front ends no decisions.

use crate::estimate::ExplainInfo;
use crate::format::{bytes, params, shown, signed_bytes, thousands};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use vramfit_core::CoreError;
use vramfit_llamacpp::plan::DeviceMemory;
use vramfit_llamacpp::{self as lc, Device, GpuSlot, LineKind, LlamaCppOptions, LlamaCppPlan, LlamaModel};

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
    pub kind: LineKind,
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

/// Where the model was read from, for the report: `file` is a local path
/// or the Hub's `org/repo@commit/file.gguf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufSource {
    pub file: String,
    pub gguf_version: u32,
    /// the file's size (all shards of a split model)
    pub file_bytes: u64,
}

impl GgufModelInfo {
    /// What the file holds (byte and element sums checked, never saturated).
    pub fn of(model: &LlamaModel, source: &GgufSource) -> Result<GgufModelInfo, CoreError> {
        let tensors_by_type = model
            .tensors_by_type()?
            .into_iter()
            .map(|(ty, t)| {
                (ty.name().to_string(), TypeCount { tensors: t.tensors, elements: t.elements, bytes: t.bytes })
            })
            .collect();
        Ok(GgufModelInfo {
            name: model.name.clone(),
            file: source.file.clone(),
            architecture: model.arch.clone(),
            gguf_version: source.gguf_version,
            layers: model.n_layer as u64,
            embedding_length: model.n_embd,
            vocab_size: model.n_vocab,
            context_length: model.n_ctx_train,
            params: model.params()?,
            file_bytes: source.file_bytes,
            tensor_bytes: model.weight_bytes()?,
            tensors: model.tensors.len() as u64,
            tensors_by_type,
            sliding_window: model.layers.iter().any(|l| l.sliding).then_some(model.n_swa),
            sliding_layers: model.layers.iter().filter(|l| l.sliding).count() as u64,
            recurrent_layers: model.layers.iter().filter(|l| l.recurrent.is_some()).count() as u64,
            experts: model.experts.as_ref().map(|e| ExpertInfo {
                count: e.count,
                used: e.used,
                feed_forward_length: e.ff,
            }),
            notes: model.notes.clone(),
        })
    }
}

impl LaunchInfo {
    /// The launch: the flags as given and what llama.cpp resolves them to.
    pub fn of(opts: &LlamaCppOptions, plan: &LlamaCppPlan) -> LaunchInfo {
        LaunchInfo {
            ctx_size: opts.ctx_size,
            n_ctx: plan.context.n_ctx,
            n_ctx_seq: plan.context.n_ctx_seq,
            swa_cells: plan.context.swa_cells,
            parallel: opts.parallel,
            kv_unified: opts.kv_unified,
            batch: opts.batch,
            ubatch: plan.n_ubatch,
            cache_type_k: opts.cache_type_k.name().to_string(),
            cache_type_v: opts.cache_type_v.name().to_string(),
            flash_attn: plan.flash_attn,
            n_gpu_layers: plan.n_gpu_layers,
            tensor_split: opts.tensor_split.clone(),
            offload_kqv: opts.offload_kqv,
            mmap: opts.mmap,
        }
    }
}

/// `CUDA0`, `CPU`: llama.cpp's device names.
fn device_name(d: Device) -> String {
    match d {
        Device::Cpu => "CPU".into(),
        Device::Gpu(g) => format!("CUDA{g}"),
    }
}

impl PlacementInfo {
    /// Which layers sit where (`n_layer` repeating layers + the output).
    pub fn of(plan: &LlamaCppPlan, n_layer: u32) -> PlacementInfo {
        let p = &plan.placement;
        PlacementInfo {
            offloaded: p.offloaded as u64,
            slots: n_layer as u64 + 1,
            output: device_name(p.output),
            layers: p
                .ranges()
                .into_iter()
                .map(|(d, a, b)| LayerRange { device: device_name(d), first: a as u64, last: b as u64 })
                .collect(),
            explain: (&p.explain).into(),
        }
    }
}

fn buffer_lines(d: &DeviceMemory) -> Vec<BufferLine> {
    d.lines
        .iter()
        .map(|l| BufferLine { kind: l.kind, label: l.label.clone(), bytes: l.bytes, explain: (&l.explain).into() })
        .collect()
}

impl DeviceInfo {
    /// A GPU of the plan on the card it was fitted to (`slot`): the card's
    /// name, memory, fit and headroom when its memory is known.
    pub fn gpu(d: &DeviceMemory, slot: &GpuSlot) -> DeviceInfo {
        DeviceInfo {
            name: d.name.clone(),
            gpu: slot.memory_bytes.map(|_| slot.name.clone()),
            memory_bytes: slot.memory_bytes,
            buffers: buffer_lines(d),
            total_bytes: d.total_bytes,
            fits: slot.memory_bytes.map(|m| d.total_bytes <= m),
            // both sides are below 2^64: the difference fits an i128, and an
            // i64 for any real card (clamped, not wrapped, beyond)
            headroom_bytes: slot
                .memory_bytes
                .map(|m| (m as i128 - d.total_bytes as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64),
        }
    }

    /// The host (RAM): no capacity is checked.
    pub fn host(d: &DeviceMemory) -> DeviceInfo {
        DeviceInfo {
            name: "host".into(),
            gpu: None,
            memory_bytes: None,
            buffers: buffer_lines(d),
            total_bytes: d.total_bytes,
            fits: None,
            headroom_bytes: None,
        }
    }
}

impl From<&lc::kv::KvCache> for KvSummary {
    fn from(kv: &lc::kv::KvCache) -> KvSummary {
        KvSummary {
            k_bytes: kv.k_bytes,
            v_bytes: kv.v_bytes,
            swa_bytes: kv.swa_bytes,
            state_bytes: kv.state_bytes,
            bytes_per_token: kv.bytes_per_token,
        }
    }
}

impl From<&lc::FitSearch> for FitSearch {
    fn from(f: &lc::FitSearch) -> FitSearch {
        FitSearch {
            fits: f.fits,
            max_gpu_layers: f.max_gpu_layers,
            max_context: f.max_context,
            max_context_cap: f.max_context_cap,
            max_gpu_layers_command: f.max_gpu_layers_command.clone(),
            explain: (&f.explain).into(),
        }
    }
}

impl LlamaCppReport {
    /// The report of one launch, from the engine's values: the model as
    /// read from `source`, the options, their plan, the fit search (when the
    /// GPUs' memory is known), the command line and notes (the plan's and
    /// the front end's: where the GPUs' memory came from).
    pub fn of(
        source: &GgufSource,
        model: &LlamaModel,
        opts: &LlamaCppOptions,
        plan: &LlamaCppPlan,
        fit: Option<&lc::FitSearch>,
        command_line: String,
        extra_notes: Vec<String>,
    ) -> Result<LlamaCppReport, CoreError> {
        let devices = plan.gpus.iter().zip(&opts.gpus).map(|(d, g)| DeviceInfo::gpu(d, g)).collect();
        let mut notes = plan.notes.clone();
        notes.extend(extra_notes);
        Ok(LlamaCppReport::new(
            GgufModelInfo::of(model, source)?,
            LaunchInfo::of(opts, plan),
            PlacementInfo::of(plan, model.n_layer),
            devices,
            DeviceInfo::host(&plan.host),
            KvSummary::from(&plan.kv),
            fit.map(FitSearch::from),
            command_line,
            notes,
        ))
    }

    /// Exit status the report calls for: does not fit (1) when a GPU's
    /// memory is known and the plan exceeds it.
    pub fn fits(&self) -> bool {
        self.fit.as_ref().is_none_or(|f| f.fits)
    }

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
        self.write_model(&mut out);
        self.write_launch(&mut out);
        out.push('\n');
        let _ = writeln!(out, "{}", self.buffer_table());
        self.write_verdicts(&mut out);
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

    /// The model: shape, file, window, recurrent layers, experts.
    fn write_model(&self, out: &mut String) {
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
    }

    /// The launch as llama.cpp reads it and where the layers go.
    fn write_launch(&self, out: &mut String) {
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
    }

    /// Every buffer of every device, then the host, each with its total.
    fn buffer_table(&self) -> Table {
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        t.set_header(vec!["device", "buffer", "size", "bytes"]);
        let devices = self.devices.iter().map(|d| (d, false));
        for (d, is_host) in devices.chain(std::iter::once((&self.host, true))) {
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
                _ if is_host => "total host RAM".to_string(),
                _ => "total".to_string(),
            };
            t.add_row(vec![
                Cell::new(&d.name),
                Cell::new(total_label),
                Cell::new(bytes(d.total_bytes)).set_alignment(CellAlignment::Right),
                Cell::new(thousands(d.total_bytes)).set_alignment(CellAlignment::Right),
            ]);
        }
        t
    }

    /// Fits or not per GPU, the KV cache, and the largest -ngl and context that fit.
    fn write_verdicts(&self, out: &mut String) {
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
    }
}
