//! A model as llama.cpp sees it after loading a GGUF: hyper-parameters per
//! layer and the tensor list with the slot each tensor belongs to. Built by
//! `vramfit-ingest` from a GGUF header (or by a test from an architecture);
//! nothing here reads files.

use crate::ggml::GgmlType;
use serde::{Deserialize, Serialize};
use vramfit_core::CoreError;

/// Which of llama.cpp's device slots a weight is loaded into
/// (`LLM_TENSOR_LAYER_INPUT / REPEATING / OUTPUT` in `llama-arch.cpp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "slot", content = "layer")]
pub enum Slot {
    /// token embeddings and friends: always on the host ("there is very
    /// little benefit to offloading the input layer", `llama-model.cpp`)
    Input,
    /// `blk.N.*`
    Layer(u32),
    /// `output.weight`, `output_norm.*`, classifier heads
    Output,
}

/// One tensor info of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    pub ty: GgmlType,
    /// dimensions, innermost first (ggml `ne`)
    pub ne: Vec<u64>,
    /// bytes in the file (`ggml_nbytes`)
    pub bytes: u64,
    /// offset of the data from the start of the data section
    pub offset: u64,
    pub slot: Slot,
}

impl TensorInfo {
    /// Elements (Π ne); a claim past 2^64 is an error, never a wrap (a
    /// 1-bit type packs 8 elements per byte, so a file's byte count does
    /// not bound it).
    pub fn elements(&self) -> Result<u64, CoreError> {
        vramfit_core::units::product(&format!("elements of tensor '{}'", self.name), &self.ne)
    }
}

/// Tensors of one ggml type: how many, their elements and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TypeTally {
    pub tensors: u64,
    pub elements: u64,
    pub bytes: u64,
}

/// Recurrent state of a layer (Mamba, RWKV, gated-delta-net), per sequence,
/// in elements (`n_embd_r` / `n_embd_s` of `llama-hparams.cpp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecurrentState {
    /// convolution / token-shift state
    pub r: u64,
    /// SSM / WKV state
    pub s: u64,
}

/// Hyper-parameters of one repeating layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerHparams {
    pub n_head: u64,
    /// 0: the layer has no KV cache (a recurrent layer of a hybrid)
    pub n_head_kv: u64,
    /// `key_length`: head size of K (and Q)
    pub head_dim_k: u64,
    /// `value_length`: head size of V
    pub head_dim_v: u64,
    /// dense feed-forward width (0 for MoE-only layers)
    pub n_ff: u64,
    /// attends over a sliding window instead of the whole context
    pub sliding: bool,
    /// the layer keeps a recurrent state instead of (or besides) a KV cache
    pub recurrent: Option<RecurrentState>,
    /// the layer keeps no KV cache of its own and attends over this earlier
    /// layer's (Gemma 3n / Gemma 4 KV sharing: `llama_model::create_memory`'s
    /// `reuse` callback, src/llama-model.cpp, b11312)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_from: Option<u32>,
}

impl LayerHparams {
    /// K width per token (`n_embd_k_gqa`).
    pub fn k_width(&self) -> u64 {
        self.n_head_kv * self.head_dim_k
    }

    /// V width per token (`n_embd_v_gqa`).
    pub fn v_width(&self) -> u64 {
        self.n_head_kv * self.head_dim_v
    }

    /// The layer has a KV cache of its own (not a recurrent layer, not one
    /// reading an earlier layer's cache).
    pub fn has_kv(&self) -> bool {
        self.n_head_kv > 0 && self.kv_from.is_none()
    }

    /// The layer runs attention: over its own cache or a shared one.
    pub fn attends(&self) -> bool {
        self.n_head_kv > 0
    }
}

/// Mixture-of-experts shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertSpec {
    pub count: u64,
    pub used: u64,
    /// width of one routed expert (`expert_feed_forward_length`)
    pub ff: u64,
    /// always-on shared experts and their width
    pub shared: u64,
    pub shared_ff: u64,
}

/// How llama.cpp builds the layer graph, as far as memory is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphFamily {
    /// pre-norm, attention then FFN (Llama, Mistral, Qwen, Gemma, Phi-3, …)
    Sequential,
    /// attention and FFN read the same input (GPT-NeoX/Pythia, Phi-2, GPT-J, Falcon, Command-R)
    Parallel,
}

/// A model as llama.cpp loads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaModel {
    pub name: String,
    /// `general.architecture`, as the file names it (displayed; the
    /// architectures the simulator treats on their own terms are looked up
    /// in [`crate::arch::KNOWN_ARCHS`])
    pub arch: String,
    pub n_layer: u32,
    pub n_embd: u64,
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    pub layers: Vec<LayerHparams>,
    /// sliding window span (tokens), when some layers use one
    pub n_swa: u64,
    pub experts: Option<ExpertSpec>,
    /// causal decoder (false: encoder/embedding model, attention over the batch)
    pub causal: bool,
    pub family: GraphFamily,
    /// Q, K and V come from one fused matrix (views of it)
    pub fused_qkv: bool,
    /// per-head norm of Q and K before RoPE (Qwen3, Gemma 3, OLMo 2)
    pub qk_norm: bool,
    /// gate and up projections (SwiGLU/GeGLU) rather than up alone
    pub gated_ffn: bool,
    /// the output head is the token embedding (no `output.weight`): llama.cpp
    /// loads a second copy of it into the output slot
    pub tied_output: bool,
    /// the file carries `attention.key_length_mla` and `value_length_mla`
    /// (both non-zero): llama.cpp's `llama_hparams::is_mla()`
    /// (src/llama-hparams.cpp). Its K cache then holds the compressed
    /// latent (`key_length` = kv_lora_rank + rope) and, from build
    /// [`crate::build::V_LESS_MLA`], no V cache at all.
    #[serde(default)]
    pub mla: bool,
    pub tensors: Vec<TensorInfo>,
    /// what the reader assumed or could not place
    pub notes: Vec<String>,
    /// the multi-token-prediction (NextN) layers the file carries beyond
    /// the trunk, which llama.cpp loads only for `--spec-type draft-mtp`
    /// (see [`NextnLayers`]); not in `n_layer`, `layers` or `tensors`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nextn: Option<NextnLayers>,
}

/// The last `nextn_predict_layers` blocks of a file whose loader keeps them
/// out of the trunk (`hparams.n_layer() = n_layer_all − n_layer_nextn`,
/// src/llama-model.cpp): their tensors are created with `TENSOR_SKIP`
/// unless the model is loaded with `load_mtp` (llama-server's
/// `--spec-type draft-mtp`, `common_model_params_to_llama`), and only an
/// MTP context (`LLAMA_CONTEXT_TYPE_MTP`) gives them a KV cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NextnLayers {
    /// hyper-parameters of each NextN layer (attention-only, never recurrent:
    /// "MTP layers are dense attention-only", src/models/qwen35.cpp)
    pub layers: Vec<LayerHparams>,
    /// their tensors, `blk.{n_layer + i}.*`, slot `Layer(n_layer + i)`
    pub tensors: Vec<TensorInfo>,
}

/// Sanity bounds (a GGUF claiming more is corrupt).
pub mod limits {
    pub const MAX_LAYERS: u64 = 1 << 12;
    pub const MAX_EMBD: u64 = 1 << 20;
    pub const MAX_HEADS: u64 = 1 << 14;
    pub const MAX_VOCAB: u64 = 1 << 24;
    pub const MAX_CTX: u64 = 1 << 31;
}

impl LlamaModel {
    /// Check dimensions before any arithmetic, naming the GGUF key.
    pub fn validate(&self) -> Result<(), CoreError> {
        let check = vramfit_core::units::check_size;
        check("block_count", self.n_layer as u64, limits::MAX_LAYERS)?;
        check("embedding_length", self.n_embd, limits::MAX_EMBD)?;
        check("vocab size", self.n_vocab, limits::MAX_VOCAB)?;
        if self.layers.len() != self.n_layer as usize {
            return Err(CoreError::invalid(
                "block_count",
                format!("{} layers declared, {} described", self.n_layer, self.layers.len()),
            ));
        }
        for (i, l) in self.layers.iter().enumerate() {
            if l.n_head == 0 && l.recurrent.is_none() {
                return Err(CoreError::invalid(format!("attention.head_count[{i}]"), "must be at least 1"));
            }
            for (field, v) in [
                ("attention.head_count", l.n_head),
                ("attention.head_count_kv", l.n_head_kv),
                ("attention.key_length", l.head_dim_k),
                ("attention.value_length", l.head_dim_v),
            ] {
                if v > limits::MAX_HEADS.max(limits::MAX_EMBD) {
                    return Err(CoreError::invalid(format!("{field}[{i}]"), format!("{v} is absurdly large")));
                }
            }
            if l.has_kv() && (l.head_dim_k == 0 || l.head_dim_v == 0) {
                return Err(CoreError::invalid(format!("attention.key_length[{i}]"), "head size is 0"));
            }
        }
        if self.layers.iter().any(|l| l.sliding) && self.n_swa == 0 {
            return Err(CoreError::invalid("attention.sliding_window", "layers slide but the window is 0"));
        }
        Ok(())
    }

    /// Total bytes of all tensors (the GGUF data section without padding).
    pub fn weight_bytes(&self) -> Result<u64, CoreError> {
        self.tensors.iter().try_fold(0u64, |a, t| vramfit_core::units::add("tensor bytes", a, t.bytes))
    }

    /// Parameters (elements of all tensors).
    pub fn params(&self) -> Result<u64, CoreError> {
        self.tensors.iter().try_fold(0u64, |a, t| vramfit_core::units::add("parameters", a, t.elements()?))
    }

    /// Tensor count, elements and bytes per ggml type, in type-id order.
    pub fn tensors_by_type(&self) -> Result<Vec<(GgmlType, TypeTally)>, CoreError> {
        let mut by: std::collections::BTreeMap<u32, (GgmlType, TypeTally)> = Default::default();
        for t in &self.tensors {
            let e = &mut by.entry(t.ty.id()).or_insert((t.ty, TypeTally::default())).1;
            e.tensors += 1; // at most the tensor count, a usize
            e.elements = vramfit_core::units::add("elements per type", e.elements, t.elements()?)?;
            e.bytes = vramfit_core::units::add("bytes per type", e.bytes, t.bytes)?;
        }
        Ok(by.into_values().collect())
    }

    /// A tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Bytes of the largest tensor named `blk.{il}.{suffix}`, if present.
    pub fn layer_tensor_bytes(&self, il: u32, suffix: &str) -> Option<u64> {
        self.tensor(&format!("blk.{il}.{suffix}")).map(|t| t.bytes)
    }

    /// The row of [`crate::arch::KNOWN_ARCHS`] for this model's architecture.
    pub fn known_arch(&self) -> Option<&'static crate::arch::KnownArch> {
        crate::arch::known_arch(&self.arch)
    }

    /// llama.cpp builds this model's attention as multi-head latent attention.
    pub fn latent_attention(&self) -> bool {
        match self.known_arch().map(|a| a.attention) {
            Some(crate::arch::AttentionGraph::Latent) => true,
            Some(crate::arch::AttentionGraph::LatentWhenKvHeadSizesDiffer) => {
                self.layers.iter().any(|l| l.head_dim_k != l.head_dim_v)
            }
            None => false,
        }
    }

    /// Layers with a KV cache.
    pub fn kv_layers(&self) -> usize {
        self.layers.iter().filter(|l| l.has_kv()).count()
    }
}

/// The slot of a tensor by its GGUF name.
pub fn slot_of(name: &str) -> Slot {
    if let Some(rest) = name.strip_prefix("blk.") {
        if let Some((n, _)) = rest.split_once('.') {
            if let Ok(il) = n.parse::<u32>() {
                return Slot::Layer(il);
            }
        }
    }
    // per_layer_token_embd (Gemma 3n / Gemma 4 per-layer embeddings) is an
    // input-layer tensor read by GET_ROWS (LLM_TENSOR_INFOS, src/llama-arch.cpp)
    if name.starts_with("token_embd")
        || name.starts_with("pos_embd")
        || name.starts_with("token_types")
        || name.starts_with("per_layer_token_embd")
    {
        return Slot::Input;
    }
    // rope frequency factors are created with layer 0 (and shared by the rest);
    // so are the per-layer-embedding projection and its norm, repeating-layer
    // tensors created with bid 0 (LLM_TENSOR_INFOS: LLM_TENSOR_LAYER_REPEATING;
    // `tn(LLM_TENSOR_PER_LAYER_MODEL_PROJ, "weight", 0)`, src/models/gemma4.cpp)
    if name.starts_with("rope_freqs")
        || name.starts_with("rope_factors")
        || name.starts_with("per_layer_model_proj")
        || name.starts_with("per_layer_proj_norm")
    {
        return Slot::Layer(0);
    }
    Slot::Output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_by_name() {
        assert_eq!(slot_of("token_embd.weight"), Slot::Input);
        assert_eq!(slot_of("blk.12.attn_q.weight"), Slot::Layer(12));
        assert_eq!(slot_of("output.weight"), Slot::Output);
        assert_eq!(slot_of("output_norm.weight"), Slot::Output);
        assert_eq!(slot_of("rope_freqs.weight"), Slot::Layer(0));
        // Gemma 3n / 4 per-layer embeddings: the table on the host, its projection with layer 0
        assert_eq!(slot_of("per_layer_token_embd.weight"), Slot::Input);
        assert_eq!(slot_of("per_layer_model_proj.weight"), Slot::Layer(0));
        assert_eq!(slot_of("per_layer_proj_norm.weight"), Slot::Layer(0));
        assert_eq!(slot_of("blk.x.attn_q.weight"), Slot::Output);
    }
}
