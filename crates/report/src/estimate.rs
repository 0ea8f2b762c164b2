//! `vramfit estimate`: JSON schema and renderers.
//!
//! Schema 1 (docs/schema.md): bytes are integers; `per_gpu.categories`
//! always carries every category key (zeros included) and sums to
//! `per_gpu.total_bytes`; `per_gpu.tensor_peak_bytes` is what
//! `torch.cuda.max_memory_allocated()` would show (all categories except
//! `runtime` and `margin`).

use crate::format::{bytes, display_width, fit_lines, fit_table, params, shown, signed_bytes, thousands, Width};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;
use vramfit_core::infer::InferenceDetail;
use vramfit_core::{
    Capacity, Category, CoreError, Explanation, Fit, Ledger, ModelSpec, ParamGroup, ParamGroupKind, ParamLayout, Task,
    Workload,
};

/// The whole `estimate --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct EstimateReport {
    pub schema: u32,
    pub command: &'static str,
    pub model: ModelInfo,
    pub workload: WorkloadInfo,
    pub per_gpu: PerGpu,
    pub gpus: u64,
    pub peak_phase: String,
    /// host RAM for offloaded state (bytes)
    pub cpu_bytes: u64,
    /// NVMe for offloaded state (bytes)
    pub nvme_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitInfo>,
    pub notes: Vec<String>,
    /// only with `--sweep` (crate::sweep)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::sweep::SweepInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub source: String,
    pub family: String,
    pub attention: String,
    pub params_total: u64,
    pub params_active: u64,
    pub params_trainable: u64,
    pub layers: u64,
    pub hidden_size: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab_size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointInfo>,
    /// the parameter layout behind `params_total` / `params_active`
    pub param_groups: Vec<ParamGroupInfo>,
    pub notes: Vec<String>,
}

/// One parameter group: `copies` instances of a `d_out × d_in` matrix (+ bias).
#[derive(Debug, Clone, Serialize)]
pub struct ParamGroupInfo {
    pub path: String,
    pub module: String,
    pub kind: String,
    pub d_in: u64,
    pub d_out: u64,
    pub bias: bool,
    pub copies: u64,
    pub active_copies: u64,
    pub params: u64,
}

/// Safetensors header check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointInfo {
    pub params: u64,
    pub data_bytes: u64,
    pub tensors: u64,
    pub params_by_dtype: BTreeMap<String, u64>,
    pub files: u64,
    pub matches_config: bool,
    pub verdict: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadInfo {
    /// `infer`, `train`, `lora`, `qlora` (the `--task` value)
    pub task: String,
    /// weights dtype or quantization label
    pub dtype: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<String>,
    pub batch: u64,
    /// tokens per sequence
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    /// expert-parallel degree of a MoE model's routed experts (absent: 1)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ep: Option<u64>,
    /// expert-tensor-parallel degree of the routed experts (Megatron
    /// `--expert-tensor-parallel-size`): present with expert parallelism in
    /// training or an explicit `--etp`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etp: Option<u64>,
    /// data-parallel attention groups of a MoE serving layout (absent: 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_attention: Option<u64>,
    /// a serving engine's release whose row sized the start-up (`0.20`; the
    /// latest modelled unless `--engine vllm@X` named one)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// any further settings, as strings (precision, optimizer, zero stage …)
    pub settings: BTreeMap<String, String>,
    /// training: context-parallel degree (absent: 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cp: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PerGpu {
    pub categories: BTreeMap<&'static str, u64>,
    pub tensor_peak_bytes: u64,
    pub total_bytes: u64,
    pub entries: Vec<EntryInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryInfo {
    pub category: &'static str,
    pub label: String,
    pub bytes: u64,
    pub explain: ExplainInfo,
}

/// How a number was computed: `{formula, terms: [{name, value}], note?}`, a
/// term's value in its own type (an integer, a real number, a flag or a
/// string). Core's [`Explanation`] is the view itself: its serde form is this
/// schema, so a field is written once.
pub type ExplainInfo = Explanation;

#[derive(Debug, Clone, Serialize)]
pub struct KvInfo {
    pub bytes_per_token: u64,
    pub tokens_per_sequence: u64,
    pub block_size: u64,
    pub block_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FitInfo {
    pub gpu: String,
    pub gpu_memory_bytes: u64,
    /// what the job may use: CUDA's total (nvidia-smi's less the driver's reservation),
    /// a local GPU's free memory, or the `--gpu-util` budget
    pub usable_bytes: u64,
    pub required_bytes: u64,
    pub fits: bool,
    /// memory left over (negative: short by), bytes
    pub headroom_bytes: i128,
    /// `fits`, `tight` (only the margin does not fit) or `does_not_fit`
    pub verdict: vramfit_core::FitVerdict,
    /// the guide's rule beside the verdict: the total × 1.2 against the same usable memory
    pub guide_headroom: vramfit_core::GuideHeadroom,
    pub explain: ExplainInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityInfo>,
    /// only with `--gpu auto`: the local GPUs read through NVML; the fit is
    /// against the smallest free memory among the GPUs used
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected: Option<DetectedGpus>,
}

/// The local GPUs `--gpu auto` read: hw's own types (the JSON is theirs,
/// so a field is written once).
pub use vramfit_hw::select::{DetectedGpu, DetectedGpus};

/// Paged-KV capacity at a utilisation (`--gpu-util`).
#[derive(Debug, Clone, Serialize)]
pub struct CapacityInfo {
    pub gpu_util: f64,
    pub budget_bytes: u64,
    pub kv_budget_bytes: u64,
    pub kv_blocks: u64,
    pub max_concurrency: u64,
    pub max_context: u64,
    /// what the figures assume, and which flags reproduce them
    pub assumes: String,
    pub explain: ExplainInfo,
}

impl From<&Capacity> for CapacityInfo {
    fn from(c: &Capacity) -> CapacityInfo {
        CapacityInfo {
            gpu_util: c.gpu_util,
            budget_bytes: c.budget_bytes,
            kv_budget_bytes: c.kv_budget_bytes,
            kv_blocks: c.kv_blocks,
            max_concurrency: c.max_concurrency,
            max_context: c.max_context,
            assumes: c.assumes.clone(),
            explain: (&c.explain).into(),
        }
    }
}

impl FitInfo {
    /// The fit of the estimate on `gpu`, with the paged-KV capacity when asked.
    pub fn of(gpu: &str, fit: &Fit, capacity: Option<CapacityInfo>, detected: Option<DetectedGpus>) -> FitInfo {
        FitInfo {
            gpu: gpu.to_string(),
            gpu_memory_bytes: fit.gpu_memory_bytes,
            usable_bytes: fit.usable_bytes,
            required_bytes: fit.required_bytes,
            fits: fit.fits,
            headroom_bytes: fit.headroom_bytes,
            verdict: fit.verdict,
            guide_headroom: fit.guide_headroom,
            explain: (&fit.explain).into(),
            capacity,
            detected,
        }
    }
}

impl KvInfo {
    /// The KV cache geometry of an inference estimate.
    pub fn of(detail: &InferenceDetail, block_size: u64) -> KvInfo {
        KvInfo {
            bytes_per_token: detail.kv.bytes_per_token,
            tokens_per_sequence: detail.tokens_per_sequence,
            block_size,
            block_bytes: detail.block_bytes,
        }
    }
}

impl ParamGroupInfo {
    /// One parameter group; `kind` is `linear:<role>` or the group kind's name.
    pub fn of(g: &ParamGroup) -> Result<ParamGroupInfo, CoreError> {
        Ok(ParamGroupInfo {
            path: g.path.clone(),
            module: g.module.clone(),
            kind: match g.kind {
                ParamGroupKind::Linear(role) => format!("linear:{}", role.name()),
                other => other.name().to_string(),
            },
            d_in: g.d_in,
            d_out: g.d_out,
            bias: g.bias,
            copies: g.copies,
            active_copies: g.active_copies,
            params: g.params()?,
        })
    }
}

impl ModelInfo {
    /// Model facts for the report: `source` says where the spec came from,
    /// `checkpoint` what its safetensors headers held (when read).
    pub fn of(
        spec: &ModelSpec,
        source: String,
        checkpoint: Option<CheckpointInfo>,
        params_trainable: u64,
    ) -> Result<ModelInfo, CoreError> {
        let layout = ParamLayout::of(spec)?;
        Ok(ModelInfo {
            name: spec.name.clone(),
            source,
            family: spec.family.name().to_string(),
            attention: spec.attention_kind().to_string(),
            params_total: layout.total()?,
            params_active: layout.active()?,
            params_trainable,
            layers: spec.num_layers,
            hidden_size: spec.hidden_size,
            heads: spec.num_heads,
            kv_heads: spec.num_kv_heads,
            head_dim: spec.head_dim,
            vocab_size: spec.vocab_size,
            quantization: spec.quantization.as_ref().map(|q| q.label.clone()),
            checkpoint,
            param_groups: layout.groups.iter().map(ParamGroupInfo::of).collect::<Result<_, _>>()?,
            notes: spec.notes.clone(),
        })
    }
}

/// An enum value as its JSON (serde) name.
fn json_name<T: Serialize>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => other.map(|v| v.to_string()).unwrap_or_default(),
    }
}

impl From<&Workload> for WorkloadInfo {
    fn from(w: &Workload) -> WorkloadInfo {
        let par = &w.parallelism;
        let mut info = WorkloadInfo {
            task: String::new(),
            dtype: String::new(),
            kv_dtype: None,
            batch: 0,
            seq: 0,
            concurrency: None,
            tp: par.tp,
            pp: par.pp,
            dp: par.dp(),
            ep: Some(par.ep).filter(|&e| e > 1),
            etp: (par.etp > 0 || (par.ep > 1 && matches!(w.task, Task::Train(_)))).then(|| par.expert_tp()),
            dp_attention: Some(par.dp_attention).filter(|&d| d > 1),
            engine_version: None,
            settings: BTreeMap::new(),
            cp: Some(par.cp).filter(|&c| c > 1),
        };
        match &w.task {
            Task::Inference(s) => {
                info.task = "infer".into();
                info.dtype = s.weights_label();
                info.kv_dtype = Some(s.kv_dtype.name().to_string());
                info.batch = s.batch;
                info.seq = s.context;
                info.concurrency = Some(s.concurrency);
                if let Some(f) = s.serving_facts() {
                    info.engine_version = Some(f.version.to_string());
                    // `vllm@0.20`, or `vllm@0.8 (asked 0.19)`
                    info.settings.insert("engine".into(), vramfit_core::serving::release_label(s));
                }
            }
            Task::Train(t) => {
                info.task = t.kind.name().into();
                info.dtype = t.precision.name().into();
                info.batch = t.batch;
                info.seq = t.seq;
                let settings = [
                    ("optimizer", t.optimizer.name().to_string()),
                    ("checkpointing", t.checkpointing.name().to_string()),
                    ("attention", t.attention.name().to_string()),
                    ("grad_accum", t.grad_accum.to_string()),
                    ("sharding", json_name(par.sharding)),
                    ("engine", t.engine.name().to_string()),
                    ("loss", t.loss.name().to_string()),
                ];
                info.settings = settings.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                if par.hybrid() {
                    // hybrid sharding (HSDP): the replicas of the shard group (add-only key)
                    info.settings.insert("dp_replicate".into(), par.dp_replicate.to_string());
                }
                if par.hpz_on() {
                    // DeepSpeed ZeRO++ hpZ: the secondary partition's group (add-only key)
                    info.settings.insert("hpz".into(), par.hpz.to_string());
                }
            }
        }
        info
    }
}

impl PerGpu {
    pub fn from_ledger(l: &Ledger) -> PerGpu {
        PerGpu {
            categories: l.categories().into_iter().map(|(c, b)| (c.key(), b)).collect(),
            tensor_peak_bytes: l.tensor_peak_bytes(),
            total_bytes: l.total_bytes(),
            entries: l
                .entries
                .iter()
                .map(|e| EntryInfo {
                    category: e.category.key(),
                    label: e.label.clone(),
                    bytes: e.bytes,
                    explain: (&e.explain).into(),
                })
                .collect(),
        }
    }
}

impl EstimateReport {
    pub fn new(
        model: ModelInfo,
        workload: WorkloadInfo,
        ledger: &Ledger,
        kv: Option<KvInfo>,
        fit: Option<FitInfo>,
    ) -> Self {
        EstimateReport {
            schema: SCHEMA_VERSION,
            command: "estimate",
            model,
            workload,
            per_gpu: PerGpu::from_ledger(ledger),
            gpus: ledger.gpus,
            peak_phase: ledger.peak_phase.name().to_string(),
            cpu_bytes: ledger.cpu_bytes,
            nvme_bytes: ledger.nvme_bytes,
            kv,
            fit,
            notes: ledger.notes.clone(),
            sweep: None,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
    }

    /// The human table, as wide as it gets; `explain` adds every entry's
    /// formula and inputs.
    pub fn to_text(&self, explain: bool) -> String {
        self.to_text_fitted(explain, None)
    }

    /// [`Self::to_text`] fitted to `width` columns: long lines wrap, and the
    /// model's source is cut to what it is (its provenance in parentheses
    /// goes: `--explain` and `--json` keep it).
    pub fn to_text_fitted(&self, explain: bool, width: Width) -> String {
        let mut out = String::new();
        self.write_header(&mut out, if explain { None } else { width });
        // too wide: the exact byte counts go first (--json has them), then the cells wrap
        let (table, hidden) = fit_table(self.category_table(), width, &[2], &[1, 3]);
        let _ = writeln!(out, "{table}");
        if !hidden.is_empty() {
            let _ = writeln!(out, "{hidden}");
        }
        self.write_facts(&mut out);
        self.write_notes(&mut out);
        if let Some(s) = &self.sweep {
            s.write_text(&mut out);
        }
        if explain {
            self.write_explanations(&mut out);
        } else {
            out.push_str("(--explain shows the formula and inputs behind every number)\n");
        }
        fit_lines(&out, width)
    }

    /// Model and workload in one line each; the source cut to `width`.
    fn write_header(&self, out: &mut String, width: Width) {
        let m = &self.model;
        let _ = writeln!(
            out,
            "{} — {} params{} ({}, {} layers, hidden {}, {} {} heads / {} kv, head_dim {})",
            shown(&m.name),
            params(m.params_total),
            if m.params_active != m.params_total {
                format!(", {} active per token", params(m.params_active))
            } else {
                String::new()
            },
            shown(&m.family),
            m.layers,
            m.hidden_size,
            m.heads,
            m.attention,
            m.kv_heads,
            m.head_dim
        );
        let _ = writeln!(
            out,
            "source: {}",
            short_source(&shown(&m.source), width.map(|w| w.saturating_sub("source: ".len())))
        );
        let w = &self.workload;
        let mut wl = format!("task {}, weights {}", w.task, w.dtype);
        if let Some(k) = &w.kv_dtype {
            let _ = write!(wl, ", kv {k}");
        }
        let _ = write!(wl, ", batch {}, seq {}", w.batch, w.seq);
        if let Some(c) = w.concurrency {
            let _ = write!(wl, ", concurrency {c}");
        }
        for (k, v) in &w.settings {
            let _ = write!(wl, ", {} {}", shown(k), shown(v));
        }
        let _ = write!(
            wl,
            "; {} GPU{} (TP {}{} × PP {} × DP {}{})",
            self.gpus,
            if self.gpus == 1 { "" } else { "s" },
            w.tp,
            w.cp.map(|c| format!(" × CP {c}")).unwrap_or_default(),
            w.pp,
            w.dp,
            match (w.ep, w.etp) {
                (Some(e), Some(t)) if t > 1 => format!(", experts over EP {e} × ETP {t}"),
                (None, Some(t)) => format!(", experts over ETP {t}"),
                (Some(e), _) => format!(", experts over EP {e}"),
                _ => String::new(),
            } + &w.dp_attention.map(|d| format!(", attention over DP {d}")).unwrap_or_default()
        );
        let _ = writeln!(out, "{wl}");
        if m.params_trainable > 0 && m.params_trainable != m.params_total {
            let _ = writeln!(
                out,
                "trainable: {} ({:.3}% of {})",
                thousands(m.params_trainable),
                m.params_trainable as f64 / m.params_total.max(1) as f64 * 100.0,
                thousands(m.params_total)
            );
        }
        out.push('\n');
    }

    /// Bytes per category, the tensor peak and the total.
    fn category_table(&self) -> Table {
        let total = self.per_gpu.total_bytes.max(1);
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        t.set_header(vec!["category", "per GPU", "bytes", "share"]);
        for cat in category_keys() {
            let b = &self.per_gpu.categories.get(cat).copied().unwrap_or(0);
            if *b == 0 {
                continue;
            }
            t.add_row(vec![
                Cell::new(cat),
                Cell::new(bytes(*b)).set_alignment(CellAlignment::Right),
                Cell::new(thousands(*b)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.1}%", *b as f64 / total as f64 * 100.0)).set_alignment(CellAlignment::Right),
            ]);
        }
        t.add_row(vec![
            Cell::new("tensor peak (max_memory_allocated)"),
            Cell::new(bytes(self.per_gpu.tensor_peak_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(thousands(self.per_gpu.tensor_peak_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(""),
        ]);
        t.add_row(vec![
            Cell::new("total per GPU"),
            Cell::new(bytes(self.per_gpu.total_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(thousands(self.per_gpu.total_bytes)).set_alignment(CellAlignment::Right),
            Cell::new("100%"),
        ]);
        t
    }

    /// Peak phase, offload needs, the KV cache, the fit on a card.
    fn write_facts(&self, out: &mut String) {
        let _ = writeln!(out, "peak phase: {}", self.peak_phase);
        if self.cpu_bytes > 0 {
            let _ = writeln!(out, "host RAM needed for offload: {}", bytes(self.cpu_bytes));
        }
        if self.nvme_bytes > 0 {
            let _ = writeln!(out, "NVMe needed for offload: {}", bytes(self.nvme_bytes));
        }
        if let Some(kv) = &self.kv {
            let _ = writeln!(
                out,
                "KV cache: {} per token per GPU, {} tokens per sequence, blocks of {} tokens = {} per block",
                bytes(kv.bytes_per_token),
                kv.tokens_per_sequence,
                kv.block_size,
                bytes(kv.block_bytes)
            );
        }
        if let Some(f) = &self.fit {
            let _ = writeln!(
                out,
                "{}: {} — needs {} of {}{} ({})",
                shown(&f.gpu),
                if f.fits { "FITS" } else { "DOES NOT FIT" },
                bytes(f.required_bytes),
                bytes(f.usable_bytes),
                if f.usable_bytes == f.gpu_memory_bytes {
                    String::new()
                } else {
                    format!(" usable of {}", bytes(f.gpu_memory_bytes))
                },
                if f.fits {
                    let g = &f.guide_headroom;
                    if g.fits {
                        format!(
                            "{} headroom; with the guide's 20% too: {} spare",
                            signed_bytes(f.headroom_bytes),
                            signed_bytes(g.spare_bytes)
                        )
                    } else {
                        format!(
                            "{} headroom; not with the guide's 20%: × 1.2 needs {}",
                            signed_bytes(f.headroom_bytes),
                            bytes(g.need_bytes)
                        )
                    }
                } else {
                    format!("short by {}", bytes(f.headroom_bytes.unsigned_abs().min(u64::MAX as u128) as u64))
                }
            );
            if let Some(d) = &f.detected {
                for g in &d.gpus {
                    let _ = writeln!(
                        out,
                        "  GPU {} {} ({}): {} free of {}; other processes hold {}, the driver reserves {}",
                        g.index,
                        shown(&g.name),
                        shown(&d.source),
                        bytes(g.free_bytes),
                        bytes(g.total_bytes),
                        bytes(g.used_bytes),
                        bytes(g.reserved_bytes)
                    );
                }
                for s in &d.skipped {
                    let _ = writeln!(out, "  not used: {}", shown(s));
                }
            }
            if let Some(c) = &f.capacity {
                let _ = writeln!(
                    out,
                    "at --gpu-util {:.2}: budget {}, KV budget {} = {} blocks → max concurrency {} at this context; max context {} at concurrency {}",
                    c.gpu_util,
                    bytes(c.budget_bytes),
                    bytes(c.kv_budget_bytes),
                    c.kv_blocks,
                    c.max_concurrency,
                    c.max_context,
                    self.workload.concurrency.unwrap_or(self.workload.batch)
                );
                let _ = writeln!(out, "  assumes: {}", c.assumes);
            }
        }
    }

    fn write_notes(&self, out: &mut String) {
        for n in self.model.notes.iter().chain(&self.notes) {
            let _ = writeln!(out, "note: {}", shown(n));
        }
        if let Some(c) = &self.model.checkpoint {
            let _ = writeln!(
                out,
                "checkpoint: {} tensors in {} file(s), {} elements — {}",
                c.tensors,
                c.files,
                thousands(c.params),
                shown(&c.verdict)
            );
        }
    }

    /// The parameter layout and every entry's formula and inputs.
    fn write_explanations(&self, out: &mut String) {
        {
            out.push_str("\nParameters (params = copies × (d_in × d_out + bias)):\n");
            for g in &self.model.param_groups {
                let _ = writeln!(
                    out,
                    "    {:<48} {:>7} × {:<7} {}{:>7} copies{} = {}",
                    g.path,
                    g.d_in,
                    g.d_out,
                    if g.bias { "+bias " } else { "      " },
                    g.copies,
                    if g.active_copies != g.copies { format!(" ({} active)", g.active_copies) } else { String::new() },
                    thousands(g.params)
                );
            }
            let _ = writeln!(
                out,
                "    total {} ; active per token {}",
                thousands(self.model.params_total),
                thousands(self.model.params_active)
            );
            out.push_str("\nHow each number was computed (per GPU):\n");
            for e in &self.per_gpu.entries {
                let head = format!("[{}] {} = {} ({} B)", e.category, e.label, bytes(e.bytes), thousands(e.bytes));
                write_explain(out, &head, &e.explain);
            }
            if let Some(f) = &self.fit {
                write_explain(out, &format!("[fit] {}", shown(&f.gpu)), &f.explain);
                if let Some(c) = &f.capacity {
                    write_explain(out, "[capacity] paged KV", &c.explain);
                }
            }
            let _ = writeln!(
                out,
                "\ntensor peak = sum of all categories except runtime and margin = {} B; total = tensor peak + runtime + margin = {} B",
                thousands(self.per_gpu.tensor_peak_bytes),
                thousands(self.per_gpu.total_bytes)
            );
        }
    }
}

/// A model's source in at most `room` columns where it can be: the
/// parenthesized provenance at its end (`preset llama-2-7b (huggingface.co/…
/// config.json …; in this repo: …)`) goes, and a pointer to `--explain`
/// takes its place. What is still too wide is left to wrap.
fn short_source(source: &str, room: Option<usize>) -> String {
    let Some(room) = room else { return source.to_string() };
    const MORE: &str = " (the full source: --explain)";
    let mut s = source.trim_end();
    while display_width(s) > room || (s.len() < source.len() && display_width(s) + MORE.len() > room) {
        let Some(open) = trailing_group(s) else { break };
        s = s[..open].trim_end();
    }
    if s.len() == source.trim_end().len() {
        source.to_string()
    } else {
        format!("{s}{MORE}")
    }
}

/// Where the balanced `( … )` group that ends `s` opens, if one does and
/// something comes before it.
fn trailing_group(s: &str) -> Option<usize> {
    if !s.ends_with(')') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (i > 0).then_some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Category display order helper for other renderers.
pub fn category_keys() -> Vec<&'static str> {
    Category::ALL.iter().map(|c| c.key()).collect()
}

/// One explained number: heading, formula, inputs, note (the inputs may
/// quote file names and values read from input: shown escaped).
pub fn write_explain(out: &mut String, head: &str, e: &ExplainInfo) {
    let _ = writeln!(out, "\n{}", shown(head));
    let _ = writeln!(out, "    formula: {}", shown(&e.formula));
    for term in &e.terms {
        let _ = writeln!(out, "    {} = {}", shown(&term.name), shown(&term.value.to_string()));
    }
    if let Some(n) = &e.note {
        let _ = writeln!(out, "    note: {}", shown(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_source_loses_its_provenance_not_what_it_is() {
        let preset = "preset llama-2-7b (huggingface.co/x config.json (a re-export of y; revision not recorded); in this repo: a/b.json)";
        assert_eq!(short_source(preset, Some(92)), "preset llama-2-7b (the full source: --explain)");
        assert_eq!(short_source(preset, None), preset);
        assert_eq!(short_source(preset, Some(200)), preset);
        let cache = "org/m (commit abc1234) from the local Hugging Face cache (/home/u/.cache/huggingface/hub/models--org--m/snapshots/abc)";
        assert_eq!(
            short_source(cache, Some(92)),
            "org/m (commit abc1234) from the local Hugging Face cache (the full source: --explain)"
        );
        // nothing in parentheses to drop: left as it is (it wraps)
        let path = "a/very/long/path/config.json";
        assert_eq!(short_source(path, Some(10)), path);
    }
}
