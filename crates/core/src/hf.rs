//! Hugging Face module names per model family, in one table: the parameter
//! paths and leaf names of each family (what PEFT `target_modules` matches,
//! used by the parameter layout and by the activation accounting of adapted
//! linears) and the decoder block class FSDP wraps (used by launch configs).
//!
//! Source: each family's `modeling_*.py` in `transformers`
//! (`modeling_llama.py`, `modeling_gpt2.py`, `modeling_gpt_neox.py`,
//! `modeling_falcon.py`, `modeling_phi3.py`, `modeling_mixtral.py`,
//! `modeling_qwen2_moe.py`, `modeling_deepseek_v3.py`…).

use crate::model::{Attention, Family, MlpKind};

/// Attention projections: the path prefix, the modules that read the
/// block's input (q/k/v or the fused qkv) and the output projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttnNames {
    pub prefix: &'static str,
    pub inputs: &'static [&'static str],
    pub out: &'static str,
}

/// An MLP: the path prefix, the modules that read its input (gate and up,
/// a fused gate_up, or one fc) and the down projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpNames {
    pub prefix: &'static str,
    pub inputs: &'static [&'static str],
    pub down: &'static str,
}

/// Every name vramfit needs of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyNames {
    pub embed: &'static str,
    /// the learned position table (GPT-2 `wpe`)
    pub position_embed: &'static str,
    /// the output head (GPT-NeoX calls it `embed_out`)
    pub lm_head: &'static str,
    /// the separate q/k/v layout of this family (Phi's output is `dense`)
    separate_attention: AttnNames,
    /// the fused-qkv layout of this family (GPT-2 `c_attn`, Phi-3 `qkv_proj`, NeoX/Falcon `query_key_value`)
    fused_attention: AttnNames,
    gated_mlp: MlpNames,
    plain_mlp: MlpNames,
    /// routed experts (Mixtral names them w1/w3/w2 under `block_sparse_moe`)
    experts: Option<MlpNames>,
    /// the MoE router's path (its leaf is `gate`)
    pub router: &'static str,
    /// the shared experts' prefix (Qwen2-MoE: one `shared_expert`, DeepSeek: fused `shared_experts`)
    pub shared_experts: &'static str,
    /// the decoder block class FSDP's transformer auto-wrap policy wraps (None: unknown)
    pub decoder_layer: Option<&'static str>,
    /// the final norm's path
    pub final_norm: &'static str,
    /// the Gated DeltaNet module prefix (Qwen3-Next/3.5 `linear_attn`)
    pub linear_attention: &'static str,
    /// how its input projections are split
    pub linear_attention_inputs: LinearAttnInputs,
    /// the Mamba-2 mixer prefix (Nemotron-H `mixer`)
    pub mamba: &'static str,
}

/// Gated DeltaNet input projections: Qwen3-Next fuses q/k/v/z and b/a;
/// Qwen3.5 keeps four (`in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinearAttnInputs {
    Fused,
    Split,
}

/// DeepSeek multi-head latent attention's modules (`modeling_deepseek_v3.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlaNames {
    /// low-rank query: down-projection, its norm, up-projection
    pub q_a: &'static str,
    pub q_a_norm: &'static str,
    pub q_b: &'static str,
    /// the plain query projection (no `q_lora_rank`)
    pub q: &'static str,
    /// the compressed K/V latent (+ the shared rope key), its norm, its up-projection
    pub kv_a: &'static str,
    pub kv_a_norm: &'static str,
    pub kv_b: &'static str,
    pub out: &'static str,
}

pub const MLA_NAMES: MlaNames = MlaNames {
    q_a: "q_a_proj",
    q_a_norm: "q_a_layernorm",
    q_b: "q_b_proj",
    q: "q_proj",
    kv_a: "kv_a_proj_with_mqa",
    kv_a_norm: "kv_a_layernorm",
    kv_b: "kv_b_proj",
    out: "o_proj",
};

/// Qwen3's per-head q/k RMSNorms: path prefix and leaf names.
pub const QK_NORMS: (&str, [&str; 2]) = ("layers.*.self_attn.", ["q_norm", "k_norm"]);
/// DeepSeek-V3's per-expert router correction bias.
pub const ROUTER_BIAS: &str = "layers.*.mlp.gate.e_score_correction_bias";
/// Qwen2-MoE's hidden → 1 gate on the shared expert.
pub const SHARED_EXPERT_GATE: &str = "layers.*.mlp.shared_expert_gate";
/// gpt-oss's learned attention sink per head (`GptOssAttention.sinks`).
pub const ATTENTION_SINKS: &str = "layers.*.self_attn.sinks";
/// DeepSeek-V3.2's sparse-attention indexer (`Indexer` in DeepSeek's inference/model.py).
pub const INDEXER: &str = "layers.*.self_attn.indexer.";
/// BERT's pooler (`BertPooler.dense`).
pub const POOLER: &str = "pooler.dense";
/// BERT's token-type table (`BertEmbeddings.token_type_embeddings`).
pub const TOKEN_TYPE_EMBEDDINGS: &str = "embeddings.token_type_embeddings";
/// BERT's LayerNorm over the summed embeddings (`BertEmbeddings.LayerNorm`).
pub const EMBEDDINGS_NORM: &str = "embeddings.LayerNorm";

const SEPARATE: AttnNames =
    AttnNames { prefix: "layers.*.self_attn.", inputs: &["q_proj", "k_proj", "v_proj"], out: "o_proj" };
/// DeepSeek multi-head latent attention: the modules reading the block's input.
const MLA: AttnNames = AttnNames {
    prefix: "layers.*.self_attn.",
    inputs: &[MLA_NAMES.q_a, MLA_NAMES.q, MLA_NAMES.kv_a],
    out: MLA_NAMES.out,
};
const NEOX_FUSED: AttnNames = AttnNames { prefix: "layers.*.attention.", inputs: &["query_key_value"], out: "dense" };
const GATED: MlpNames = MlpNames { prefix: "layers.*.mlp.", inputs: &["gate_proj", "up_proj"], down: "down_proj" };
const PLAIN: MlpNames = MlpNames { prefix: "layers.*.mlp.", inputs: &["dense_h_to_4h"], down: "dense_4h_to_h" };

const LLAMA_LIKE: FamilyNames = FamilyNames {
    separate_attention: SEPARATE,
    embed: "embed_tokens",
    position_embed: "wpe",
    lm_head: "lm_head",
    fused_attention: NEOX_FUSED,
    gated_mlp: GATED,
    plain_mlp: PLAIN,
    experts: None,
    router: "layers.*.mlp.gate",
    shared_experts: "layers.*.mlp.shared_experts.",
    decoder_layer: None,
    final_norm: "norm",
    linear_attention: "layers.*.linear_attn.",
    linear_attention_inputs: LinearAttnInputs::Fused,
    mamba: "layers.*.mixer.",
};

/// Mixtral's names.
const MIXTRAL: FamilyNames = FamilyNames {
    experts: Some(MlpNames { prefix: "layers.*.block_sparse_moe.experts.*.", inputs: &["w1", "w3"], down: "w2" }),
    router: "layers.*.block_sparse_moe.gate",
    decoder_layer: Some("MixtralDecoderLayer"),
    ..LLAMA_LIKE
};

/// Qwen2Moe's names.
const QWEN2_MOE: FamilyNames = FamilyNames {
    shared_experts: "layers.*.mlp.shared_expert.",
    decoder_layer: Some("Qwen2MoeDecoderLayer"),
    ..LLAMA_LIKE
};

/// Phi3's names.
const PHI3: FamilyNames = FamilyNames {
    fused_attention: AttnNames { prefix: "layers.*.self_attn.", inputs: &["qkv_proj"], out: "o_proj" },
    gated_mlp: MlpNames { prefix: "layers.*.mlp.", inputs: &["gate_up_proj"], down: "down_proj" },
    decoder_layer: Some("Phi3DecoderLayer"),
    ..LLAMA_LIKE
};

/// Gpt2's names.
const GPT2: FamilyNames = FamilyNames {
    embed: "wte",
    fused_attention: AttnNames { prefix: "h.*.attn.", inputs: &["c_attn"], out: "c_proj" },
    plain_mlp: MlpNames { prefix: "layers.*.mlp.", inputs: &["c_fc"], down: "c_proj" },
    decoder_layer: Some("GPT2Block"),
    ..LLAMA_LIKE
};

/// Falcon's names.
const FALCON: FamilyNames = FamilyNames {
    embed: "word_embeddings",
    fused_attention: AttnNames { prefix: "h.*.self_attention.", inputs: &["query_key_value"], out: "dense" },
    decoder_layer: Some("FalconDecoderLayer"),
    ..LLAMA_LIKE
};

/// Phi's names.
const PHI: FamilyNames = FamilyNames {
    plain_mlp: MlpNames { prefix: "layers.*.mlp.", inputs: &["fc1"], down: "fc2" },
    separate_attention: AttnNames {
        prefix: "layers.*.self_attn.",
        inputs: &["q_proj", "k_proj", "v_proj"],
        out: "dense",
    },
    final_norm: "final_layernorm",
    decoder_layer: Some("PhiDecoderLayer"),
    ..LLAMA_LIKE
};

/// GptOss's names.
const GPT_OSS: FamilyNames = FamilyNames {
    gated_mlp: MlpNames { prefix: "layers.*.mlp.experts.", inputs: &["gate_up_proj"], down: "down_proj" },
    router: "layers.*.mlp.router",
    decoder_layer: Some("GptOssDecoderLayer"),
    ..LLAMA_LIKE
};

/// Qwen3Next's names.
const QWEN3_NEXT: FamilyNames = FamilyNames {
    shared_experts: "layers.*.mlp.shared_expert.",
    decoder_layer: Some("Qwen3NextDecoderLayer"),
    ..LLAMA_LIKE
};

/// Qwen35's names.
const QWEN35: FamilyNames = FamilyNames {
    shared_experts: "layers.*.mlp.shared_expert.",
    linear_attention_inputs: LinearAttnInputs::Split,
    decoder_layer: Some("Qwen3_5DecoderLayer"),
    ..LLAMA_LIKE
};

/// NemotronH's names.
const NEMOTRON_H: FamilyNames = FamilyNames {
    separate_attention: AttnNames { prefix: "layers.*.mixer.", ..SEPARATE },
    embed: "backbone.embeddings",
    plain_mlp: MlpNames { prefix: "layers.*.mixer.", inputs: &["up_proj"], down: "down_proj" },
    experts: Some(MlpNames { prefix: "layers.*.mixer.experts.*.", inputs: &["up_proj"], down: "down_proj" }),
    router: "layers.*.mixer.gate",
    shared_experts: "layers.*.mixer.shared_experts.",
    final_norm: "norm_f",
    decoder_layer: Some("NemotronHBlock"),
    ..LLAMA_LIKE
};

/// GraniteMoe's names.
const GRANITE_MOE: FamilyNames = FamilyNames {
    experts: Some(MlpNames { prefix: "layers.*.block_sparse_moe.", inputs: &["input_linear"], down: "output_linear" }),
    router: "layers.*.block_sparse_moe.router.layer",
    decoder_layer: Some("GraniteMoeDecoderLayer"),
    ..LLAMA_LIKE
};

/// Granite 4's names (`modeling_granitemoehybrid.py`): `mamba` or `self_attn`, the
/// always-present `shared_mlp` (fused `input_linear` of 2 × shared_intermediate_size,
/// `output_linear`) and the `block_sparse_moe` of GraniteMoe (3-D `input_linear` /
/// `output_linear`, a bias-free `router.layer`).
const GRANITE_MOE_HYBRID: FamilyNames = FamilyNames {
    gated_mlp: MlpNames { prefix: "layers.*.shared_mlp.", inputs: &["input_linear"], down: "output_linear" },
    experts: Some(MlpNames { prefix: "layers.*.block_sparse_moe.", inputs: &["input_linear"], down: "output_linear" }),
    router: "layers.*.block_sparse_moe.router.layer",
    shared_experts: "layers.*.shared_mlp.",
    decoder_layer: Some("GraniteMoeHybridDecoderLayer"),
    mamba: "layers.*.mamba.",
    ..LLAMA_LIKE
};

/// Falcon-H1's names (`modeling_falcon_h1.py`): `self_attn` and `mamba` side by side,
/// the MLP is `feed_forward`, the last norm `final_layernorm`.
const FALCON_H1: FamilyNames = FamilyNames {
    gated_mlp: MlpNames { prefix: "layers.*.feed_forward.", inputs: &["gate_proj", "up_proj"], down: "down_proj" },
    decoder_layer: Some("FalconH1DecoderLayer"),
    final_norm: "final_layernorm",
    mamba: "layers.*.mamba.",
    ..LLAMA_LIKE
};

/// MiniMax-M2's names.
const MINIMAX_M2: FamilyNames = FamilyNames {
    // the checkpoint's names (transformers fuses them into 3-D gate_up_proj / down_proj)
    experts: Some(MlpNames { prefix: "layers.*.block_sparse_moe.experts.*.", inputs: &["w1", "w3"], down: "w2" }),
    router: "layers.*.block_sparse_moe.gate",
    decoder_layer: Some("MiniMaxM2DecoderLayer"),
    ..LLAMA_LIKE
};

/// Llama 4's names (`modeling_llama4.py`): the MLP block is `feed_forward`, dense
/// (`Llama4TextMLP`) or MoE (`Llama4TextMoe`: experts fused 3-D as `gate_up_proj`
/// [E, h, 2·I] and `down_proj` [E, I, h], a bias-free `router`, a `shared_expert`).
const LLAMA4: FamilyNames = FamilyNames {
    gated_mlp: MlpNames { prefix: "layers.*.feed_forward.", inputs: &["gate_proj", "up_proj"], down: "down_proj" },
    experts: Some(MlpNames { prefix: "layers.*.feed_forward.experts.", inputs: &["gate_up_proj"], down: "down_proj" }),
    router: "layers.*.feed_forward.router",
    shared_experts: "layers.*.feed_forward.shared_expert.",
    decoder_layer: Some("Llama4TextDecoderLayer"),
    ..LLAMA_LIKE
};

/// Bert's names.
const BERT: FamilyNames = FamilyNames {
    separate_attention: AttnNames {
        prefix: "encoder.layer.*.attention.self.",
        inputs: &["query", "key", "value"],
        out: "dense",
    },
    embed: "embeddings.word_embeddings",
    position_embed: "embeddings.position_embeddings",
    plain_mlp: MlpNames { prefix: "encoder.layer.*.", inputs: &["intermediate.dense"], down: "output.dense" },
    decoder_layer: Some("BertLayer"),
    ..LLAMA_LIKE
};

/// The names of `family`.
pub fn names(family: Family) -> FamilyNames {
    let layer = |c: &'static str| Some(c);
    match family {
        Family::Llama => FamilyNames { decoder_layer: layer("LlamaDecoderLayer"), ..LLAMA_LIKE },
        Family::Mistral => FamilyNames { decoder_layer: layer("MistralDecoderLayer"), ..LLAMA_LIKE },
        Family::Mixtral => MIXTRAL,
        Family::Qwen2 => FamilyNames { decoder_layer: layer("Qwen2DecoderLayer"), ..LLAMA_LIKE },
        Family::Qwen2Moe => QWEN2_MOE,
        Family::Qwen3 => FamilyNames { decoder_layer: layer("Qwen3DecoderLayer"), ..LLAMA_LIKE },
        Family::Qwen3Moe => FamilyNames { decoder_layer: layer("Qwen3MoeDecoderLayer"), ..LLAMA_LIKE },
        Family::Gemma => FamilyNames { decoder_layer: layer("GemmaDecoderLayer"), ..LLAMA_LIKE },
        Family::Gemma2 => FamilyNames { decoder_layer: layer("Gemma2DecoderLayer"), ..LLAMA_LIKE },
        Family::Phi3 => PHI3,
        Family::Gpt2 => GPT2,
        Family::GptNeox => {
            FamilyNames { embed: "embed_in", lm_head: "embed_out", decoder_layer: layer("GPTNeoXLayer"), ..LLAMA_LIKE }
        }
        Family::Falcon => FALCON,
        Family::DeepseekV3 => FamilyNames { decoder_layer: layer("DeepseekV3DecoderLayer"), ..LLAMA_LIKE },
        Family::Phi => PHI,
        Family::Olmo2 => FamilyNames { decoder_layer: layer("Olmo2DecoderLayer"), ..LLAMA_LIKE },
        Family::Gemma3 => FamilyNames { decoder_layer: layer("Gemma3DecoderLayer"), ..LLAMA_LIKE },
        Family::GptOss => GPT_OSS,
        Family::Qwen3Next => QWEN3_NEXT,
        Family::Qwen35 => QWEN35,
        Family::NemotronH => NEMOTRON_H,
        Family::GraniteMoe => GRANITE_MOE,
        Family::GraniteMoeHybrid => GRANITE_MOE_HYBRID,
        Family::FalconH1 => FALCON_H1,
        Family::MiniMaxM2 => MINIMAX_M2,
        Family::Llama4 => LLAMA4,
        Family::Bert => BERT,
        Family::Generic => LLAMA_LIKE,
    }
}

impl FamilyNames {
    /// The attention projections of `layout`.
    pub fn attention(&self, layout: Attention) -> AttnNames {
        match layout {
            Attention::Separate => self.separate_attention,
            Attention::FusedQkv => self.fused_attention,
            Attention::Mla => MLA,
        }
    }

    /// A dense MLP of `kind`.
    pub fn mlp(&self, kind: MlpKind) -> MlpNames {
        match kind {
            MlpKind::Gated => self.gated_mlp,
            MlpKind::Plain => self.plain_mlp,
        }
    }

    /// One routed expert's MLP of `kind`.
    pub fn expert(&self, kind: MlpKind) -> MlpNames {
        self.experts.unwrap_or(MlpNames { prefix: "layers.*.mlp.experts.*.", ..self.mlp(kind) })
    }
}

/// The transformer block class FSDP wraps, per family (`transformers` names).
pub fn layer_class(family: Family) -> Option<&'static str> {
    names(family).decoder_layer
}
