//! A multimodal projector (`--mmproj FILE`, llama.cpp's tools/mtmd) read
//! from its GGUF header: `general.architecture` `clip`, the encoder shapes
//! under `clip.vision.*` / `clip.audio.*` and the tensor infos, never the
//! weights. The keys are those `clip_model_loader::load_hparams`
//! (tools/mtmd/clip.cpp) reads: `clip.has_vision_encoder`,
//! `clip.has_audio_encoder`, `clip.{vision,audio}.{block_count,
//! embedding_length, feed_forward_length, attention.head_count,
//! projection_dim}`, `clip.vision.image_size`, `clip.vision.patch_size`,
//! `clip.audio.num_mel_bins`.

use super::{GgufHeader, ModelError};
use vramfit_llamacpp::companion::{ClipEncoder, ClipInput, Mmproj};

/// `warmup_audio_size` (mel frames) of `clip_hparams` (tools/mtmd/clip.cpp):
/// the audio warm-up input when the projector has an audio encoder.
pub const WARMUP_AUDIO_FRAMES: u64 = 3000;

fn u64_key(h: &GgufHeader, key: &str) -> Result<Option<u64>, ModelError> {
    match h.get(key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| ModelError::Bad {
            key: key.into(),
            expected: "an unsigned integer".into(),
            found: v.describe(),
        }),
    }
}

fn required(h: &GgufHeader, key: &str) -> Result<u64, ModelError> {
    match u64_key(h, key)? {
        Some(v) if v > 0 => Ok(v),
        Some(_) => Err(ModelError::Bad { key: key.into(), expected: "at least 1".into(), found: "0".into() }),
        None => Err(ModelError::Missing { key: key.into(), arch: "clip".into() }),
    }
}

fn flag(h: &GgufHeader, key: &str) -> bool {
    h.get(key).and_then(|v| v.as_bool()).unwrap_or(false)
}

/// The encoder under `clip.{prefix}.*` with the given warm-up input.
fn encoder(h: &GgufHeader, prefix: &str, input: ClipInput) -> Result<ClipEncoder, ModelError> {
    let k = |s: &str| format!("clip.{prefix}.{s}");
    let n_embd = required(h, &k("embedding_length"))?;
    Ok(ClipEncoder {
        n_layer: required(h, &k("block_count"))?,
        n_embd,
        n_head: required(h, &k("attention.head_count"))?,
        n_ff: required(h, &k("feed_forward_length"))?,
        projection_dim: u64_key(h, &k("projection_dim"))?.unwrap_or(n_embd),
        input,
    })
}

/// The projector of a header. A file that is not a projector
/// (`general.architecture` other than `clip`) is refused, as llama.cpp
/// refuses it ("clip_init: failed to load model"), saying what to pass.
pub fn mmproj_from_header(h: &GgufHeader, file: &str, offload: bool) -> Result<Mmproj, ModelError> {
    let arch = h.get("general.architecture").and_then(|v| v.as_str()).unwrap_or("");
    if arch != "clip" {
        return Err(ModelError::Bad {
            key: "general.architecture".into(),
            expected: "'clip' (a projector: the mmproj-*.gguf file published beside the model)".into(),
            found: format!("'{arch}'"),
        });
    }
    // older projectors have no has_*_encoder keys: a vision encoder
    let legacy = h.get("clip.has_vision_encoder").is_none() && h.get("clip.has_audio_encoder").is_none();
    let mut encoders = Vec::new();
    if flag(h, "clip.has_vision_encoder") || legacy {
        let size = required(h, "clip.vision.image_size")?;
        let patch_size = required(h, "clip.vision.patch_size")?;
        let class_token = h.tensors.iter().any(|t| t.name == "v.class_embd");
        encoders.push(encoder(h, "vision", ClipInput::Image { size, patch_size, class_token })?);
    }
    if flag(h, "clip.has_audio_encoder") {
        let n_mel_bins = required(h, "clip.audio.num_mel_bins")?;
        encoders.push(encoder(h, "audio", ClipInput::Audio { frames: WARMUP_AUDIO_FRAMES, n_mel_bins })?);
    }
    if encoders.is_empty() {
        return Err(ModelError::Bad {
            key: "clip.has_vision_encoder".into(),
            expected: "a vision or audio encoder".into(),
            found: "neither".into(),
        });
    }
    for e in &encoders {
        e.input.positions().map_err(|e| ModelError::Core(e.to_string()))?;
    }
    Ok(Mmproj {
        file: file.to_string(),
        tensors: h.tensors.iter().map(|t| (t.ty, t.ne.clone(), t.bytes)).collect(),
        encoders,
        offload,
    })
}
