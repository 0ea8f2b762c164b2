//! What the network is: dimensions and structural choices, nothing about
//! how it is run. Built by `vramfit-ingest` from a `config.json` or by
//! `vramfit-catalog` from an embedded preset; validated before use.

use crate::dtype::DType;
use crate::error::CoreError;
use crate::quant::QuantSpec;
use serde::{Deserialize, Serialize};

/// Architecture family: decides module names (for LoRA targets) and a few
/// structural defaults. `Generic` is a Llama-shaped fallback for unknown
/// `model_type`s (the ingest layer says so in `notes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Llama,
    Mistral,
    Mixtral,
    Qwen2,
    Qwen2Moe,
    Qwen3,
    Qwen3Moe,
    Gemma,
    Gemma2,
    Phi3,
    Gpt2,
    GptNeox,
    Falcon,
    DeepseekV3,
    /// phi-1 / phi-1.5 / phi-2 (`modeling_phi.py`): parallel block, LayerNorm, fc1/fc2, biased head
    Phi,
    /// OLMo 2 (`modeling_olmo2.py`): post-norms, q/k norms over the whole projection
    Olmo2,
    /// Gemma 3 (`modeling_gemma3.py`): 5 sliding : 1 global layers, 4 norms, q/k norms
    Gemma3,
    /// gpt-oss (`modeling_gpt_oss.py`): MoE with fused biased experts, attention sinks, alternating window
    GptOss,
    /// Qwen3-Next (`modeling_qwen3_next.py`): Gated DeltaNet + gated attention, fused in_proj_qkvz
    Qwen3Next,
    /// Qwen3.5 (`modeling_qwen3_5.py`, `modeling_qwen3_5_moe.py`): as Qwen3-Next with split input projections
    Qwen35,
    /// Nemotron-H (`modeling_nemotron_h.py`): one of Mamba-2, attention, MLP or MoE per block
    NemotronH,
    /// Granite 3 MoE (`modeling_granitemoe.py`)
    GraniteMoe,
    /// Granite 4 (`modeling_granitemoehybrid.py`): Mamba-2 or attention per layer, each
    /// followed by a shared MLP and (when `num_local_experts` > 0) a MoE beside it
    GraniteMoeHybrid,
    /// Falcon-H1 (`modeling_falcon_h1.py`): attention and a Mamba-2 mixer side by side in
    /// every layer, then a gated MLP
    FalconH1,
    /// MiniMax-M2 (`modeling_minimax_m2.py`): q/k norms over the whole projection, 256-expert MoE with a routing bias
    MiniMaxM2,
    /// Llama 4 (`modeling_llama4.py`): chunked attention on 3 of 4 layers, MoE with a shared
    /// expert (every layer or every other layer), a dense `feed_forward` elsewhere
    Llama4,
    /// BERT / XLM-RoBERTa encoders (`modeling_bert.py`, `modeling_xlm_roberta.py`): no KV cache
    Bert,
    Generic,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Mistral => "mistral",
            Family::Mixtral => "mixtral",
            Family::Qwen2 => "qwen2",
            Family::Qwen2Moe => "qwen2_moe",
            Family::Qwen3 => "qwen3",
            Family::Qwen3Moe => "qwen3_moe",
            Family::Gemma => "gemma",
            Family::Gemma2 => "gemma2",
            Family::Phi3 => "phi3",
            Family::Gpt2 => "gpt2",
            Family::GptNeox => "gpt_neox",
            Family::Falcon => "falcon",
            Family::DeepseekV3 => "deepseek_v3",
            Family::Phi => "phi",
            Family::Olmo2 => "olmo2",
            Family::Gemma3 => "gemma3",
            Family::GptOss => "gpt_oss",
            Family::Qwen3Next => "qwen3_next",
            Family::Qwen35 => "qwen3_5",
            Family::NemotronH => "nemotron_h",
            Family::GraniteMoe => "granitemoe",
            Family::GraniteMoeHybrid => "granitemoehybrid",
            Family::FalconH1 => "falcon_h1",
            Family::Llama4 => "llama4",
            Family::MiniMaxM2 => "minimax_m2",
            Family::Bert => "bert",
            Family::Generic => "generic",
        }
    }
}

/// Feed-forward block shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    /// gate, up, down (SwiGLU / GeGLU): three matrices, an elementwise product.
    Gated,
    /// up, down with an activation in between (GPT-2, NeoX, Falcon).
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// weight only
    RmsNorm,
    /// weight and bias
    LayerNorm,
}

/// How the attention projections are laid out as modules. The parameter
/// count is the same; module names (LoRA targets) differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// q_proj, k_proj, v_proj, o_proj
    Separate,
    /// one fused qkv module plus an output projection (GPT-2 c_attn, NeoX/Falcon query_key_value, Phi-3 qkv_proj)
    FusedQkv,
    /// DeepSeek multi-head latent attention (see [`MlaSpec`])
    Mla,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Positional {
    /// rotary embeddings: no parameters (a tiny fp32 buffer)
    Rotary,
    /// learned absolute position table of `max_position_embeddings × hidden`
    Learned,
}

/// Mixture-of-experts layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoeSpec {
    /// routed experts per MoE layer
    pub num_experts: u64,
    /// experts each token is routed to (top-k)
    pub experts_per_token: u64,
    /// width of one routed expert's MLP
    pub expert_intermediate: u64,
    /// always-on shared experts per MoE layer (DeepSeek, Qwen2-MoE)
    pub shared_experts: u64,
    /// width of one shared expert
    pub shared_intermediate: u64,
    /// Qwen2-MoE gates the shared expert with a hidden→1 linear
    pub shared_expert_gate: bool,
    /// number of leading layers that keep a dense MLP (`first_k_dense_replace`)
    pub dense_layers: u64,
    /// DeepSeek-V3 router carries a per-expert correction bias
    pub router_bias: bool,
    /// the router linear itself has a bias (gpt-oss `mlp.router`)
    #[serde(default, skip_serializing_if = "is_false")]
    pub router_linear_bias: bool,
}

/// DeepSeek multi-head latent attention dimensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlaSpec {
    /// low-rank query compression (None: plain q_proj)
    pub q_lora_rank: Option<u64>,
    /// the latent that is cached instead of K and V
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

/// What mixes tokens in one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mixer {
    /// softmax attention over the whole context (a KV cache that grows with it)
    Attention,
    /// softmax attention over the last `sliding_window` tokens
    SlidingAttention,
    /// Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5): a fixed-size
    /// recurrent state and a short convolution state per sequence
    LinearAttention,
    /// Mamba-2 (Nemotron-H, Granite 4): a fixed-size SSM state and convolution state per sequence
    Mamba2,
    /// attention and a Mamba-2 mixer reading the same input side by side (Falcon-H1
    /// `FalconH1DecoderLayer`: `self_attn` and `mamba` in every layer): a KV cache
    /// that grows with the context AND a fixed-size state per sequence
    AttentionMamba2,
    /// no token mixer: a feed-forward-only block (Nemotron-H `-` and `E`)
    None,
}

impl Mixer {
    /// Does this layer keep K and V per token?
    pub fn has_kv(self) -> bool {
        matches!(self, Mixer::Attention | Mixer::SlidingAttention | Mixer::AttentionMamba2)
    }

    /// Does this layer keep K and V of the whole context (full attention)?
    pub fn is_full_attention(self) -> bool {
        matches!(self, Mixer::Attention | Mixer::AttentionMamba2)
    }

    /// Does this layer hold a Mamba-2 mixer (alone or beside attention)?
    pub fn has_mamba(self) -> bool {
        matches!(self, Mixer::Mamba2 | Mixer::AttentionMamba2)
    }

    /// Does this layer keep a fixed-size state per sequence?
    pub fn has_state(self) -> bool {
        matches!(self, Mixer::LinearAttention | Mixer::Mamba2 | Mixer::AttentionMamba2)
    }
}

/// The feed-forward part of one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ffn {
    /// the dense MLP of `intermediate_size`
    Dense,
    /// the mixture of experts of [`MoeSpec`]
    Moe,
    /// none (a Nemotron-H mixer-only block)
    None,
}

/// One decoder layer: its token mixer and its feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerKind {
    pub mixer: Mixer,
    pub ffn: Ffn,
}

/// Gated DeltaNet dimensions (`linear_*` fields of Qwen3-Next / Qwen3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearAttentionSpec {
    pub key_heads: u64,
    pub value_heads: u64,
    pub key_head_dim: u64,
    pub value_head_dim: u64,
    /// depthwise causal convolution width (`linear_conv_kernel_dim`)
    pub conv_kernel: u64,
    /// dtype of the recurrent state when the config fixes it (`mamba_ssm_dtype`); None: the compute dtype
    pub state_dtype: Option<DType>,
}

impl LinearAttentionSpec {
    /// Channels of the convolution: q, k and v (`conv_dim = 2·key_dim + value_dim`).
    pub fn conv_dim(&self) -> u64 {
        2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim
    }
}

/// Mamba-2 dimensions (Nemotron-H `mamba_*` fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mamba2Spec {
    pub heads: u64,
    pub head_dim: u64,
    /// `ssm_state_size` (d_state)
    pub state_size: u64,
    /// `n_groups` sharing B and C
    pub groups: u64,
    /// `conv_kernel` (d_conv)
    pub conv_kernel: u64,
    /// bias on the depthwise convolution (`use_conv_bias`)
    pub conv_bias: bool,
    /// bias on in_proj / out_proj (`use_bias`)
    pub proj_bias: bool,
    /// dtype of the SSM state when the config fixes it (`mamba_ssm_cache_dtype`); None: the compute dtype
    pub state_dtype: Option<DType>,
    /// the gated RMSNorm over d_inner before out_proj (Falcon-H1 `mamba_rms_norm` may drop it)
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub gated_norm: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl Mamba2Spec {
    /// `d_inner = heads × head_dim`.
    pub fn inner(&self) -> u64 {
        self.heads * self.head_dim
    }

    /// Channels of the convolution: x, B and C (`d_inner + 2·n_groups·d_state`).
    pub fn conv_dim(&self) -> u64 {
        self.inner() + 2 * self.groups * self.state_size
    }
}

/// A vision tower shipped in the checkpoint (and loaded with the model by
/// transformers' `*ForConditionalGeneration` and by vLLM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisionSpec {
    pub kind: VisionKind,
    pub hidden_size: u64,
    pub intermediate_size: u64,
    pub layers: u64,
    pub patch_size: u64,
    /// frames per patch of a Conv3d patch embedding (Qwen-VL: 2); 1 for images-only towers
    pub temporal_patch_size: u64,
    pub in_channels: u64,
    /// rows of the learned position table (SigLIP: (image/patch)², Qwen3-VL: `num_position_embeddings`; 0: none)
    pub position_embeddings: u64,
    /// width the merger projects to (the language model's hidden size)
    pub out_hidden_size: u64,
    /// patches merged per side before projection (Qwen-VL `spatial_merge_size`; 1: none)
    pub spatial_merge: u64,
    /// Qwen3-VL deepstack mergers (`deepstack_visual_indexes`)
    pub deepstack_mergers: u64,
    /// Llama 4: width of the pixel-shuffle adapter's output (`projector_input_dim`,
    /// = `projector_output_dim` = `vision_output_dim` in the released configs); 0 otherwise
    #[serde(default, skip_serializing_if = "is_zero")]
    pub projector_dim: u64,
}

/// Vision tower architectures vramfit lays out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisionKind {
    /// SigLIP encoder without head + Gemma 3's projector (`modeling_siglip.py`, `Gemma3MultiModalProjector`)
    SiglipGemma3,
    /// Qwen2.5-VL ViT: RMSNorm, gated MLP, windowed attention (`Qwen2_5_VisionTransformerPretrainedModel`)
    Qwen25Vl,
    /// Qwen3-VL / Qwen3.5 ViT: LayerNorm, plain MLP, learned positions, deepstack mergers (`Qwen3VLVisionModel`)
    Qwen3Vl,
    /// Llama 4 ViT: unfold patch linear, class token, biased attention, pixel-shuffle MLP
    /// adapter and a bias-free projector (`Llama4VisionModel`, `Llama4MultiModalProjector`)
    Llama4,
}

/// DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2, GLM-5):
/// its own query/key projections and a per-token key cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexerSpec {
    pub heads: u64,
    pub head_dim: u64,
    /// tokens each query attends to (`index_topk`)
    pub topk: u64,
}

/// A BERT-style encoder's extras: token-type table and pooler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderSpec {
    /// `type_vocab_size`
    pub token_types: u64,
    /// the pooler (dense hidden × hidden + bias) that `BertModel` / `XLMRobertaModel` load by default
    pub pooler: bool,
}

/// A transformer (decoder, or encoder with [`EncoderSpec`]), described by its dimensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// display name (preset name, hub id or path)
    pub name: String,
    pub family: Family,
    pub hidden_size: u64,
    pub num_layers: u64,
    pub num_heads: u64,
    /// key/value heads: = heads for MHA, < heads for GQA, 1 for MQA
    pub num_kv_heads: u64,
    /// per-head width; not always hidden/heads (Gemma: 256)
    pub head_dim: u64,
    /// dense MLP width
    pub intermediate_size: u64,
    pub vocab_size: u64,
    pub max_position_embeddings: u64,
    pub mlp: MlpKind,
    /// `hidden_act` as written in the config (silu, gelu_new, ...)
    pub activation: String,
    pub norm: NormKind,
    pub attention: Attention,
    /// bias on the q/k/v projections (Qwen2, GPT-2, NeoX)
    pub qkv_bias: bool,
    /// bias on the attention output projection
    pub o_bias: bool,
    /// bias on the MLP projections
    pub mlp_bias: bool,
    /// norm modules per decoder layer (2 usually; Gemma-2: 4; Falcon-7B: 1)
    pub norms_per_layer: u64,
    /// per-head RMSNorm on q and k (Qwen3)
    pub qk_norm: bool,
    pub tied_embeddings: bool,
    pub positional: Positional,
    /// attention and MLP read the same input (GPT-J/NeoX/Falcon-7B)
    pub parallel_residual: bool,
    pub moe: Option<MoeSpec>,
    pub mla: Option<MlaSpec>,
    /// sliding-window attention span of the [`Mixer::SlidingAttention`] layers
    /// (every layer when `layer_pattern` is empty)
    pub sliding_window: Option<u64>,
    /// per-layer mixer and feed-forward kinds, when the layers differ; empty:
    /// every layer is attention (sliding when `sliding_window` is set) with a
    /// dense MLP for the first `moe.dense_layers` and the MoE after
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layer_pattern: Vec<LayerKind>,
    /// Gated DeltaNet dimensions of the linear-attention layers
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttentionSpec>,
    /// Mamba-2 dimensions of the SSM layers
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba: Option<Mamba2Spec>,
    /// a vision tower in the checkpoint, counted with the model
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<VisionSpec>,
    /// DeepSeek sparse attention indexer
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexer: Option<IndexerSpec>,
    /// encoder-only (BERT, XLM-RoBERTa): no causal KV cache, no LM head
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder: Option<EncoderSpec>,
    /// multi-token-prediction layers shipped in the checkpoint beside the
    /// model (`num_nextn_predict_layers`, `mtp_num_hidden_layers`): not part of
    /// `ParamLayout` (transformers drops them; vLLM/SGLang load them only for
    /// MTP speculative decoding), counted by [`crate::params::mtp_params`]
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_layers: u64,
    /// q/k RMSNorm over the whole projection (OLMo 2) rather than per head (Qwen3, Gemma 3)
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm_full_width: bool,
    /// q_proj also yields a per-head output gate (Qwen3-Next `attn_output_gate`): twice as wide
    #[serde(default, skip_serializing_if = "is_false")]
    pub attn_output_gate: bool,
    /// one learned sink logit per head and layer (gpt-oss `sinks`)
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_sinks: bool,
    /// the output head has a bias (phi)
    #[serde(default, skip_serializing_if = "is_false")]
    pub lm_head_bias: bool,
    /// dropout probability on attention probabilities (training masks)
    pub attention_dropout: f64,
    /// dropout probability on residual/hidden outputs (training masks)
    pub hidden_dropout: f64,
    /// weights already quantized by the checkpoint (`quantization_config`)
    pub quantization: Option<QuantSpec>,
    /// `torch_dtype` of the checkpoint, when stated
    pub native_dtype: Option<DType>,
    /// what the ingest layer assumed or skipped, shown to the user
    pub notes: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Upper bounds that catch absurd configs before any arithmetic (the
/// largest real models are far below each of these).
pub mod limits {
    pub const MAX_HIDDEN: u64 = 1 << 20;
    pub const MAX_LAYERS: u64 = 1 << 14;
    pub const MAX_HEADS: u64 = 1 << 16;
    pub const MAX_VOCAB: u64 = 1 << 24;
    pub const MAX_INTERMEDIATE: u64 = 1 << 22;
    pub const MAX_EXPERTS: u64 = 1 << 16;
    pub const MAX_POSITIONS: u64 = 1 << 32;
}

/// Configuration defaults of model families, for a model a source gives
/// only in part (a `config.json` without the key, a paper that states width
/// and depth). One place, each with its source.
pub mod defaults {
    /// transformers `GPT2Config(vocab_size=50257)`: GPT-2's BPE vocabulary.
    pub const GPT2_VOCAB_SIZE: u64 = 50_257;
    /// transformers `GPT2Config(n_inner=None)`: the MLP is 4 × `n_embd` wide.
    pub const GPT2_MLP_RATIO: u64 = 4;
    /// transformers `GPT2Config(n_positions=1024)`, Megatron-LM's GPT-2 `--seq-length`.
    pub const GPT2_POSITIONS: u64 = 1024;
    /// Attention head width of a model given by width and depth only: 128
    /// (GPT-3's and Megatron-LM's large models, Llama's), so `heads = hidden / 128`.
    pub const HEAD_DIM: u64 = 128;
}

impl ModelSpec {
    /// This checkpoint loaded with its quantized weights expanded to
    /// `dtype`, as a training run that asks for 16-bit weights loads it
    /// (transformers' `Mxfp4Config(dequantize=True)` for gpt-oss, a
    /// `dequantize()` of a GPTQ/AWQ/FP8 model, or a 16-bit copy of the
    /// checkpoint): no quantization, `dtype` as the native dtype, and a note
    /// saying so. A checkpoint without quantization is returned unchanged.
    pub fn dequantized(&self, dtype: DType) -> ModelSpec {
        let mut s = self.clone();
        if let Some(q) = s.quantization.take() {
            s.native_dtype = Some(dtype);
            s.notes.push(format!(
                "the checkpoint's {} weights are sized dequantized to {dtype}, as asked by --dtype (transformers: Mxfp4Config(dequantize=True) for MXFP4, the model's dequantize() otherwise)",
                q.method.label()
            ));
        }
        s
    }

    /// The model as `engine` builds it. LitGPT builds its own output head even
    /// where the Hugging Face config ties it to the embedding (Llama 3.2, Gemma):
    /// `GPT.__init__` creates `lm_head` beside `transformer.wte`, and
    /// `convert_hf_checkpoint` copies the embedding into it
    /// ([`crate::workload::FrameworkFacts::unties_embeddings`]). Its
    /// `padded_vocab_size` is taken to be the config's vocabulary (true of its Llama
    /// 3.2 and Gemma configs).
    pub fn as_built_by(&self, engine: crate::workload::Engine) -> std::borrow::Cow<'_, ModelSpec> {
        let unties = engine.framework_facts().is_some_and(|f| f.unties_embeddings);
        if unties && self.tied_embeddings {
            let mut s = self.clone();
            s.tied_embeddings = false;
            std::borrow::Cow::Owned(s)
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }

    /// The note for a head [`ModelSpec::as_built_by`] unties.
    pub fn untied_head_note(&self, engine: crate::workload::Engine) -> Option<String> {
        let unties = engine.framework_facts().is_some_and(|f| f.unties_embeddings);
        (unties && self.tied_embeddings).then(|| {
            format!(
                "{} builds its own output head: the tied embedding is copied into it ({} × {} more parameters)",
                engine.name(),
                self.vocab_size,
                self.hidden_size
            )
        })
    }

    /// A Llama-shaped model (RMSNorm, SwiGLU, rotary, untied): handy for
    /// tests and as the base of presets.
    pub fn llama_like(
        name: &str,
        hidden: u64,
        layers: u64,
        heads: u64,
        kv_heads: u64,
        intermediate: u64,
        vocab: u64,
    ) -> ModelSpec {
        ModelSpec {
            name: name.to_string(),
            family: Family::Llama,
            hidden_size: hidden,
            num_layers: layers,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim: hidden.checked_div(heads).unwrap_or(0),
            intermediate_size: intermediate,
            vocab_size: vocab,
            max_position_embeddings: 4096,
            mlp: MlpKind::Gated,
            activation: "silu".into(),
            norm: NormKind::RmsNorm,
            attention: Attention::Separate,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            norms_per_layer: 2,
            qk_norm: false,
            tied_embeddings: false,
            positional: Positional::Rotary,
            parallel_residual: false,
            moe: None,
            mla: None,
            sliding_window: None,
            layer_pattern: Vec::new(),
            linear_attention: None,
            mamba: None,
            vision: None,
            indexer: None,
            encoder: None,
            mtp_layers: 0,
            qk_norm_full_width: false,
            attn_output_gate: false,
            attention_sinks: false,
            lm_head_bias: false,
            attention_dropout: 0.0,
            hidden_dropout: 0.0,
            quantization: None,
            native_dtype: None,
            notes: Vec::new(),
        }
    }

    /// Reject zero or absurd dimensions with the field named.
    pub fn validate(&self) -> Result<(), CoreError> {
        use limits::*;
        let check = |field: &str, v: u64, max: u64| -> Result<(), CoreError> {
            if v == 0 {
                Err(CoreError::invalid(field, "must be at least 1"))
            } else if v > max {
                Err(CoreError::invalid(field, format!("{v} is larger than any real model (limit {max})")))
            } else {
                Ok(())
            }
        };
        check("hidden_size", self.hidden_size, MAX_HIDDEN)?;
        check("num_hidden_layers", self.num_layers, MAX_LAYERS)?;
        check("num_attention_heads", self.num_heads, MAX_HEADS)?;
        check("num_key_value_heads", self.num_kv_heads, MAX_HEADS)?;
        check("head_dim", self.head_dim, MAX_HIDDEN)?;
        check("intermediate_size", self.intermediate_size, MAX_INTERMEDIATE)?;
        check("vocab_size", self.vocab_size, MAX_VOCAB)?;
        check("max_position_embeddings", self.max_position_embeddings, MAX_POSITIONS)?;
        if self.num_kv_heads > self.num_heads {
            return Err(CoreError::invalid(
                "num_key_value_heads",
                format!("{} is more than num_attention_heads {}", self.num_kv_heads, self.num_heads),
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(CoreError::invalid(
                "num_key_value_heads",
                format!("{} does not divide num_attention_heads {}", self.num_kv_heads, self.num_heads),
            ));
        }
        if let Some(moe) = &self.moe {
            check("num_experts", moe.num_experts, MAX_EXPERTS)?;
            check("num_experts_per_tok", moe.experts_per_token, MAX_EXPERTS)?;
            check("moe_intermediate_size", moe.expert_intermediate, MAX_INTERMEDIATE)?;
            if moe.experts_per_token > moe.num_experts {
                return Err(CoreError::invalid(
                    "num_experts_per_tok",
                    format!("{} is more than the {} experts", moe.experts_per_token, moe.num_experts),
                ));
            }
            if moe.shared_experts > 0 {
                check("shared_expert_intermediate_size", moe.shared_intermediate, MAX_INTERMEDIATE)?;
            }
            if moe.dense_layers > self.num_layers {
                return Err(CoreError::invalid(
                    "first_k_dense_replace",
                    format!("{} is more than the {} layers", moe.dense_layers, self.num_layers),
                ));
            }
        }
        if let Some(mla) = &self.mla {
            check("kv_lora_rank", mla.kv_lora_rank, MAX_HIDDEN)?;
            check("qk_rope_head_dim", mla.qk_rope_head_dim, MAX_HIDDEN)?;
            check("qk_nope_head_dim", mla.qk_nope_head_dim, MAX_HIDDEN)?;
            check("v_head_dim", mla.v_head_dim, MAX_HIDDEN)?;
            if let Some(q) = mla.q_lora_rank {
                check("q_lora_rank", q, MAX_HIDDEN)?;
            }
        }
        self.validate_layers()?;
        for (field, p) in [("attention_dropout", self.attention_dropout), ("hidden_dropout", self.hidden_dropout)] {
            if !(0.0..1.0).contains(&p) {
                return Err(CoreError::invalid(field, format!("{p} is not a probability in [0, 1)")));
            }
        }
        Ok(())
    }

    /// The per-layer pattern and the specs its kinds need.
    fn validate_layers(&self) -> Result<(), CoreError> {
        use limits::*;
        let check = |field: &str, v: u64, max: u64| -> Result<(), CoreError> {
            if v == 0 {
                Err(CoreError::invalid(field, "must be at least 1"))
            } else if v > max {
                Err(CoreError::invalid(field, format!("{v} is larger than any real model (limit {max})")))
            } else {
                Ok(())
            }
        };
        if !self.layer_pattern.is_empty() {
            if self.layer_pattern.len() as u64 != self.num_layers {
                return Err(CoreError::invalid(
                    "layer_types",
                    format!("{} entries for {} layers", self.layer_pattern.len(), self.num_layers),
                ));
            }
            if self.moe.as_ref().is_some_and(|m| m.dense_layers != 0) {
                return Err(CoreError::invalid(
                    "first_k_dense_replace",
                    "a per-layer pattern already says which layers are dense",
                ));
            }
        }
        let layers = self.layers();
        let any = |m: Mixer| layers.iter().any(|l| l.mixer == m);
        if layers.iter().any(|l| l.ffn == Ffn::Moe) && self.moe.is_none() {
            return Err(CoreError::invalid("layer_types", "MoE layers without expert dimensions"));
        }
        if any(Mixer::SlidingAttention) {
            check("sliding_window", self.sliding_window.unwrap_or(0), MAX_POSITIONS)?;
        }
        if any(Mixer::LinearAttention) {
            let la = self.linear_attention.as_ref().ok_or_else(|| {
                CoreError::invalid("layer_types", "linear-attention layers without linear_* dimensions")
            })?;
            check("linear_num_key_heads", la.key_heads, MAX_HEADS)?;
            check("linear_num_value_heads", la.value_heads, MAX_HEADS)?;
            check("linear_key_head_dim", la.key_head_dim, MAX_HIDDEN)?;
            check("linear_value_head_dim", la.value_head_dim, MAX_HIDDEN)?;
            check("linear_conv_kernel_dim", la.conv_kernel, MAX_HIDDEN)?;
        }
        if layers.iter().any(|l| l.mixer.has_mamba()) {
            let m = self
                .mamba
                .as_ref()
                .ok_or_else(|| CoreError::invalid("layer_types", "Mamba layers without mamba_* dimensions"))?;
            check("mamba_num_heads", m.heads, MAX_HEADS)?;
            check("mamba_head_dim", m.head_dim, MAX_HIDDEN)?;
            check("ssm_state_size", m.state_size, MAX_HIDDEN)?;
            check("n_groups", m.groups, MAX_HEADS)?;
            check("conv_kernel", m.conv_kernel, MAX_HIDDEN)?;
        }
        if let Some(v) = &self.vision {
            check("vision_config.hidden_size", v.hidden_size, MAX_HIDDEN)?;
            check("vision_config.intermediate_size", v.intermediate_size, MAX_INTERMEDIATE)?;
            check("vision_config.num_hidden_layers", v.layers, MAX_LAYERS)?;
            // patches, frames, channels and merges are small in every real tower
            check("vision_config.patch_size", v.patch_size, 1 << 12)?;
            check("vision_config.temporal_patch_size", v.temporal_patch_size, 1 << 8)?;
            check("vision_config.in_channels", v.in_channels, 1 << 8)?;
            check("vision_config.out_hidden_size", v.out_hidden_size, MAX_HIDDEN)?;
            check("vision_config.spatial_merge_size", v.spatial_merge, 1 << 8)?;
            if v.position_embeddings > MAX_POSITIONS {
                return Err(CoreError::invalid("vision_config.num_position_embeddings", "larger than any real model"));
            }
        }
        if let Some(ix) = &self.indexer {
            check("index_n_heads", ix.heads, MAX_HEADS)?;
            check("index_head_dim", ix.head_dim, MAX_HIDDEN)?;
        }
        if self.mtp_layers > MAX_LAYERS {
            return Err(CoreError::invalid("num_nextn_predict_layers", "larger than any real model"));
        }
        Ok(())
    }

    /// Width of the q projection output (heads × head_dim, or MLA's q head).
    pub fn q_width(&self) -> u64 {
        match &self.mla {
            Some(m) => self.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim),
            None => self.num_heads * self.head_dim,
        }
    }

    /// Width of one of K or V (kv_heads × head_dim).
    pub fn kv_width(&self) -> u64 {
        self.num_kv_heads * self.head_dim
    }

    /// Width of the attention output before o_proj.
    pub fn attn_out_width(&self) -> u64 {
        match &self.mla {
            Some(m) => self.num_heads * m.v_head_dim,
            None => self.num_heads * self.head_dim,
        }
    }

    /// Widest MLP a token passes through at inference (dense, or top-k
    /// experts side by side as transformers' loop materialises them one
    /// expert at a time: one expert).
    pub fn token_mlp_width(&self) -> u64 {
        match &self.moe {
            Some(m) if self.moe_layers() == self.num_layers => {
                m.expert_intermediate.max(m.shared_intermediate * m.shared_experts)
            }
            _ => self.intermediate_size,
        }
    }

    /// Number of layers whose MLP is a mixture of experts.
    pub fn moe_layers(&self) -> u64 {
        if !self.layer_pattern.is_empty() {
            return self.count_layers(|l| l.ffn == Ffn::Moe);
        }
        match &self.moe {
            Some(m) => self.num_layers - m.dense_layers.min(self.num_layers),
            None => 0,
        }
    }

    /// Every layer's kind, in order: the pattern, or the uniform reading of
    /// `sliding_window` and `moe.dense_layers` (leading dense layers).
    pub fn layers(&self) -> Vec<LayerKind> {
        if !self.layer_pattern.is_empty() {
            return self.layer_pattern.clone();
        }
        let mixer = if self.sliding_window.is_some() { Mixer::SlidingAttention } else { Mixer::Attention };
        let dense = match &self.moe {
            Some(m) => m.dense_layers.min(self.num_layers),
            None => self.num_layers,
        };
        (0..self.num_layers).map(|i| LayerKind { mixer, ffn: if i < dense { Ffn::Dense } else { Ffn::Moe } }).collect()
    }

    /// Layers matching `pred`.
    pub fn count_layers(&self, pred: impl Fn(&LayerKind) -> bool) -> u64 {
        if self.layer_pattern.is_empty() {
            return self.layers().iter().filter(|l| pred(l)).count() as u64;
        }
        self.layer_pattern.iter().filter(|l| pred(l)).count() as u64
    }

    /// Layers with softmax attention (full or sliding): the ones with q/k/v/o projections.
    pub fn attention_layers(&self) -> u64 {
        self.count_layers(|l| l.mixer.has_kv())
    }

    /// Layers with a dense MLP.
    pub fn dense_mlp_layers(&self) -> u64 {
        self.count_layers(|l| l.ffn == Ffn::Dense)
    }

    /// Does any layer differ from full attention (the cases the KV cache must size per layer)?
    pub fn is_hybrid(&self) -> bool {
        self.layer_pattern.iter().any(|l| l.mixer != Mixer::Attention)
    }

    /// Attention kind in words, for output.
    pub fn attention_kind(&self) -> &'static str {
        if self.encoder.is_some() {
            "MHA (encoder)"
        } else if self.mla.is_some() {
            "MLA"
        } else if self.num_kv_heads == self.num_heads {
            "MHA"
        } else if self.num_kv_heads == 1 {
            "MQA"
        } else {
            "GQA"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Engine, InferenceSetup, Parallelism, Task, Workload};
    use crate::{estimate, Category, RuntimeSetup};

    /// LitGPT's `GPT.__init__` (litgpt/model.py) builds `lm_head` as its own
    /// `nn.Linear(n_embd, padded_vocab_size)`, and `convert_hf_checkpoint.py` fills it
    /// from `transformer.wte.weight` when a Llama 3.2 checkpoint has no `lm_head.weight`:
    /// Llama-3.2-1B (tied in its config) holds 128256 × 2048 more bf16 parameters,
    /// 525,336,576 B, under LitGPT than under transformers (issue 22).
    #[test]
    fn litgpt_builds_its_own_head_for_a_tied_model() {
        let mut spec = ModelSpec::llama_like("llama-3.2-1b", 2048, 16, 32, 8, 8192, 128_256);
        spec.tied_embeddings = true;
        let weights = |spec: &ModelSpec, engine: Engine| {
            let setup = InferenceSetup { engine, ..InferenceSetup::default() };
            let w = Workload {
                task: Task::Inference(setup),
                parallelism: Parallelism::default(),
                runtime: RuntimeSetup::default(),
            };
            let l = estimate(spec, &w).unwrap();
            (l.bytes(Category::Weights), l.notes)
        };
        let (hf, hf_notes) = weights(&spec, Engine::Transformers);
        let (lit, lit_notes) = weights(&spec, Engine::Litgpt);
        assert_eq!(lit - hf, 128_256 * 2048 * 2);
        assert!(lit_notes.iter().any(|n| n.contains("builds its own output head")), "{lit_notes:?}");
        assert!(!hf_notes.iter().any(|n| n.contains("output head")));
        // an untied model is the same under both
        spec.tied_embeddings = false;
        assert_eq!(weights(&spec, Engine::Litgpt).0, weights(&spec, Engine::Transformers).0);
    }
}
