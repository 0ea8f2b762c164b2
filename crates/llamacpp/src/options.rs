//! The launch flags of one llama.cpp run, their defaults and their bounds,
//! checked in one place: [`LlamaCppOptions::validate`]. An [`OptionsError`]
//! names the option by [`OptionField`], which a front end maps to its own
//! flag (the CLI: `-np/--parallel`).

use crate::compute::GraphEra;
use crate::ggml::GgmlType;
use crate::placement::OffloadOrder;
use serde::{Deserialize, Serialize};
use std::fmt;

/// llama.cpp's `-c` default (`common_params::n_ctx`, `common/common.h`,
/// 4096 in the builds the calibration logs come from).
pub const DEFAULT_CTX_SIZE: u64 = 4096;
/// llama.cpp's `-b` default (`common_params::n_batch`, `common/common.h`).
pub const DEFAULT_BATCH: u64 = 2048;
/// llama.cpp's `-np` default (`common_params::n_parallel`, `common/common.h`).
pub const DEFAULT_PARALLEL: u64 = 1;
/// llama.cpp's `-ub` default (`common_params::n_ubatch`), defined in core
/// beside `--sliding-window-cache llamacpp`, which uses it too.
pub const DEFAULT_UBATCH: u64 = vramfit_core::workload::defaults::LLAMACPP_UBATCH;

/// Largest `-c`: a context past 2^31 tokens is no real launch.
pub const MAX_CTX_SIZE: u64 = crate::model::limits::MAX_CTX;
/// Largest `-b`.
pub const MAX_BATCH: u64 = 1 << 24;
/// Largest `-ub`.
pub const MAX_UBATCH: u64 = 1 << 20;
/// Largest `-np`: llama.cpp refuses more sequences (`LLAMA_MAX_SEQ 256`,
/// `src/llama-cparams.h`; "n_seq_max must be <= 256" from the
/// `llama_context` constructor).
pub const MAX_PARALLEL: u64 = 256;
/// Most GPUs one llama.cpp process uses (`GGML_CUDA_MAX_DEVICES 16`,
/// `ggml/src/ggml-cuda/common.cuh`); also the most `-ts` shares.
pub const MAX_GPUS: u64 = 16;

/// `--flash-attn on|off|auto` (llama.cpp's default is auto).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FlashAttn {
    #[default]
    Auto,
    On,
    Off,
}

impl std::str::FromStr for FlashAttn {
    type Err = String;
    /// llama.cpp's spellings (`on|off|auto`, and the older `1|0|true|false`).
    fn from_str(s: &str) -> Result<FlashAttn, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(FlashAttn::Auto),
            "on" | "1" | "true" => Ok(FlashAttn::On),
            "off" | "0" | "false" => Ok(FlashAttn::Off),
            o => Err(format!("'{o}' is not on, off or auto")),
        }
    }
}

/// A GPU the plan places layers on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSlot {
    /// the card as named (`--gpu`), or empty when only a count is known
    pub name: String,
    /// memory to fit in (as nvidia-smi reports it, or free memory for
    /// `--gpu auto`); `None`: not known, the plan only sizes the buffers
    pub memory_bytes: Option<u64>,
}

/// The launch flags (llama.cpp names in the docs of each field).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaCppOptions {
    /// `-c` (0: the model's training context)
    pub ctx_size: u64,
    /// `-b`
    pub batch: u64,
    /// `-ub`
    pub ubatch: u64,
    /// `-np`
    pub parallel: u64,
    /// `--kv-unified`
    pub kv_unified: bool,
    /// `-ctk`, `-ctv`
    pub cache_type_k: GgmlType,
    pub cache_type_v: GgmlType,
    /// `-fa`
    pub flash_attn: FlashAttn,
    /// `-ngl` (None: all layers, llama.cpp's `-ngl 999`)
    pub n_gpu_layers: Option<u64>,
    /// `-ts` (empty: proportional to GPU memory, as llama.cpp splits by free memory)
    pub tensor_split: Vec<f64>,
    pub gpus: Vec<GpuSlot>,
    /// `--no-kv-offload` clears it
    pub offload_kqv: bool,
    /// `--no-op-offload` clears it
    pub op_offload: bool,
    /// `--swa-full`
    pub swa_full: bool,
    /// `--no-mmap` clears it
    pub mmap: bool,
    /// the CPU backend repacks host matrices of some types (x86-64 AVX2
    /// rules; `--no-repack` clears it)
    pub cpu_repack: bool,
    /// bytes per GPU outside llama.cpp's buffers (CUDA context, cuBLAS)
    pub gpu_reserve: u64,
    pub order: OffloadOrder,
    pub era: GraphEra,
    /// `--llamacpp-build N`: the llama.cpp build whose rules apply
    /// ([`crate::build::BuildRules`]); `None`: the current build
    pub build: Option<u64>,
    /// `--n-cpu-moe N`: the routed experts of the first N layers stay on
    /// the host (`--cpu-moe`: every layer, given as the layer count or more)
    pub n_cpu_moe: u64,
    /// `-ot/--override-tensor PATTERN=BUFT`: (pattern, device) in order;
    /// the first pattern found in a tensor's name places it
    pub override_tensor: Vec<(String, crate::graph::Device)>,
    /// `--mmproj FILE`, `-md FILE`: what llama-server loads beside the
    /// model ([`crate::companion`])
    pub companions: crate::companion::Companions,
}

impl Default for LlamaCppOptions {
    fn default() -> Self {
        LlamaCppOptions {
            ctx_size: DEFAULT_CTX_SIZE,
            batch: DEFAULT_BATCH,
            ubatch: DEFAULT_UBATCH,
            parallel: DEFAULT_PARALLEL,
            kv_unified: false,
            cache_type_k: GgmlType::F16,
            cache_type_v: GgmlType::F16,
            flash_attn: FlashAttn::Auto,
            n_gpu_layers: None,
            tensor_split: Vec::new(),
            gpus: Vec::new(),
            offload_kqv: true,
            op_offload: true,
            swa_full: false,
            mmap: true,
            cpu_repack: true,
            gpu_reserve: vramfit_core::runtime::DEFAULT_CUDA_CONTEXT,
            order: OffloadOrder::OutputFirst,
            era: GraphEra::Current,
            build: None,
            n_cpu_moe: 0,
            override_tensor: Vec::new(),
            companions: crate::companion::Companions::default(),
        }
    }
}

/// `n_cpu_moe` of `--cpu-moe`: every layer's experts on the host.
pub const CPU_MOE_ALL: u64 = u32::MAX as u64;

/// Largest `--llamacpp-build`: llama.cpp's release tags count commits
/// (b9479 in June 2026); a number past a million is a typo.
pub const MAX_BUILD: u64 = 1_000_000;

/// A launch option an error is about. [`OptionField::id`] is its stable
/// name: llama.cpp's long flag (and vramfit's), or `gpu` for the GPU list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionField {
    CtxSize,
    Batch,
    Ubatch,
    Parallel,
    CacheTypeK,
    CacheTypeV,
    TensorSplit,
    /// the GPUs of the launch (vramfit's `--gpu`; llama.cpp uses the visible devices)
    Gpus,
    /// vramfit's `--llamacpp-build`: which llama.cpp build's rules apply
    Build,
}

impl OptionField {
    pub const ALL: [OptionField; 9] = [
        OptionField::CtxSize,
        OptionField::Batch,
        OptionField::Ubatch,
        OptionField::Parallel,
        OptionField::CacheTypeK,
        OptionField::CacheTypeV,
        OptionField::TensorSplit,
        OptionField::Gpus,
        OptionField::Build,
    ];

    /// Stable id: the long flag without its dashes.
    pub fn id(self) -> &'static str {
        match self {
            OptionField::CtxSize => "ctx-size",
            OptionField::Batch => "batch-size",
            OptionField::Ubatch => "ubatch-size",
            OptionField::Parallel => "parallel",
            OptionField::CacheTypeK => "cache-type-k",
            OptionField::CacheTypeV => "cache-type-v",
            OptionField::TensorSplit => "tensor-split",
            OptionField::Gpus => "gpu",
            OptionField::Build => "llamacpp-build",
        }
    }

    /// llama.cpp's short flag, when it has one.
    pub fn short_flag(self) -> Option<&'static str> {
        match self {
            OptionField::CtxSize => Some("-c"),
            OptionField::Batch => Some("-b"),
            OptionField::Ubatch => Some("-ub"),
            OptionField::Parallel => Some("-np"),
            OptionField::CacheTypeK => Some("-ctk"),
            OptionField::CacheTypeV => Some("-ctv"),
            OptionField::TensorSplit => Some("-ts"),
            OptionField::Gpus | OptionField::Build => None,
        }
    }
}

/// What is wrong with one launch option.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionsError {
    /// a count of 0
    Zero { field: OptionField },
    /// a count above its bound (`limit`, and why it is the bound)
    TooLarge { field: OptionField, value: u64, limit: u64, why: &'static str },
    /// a type `--cache-type-k/-v` does not accept
    NotACacheType { field: OptionField, ty: GgmlType },
    /// `-ts` shares that are negative, not finite or all zero
    Shares,
    /// more `-ts` shares than GPUs
    SharesOverGpus { shares: usize, gpus: usize },
}

impl OptionsError {
    /// The option the error is about.
    pub fn field(&self) -> OptionField {
        match self {
            OptionsError::Zero { field } | OptionsError::TooLarge { field, .. } => *field,
            OptionsError::NotACacheType { field, .. } => *field,
            OptionsError::Shares | OptionsError::SharesOverGpus { .. } => OptionField::TensorSplit,
        }
    }

    /// What is wrong, without naming the option.
    pub fn reason(&self) -> String {
        match self {
            OptionsError::Zero { .. } => "must be at least 1".into(),
            OptionsError::TooLarge { value, limit, why, .. } => format!("{value} is more than {limit} ({why})"),
            OptionsError::NotACacheType { ty, .. } => {
                let names: Vec<&str> = GgmlType::CACHE_TYPES.iter().map(|t| t.name()).collect();
                format!("{ty} is not a KV cache type: llama.cpp accepts {}", names.join(", "))
            }
            OptionsError::Shares => "shares must be finite, non-negative and not all zero".into(),
            OptionsError::SharesOverGpus { shares, gpus } => format!("{shares} shares for {gpus} GPUs"),
        }
    }

    /// The error as a sentence, with `name` naming the option.
    pub fn render(&self, name: &dyn Fn(OptionField) -> String) -> String {
        format!("{}: {}", name(self.field()), self.reason())
    }
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&|x| format!("--{}", x.id())))
    }
}

impl std::error::Error for OptionsError {}

impl From<OptionsError> for vramfit_core::CoreError {
    fn from(e: OptionsError) -> Self {
        vramfit_core::CoreError::invalid(e.field().id(), e.reason())
    }
}

fn count(field: OptionField, value: u64, limit: u64, why: &'static str) -> Result<(), OptionsError> {
    if value == 0 {
        Err(OptionsError::Zero { field })
    } else if value > limit {
        Err(OptionsError::TooLarge { field, value, limit, why })
    } else {
        Ok(())
    }
}

/// `-ts` shares on their own: finite, non-negative, not all zero, at most
/// [`MAX_GPUS`] of them.
pub fn check_shares(shares: &[f64]) -> Result<(), OptionsError> {
    let n = shares.len() as u64;
    count(OptionField::TensorSplit, n, MAX_GPUS, "GGML_CUDA_MAX_DEVICES: one share per GPU")?;
    if shares.iter().any(|s| !s.is_finite() || *s < 0.0) || shares.iter().sum::<f64>() <= 0.0 {
        return Err(OptionsError::Shares);
    }
    Ok(())
}

impl LlamaCppOptions {
    /// Every bound of the launch options, in one place (docs/limits.md
    /// lists them). `-c 0` means the model's context and is checked against
    /// the model when the context is sized; `-ngl` above the layer count
    /// means all layers, as in llama.cpp.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.ctx_size > MAX_CTX_SIZE {
            let why = "no model is trained on more";
            return Err(OptionsError::TooLarge {
                field: OptionField::CtxSize,
                value: self.ctx_size,
                limit: MAX_CTX_SIZE,
                why,
            });
        }
        count(OptionField::Batch, self.batch, MAX_BATCH, "vramfit's bound on a logical batch")?;
        count(OptionField::Ubatch, self.ubatch, MAX_UBATCH, "vramfit's bound on a micro-batch")?;
        count(OptionField::Parallel, self.parallel, MAX_PARALLEL, "llama.cpp's LLAMA_MAX_SEQ")?;
        for (field, ty) in [(OptionField::CacheTypeK, self.cache_type_k), (OptionField::CacheTypeV, self.cache_type_v)]
        {
            if !GgmlType::CACHE_TYPES.contains(&ty) {
                return Err(OptionsError::NotACacheType { field, ty });
            }
        }
        if self.gpus.len() as u64 > MAX_GPUS {
            let value = self.gpus.len() as u64;
            let why = "GGML_CUDA_MAX_DEVICES";
            return Err(OptionsError::TooLarge { field: OptionField::Gpus, value, limit: MAX_GPUS, why });
        }
        if let Some(b) = self.build {
            count(OptionField::Build, b, MAX_BUILD, "llama.cpp's build numbers count commits")?;
        }
        if !self.tensor_split.is_empty() {
            check_shares(&self.tensor_split)?;
            if self.tensor_split.len() > self.gpus.len() {
                return Err(OptionsError::SharesOverGpus { shares: self.tensor_split.len(), gpus: self.gpus.len() });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(o: LlamaCppOptions) -> OptionsError {
        o.validate().unwrap_err()
    }

    #[test]
    fn defaults_are_valid_and_each_bound_names_its_option() {
        let d = LlamaCppOptions::default();
        assert_eq!(d.validate(), Ok(()));
        assert_eq!(
            err(LlamaCppOptions { parallel: 0, ..d.clone() }),
            OptionsError::Zero { field: OptionField::Parallel }
        );
        let e = err(LlamaCppOptions { parallel: MAX_PARALLEL + 1, ..d.clone() });
        assert_eq!(e.field(), OptionField::Parallel);
        assert_eq!(e.to_string(), "--parallel: 257 is more than 256 (llama.cpp's LLAMA_MAX_SEQ)");
        assert_eq!(LlamaCppOptions { parallel: MAX_PARALLEL, ..d.clone() }.validate(), Ok(()));
        assert_eq!(err(LlamaCppOptions { ubatch: 0, ..d.clone() }).field(), OptionField::Ubatch);
        assert_eq!(err(LlamaCppOptions { batch: MAX_BATCH + 1, ..d.clone() }).field(), OptionField::Batch);
        assert_eq!(err(LlamaCppOptions { ctx_size: MAX_CTX_SIZE + 1, ..d.clone() }).field(), OptionField::CtxSize);
        assert_eq!(LlamaCppOptions { ctx_size: 0, ..d.clone() }.validate(), Ok(()), "-c 0: the model's");
        let e = err(LlamaCppOptions { cache_type_v: GgmlType::Q4K, ..d.clone() });
        assert_eq!(e.field(), OptionField::CacheTypeV);
        assert!(e.reason().contains("q8_0"), "{e}");
    }

    #[test]
    fn shares_and_gpus() {
        let gpu = GpuSlot { name: "g".into(), memory_bytes: None };
        let d = LlamaCppOptions { gpus: vec![gpu.clone(); 2], ..LlamaCppOptions::default() };
        assert_eq!(LlamaCppOptions { tensor_split: vec![3.0, 1.0], ..d.clone() }.validate(), Ok(()));
        assert_eq!(err(LlamaCppOptions { tensor_split: vec![0.0, 0.0], ..d.clone() }), OptionsError::Shares);
        assert_eq!(err(LlamaCppOptions { tensor_split: vec![f64::NAN], ..d.clone() }), OptionsError::Shares);
        let e = err(LlamaCppOptions { tensor_split: vec![1.0; 3], ..d.clone() });
        assert_eq!(e, OptionsError::SharesOverGpus { shares: 3, gpus: 2 });
        let e = err(LlamaCppOptions { gpus: vec![gpu; 17], ..d });
        assert_eq!(e.field(), OptionField::Gpus);
        assert!(check_shares(&[1.0; 17]).is_err());
    }

    #[test]
    fn field_ids_are_distinct_and_flash_attn_parses() {
        let mut ids: Vec<&str> = OptionField::ALL.iter().map(|f| f.id()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), OptionField::ALL.len());
        assert_eq!("ON".parse::<FlashAttn>(), Ok(FlashAttn::On));
        assert_eq!("0".parse::<FlashAttn>(), Ok(FlashAttn::Off));
        assert!("maybe".parse::<FlashAttn>().unwrap_err().contains("on, off or auto"));
    }
}
