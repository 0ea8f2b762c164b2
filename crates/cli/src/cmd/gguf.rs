//! `vramfit estimate <model.gguf>`: llama.cpp's memory for a GGUF file.
//!
//! The flags are llama.cpp's (`-c`, `-ngl`, `-ts`, `-ctk/-ctv`, `-np`,
//! `-ub`, `-b`, `-fa`); [`llama_cpp_short_flags`] lets the multi-letter
//! single-dash spellings llama.cpp users type (`-ngl 20`) reach clap.

use crate::cmd::train_args::TaskKind;
use crate::cmd::workload_args::WorkloadArgs;
use crate::Outcome;
use anyhow::{bail, Context};
use std::ffi::OsString;
use vramfit_core::units::MIB;
use vramfit_ingest::resolve::{GgufLocation, ModelKind};
use vramfit_llamacpp::compute::GraphEra;
use vramfit_llamacpp::options::{self, check_shares};
use vramfit_llamacpp::placement::OffloadOrder;
use vramfit_llamacpp::{self as lc, FlashAttn, GgmlType, GpuSlot, LlamaCppOptions, ModelArg, OptionField};
use vramfit_report::llamacpp::{GgufSource, LlamaCppReport};

/// llama.cpp's flags, for GGUF models (ignored otherwise).
#[derive(clap::Args, Debug, Clone)]
pub struct GgufArgs {
    #[arg(long = "ctx-size", short = 'c', value_name = "TOKENS", value_parser = crate::cmd::workload_args::tokens, help = format!(
        "GGUF: context size, llama.cpp's `-c` (--context says the same; 32k = 32768; 0 = the model's trained context) [default: {}]",
        options::DEFAULT_CTX_SIZE
    ))]
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
    #[arg(long = "parallel", visible_alias = "np", value_name = "N", help = format!(
        "GGUF: parallel sequences (server slots), llama.cpp's `-np` [default: {}]",
        options::DEFAULT_PARALLEL
    ))]
    pub parallel: Option<u64>,
    /// GGUF: one KV cache shared by all sequences (`--kv-unified`)
    #[arg(long = "kv-unified")]
    pub kv_unified: bool,
    #[arg(long = "ubatch-size", visible_alias = "ub", value_name = "N", help = format!(
        "GGUF: physical batch, llama.cpp's `-ub` [default: {}]",
        options::DEFAULT_UBATCH
    ))]
    pub ubatch_size: Option<u64>,
    #[arg(long = "batch-size", value_name = "N", help = format!(
        "GGUF: logical batch, llama.cpp's `-b` [default: {}]",
        options::DEFAULT_BATCH
    ))]
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
    /// GGUF: the llama.cpp build to model (its bNNNN release number, e.g. 4897); its rules for logits and CPU repacking apply [default: current]
    #[arg(long = "llamacpp-build", value_name = "N", value_parser = llamacpp_build)]
    pub llamacpp_build: Option<u64>,
    /// GGUF: keep the routed experts of the first N layers in host memory, llama.cpp's `--n-cpu-moe` (`-ncmoe`)
    #[arg(long = "n-cpu-moe", visible_alias = "ncmoe", value_name = "N")]
    pub n_cpu_moe: Option<u64>,
    /// GGUF: keep every layer's routed experts in host memory, llama.cpp's `--cpu-moe` (`-cmoe`)
    #[arg(long = "cpu-moe", visible_alias = "cmoe", conflicts_with = "n_cpu_moe")]
    pub cpu_moe: bool,
    /// GGUF: place the tensors whose name a pattern matches on a buffer type, llama.cpp's `-ot` (`PATTERN=CPU` or `PATTERN=CUDA1`, comma separated or repeated; the first match wins)
    #[arg(long = "override-tensor", visible_alias = "ot", value_name = "PATTERN=BUFT")]
    pub override_tensor: Vec<String>,
    /// GGUF: a multimodal projector file (mmproj-*.gguf), llama.cpp's `--mmproj`: its weights and warm-up compute buffer on the first GPU
    #[arg(long = "mmproj", value_name = "FILE")]
    pub mmproj: Option<String>,
    /// GGUF: keep the projector on the host, llama.cpp's `--no-mmproj-offload`
    #[arg(long = "no-mmproj-offload", requires = "mmproj")]
    pub no_mmproj_offload: bool,
    /// GGUF: a draft model for speculative decoding, llama-server's `-md` (`--model-draft`, `--spec-draft-model`)
    #[arg(long = "model-draft", visible_aliases = ["md", "spec-draft-model"], value_name = "FILE")]
    pub model_draft: Option<String>,
    /// GGUF: the draft model's layers on the GPU(s), llama.cpp's `-ngld` (`--gpu-layers-draft`) [default: all]
    #[arg(long = "gpu-layers-draft", visible_aliases = ["ngld", "n-gpu-layers-draft", "spec-draft-ngl"], value_name = "N", requires = "model_draft")]
    pub gpu_layers_draft: Option<u64>,
    /// GGUF: the draft model's K cache type, llama.cpp's `-ctkd` [default: f16]
    #[arg(long = "cache-type-k-draft", visible_alias = "ctkd", value_name = "T", requires = "model_draft")]
    pub cache_type_k_draft: Option<String>,
    /// GGUF: the draft model's V cache type, llama.cpp's `-ctvd` [default: f16]
    #[arg(long = "cache-type-v-draft", visible_alias = "ctvd", value_name = "T", requires = "model_draft")]
    pub cache_type_v_draft: Option<String>,
    /// GGUF: the draft context's size, llama.cpp's `-cd` (`--ctx-size-draft`); builds before b9109 only (the current build sizes it at the target's context) [default: the target's per-slot context]
    #[arg(long = "ctx-size-draft", visible_aliases = ["cd", "spec-draft-ctx-size"], value_name = "N", requires = "model_draft")]
    pub ctx_size_draft: Option<u64>,
    /// GGUF: the draft model's `-ot`, llama.cpp's `-otd` (`--override-tensor-draft`, `PATTERN=CPU` or `PATTERN=CUDA1`)
    #[arg(long = "override-tensor-draft", visible_aliases = ["otd", "spec-draft-override-tensor"], value_name = "PATTERN=BUFT", requires = "model_draft")]
    pub override_tensor_draft: Vec<String>,
    /// GGUF: llama-server's `--spec-type`, comma separated (none, draft-simple, draft-eagle3, draft-dflash, draft-dspark, draft-mtp, ngram-cache, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod) [default: none; draft-simple with -md before b9464]
    #[arg(long = "spec-type", value_name = "TYPES")]
    pub spec_type: Option<String>,
    /// GGUF: draft tokens per verification of the model drafters, llama.cpp's `--spec-draft-n-max` (`--draft-max`) [default: 3]
    #[arg(long = "spec-draft-n-max", visible_aliases = ["draft-max", "draft-n"], value_name = "N")]
    pub spec_draft_n_max: Option<u64>,
}

/// `-ot` values: `PATTERN=BUFT[,PATTERN=BUFT…]`, BUFT `CPU` or `CUDA<n>`.
fn parse_overrides(values: &[String]) -> anyhow::Result<Vec<(String, lc::Device)>> {
    parse_overrides_of("--override-tensor", values)
}

/// `-ot` / `-otd` values, errors naming `flag`.
fn parse_overrides_of(flag: &str, values: &[String]) -> anyhow::Result<Vec<(String, lc::Device)>> {
    let mut out = Vec::new();
    for v in values {
        for item in v.split(',').filter(|i| !i.trim().is_empty()) {
            let (pattern, buft) = item
                .rsplit_once('=')
                .ok_or_else(|| anyhow::anyhow!("{flag}: '{item}' is not PATTERN=BUFT (e.g. 'ffn_.*_exps=CPU')"))?;
            let b = buft.trim();
            let dev = if b.eq_ignore_ascii_case("cpu") {
                lc::Device::Cpu
            } else if let Some(n) = b.get(..4).filter(|p| p.eq_ignore_ascii_case("cuda")).and(b.get(4..)) {
                lc::Device::Gpu(
                    n.parse::<u32>()
                        .map_err(|_| anyhow::anyhow!("{flag}: '{b}' is not a buffer type (expected CPU or CUDA<n>)"))?,
                )
            } else {
                bail!("{flag}: '{b}' is not a buffer type vramfit models (expected CPU or CUDA<n>)");
            };
            if pattern.is_empty() {
                bail!("{flag}: '{item}' has an empty pattern");
            }
            out.push((pattern.to_string(), dev));
        }
    }
    Ok(out)
}

/// `--llamacpp-build`: `9479` or `b9479`.
fn llamacpp_build(s: &str) -> Result<u64, String> {
    let digits = s.trim().strip_prefix(['b', 'B']).unwrap_or(s.trim());
    digits.parse::<u64>().map_err(|_| format!("'{s}' is not a llama.cpp build number (expected e.g. 9479 or b9479)"))
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
            (self.llamacpp_build.is_some(), "--llamacpp-build"),
            (self.n_cpu_moe.is_some(), "--n-cpu-moe"),
            (self.cpu_moe, "--cpu-moe"),
            (!self.override_tensor.is_empty(), "--override-tensor"),
            (self.mmproj.is_some(), "--mmproj"),
            (self.no_mmproj_offload, "--no-mmproj-offload"),
            (self.model_draft.is_some(), "--model-draft"),
            (self.gpu_layers_draft.is_some(), "--gpu-layers-draft"),
            (self.cache_type_k_draft.is_some(), "--cache-type-k-draft"),
            (self.cache_type_v_draft.is_some(), "--cache-type-v-draft"),
            (self.ctx_size_draft.is_some(), "--ctx-size-draft"),
            (!self.override_tensor_draft.is_empty(), "--override-tensor-draft"),
            (self.spec_type.is_some(), "--spec-type"),
            (self.spec_draft_n_max.is_some(), "--spec-draft-n-max"),
        ];
        for (g, n) in opt {
            if g {
                v.push(n);
            }
        }
        v
    }
}

/// The flag of a transformers model that says what a llama.cpp flag says,
/// for the error that refuses the llama.cpp flag.
fn transformers_equivalent(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "--ctx-size" => "--context",
        "--tensor-split" => "--tp or --gpus",
        "--cache-type-k" | "--cache-type-v" => "--kv-dtype",
        "--parallel" => "--concurrency",
        "--batch-size" | "--ubatch-size" => "--batch or --max-num-batched-tokens",
        "--gpu-reserve-mib" => "--cuda-context-mib",
        _ => return None,
    })
}

/// Refuse llama.cpp flags on a non-GGUF model (they would be silently
/// ignored), saying which flag of this model says the same.
pub fn refuse_for_other_models(args: &GgufArgs) -> anyhow::Result<()> {
    let given = args.given();
    if !given.is_empty() {
        let instead: Vec<String> =
            given.iter().filter_map(|f| transformers_equivalent(f).map(|e| format!("{e} instead of {f}"))).collect();
        bail!(
            "{} appl{} to GGUF files (llama.cpp) only: pass a .gguf model or drop {}{}",
            given.join(", "),
            if given.len() == 1 { "ies" } else { "y" },
            if given.len() == 1 { "it" } else { "them" },
            if instead.is_empty() { String::new() } else { format!(" (for this model: {})", instead.join(", ")) }
        );
    }
    Ok(())
}

/// Rewrite the spellings other tools' users type to the ones clap knows:
/// llama.cpp's multi-letter single-dash flags (`-ngl 20`, `-np 4`, `-ts 3,1`,
/// `-ctk q8_0`, `-ub 256`, `-fa on`, `-b 512`, `-nkvo`, `-nr`) to their long
/// forms, only after the `estimate` subcommand; vLLM's `-tp`/`-pp` to `--tp`/
/// `--pp` after `estimate`, `plan` and `diagnose`; and a long flag written
/// with underscores (DeepSpeed's `--num_gpus`, vLLM's `--max_model_len=8k`)
/// to dashes, in every command. Nothing after a `--` separator is touched.
pub fn llama_cpp_short_flags(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().collect();
    let sub = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let is_estimate = sub == "estimate";
    let sizes_a_job = matches!(sub, "estimate" | "plan" | "diagnose");
    let mut separated = false;
    args.into_iter()
        .enumerate()
        .map(|(i, a)| {
            if i < 2 || separated {
                return a;
            }
            let Some(text) = a.to_str() else { return a };
            if text == "--" {
                separated = true;
                return a;
            }
            if let Some(name) = text.strip_prefix("--") {
                let (flag, value) = match name.split_once('=') {
                    Some((f, v)) => (f, Some(v)),
                    None => (name, None),
                };
                if !flag.contains('_') {
                    return a;
                }
                let flag = flag.replace('_', "-");
                return OsString::from(match value {
                    Some(v) => format!("--{flag}={v}"),
                    None => format!("--{flag}"),
                });
            }
            let long = match text {
                "-tp" if sizes_a_job => "--tp",
                "-pp" if sizes_a_job => "--pp",
                _ if !is_estimate => return a,
                "-ngl" => "--n-gpu-layers",
                "-ts" => "--tensor-split",
                "-ctk" => "--cache-type-k",
                "-ctv" => "--cache-type-v",
                "-np" => "--parallel",
                "-ub" => "--ubatch-size",
                "-b" => "--batch-size",
                "-fa" => "--flash-attn",
                "-nkvo" => "--no-kv-offload",
                "-nr" => "--no-repack",
                "-ncmoe" => "--n-cpu-moe",
                "-cmoe" => "--cpu-moe",
                "-ot" => "--override-tensor",
                "-md" => "--model-draft",
                "-ngld" => "--gpu-layers-draft",
                "-ctkd" => "--cache-type-k-draft",
                "-ctvd" => "--cache-type-v-draft",
                "-cd" => "--ctx-size-draft",
                "-otd" => "--override-tensor-draft",
                _ => return a,
            };
            OsString::from(long)
        })
        .collect()
}

/// A workload flag `estimate` refuses for a GGUF ([`estimate_flags_given`]),
/// as a clap tip may name it: `Some(llama.cpp's flag that says the same)`,
/// `Some(None)` when llama.cpp has none; `None` for a flag that applies.
fn refused_for_gguf(tip: &str) -> Option<Option<&'static str>> {
    Some(match tip {
        "--kv-dtype" | "--kv-cache-dtype" => Some("--cache-type-k"),
        "--concurrency" | "--max-num-seqs" => Some("--parallel"),
        "--batch" => Some("--batch-size"),
        "--max-num-batched-tokens" => Some("--ubatch-size"),
        "--tp" | "--tensor-parallel-size" | "--pp" | "--pipeline-parallel-size" | "--gpus" | "--num-gpus" => {
            Some("--tensor-split")
        }
        "--cuda-context-mib" | "--workspace-mib" => Some("--gpu-reserve-mib"),
        "--gpu-util"
        | "--gpu-memory-utilization"
        | "--dtype"
        | "--quant"
        | "--quantization"
        | "--group-size"
        | "--block-size"
        | "--logits-fp32"
        | "--margin"
        | "--engine"
        | "--sliding-window-cache"
        | "--task" => None,
        _ => return None,
    })
}

/// llama.cpp's flag `tip` names (its long form or an alias), as `--long`.
fn gguf_flag(tip: &str) -> Option<String> {
    use clap::Args;
    let name = tip.strip_prefix("--")?;
    GgufArgs::augment_args(clap::Command::new("gguf"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| (l, a.get_all_aliases().unwrap_or_default())))
        .find(|(l, aliases)| *l == name || aliases.contains(&name))
        .map(|(l, _)| format!("--{l}"))
}

/// Keep a clap error's "a similar argument exists" tip to flags that apply to
/// the model on the command line (`args`, as [`llama_cpp_short_flags`] left
/// them): `--ctxsize` on a transformers model is answered with `--context`,
/// not llama.cpp's `--ctx-size`; `--kv-cache-type` on a GGUF with
/// `--cache-type-k` (`-ctk`), not `--kv-cache-dtype`; a tip with no
/// counterpart is dropped.
pub fn fit_suggestion(args: &[OsString], mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    if args.get(1).is_none_or(|a| a != "estimate") {
        return e;
    }
    let Some(ContextValue::String(tip)) = e.get(ContextKind::SuggestedArg).cloned() else { return e };
    let gguf = args.iter().skip(2).any(|a| a.to_str().is_some_and(|s| s.to_ascii_lowercase().ends_with(".gguf")));
    let instead = match (gguf, gguf_flag(&tip)) {
        (false, Some(long)) => transformers_equivalent(&long).map(|e| e.split(' ').next().unwrap_or(e)),
        (true, None) => match refused_for_gguf(&tip) {
            Some(instead) => instead,
            None => return e,
        },
        _ => return e,
    };
    match instead {
        Some(flag) => e.insert(ContextKind::SuggestedArg, ContextValue::String(flag.to_string())),
        None => e.remove(ContextKind::SuggestedArg),
    };
    e
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
    check_shares(&v).map_err(|e| anyhow::anyhow!(e.render(&flag)))?;
    Ok(v)
}

/// The flag that sets a launch option, as a llama.cpp user types it
/// (`-np/--parallel`), for the options' errors.
fn flag(f: OptionField) -> String {
    match f.short_flag() {
        Some(short) => format!("{short}/--{}", f.id()),
        None => format!("--{}", f.id()),
    }
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
    let fa = match &args.flash_attn {
        Some(f) => f.parse::<FlashAttn>().map_err(|e| anyhow::anyhow!("--flash-attn: {e}"))?,
        None => d.flash_attn,
    };
    let reserve = match args.gpu_reserve_mib {
        Some(m) => m.checked_mul(MIB).context("--gpu-reserve-mib is absurdly large")?,
        None => d.gpu_reserve,
    };
    let opts = LlamaCppOptions {
        ctx_size: args.ctx_size.unwrap_or(d.ctx_size),
        batch: args.batch_size.unwrap_or(d.batch),
        ubatch: args.ubatch_size.unwrap_or(d.ubatch),
        parallel: args.parallel.unwrap_or(d.parallel),
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
        build: args.llamacpp_build,
        // --cpu-moe: every layer (llama.cpp's pattern matches all of them)
        n_cpu_moe: if args.cpu_moe { options::CPU_MOE_ALL } else { args.n_cpu_moe.unwrap_or(0) },
        override_tensor: parse_overrides(&args.override_tensor)?,
        companions: lc::companion::Companions::default(),
    };
    opts.validate().map_err(|e| anyhow::anyhow!(e.render(&flag)))?;
    Ok(opts)
}

/// What a GGUF estimate fits against: `--gpu` (catalogue cards, comma
/// separated, or `auto`) or `--gpu-mem SIZE` (a card by its memory).
#[derive(Debug, Clone, Copy, Default)]
pub struct GgufTarget<'a> {
    pub gpu: Option<&'a str>,
    pub gpu_mem: Option<&'a str>,
    /// `--gpu-util`: refused for GGUF (vLLM's setting)
    pub gpu_util: Option<f64>,
}

/// A GGUF estimate: the model argument as given, llama.cpp's flags, the
/// card, how the Hub is reached, and the output asked for.
#[derive(Debug, Clone, Copy)]
pub struct GgufRequest<'a> {
    pub model: &'a str,
    pub args: &'a GgufArgs,
    pub target: GgufTarget<'a>,
    pub hub: &'a crate::cmd::model_args::HubArgs,
    pub json: bool,
    pub explain: bool,
}

/// The GPUs of the launch and notes on where their memory came from. The
/// GPU count is `--tensor-split`'s length, else the number of cards named,
/// else (with `--gpu auto`) every usable local GPU, as llama.cpp uses every
/// visible device; a GPU whose memory is not known is sized, not fitted.
fn gpu_slots(args: &GgufArgs, target: GgufTarget, split: &[f64]) -> anyhow::Result<(Vec<GpuSlot>, Vec<String>)> {
    let want_gpus = target.gpu.is_some() || target.gpu_mem.is_some() || !split.is_empty();
    if args.cpu_only && (want_gpus || args.n_gpu_layers.is_some_and(|n| n > 0)) {
        bail!("--cpu-only describes a build without GPUs: drop --gpu, --gpu-mem, --tensor-split and -ngl");
    }
    if args.cpu_only {
        return Ok((Vec::new(), Vec::new()));
    }
    if let Some(m) = target.gpu_mem {
        let bytes = crate::cmd::gpu_target::parse_memory(m)?;
        let name = vramfit_hw::select::memory_card_name(bytes, m);
        let n = split.len().max(1);
        return Ok(((0..n).map(|_| GpuSlot { name: name.clone(), memory_bytes: Some(bytes) }).collect(), Vec::new()));
    }
    match target.gpu.map(str::trim) {
        Some(g) if g.eq_ignore_ascii_case("auto") => {
            // every usable GPU unless -ts says how many (0: all)
            let t = crate::cmd::gpu_target::target(Some("auto"), None, split.len() as u64)?
                .ok_or_else(|| anyhow::anyhow!("--gpu auto: no GPU read"))?;
            Ok((slots_from_detected(&t)?, t.notes))
        }
        Some(list) => {
            let catalogue = vramfit_catalog::gpus::builtin_gpus()?;
            let named: Vec<vramfit_core::GpuSpec> = list
                .split(',')
                .map(|n| vramfit_hw::select::catalogue_card(&catalogue, n.trim()).cloned())
                .collect::<Result<_, _>>()
                .map_err(|e| crate::error::field_error("gpu", e))?;
            if named.len() > 1 && !split.is_empty() && named.len() != split.len() {
                bail!("--gpu names {} cards but --tensor-split has {} shares", named.len(), split.len());
            }
            let n = named.len().max(split.len());
            // one card named for several shares: that card, repeated
            Ok((
                (0..n)
                    .map(|i| {
                        let g = named.get(i).unwrap_or(&named[0]);
                        GpuSlot { name: g.name.clone(), memory_bytes: Some(g.memory_bytes()) }
                    })
                    .collect(),
                Vec::new(),
            ))
        }
        None => Ok((
            (0..split.len().max(1)).map(|_| GpuSlot { name: String::new(), memory_bytes: None }).collect(),
            Vec::new(),
        )),
    }
}

/// The local GPUs `--gpu auto` chose, in CUDA's order (by index), each
/// fitted against its own free memory (llama.cpp places by free memory
/// per device).
pub fn slots_from_detected(t: &crate::cmd::gpu_target::FitTarget) -> anyhow::Result<Vec<GpuSlot>> {
    let Some(d) = &t.detected else { bail!("--gpu auto: no GPU detected") };
    let mut gpus = d.gpus.clone();
    gpus.sort_by_key(|g| g.index);
    Ok(gpus
        .iter()
        .map(|g| GpuSlot {
            name: format!("GPU {} {} (free memory)", g.index, g.name),
            memory_bytes: Some(g.free_bytes),
        })
        .collect())
}

/// `estimate`'s own workload flags given with a GGUF model: each with the
/// llama.cpp flag that says the same, for the error (they would otherwise
/// be ignored, and `--context 8192` would silently size `-c 4096`).
fn estimate_flags_given(w: &WorkloadArgs, gpu_util: Option<f64>) -> Vec<String> {
    let mut v: Vec<String> = [
        (w.batch.is_some(), "--batch (llama.cpp: -np for sequences, -b/-ub for batches)"),
        (w.concurrency.is_some(), "--concurrency (llama.cpp: -np)"),
        (w.kv_dtype.is_some(), "--kv-dtype (llama.cpp: -ctk/-ctv)"),
        (w.dtype().is_some(), "--dtype (a GGUF loads the types it holds)"),
        (w.tp.is_some() || w.pp.is_some() || w.gpus.is_some(), "--tp/--pp/--gpus (llama.cpp: -ts, --gpu A,B)"),
        (w.group_size.is_some(), "--group-size"),
        (w.logits_fp32, "--logits-fp32"),
        (w.block_size.is_some(), "--block-size"),
        (
            w.cuda_context_mib.is_some() || w.workspace_mib.is_some(),
            "--cuda-context-mib/--workspace-mib (here: --gpu-reserve-mib)",
        ),
        (w.margin.is_some(), "--margin"),
        (gpu_util.is_some(), "--gpu-util (vLLM's; llama.cpp has none)"),
        (w.task != TaskKind::Infer, "--task (a GGUF is sized for llama.cpp inference)"),
    ]
    .into_iter()
    .filter(|(given, _)| *given)
    .map(|(_, flag)| flag.to_string())
    .collect();
    v.extend(w.train.given_flags().into_iter().map(String::from));
    v
}

/// `estimate` for a model argument that is not a transformers model
/// ([`ModelKind`], from ingest's resolver): a GGUF file is sized here, with
/// `estimate`'s own workload flags refused by name; a quant tag is refused
/// with what to write instead. For a transformers model llama.cpp flags are
/// refused and `None` lets `estimate` go on.
pub fn dispatch(kind: ModelKind, workload: &WorkloadArgs, req: &GgufRequest) -> anyhow::Result<Option<Outcome>> {
    let m = req.model;
    match kind {
        ModelKind::Gguf(location) => {
            let other = estimate_flags_given(workload, req.target.gpu_util);
            if !other.is_empty() {
                bail!(
                    "{m} is a GGUF file, sized with llama.cpp's flags: {} do{} not apply (docs/gguf.md lists the flags)",
                    other.join(", "),
                    if other.len() == 1 { "es" } else { "" }
                );
            }
            let args = with_context(req.args, workload.context)?;
            run(location, &GgufRequest { args: &args, ..*req }).map(Some)
        }
        ModelKind::GgufQuantTag { repo, tag } => bail!(
            "{m}: a quant tag (llama.cpp's -hf {repo}:{tag}) picks a file from the repo's file list, which vramfit does not read: name the file, e.g. {repo}:<name>-{tag}.gguf (the file names are on {repo}'s Files page)"
        ),
        ModelKind::Transformers => refuse_for_other_models(req.args).map(|_| None),
    }
}

/// `--context` (or `--max-model-len`) for a GGUF is llama.cpp's `-c`;
/// both given must agree.
fn with_context(args: &GgufArgs, context: Option<u64>) -> anyhow::Result<GgufArgs> {
    let mut args = args.clone();
    match (args.ctx_size, context) {
        (Some(c), Some(t)) if c != t => {
            bail!("--context {t} and -c/--ctx-size {c} both set a GGUF's context and disagree: give one of them")
        }
        (_, Some(t)) => args.ctx_size = Some(t),
        _ => {}
    }
    Ok(args)
}

/// A GGUF read from where the model argument says: the model, how the
/// report names the file, the `llama-server` flag that loads it, notes.
struct Read {
    model: lc::LlamaModel,
    source: GgufSource,
    arg: ModelArg,
    notes: Vec<String>,
}

/// A local file (also when its name looks like `org/name:file.gguf`), else
/// a Hub file written `org/name:path/file.gguf`; `m` is the argument as given.
fn read(m: &str, location: GgufLocation, hub: &crate::cmd::model_args::HubArgs) -> anyhow::Result<Read> {
    match location {
        GgufLocation::File(path) => {
            let (header, model) = vramfit_ingest::gguf::read_model(&path)?;
            let source = GgufSource { file: m.to_string(), gguf_version: header.version, file_bytes: header.file_len };
            Ok(Read { model, source, arg: ModelArg::File(m.to_string()), notes: Vec::new() })
        }
        GgufLocation::Hub(r) => read_hub(&r, hub),
    }
}

#[cfg(feature = "hub")]
fn read_hub(r: &vramfit_ingest::gguf::HubGgufRef, hub: &crate::cmd::model_args::HubArgs) -> anyhow::Result<Read> {
    use vramfit_ingest::hub::gguf::{read_cached_gguf, read_gguf};
    use vramfit_ingest::hub::{HubClient, HubSettings};
    let env = |k: &str| std::env::var(k).ok();
    let settings = HubSettings::from_env(&env, hub.offline)?;
    let endpoint = settings.endpoint.clone();
    let revision = hub.revision.clone().unwrap_or_else(|| "main".into());
    // the local Hugging Face cache first (an earlier run cached the header)
    let cached = match &settings.cache_dir {
        Some(dir) => read_cached_gguf(dir, &r.repo, &revision, &r.file)?,
        None => None,
    };
    let (g, mut notes) = match cached {
        Some(g) => {
            let note = format!(
                "header{} from the local Hugging Face cache (read from the Hub by an earlier run)",
                if g.shards > 1 { format!("s of all {} shards", g.shards) } else { String::new() }
            );
            (g, vec![note])
        }
        None => {
            if let Some(why) = &settings.offline_reason {
                bail!(
                    "{}:{}: not in the local Hugging Face cache, and {why} forbids the network: run once online (the header is cached then), or download the file and pass its path",
                    r.repo,
                    r.file
                );
            }
            crate::to_stderr(&format!(
                "vramfit: reading the header of {}/{} (revision {revision}) from {endpoint} by range requests, not the weights",
                r.repo, r.file
            ));
            let client = HubClient::new(settings)?;
            let progress = |m: &str| crate::to_stderr(&format!("vramfit: {m}"));
            let g = read_gguf(&client, &r.repo, &revision, &r.file, &progress)?;
            let mut notes = vec![format!(
                "read from {endpoint}: the header{} by {} range request{} ({} bytes), never the weights",
                if g.shards > 1 { format!(" of all {} shards", g.shards) } else { String::new() },
                g.requests,
                if g.requests == 1 { "" } else { "s" },
                g.bytes_received
            )];
            notes.extend(g.cache_note.clone());
            (g, notes)
        }
    };
    let label = g.label();
    let model = vramfit_ingest::gguf::model_of(&g.header, std::path::Path::new(&r.file), &label)?;
    if revision != "main" {
        notes.push(format!(
            "sized at revision {revision} (commit {}); llama.cpp's --hf-repo downloads the repo's main branch",
            &g.commit[..g.commit.len().min(12)]
        ));
    }
    Ok(Read {
        model,
        source: GgufSource { file: label, gguf_version: g.header.version, file_bytes: g.header.file_len },
        arg: ModelArg::Hub { repo: r.repo.clone(), file: r.file.clone() },
        notes,
    })
}

#[cfg(not(feature = "hub"))]
fn read_hub(r: &vramfit_ingest::gguf::HubGgufRef, _: &crate::cmd::model_args::HubArgs) -> anyhow::Result<Read> {
    bail!(
        "{}:{}: no such local file, and this vramfit was built without the Hub client (cargo feature `hub`)",
        r.repo,
        r.file
    )
}

/// `--mmproj FILE` and `-md FILE` (with `-ngld`, `-ctkd`, `-ctvd`): the
/// projector's and the draft model's headers, read from local files.
fn companions(args: &GgufArgs) -> anyhow::Result<lc::companion::Companions> {
    let local = |flag: &str, f: &str, what: &str| -> anyhow::Result<std::path::PathBuf> {
        let p = std::path::Path::new(f);
        if !f.to_ascii_lowercase().ends_with(".gguf") || !p.is_file() {
            bail!("{flag} {f}: not a local .gguf file: pass the path of {what}");
        }
        Ok(p.to_path_buf())
    };
    let mmproj = match &args.mmproj {
        Some(f) => {
            let p = local("--mmproj", f, "the projector (the mmproj-*.gguf file published beside the model)")?;
            Some(vramfit_ingest::gguf::read_mmproj(&p, !args.no_mmproj_offload)?)
        }
        None => None,
    };
    let draft = match &args.model_draft {
        Some(f) => {
            let p = local("-md/--model-draft", f, "the draft model (a small model of the same vocabulary)")?;
            let (_, model) = vramfit_ingest::gguf::read_model(&p)?;
            let cache = |flag: &str, t: &Option<String>| -> anyhow::Result<GgmlType> {
                match t {
                    Some(t) => GgmlType::parse_cache_type(t).map_err(|e| anyhow::anyhow!("{flag}: {e}")),
                    None => Ok(GgmlType::F16),
                }
            };
            Some(lc::companion::Draft {
                file: f.clone(),
                model: Box::new(model),
                n_gpu_layers: args.gpu_layers_draft,
                cache_type_k: cache("-ctkd/--cache-type-k-draft", &args.cache_type_k_draft)?,
                cache_type_v: cache("-ctvd/--cache-type-v-draft", &args.cache_type_v_draft)?,
                ctx_size: args.ctx_size_draft,
                override_tensor: parse_overrides_of("-otd/--override-tensor-draft", &args.override_tensor_draft)?,
            })
        }
        None => None,
    };
    let speculative = lc::companion::Speculative {
        types: match &args.spec_type {
            Some(t) => lc::companion::SpecType::parse_list(t).map_err(|e| anyhow::anyhow!("--spec-type: {e}"))?,
            None => Vec::new(),
        },
        draft_n_max: args.spec_draft_n_max.unwrap_or(lc::companion::DEFAULT_DRAFT_N_MAX),
    };
    Ok(lc::companion::Companions { mmproj, draft, speculative })
}

/// Run the estimate for a GGUF file: parse the flags, read the file, let
/// core plan and search, let report build and render.
pub fn run(location: GgufLocation, req: &GgufRequest) -> anyhow::Result<Outcome> {
    let GgufRequest { model: m, args, target, hub, json, explain } = *req;
    let Read { model, source, arg, mut notes } = read(m, location, hub)?;
    let split = match &args.tensor_split {
        Some(s) => parse_split(s)?,
        None => Vec::new(),
    };
    let (gpus, target_notes) = gpu_slots(args, target, &split)?;
    notes.extend(target_notes);
    let mut opts = options(args, gpus, split)?;
    opts.companions = companions(args)?;
    // the simulator's own errors (an overflow on sizes a file claims) name the file
    let plan = lc::plan(&model, &opts).with_context(|| m.to_string())?;
    let cmd = lc::command_line(&arg, &model, &opts, &plan);
    let fit = lc::fit_search(&arg, &model, &opts, &plan).with_context(|| m.to_string())?;
    let report = LlamaCppReport::of(&source, &model, &opts, &plan, fit.as_ref(), cmd, notes)?;
    let stdout = if json { report.to_json() } else { report.to_text(explain) };
    Ok(Outcome { stdout, code: if report.fits() { 0 } else { 1 } })
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
    fn vllm_and_deepspeed_spellings() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let out = llama_cpp_short_flags(a(&[
            "vramfit",
            "plan",
            "-tp",
            "2",
            "-pp",
            "2",
            "--num_gpus",
            "8",
            "--max_model_len=8k",
            "--",
            "--a_b",
            "-tp",
        ]));
        assert_eq!(
            out,
            a(&[
                "vramfit",
                "plan",
                "--tp",
                "2",
                "--pp",
                "2",
                "--num-gpus",
                "8",
                "--max-model-len=8k",
                "--",
                "--a_b",
                "-tp"
            ])
        );
        // a value keeps its underscores; -tp is not rewritten where it means nothing
        let out = llama_cpp_short_flags(a(&["vramfit", "mig", "plan", "--service=a_b=llama_x", "-tp"]));
        assert_eq!(out, a(&["vramfit", "mig", "plan", "--service=a_b=llama_x", "-tp"]));
    }

    #[test]
    fn gpu_auto_fits_each_local_gpu_at_its_own_free_memory_in_cuda_order() {
        use vramfit_hw::{Gpu, Machine, MigMode};
        const MIB: u64 = 1 << 20;
        let gpu = |i: u32, used_mib: u64| {
            let mut g = Gpu::new(i, "NVIDIA GeForce RTX 4090");
            g.memory_total_bytes = Some(24564 * MIB);
            g.memory_used_bytes = Some(used_mib * MIB);
            g.memory_reserved_bytes = Some(0);
            g.memory_free_bytes = Some((24564 - used_mib) * MIB);
            g.mig_current = MigMode::Disabled;
            g
        };
        let m = Machine { sources: vec!["NVML".into()], gpus: vec![gpu(0, 8000), gpu(1, 100)], ..Machine::default() };
        // all usable GPUs (0), by index, each at its own free memory
        let t = vramfit_hw::select::from_machine(&m, 0, &Default::default()).unwrap();
        let slots = slots_from_detected(&t).unwrap();
        assert_eq!(slots.len(), 2);
        assert_eq!(slots[0].name, "GPU 0 NVIDIA GeForce RTX 4090 (free memory)");
        assert_eq!(slots[0].memory_bytes, Some((24564 - 8000) * MIB));
        assert_eq!(slots[1].memory_bytes, Some((24564 - 100) * MIB));
        // -ts 1 (one GPU): the freest
        let t = vramfit_hw::select::from_machine(&m, 1, &Default::default()).unwrap();
        let slots = slots_from_detected(&t).unwrap();
        assert_eq!(slots.len(), 1);
        assert!(slots[0].name.starts_with("GPU 1 "), "{}", slots[0].name);
        // more shares than GPUs
        assert!(vramfit_hw::select::from_machine(&m, 3, &Default::default()).is_err());
    }

    #[test]
    fn split_parsing() {
        assert_eq!(parse_split("3,1").unwrap(), vec![3.0, 1.0]);
        assert!(parse_split("a,1").is_err());
        assert!(parse_split("0,0").is_err());
    }
}
