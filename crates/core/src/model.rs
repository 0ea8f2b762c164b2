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

/// A decoder-only transformer, described by its dimensions.
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
    /// sliding-window attention span, when every layer uses one
    pub sliding_window: Option<u64>,
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

impl ModelSpec {
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
        for (field, p) in [("attention_dropout", self.attention_dropout), ("hidden_dropout", self.hidden_dropout)] {
            if !(0.0..1.0).contains(&p) {
                return Err(CoreError::invalid(field, format!("{p} is not a probability in [0, 1)")));
            }
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

    /// Number of layers whose MLP is a mixture of experts.
    pub fn moe_layers(&self) -> u64 {
        match &self.moe {
            Some(m) => self.num_layers - m.dense_layers.min(self.num_layers),
            None => 0,
        }
    }

    /// Attention kind in words, for output.
    pub fn attention_kind(&self) -> &'static str {
        if self.mla.is_some() {
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
