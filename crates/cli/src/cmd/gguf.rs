//! `vramfit estimate <model.gguf>`: llama.cpp's memory for a GGUF file.
//!
//! The flags are llama.cpp's (`-c`, `-ngl`, `-ts`, `-ctk/-ctv`, `-np`,
//! `-ub`, `-b`, `-fa`); [`llama_cpp_short_flags`] lets the multi-letter
//! single-dash spellings llama.cpp users type (`-ngl 20`) reach clap.

use crate::Outcome;
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use vramfit_core::llamacpp::compute::GraphEra;
use vramfit_core::llamacpp::placement::OffloadOrder;
use vramfit_core::llamacpp::{self as lc, Device, FlashAttn, GgmlType, GpuSlot, LlamaCppOptions};
use vramfit_core::units::MIB;
use vramfit_core::Explanation;
use vramfit_report::llamacpp::*;

/// llama.cpp's flags, for GGUF models (ignored otherwise).
#[derive(clap::Args, Debug, Clone)]
pub struct GgufArgs {
    /// GGUF: context size, llama.cpp's `-c` (0 = the model's trained context) [default: 4096]
    #[arg(long = "ctx-size", short = 'c', value_name = "N")]
    pub ctx_size: Option<u64>,
    /// GGUF: layers offloaded to the GPU(s), llama.cpp's `-ngl` (`-ngl N` works too) [default: all]
    #[arg(long = "n-gpu-layers", visible_alias = "ngl", value_name = "N")]
    pub n_gpu_layers: Option<u64>,
    /// GGUF: split over GPUs, llama.cpp's `-ts` (e.g. 3,1); its length sets the GPU count
    #[arg(long = "tensor-split", visible_alias = "ts", value_name = "A,B,…")]
    pub tensor_split: Option<String>,
    /// GGUF: K cache type, llama.cpp's `-ctk` (f16, q8_0, q4_0, …) [default: f16]
    #[arg(long = "cache-type-k", visible_alias = "ctk", value_name = "T")]
    pub cache_type_k: Option<String>,
    /// GGUF: V cache type, llama.cpp's `-ctv` (quantized needs flash attention) [default: f16]
    #[arg(long = "cache-type-v", visible_alias = "ctv", value_name = "T")]
    pub cache_type_v: Option<String>,
    /// GGUF: parallel sequences (server slots), llama.cpp's `-np` [default: 1]
    #[arg(long = "parallel", visible_alias = "np", value_name = "N")]
    pub parallel: Option<u64>,
    /// GGUF: one KV cache shared by all sequences (`--kv-unified`)
    #[arg(long = "kv-unified")]
    pub kv_unified: bool,
    /// GGUF: physical batch, llama.cpp's `-ub` [default: 512]
    #[arg(long = "ubatch-size", visible_alias = "ub", value_name = "N")]
    pub ubatch_size: Option<u64>,
    /// GGUF: logical batch, llama.cpp's `-b` [default: 2048]
    #[arg(long = "batch-size", value_name = "N")]
    pub batch_size: Option<u64>,
    /// GGUF: flash attention, llama.cpp's `-fa` (on, off, auto) [default: auto]
    #[arg(long = "flash-attn", visible_alias = "fa", value_name = "on|off|auto")]
    pub flash_attn: Option<String>,
    /// GGUF: keep the KV cache in host memory (`--no-kv-offload`)
    #[arg(long = "no-kv-offload")]
    pub no_kv_offload: bool,
    /// GGUF: full-size sliding-window cache (`--swa-full`)
    #[arg(long = "swa-full")]
    pub swa_full: bool,
    /// GGUF: read weights instead of mapping them (`--no-mmap`)
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
    /// GGUF: no GPU takeover of host-weight ops (`--no-op-offload`)
    #[arg(long = "no-op-offload")]
    pub no_op_offload: bool,
    /// GGUF: keep host weights in llama.cpp's layout (`--no-repack`); by default the CPU repacks Q4_0/Q4_K/IQ4_NL/MXFP4 host matrices (x86-64 AVX2 rules) and keeps their ops
    #[arg(long = "no-repack")]
    pub no_repack: bool,
    /// GGUF: a build without GPU support (everything on the host)
    #[arg(long = "cpu-only")]
    pub cpu_only: bool,
    /// GGUF: VRAM per GPU outside llama.cpp's buffers (CUDA context, cuBLAS), MiB [default: 500]
    #[arg(long = "gpu-reserve-mib", value_name = "MIB")]
    pub gpu_reserve_mib: Option<u64>,
}

impl GgufArgs {
    fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        let opt = [
            (self.ctx_size.is_some(), "--ctx-size"),
            (self.n_gpu_layers.is_some(), "--n-gpu-layers"),
            (self.tensor_split.is_some(), "--tensor-split"),
            (self.cache_type_k.is_some(), "--cache-type-k"),
            (self.cache_type_v.is_some(), "--cache-type-v"),
            (self.parallel.is_some(), "--parallel"),
            (self.kv_unified, "--kv-unified"),
            (self.ubatch_size.is_some(), "--ubatch-size"),
            (self.batch_size.is_some(), "--batch-size"),
            (self.flash_attn.is_some(), "--flash-attn"),
            (self.no_kv_offload, "--no-kv-offload"),
            (self.swa_full, "--swa-full"),
            (self.no_mmap, "--no-mmap"),
            (self.no_op_offload, "--no-op-offload"),
            (self.no_repack, "--no-repack"),
            (self.cpu_only, "--cpu-only"),
            (self.gpu_reserve_mib.is_some(), "--gpu-reserve-mib"),
        ];
        for (g, n) in opt {
            if g {
                v.push(n);
            }
        }
        v
    }
}

/// Is this model argument a GGUF file?
pub fn is_gguf(model: Option<&str>) -> bool {
    model.is_some_and(|m| m.to_ascii_lowercase().ends_with(".gguf"))
}

/// Refuse llama.cpp flags on a non-GGUF model (they would be silently ignored).
pub fn refuse_for_other_models(args: &GgufArgs) -> anyhow::Result<()> {
    let given = args.given();
    if !given.is_empty() {
        bail!(
            "{} appl{} to GGUF files (llama.cpp) only: pass a .gguf model or drop {}",
            given.join(", "),
            if given.len() == 1 { "ies" } else { "y" },
            if given.len() == 1 { "it" } else { "them" }
        );
    }
    Ok(())
}

/// Rewrite llama.cpp's multi-letter single-dash flags (`-ngl 20`, `-np 4`,
/// `-ts 3,1`, `-ctk q8_0`, `-ub 256`, `-fa on`, `-b 512`, `-nkvo`, `-nr`) to their
/// long forms so clap accepts them. Only after the `estimate` subcommand.
pub fn llama_cpp_short_flags(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().collect();
    let is_estimate = args.get(1).is_some_and(|a| a == "estimate");
    args.into_iter()
        .enumerate()
        .map(|(i, a)| {
            if !is_estimate || i < 2 {
                return a;
            }
            let long = match a.to_str() {
                Some("-ngl") => "--n-gpu-layers",
                Some("-ts") => "--tensor-split",
                Some("-ctk") => "--cache-type-k",
                Some("-ctv") => "--cache-type-v",
                Some("-np") => "--parallel",
                Some("-ub") => "--ubatch-size",
                Some("-b") => "--batch-size",
                Some("-fa") => "--flash-attn",
                Some("-nkvo") => "--no-kv-offload",
                Some("-nr") => "--no-repack",
                _ => return a,
            };
            OsString::from(long)
        })
        .collect()
}

fn parse_split(s: &str) -> anyhow::Result<Vec<f64>> {
    let v: Vec<f64> = s
        .split([',', '/'])
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .map_err(|_| anyhow::anyhow!("--tensor-split: '{p}' is not a number (expected e.g. 3,1)"))
        })
        .collect::<anyhow::Result<_>>()?;
    if v.is_empty() || v.len() > 16 {
        bail!("--tensor-split: give 1 to 16 shares, one per GPU");
    }
    if v.iter().any(|x| !x.is_finite() || *x < 0.0) || v.iter().sum::<f64>() <= 0.0 {
        bail!("--tensor-split: shares must be non-negative and not all zero");
    }
    Ok(v)
}

fn options(args: &GgufArgs, gpus: Vec<GpuSlot>, split: Vec<f64>) -> anyhow::Result<LlamaCppOptions> {
    let d = LlamaCppOptions::default();
    let ctk = match &args.cache_type_k {
        Some(t) => GgmlType::parse_cache_type(t).map_err(|e| anyhow::anyhow!("--cache-type-k: {e}"))?,
        None => d.cache_type_k,
    };
    let ctv = match &args.cache_type_v {
        Some(t) => GgmlType::parse_cache_type(t).map_err(|e| anyhow::anyhow!("--cache-type-v: {e}"))?,
        None => d.cache_type_v,
    };
    let fa = match args.flash_attn.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("auto") => FlashAttn::Auto,
        Some("on") | Some("1") | Some("true") => FlashAttn::On,
        Some("off") | Some("0") | Some("false") => FlashAttn::Off,
        Some(o) => bail!("--flash-attn: '{o}' is not on, off or auto"),
    };
    let parallel = args.parallel.unwrap_or(1);
    if parallel == 0 || parallel > 4096 {
        bail!("--parallel: {parallel} is not between 1 and 4096");
    }
    let ubatch = args.ubatch_size.unwrap_or(d.ubatch);
    let batch = args.batch_size.unwrap_or(d.batch);
    if ubatch == 0 || batch == 0 {
        bail!("--ubatch-size and --batch-size must be at least 1");
    }
    let reserve = match args.gpu_reserve_mib {
        Some(m) => m.checked_mul(MIB).context("--gpu-reserve-mib is absurdly large")?,
        None => d.gpu_reserve,
    };
    Ok(LlamaCppOptions {
        ctx_size: args.ctx_size.unwrap_or(d.ctx_size),
        batch,
        ubatch,
        parallel,
        kv_unified: args.kv_unified,
        cache_type_k: ctk,
        cache_type_v: ctv,
        flash_attn: fa,
        n_gpu_layers: args.n_gpu_layers,
        tensor_split: split,
        gpus,
        offload_kqv: !args.no_kv_offload,
        op_offload: !args.no_op_offload,
        swa_full: args.swa_full,
        mmap: !args.no_mmap,
        cpu_repack: !args.no_repack,
        gpu_reserve: reserve,
        order: OffloadOrder::OutputFirst,
        era: GraphEra::Current,
    })
}

fn dev_name(d: Device) -> String {
    match d {
        Device::Cpu => "CPU".into(),
        Device::Gpu(g) => format!("CUDA{g}"),
    }
}

/// The `estimate` hook: a GGUF model is estimated here (Some); for any
/// other model llama.cpp flags are refused and None lets `estimate` go on.
pub fn dispatch(
    model: Option<&str>,
    args: &GgufArgs,
    gpu: Option<&str>,
    json: bool,
    explain: bool,
) -> anyhow::Result<Option<Outcome>> {
    match model {
        Some(m) if is_gguf(Some(m)) => run(m, args, gpu, json, explain).map(Some),
        _ => refuse_for_other_models(args).map(|_| None),
    }
}

/// Run the estimate for a GGUF file.
pub fn run(path: &str, args: &GgufArgs, gpu: Option<&str>, json: bool, explain: bool) -> anyhow::Result<Outcome> {
    let (header, model) = vramfit_ingest::gguf::read_model(Path::new(path))?;
    let split = match &args.tensor_split {
        Some(s) => parse_split(s)?,
        None => Vec::new(),
    };
    // GPUs: the --gpu list (comma-separated), repeated to the --tensor-split length
    let catalogue = vramfit_catalog::gpus::builtin_gpus()?;
    let named: Vec<vramfit_core::GpuSpec> = match gpu {
        Some(list) => list
            .split(',')
            .map(|n| vramfit_catalog::gpus::find_gpu(&catalogue, n.trim()).cloned())
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    if args.cpu_only && (!named.is_empty() || !split.is_empty() || args.n_gpu_layers.is_some_and(|n| n > 0)) {
        bail!("--cpu-only describes a build without GPUs: drop --gpu, --tensor-split and -ngl");
    }
    let n_gpus = if args.cpu_only { 0 } else { named.len().max(split.len()).max(1) };
    if named.len() > 1 && !split.is_empty() && named.len() != split.len() {
        bail!("--gpu names {} cards but --tensor-split has {} shares", named.len(), split.len());
    }
    let gpus: Vec<GpuSlot> = (0..n_gpus)
        .map(|i| match named.get(i).or_else(|| named.first()) {
            Some(g) => GpuSlot { name: g.name.clone(), memory_bytes: g.memory_bytes() },
            // no card named: sizes per GPU without a capacity
            None => GpuSlot { name: String::new(), memory_bytes: u64::MAX },
        })
        .collect();
    let know_capacity = !named.is_empty();
    let opts = options(args, gpus.clone(), split.clone())?;
    let plan = lc::plan(&model, &opts)?;
    let cmd = lc::command_line(path, &model, &opts, &plan);
    let fit = if know_capacity {
        let max_ngl = lc::max_gpu_layers(&model, &opts)?;
        let cap = model.n_ctx_train.clamp(4096, 1 << 21);
        let max_ctx = lc::max_context(&model, &opts, cap)?;
        let max_cmd = match max_ngl {
            Some(n)
                if Some(n)
                    != opts
                        .n_gpu_layers
                        .map(|x| x.min(model.n_layer as u64 + 1))
                        .or(Some(model.n_layer as u64 + 1)) =>
            {
                let mut o = opts.clone();
                o.n_gpu_layers = Some(n);
                let p = lc::plan(&model, &o)?;
                Some(lc::command_line(path, &model, &o, &p))
            }
            _ => None,
        };
        Some(FitSearch {
            fits: plan.fits(),
            max_gpu_layers: max_ngl,
            max_context: max_ctx,
            max_context_cap: cap,
            max_gpu_layers_command: max_cmd,
            explain: (&Explanation::new(
                "fits when, on every GPU, model + KV + compute buffers + reserve ≤ memory; largest -ngl: the highest 0..=n_layer+1 whose plan fits; largest context: binary search over multiples of 256 up to the training context",
            )
            .term("GPUs", gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>().join(", "))
            .term("reserve per GPU", opts.gpu_reserve)
            .term("context search cap", cap))
            .into(),
        })
    } else {
        None
    };

    // report
    let mut by_type: BTreeMap<String, TypeCount> = BTreeMap::new();
    for t in &model.tensors {
        let e = by_type.entry(t.ty.name().to_string()).or_insert(TypeCount { tensors: 0, elements: 0, bytes: 0 });
        e.tensors += 1;
        e.elements = e.elements.saturating_add(t.elements());
        e.bytes = e.bytes.saturating_add(t.bytes);
    }
    let minfo = GgufModelInfo {
        name: model.name.clone(),
        file: path.to_string(),
        architecture: model.arch.clone(),
        gguf_version: header.version,
        layers: model.n_layer as u64,
        embedding_length: model.n_embd,
        vocab_size: model.n_vocab,
        context_length: model.n_ctx_train,
        params: model.params(),
        file_bytes: header.file_len,
        tensor_bytes: model.weight_bytes(),
        tensors: model.tensors.len() as u64,
        tensors_by_type: by_type,
        sliding_window: model.layers.iter().any(|l| l.sliding).then_some(model.n_swa),
        sliding_layers: model.layers.iter().filter(|l| l.sliding).count() as u64,
        recurrent_layers: model.layers.iter().filter(|l| l.recurrent.is_some()).count() as u64,
        experts: model.experts.as_ref().map(|e| ExpertInfo { count: e.count, used: e.used, feed_forward_length: e.ff }),
        notes: model.notes.clone(),
    };
    let launch = LaunchInfo {
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
        tensor_split: split,
        offload_kqv: opts.offload_kqv,
        mmap: opts.mmap,
    };
    let placement = PlacementInfo {
        offloaded: plan.placement.offloaded as u64,
        slots: model.n_layer as u64 + 1,
        output: dev_name(plan.placement.output),
        layers: plan
            .placement
            .ranges()
            .into_iter()
            .map(|(d, a, b)| LayerRange { device: dev_name(d), first: a as u64, last: b as u64 })
            .collect(),
        explain: (&plan.placement.explain).into(),
    };
    let lines = |d: &lc::plan::DeviceMemory| -> Vec<BufferLine> {
        d.lines
            .iter()
            .map(|l| BufferLine {
                kind: l.kind.clone(),
                label: l.label.clone(),
                bytes: l.bytes,
                explain: (&l.explain).into(),
            })
            .collect()
    };
    let devices: Vec<DeviceInfo> = plan
        .gpus
        .iter()
        .zip(&gpus)
        .map(|(d, g)| DeviceInfo {
            name: d.name.clone(),
            gpu: know_capacity.then(|| g.name.clone()),
            memory_bytes: know_capacity.then_some(g.memory_bytes),
            buffers: lines(d),
            total_bytes: d.total_bytes,
            fits: know_capacity.then_some(d.total_bytes <= g.memory_bytes),
            headroom_bytes: know_capacity.then(|| {
                (g.memory_bytes as i128 - d.total_bytes as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
            }),
        })
        .collect();
    let host = DeviceInfo {
        name: "host".into(),
        gpu: None,
        memory_bytes: None,
        buffers: lines(&plan.host),
        total_bytes: plan.host.total_bytes,
        fits: None,
        headroom_bytes: None,
    };
    let kv = KvSummary {
        k_bytes: plan.kv.k_bytes,
        v_bytes: plan.kv.v_bytes,
        swa_bytes: plan.kv.swa_bytes,
        state_bytes: plan.kv.state_bytes,
        bytes_per_token: plan.kv.bytes_per_token,
    };
    let fits = fit.as_ref().map(|f| f.fits).unwrap_or(true);
    let report = LlamaCppReport::new(minfo, launch, placement, devices, host, kv, fit, cmd, plan.notes.clone());
    let stdout = if json { report.to_json() } else { report.to_text(explain) };
    Ok(Outcome { stdout, code: if fits { 0 } else { 1 } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_flags_only_after_estimate() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let out = llama_cpp_short_flags(a(&[
            "vramfit", "estimate", "m.gguf", "-ngl", "20", "-np", "4", "-fa", "on", "-c", "8192",
        ]));
        assert_eq!(
            out,
            a(&[
                "vramfit",
                "estimate",
                "m.gguf",
                "--n-gpu-layers",
                "20",
                "--parallel",
                "4",
                "--flash-attn",
                "on",
                "-c",
                "8192"
            ])
        );
        let out = llama_cpp_short_flags(a(&["vramfit", "plan", "-ngl"]));
        assert_eq!(out, a(&["vramfit", "plan", "-ngl"]));
    }

    #[test]
    fn split_parsing() {
        assert_eq!(parse_split("3,1").unwrap(), vec![3.0, 1.0]);
        assert!(parse_split("a,1").is_err());
        assert!(parse_split("0,0").is_err());
    }
}
