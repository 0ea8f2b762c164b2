//! What `llama-server` loads beside the model and where its bytes go: a
//! multimodal projector (`--mmproj FILE`, tools/mtmd) and a draft model for
//! speculative decoding (`-md FILE`). Each adds its own lines to the devices
//! of the plan ([`crate::plan::plan`] calls [`add_mmproj`] and, after
//! planning the draft model with the target's launch, [`add_draft`]),
//! labelled as llama.cpp logs them, so the fit and the searches include them.
//! Imports no module that imports it (`plan` and `options` use it).

use crate::ggml::GgmlType;
use crate::graph::Device;
use crate::lines::{DeviceMemory, LineKind, MemoryLine};
use crate::model::LlamaModel;
use crate::placement::alloc_size;
use vramfit_core::units::{add, product, sum};
use vramfit_core::{CoreError, Explanation};

/// The projector's encoder shape, read from its GGUF's `clip.vision.*` or
/// `clip.audio.*` keys (`clip_model_loader::load_hparams`, tools/mtmd/clip.cpp).
#[derive(Debug, Clone, PartialEq)]
pub struct ClipEncoder {
    /// `clip.{vision,audio}.block_count`
    pub n_layer: u64,
    /// `embedding_length`
    pub n_embd: u64,
    /// `attention.head_count`
    pub n_head: u64,
    /// `feed_forward_length`
    pub n_ff: u64,
    /// `projection_dim` (the language model's embedding width it feeds)
    pub projection_dim: u64,
    /// what the warm-up feeds it
    pub input: ClipInput,
}

/// The dummy input `clip_model_loader::warmup` reserves the compute buffer
/// with (tools/mtmd/clip.cpp: "warmup with image size = %d x %d" /
/// "warmup with audio size = %d").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClipInput {
    /// a square RGB image of `warmup_image_size` pixels a side (by default
    /// `clip.vision.image_size`, `load_hparams`: "default warmup value"),
    /// cut in patches of `patch_size`; `class_token`: a `v.class_embd`
    /// position is prepended
    Image { size: u64, patch_size: u64, class_token: bool },
    /// `warmup_audio_size` (3000 mel frames, `clip_hparams`) × `n_mel_bins`
    Audio { frames: u64, n_mel_bins: u64 },
}

impl ClipInput {
    /// Positions the encoder attends over: (size / patch)² (+1 class token)
    /// for an image; for audio the Whisper-style encoder's two convolutions
    /// (the second with stride 2) halve the frames.
    pub fn positions(&self) -> Result<u64, CoreError> {
        match *self {
            ClipInput::Image { size, patch_size, class_token } => {
                if patch_size == 0 || size < patch_size {
                    return Err(CoreError::invalid(
                        "clip.vision.patch_size",
                        format!("patch size {patch_size} does not fit image size {size}"),
                    ));
                }
                let side = size / patch_size;
                add("projector positions", product("projector positions", &[side, side])?, u64::from(class_token))
            }
            ClipInput::Audio { frames, .. } => Ok(frames.div_ceil(2)),
        }
    }

    /// f32 elements of the raw input (`inp_raw`: W × H × 3, or frames × mel bins).
    fn input_elements(&self) -> Result<u64, CoreError> {
        match *self {
            ClipInput::Image { size, .. } => product("projector input", &[size, size, 3]),
            ClipInput::Audio { frames, n_mel_bins } => product("projector input", &[frames, n_mel_bins]),
        }
    }
}

/// `--mmproj FILE`: the projector as its GGUF header describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mmproj {
    /// the file as given
    pub file: String,
    /// (type, ne, bytes) of every tensor
    pub tensors: Vec<(GgmlType, Vec<u64>, u64)>,
    /// the vision and/or audio encoder (`clip.has_vision_encoder`,
    /// `clip.has_audio_encoder`): mtmd_context builds one clip context,
    /// with its own compute buffer, for each
    pub encoders: Vec<ClipEncoder>,
    /// `--no-mmproj-offload` clears it: weights and compute on the host
    pub offload: bool,
}

/// `-md FILE`: the draft model of llama-server's speculative decoding and
/// its own flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub file: String,
    pub model: Box<LlamaModel>,
    /// `-ngld/--gpu-layers-draft` (None: all, as `-ngl`)
    pub n_gpu_layers: Option<u64>,
    /// `-ctkd/--cache-type-k-draft`, `-ctvd/--cache-type-v-draft` (default f16)
    pub cache_type_k: GgmlType,
    pub cache_type_v: GgmlType,
    /// `-cd/--ctx-size-draft`: the draft context's size in builds before
    /// [`crate::build::SHARED_DRAFT_CONTEXT`] (`params_dft.n_ctx`, server
    /// `load_model`); the current build sizes it at the target's `n_ctx`
    pub ctx_size: Option<u64>,
    /// `-otd/--override-tensor-draft PATTERN=BUFT`: the draft's `-ot`
    /// (`params_dft.tensor_buft_overrides = speculative.tensor_buft_overrides`)
    pub override_tensor: Vec<(String, Device)>,
}

/// `--spec-type` values (common/common.h `enum common_speculative_type`,
/// names of `common_speculative_type_from_name_map` in
/// common/speculative.cpp; docs/speculative.md lists `none|draft-simple|
/// draft-eagle3|draft-dflash|draft-dspark|draft-mtp|ngram-cache|
/// ngram-simple|ngram-map-k|ngram-map-k4v|ngram-mod`). Comma separated, as
/// llama.cpp chains them (PR #22838, b9109).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecType {
    None,
    DraftSimple,
    DraftEagle3,
    DraftDflash,
    DraftDspark,
    DraftMtp,
    NgramCache,
    NgramSimple,
    NgramMapK,
    NgramMapK4v,
    NgramMod,
}

/// `common_params_speculative_draft::n_max`, the default of
/// `--spec-draft-n-max` (common/common.h, current build: 3).
pub const DEFAULT_DRAFT_N_MAX: u64 = 3;
/// `common_params_speculative_ngram_map::size_m` (common/common.h: 48),
/// the draft length of ngram-simple, ngram-map-k and ngram-map-k4v.
pub const NGRAM_MAP_SIZE_M: u64 = 48;
/// `common_params_speculative_ngram_mod::n_max` (common/common.h: 64).
pub const NGRAM_MOD_N_MAX: u64 = 64;
/// ngram-cache's draft length in `common_speculative_n_max` (8).
pub const NGRAM_CACHE_N_MAX: u64 = 8;
/// Largest `--spec-draft-n-max` vramfit takes (llama.cpp's `--spec-ngram-*`
/// sizes are validated to 1..1024, common/arg.cpp).
pub const MAX_DRAFT_N_MAX: u64 = 1024;

impl SpecType {
    pub const ALL: [SpecType; 11] = [
        SpecType::None,
        SpecType::DraftSimple,
        SpecType::DraftEagle3,
        SpecType::DraftDflash,
        SpecType::DraftDspark,
        SpecType::DraftMtp,
        SpecType::NgramCache,
        SpecType::NgramSimple,
        SpecType::NgramMapK,
        SpecType::NgramMapK4v,
        SpecType::NgramMod,
    ];

    /// llama.cpp's name.
    pub fn name(self) -> &'static str {
        match self {
            SpecType::None => "none",
            SpecType::DraftSimple => "draft-simple",
            SpecType::DraftEagle3 => "draft-eagle3",
            SpecType::DraftDflash => "draft-dflash",
            SpecType::DraftDspark => "draft-dspark",
            SpecType::DraftMtp => "draft-mtp",
            SpecType::NgramCache => "ngram-cache",
            SpecType::NgramSimple => "ngram-simple",
            SpecType::NgramMapK => "ngram-map-k",
            SpecType::NgramMapK4v => "ngram-map-k4v",
            SpecType::NgramMod => "ngram-mod",
        }
    }

    /// A comma-separated `--spec-type` value; an unknown name is an error
    /// listing llama.cpp's ("unknown speculative type", common/speculative.cpp).
    pub fn parse_list(s: &str) -> Result<Vec<SpecType>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| {
                SpecType::ALL.iter().copied().find(|t| t.name() == n).ok_or_else(|| {
                    let names: Vec<&str> = SpecType::ALL.iter().map(|t| t.name()).collect();
                    format!("'{n}' is not a speculative type: llama.cpp accepts {}", names.join(", "))
                })
            })
            .collect()
    }

    /// The type drafts with a model of its own (`-md`).
    pub fn needs_draft_model(self) -> bool {
        matches!(self, SpecType::DraftSimple | SpecType::DraftEagle3 | SpecType::DraftDflash | SpecType::DraftDspark)
    }

    /// Draft tokens per verification: `common_speculative_n_max`
    /// (common/speculative.cpp) — `draft.n_max` for the model drafters,
    /// the n-gram maps' `size_m`, ngram-mod's `n_max`, 8 for ngram-cache.
    pub fn n_max(self, draft_n_max: u64) -> u64 {
        match self {
            SpecType::None => 0,
            SpecType::DraftSimple
            | SpecType::DraftEagle3
            | SpecType::DraftDflash
            | SpecType::DraftDspark
            | SpecType::DraftMtp => draft_n_max,
            SpecType::NgramSimple | SpecType::NgramMapK | SpecType::NgramMapK4v => NGRAM_MAP_SIZE_M,
            SpecType::NgramMod => NGRAM_MOD_N_MAX,
            SpecType::NgramCache => NGRAM_CACHE_N_MAX,
        }
    }
}

/// `--spec-type` and `--spec-draft-n-max` of a launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speculative {
    /// as given (empty: none given; with `-md` that was draft-simple
    /// before b9464, none since)
    pub types: Vec<SpecType>,
    pub draft_n_max: u64,
}

impl Default for Speculative {
    fn default() -> Self {
        Speculative { types: Vec::new(), draft_n_max: DEFAULT_DRAFT_N_MAX }
    }
}

impl Speculative {
    /// The types in effect: those given; with none given, `-md` means
    /// draft-simple only where `draft_auto` (builds before
    /// [`crate::build::SPEC_TYPE_DEFAULT_NONE`]).
    pub fn effective(&self, has_draft: bool, draft_auto: bool) -> Vec<SpecType> {
        if self.types.is_empty() && has_draft && draft_auto {
            vec![SpecType::DraftSimple]
        } else {
            self.types.iter().copied().filter(|t| *t != SpecType::None).collect()
        }
    }

    /// `common_speculative_n_max`: the most draft tokens any type proposes.
    pub fn n_max(&self, has_draft: bool, draft_auto: bool) -> u64 {
        self.effective(has_draft, draft_auto).iter().map(|t| t.n_max(self.draft_n_max)).max().unwrap_or(0)
    }
}

/// What llama-server loads beside the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Companions {
    pub mmproj: Option<Mmproj>,
    pub draft: Option<Draft>,
    /// `--spec-type`, `--spec-draft-n-max`
    pub speculative: Speculative,
}

/// The projector's lines: its weights and the compute buffer of its warm-up graph.
fn mmproj_lines(p: &Mmproj, flash_attn: bool) -> Result<(Device, Vec<MemoryLine>), CoreError> {
    // clip_init: the projector's backend is the first GPU unless
    // --no-mmproj-offload (mtmd_context_params.use_gpu); its weights are one
    // buffer of that backend's type (ggml_backend_alloc_ctx_tensors_from_buft)
    let dev = if p.offload { Device::Gpu(0) } else { Device::Cpu };
    let mut weights = 0u64;
    for (ty, ne, bytes) in &p.tensors {
        weights = add("projector weights", weights, alloc_size(*ty, ne, *bytes, dev)?)?;
    }
    let buft = match dev {
        Device::Gpu(i) => format!("CUDA{i}"),
        Device::Cpu => "CPU".into(),
    };
    let mut lines = vec![MemoryLine {
        kind: LineKind::Model,
        label: format!("mmproj {buft} model buffer"),
        bytes: weights,
        explain: Explanation::new("Σ the projector's tensors, padded as a model buffer of its backend")
            .term("file", p.file.clone())
            .term("tensors", p.tensors.len() as u64)
            .note("tools/mtmd/clip.cpp clip_model_loader::load_tensors, logged as 'model size: … MiB'"),
    }];
    for e in &p.encoders {
        let n_pos = e.input.positions()?;
        let which = match (p.encoders.len(), e.input) {
            (1, _) => String::new(),
            (_, ClipInput::Image { .. }) => " (vision)".into(),
            (_, ClipInput::Audio { .. }) => " (audio)".into(),
        };
        lines.push(MemoryLine {
            kind: LineKind::Compute,
            label: format!("mmproj {buft} compute buffer{which}"),
            bytes: clip_compute_bytes(e, n_pos, flash_attn)?,
            explain: clip_compute_explain(e, n_pos, flash_attn),
        });
    }
    Ok((dev, lines))
}

/// An upper bound on the projector's compute buffer at warm-up: the raw
/// input, then the largest working set of one encoder block — the residual
/// stream, its norm and Q, K, V (f32, n_pos × n_embd each) with the
/// attention scores KQ (n_head × n_pos² f32, soft-maxed in place) when
/// flash attention is off, or the FFN's up projection and activation
/// (2 × n_pos × n_ff) — and the projector's output (n_pos × projection_dim).
/// ggml's allocator frees a block's tensors before the next block, so the
/// peak is one block deep (tools/mtmd/clip.cpp `clip_graph::build_vit`,
/// `build_attn`: `ggml_soft_max_ext` on `kq` without flash attention,
/// `ggml_flash_attn_ext` with it).
pub fn clip_compute_bytes(e: &ClipEncoder, n_pos: u64, flash_attn: bool) -> Result<u64, CoreError> {
    let what = "projector compute buffer";
    let stream = product(what, &[n_pos, e.n_embd])?;
    let attn = if flash_attn {
        // Q, K, V, the f16 casts of K and V (counted at f32: an upper bound) and the output
        product(what, &[stream, 6])?
    } else {
        sum(what, &[product(what, &[stream, 5])?, product(what, &[e.n_head, n_pos, n_pos])?])?
    };
    let ffn = sum(what, &[product(what, &[stream, 2])?, product(what, &[n_pos, e.n_ff, 2])?])?;
    let block = sum(what, &[stream, attn.max(ffn)])?;
    let out = product(what, &[n_pos, e.projection_dim.max(e.n_embd)])?;
    let elements = sum(what, &[e.input.input_elements()?, block, out])?;
    product(what, &[elements, 4])
}

fn clip_compute_explain(e: &ClipEncoder, n_pos: u64, flash_attn: bool) -> Explanation {
    let input = match e.input {
        ClipInput::Image { size, patch_size, .. } => format!("image {size}×{size}, patches of {patch_size}"),
        ClipInput::Audio { frames, n_mel_bins } => format!("audio {frames} frames × {n_mel_bins} mel bins"),
    };
    Explanation::new(if flash_attn {
        "4 B × (input + n_pos·n_embd + max(6·n_pos·n_embd, 2·n_pos·n_embd + 2·n_pos·n_ff) + n_pos·max(projection_dim, n_embd))"
    } else {
        "4 B × (input + n_pos·n_embd + max(5·n_pos·n_embd + n_head·n_pos², 2·n_pos·n_embd + 2·n_pos·n_ff) + n_pos·max(projection_dim, n_embd))"
    })
    .term("warm-up input", input)
    .term("positions (n_pos)", n_pos)
    .term("n_embd / n_head / n_ff", format!("{} / {} / {}", e.n_embd, e.n_head, e.n_ff))
    .term("encoder blocks", e.n_layer)
    .term("flash attention", flash_attn)
    .note("an upper bound over one encoder block's live tensors, approximate: tools/mtmd/clip.cpp warmup → reserve_compute_meta (ggml_backend_sched_reserve), logged as '<buffer type> compute buffer size'")
}

/// Add the projector's lines (`--mmproj`) to its device and say what was assumed.
pub fn add_mmproj(
    gpus: &mut [DeviceMemory],
    host: &mut DeviceMemory,
    notes: &mut Vec<String>,
    p: &Mmproj,
    flash_attn: bool,
) -> Result<(), CoreError> {
    if p.offload && gpus.is_empty() {
        return Err(CoreError::invalid(
            "mmproj",
            "the projector goes to the first GPU, and this launch has none: add --no-mmproj-offload (or give --gpu)",
        ));
    }
    let (dev, lines) = mmproj_lines(p, flash_attn)?;
    push_lines(device_mut(gpus, host, dev), lines)?;
    let positions =
        p.encoders.iter().map(|e| e.input.positions().map(|n| n.to_string())).collect::<Result<Vec<_>, _>>()?;
    notes.push(format!(
        "--mmproj {}: the projector's weights and its warm-up compute buffer ({} positions) on {}; the compute buffer is an upper bound (approximate), and projectors that warm up with their own image size (dynamic-resolution ones) may reserve a different one",
        p.file,
        positions.join(" + "),
        if p.offload { "CUDA0" } else { "the host (--no-mmproj-offload)" }
    ));
    Ok(())
}

/// What the draft model's own plan came to, for [`add_draft`].
pub struct DraftPlanned<'a> {
    pub gpus: &'a [DeviceMemory],
    pub host: &'a DeviceMemory,
    /// slots offloaded
    pub n_gpu_layers: u64,
    pub n_ctx_seq: u64,
    pub streams: u64,
    /// draft contexts: 1 (one for all slots, from b9109), else one per slot
    pub contexts: u64,
}

/// Add the draft model's lines (`-md`), planned by [`crate::plan::plan`]
/// with the launch of `crate::plan::draft_options`, to the target's devices.
pub fn add_draft(
    gpus: &mut [DeviceMemory],
    host: &mut DeviceMemory,
    notes: &mut Vec<String>,
    d: &Draft,
    dp: DraftPlanned,
) -> Result<(), CoreError> {
    for (i, g) in dp.gpus.iter().enumerate() {
        push_lines(device_mut(gpus, host, Device::Gpu(i as u32)), draft_lines(g, dp.contexts)?)?;
    }
    push_lines(host, draft_lines(dp.host, dp.contexts)?)?;
    if dp.contexts > 1 {
        notes.push(format!(
            "-md {}: the draft model's weights ({} of {} slots on GPUs) once, and {} draft contexts — one per slot, as llama-server built them before b{} (server init: slot.ctx_dft = llama_init_from_model(model_dft, cparams_dft)) — each with a KV cache of {} cells, its compute buffer and its output buffer",
            d.file,
            dp.n_gpu_layers,
            d.model.n_layer + 1,
            dp.contexts,
            crate::build::SHARED_DRAFT_CONTEXT,
            dp.n_ctx_seq
        ));
    } else {
        notes.push(format!(
            "-md {}: the draft model's weights ({} of {} slots on GPUs), KV cache ({} cells per sequence, {} sequence(s)) and compute buffer, with the target's -c, -np, -b, -ub and -fa (common_base_params_to_speculative, common/speculative.cpp)",
            d.file,
            dp.n_gpu_layers,
            d.model.n_layer + 1,
            dp.n_ctx_seq,
            dp.streams
        ));
    }
    Ok(())
}

/// The companions' llama-server flags, for the command line.
pub fn command_flags(c: &Companions) -> String {
    let q = crate::lines::shell_quote;
    let mut s = String::new();
    if let Some(p) = &c.mmproj {
        s.push_str(&format!(" --mmproj {}", q(&p.file)));
        if !p.offload {
            s.push_str(" --no-mmproj-offload");
        }
    }
    if let Some(d) = &c.draft {
        s.push_str(&format!(" -md {}", q(&d.file)));
        if let Some(n) = d.n_gpu_layers {
            s.push_str(&format!(" -ngld {n}"));
        }
        if d.cache_type_k != GgmlType::F16 {
            s.push_str(&format!(" -ctkd {}", d.cache_type_k));
        }
        if d.cache_type_v != GgmlType::F16 {
            s.push_str(&format!(" -ctvd {}", d.cache_type_v));
        }
        if let Some(n) = d.ctx_size {
            s.push_str(&format!(" -cd {n}"));
        }
        for (pat, dev) in &d.override_tensor {
            let buft = match dev {
                Device::Cpu => "CPU".to_string(),
                Device::Gpu(i) => format!("CUDA{i}"),
            };
            s.push_str(&format!(" -otd {}", q(&format!("{pat}={buft}"))));
        }
    }
    let spec = &c.speculative;
    if !spec.types.is_empty() {
        let names: Vec<&str> = spec.types.iter().map(|t| t.name()).collect();
        s.push_str(&format!(" --spec-type {}", names.join(",")));
    }
    if spec.draft_n_max != DEFAULT_DRAFT_N_MAX {
        s.push_str(&format!(" --spec-draft-n-max {}", spec.draft_n_max));
    }
    s
}

/// The draft plan's lines, labelled `draft: …` (its CUDA context reserve is
/// the process's, already counted); with one draft context per slot
/// (`contexts` > 1) every line but the weights is that many times over.
fn draft_lines(d: &DeviceMemory, contexts: u64) -> Result<Vec<MemoryLine>, CoreError> {
    d.lines
        .iter()
        .filter(|l| l.kind != LineKind::Reserve && l.bytes > 0)
        .map(|l| {
            if contexts > 1 && l.kind != LineKind::Model {
                Ok(MemoryLine {
                    label: format!("draft: {} × {contexts} slot contexts", l.label),
                    bytes: product("draft contexts", &[l.bytes, contexts])?,
                    explain: l.explain.clone().note(format!(
                        "× {contexts}: one draft context per slot (llama-server before b{})",
                        crate::build::SHARED_DRAFT_CONTEXT
                    )),
                    ..l.clone()
                })
            } else {
                Ok(MemoryLine { label: format!("draft: {}", l.label), ..l.clone() })
            }
        })
        .collect()
}

fn device_mut<'a>(gpus: &'a mut [DeviceMemory], host: &'a mut DeviceMemory, d: Device) -> &'a mut DeviceMemory {
    match d {
        Device::Gpu(i) if (i as usize) < gpus.len() => &mut gpus[i as usize],
        _ => host,
    }
}

/// Append lines before the device's reserve line and recompute its total.
fn push_lines(dev: &mut DeviceMemory, lines: Vec<MemoryLine>) -> Result<(), CoreError> {
    let at = dev.lines.iter().position(|l| l.kind == LineKind::Reserve).unwrap_or(dev.lines.len());
    dev.lines.splice(at..at, lines);
    dev.total_bytes = sum("device total", &dev.lines.iter().map(|l| l.bytes).collect::<Vec<_>>())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CLIP ViT-L/14 at 336 px (LLaVA-1.5's projector: clip.vision.image_size
    /// 336, patch_size 14, embedding_length 1024, head_count 16,
    /// feed_forward_length 4096, projection_dim 768, a class token):
    /// n_pos = (336 / 14)² + 1 = 24² + 1 = 577.
    fn vit_l() -> ClipEncoder {
        ClipEncoder {
            n_layer: 23,
            n_embd: 1024,
            n_head: 16,
            n_ff: 4096,
            projection_dim: 768,
            input: ClipInput::Image { size: 336, patch_size: 14, class_token: true },
        }
    }

    #[test]
    fn warmup_positions_follow_clip_cpp() {
        assert_eq!(vit_l().input.positions().unwrap(), 577);
        // whisper-style audio: warmup_audio_size 3000 frames, stride-2 conv → 1500
        assert_eq!(ClipInput::Audio { frames: 3000, n_mel_bins: 128 }.positions().unwrap(), 1500);
        let bad = ClipInput::Image { size: 10, patch_size: 14, class_token: false };
        assert!(bad.positions().is_err());
    }

    /// Hand-worked, flash attention off:
    /// input 336·336·3 = 338,688; stream = 577·1024 = 590,848;
    /// attention = 5·590,848 + 16·577² = 2,954,240 + 5,326,864 = 8,281,104;
    /// FFN = 2·590,848 + 2·577·4096 = 1,181,696 + 4,726,784 = 5,908,480;
    /// block = 590,848 + 8,281,104 = 8,871,952; out = 577·1024 = 590,848;
    /// total = (338,688 + 8,871,952 + 590,848) · 4 = 9,801,488 · 4 = 39,205,952 B.
    /// With flash attention: attention = 6·590,848 = 3,545,088 < FFN, block =
    /// 590,848 + 5,908,480 = 6,499,328; (338,688 + 6,499,328 + 590,848)·4 = 29,715,456 B.
    #[test]
    fn clip_compute_hand_worked() {
        assert_eq!(clip_compute_bytes(&vit_l(), 577, false).unwrap(), 39_205_952);
        assert_eq!(clip_compute_bytes(&vit_l(), 577, true).unwrap(), 29_715_456);
    }
}
