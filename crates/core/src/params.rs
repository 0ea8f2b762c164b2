//! Architecture-aware parameter layout: every parameter tensor group of a
//! [`ModelSpec`], with module names as the Hugging Face implementation
//! spells them (so LoRA targets like `q_proj,v_proj` can be counted), and
//! which groups a token actually passes through (MoE: total vs active).
//!
//! Counts follow the `transformers` modeling files of each family
//! (`modeling_llama.py`, `modeling_gpt2.py`, `modeling_gpt_neox.py`,
//! `modeling_falcon.py`, `modeling_mixtral.py`, `modeling_deepseek_v3.py`…);
//! tests check them against the fake-tensor counts in
//! `shared/calibration/cases.jsonl` group A and against model cards.

use crate::error::CoreError;
use crate::model::{Attention as AttnLayout, Family, MlpKind, ModelSpec, NormKind, Positional};
use crate::units::{add, product};
use serde::{Deserialize, Serialize};

/// What a linear layer does: decides quantization (routers and lm_head
/// stay 16-bit), tensor-parallel splitting and activation shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearRole {
    Attention,
    Mlp,
    Expert,
    SharedExpert,
    Router,
    LmHead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "role")]
pub enum ParamGroupKind {
    Linear(LinearRole),
    Embedding,
    PositionEmbedding,
    Norm,
    /// free-standing vectors (router correction bias)
    Other,
}

/// One kind of parameter tensor, repeated `copies` times in the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamGroup {
    /// dotted path with `*` for the layer index, e.g. `layers.*.self_attn.q_proj`
    pub path: String,
    /// leaf module name (`q_proj`): what PEFT's `target_modules` matches
    pub module: String,
    pub kind: ParamGroupKind,
    /// input features (rows of an embedding table)
    pub d_in: u64,
    /// output features (embedding width; norm width)
    pub d_out: u64,
    /// has a bias vector of `d_out` (LayerNorm: its beta)
    pub bias: bool,
    /// instances in the whole model (layers × experts)
    pub copies: u64,
    /// instances a single token passes through (MoE: top-k of the experts)
    pub active_copies: u64,
}

impl ParamGroup {
    fn new(path: &str, module: &str, kind: ParamGroupKind, d_in: u64, d_out: u64, bias: bool, copies: u64) -> Self {
        ParamGroup {
            path: path.to_string(),
            module: module.to_string(),
            kind,
            d_in,
            d_out,
            bias,
            copies,
            active_copies: copies,
        }
    }

    fn linear(path: &str, module: &str, role: LinearRole, d_in: u64, d_out: u64, bias: bool, copies: u64) -> Self {
        Self::new(path, module, ParamGroupKind::Linear(role), d_in, d_out, bias, copies)
    }

    /// Weight elements of one instance (the matrix, or a norm's gamma).
    pub fn weight_elems(&self) -> Result<u64, CoreError> {
        product(&self.path, &[self.d_in, self.d_out])
    }

    /// Bias elements of one instance.
    pub fn bias_elems(&self) -> u64 {
        if self.bias {
            self.d_out
        } else {
            0
        }
    }

    /// All parameters of this group across the model.
    pub fn params(&self) -> Result<u64, CoreError> {
        self.params_over(self.copies)
    }

    /// Parameters a token touches.
    pub fn active_params(&self) -> Result<u64, CoreError> {
        self.params_over(self.active_copies)
    }

    fn params_over(&self, copies: u64) -> Result<u64, CoreError> {
        let per = add(&self.path, self.weight_elems()?, self.bias_elems())?;
        product(&self.path, &[per, copies])
    }

    pub fn is_linear(&self) -> bool {
        matches!(self.kind, ParamGroupKind::Linear(_))
    }

    pub fn role(&self) -> Option<LinearRole> {
        match self.kind {
            ParamGroupKind::Linear(r) => Some(r),
            _ => None,
        }
    }
}

/// Every parameter group of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamLayout {
    pub groups: Vec<ParamGroup>,
}

impl ParamLayout {
    /// Build the layout of `spec`. The spec must have passed `validate()`.
    pub fn of(spec: &ModelSpec) -> Result<ParamLayout, CoreError> {
        spec.validate()?;
        let mut g = Vec::new();
        let l = spec.num_layers;
        let h = spec.hidden_size;
        let f = spec.family;
        use LinearRole::*;

        // Embeddings.
        let (embed_name, lm_name) = match f {
            Family::Gpt2 => ("wte", "lm_head"),
            Family::GptNeox => ("embed_in", "embed_out"),
            Family::Falcon => ("word_embeddings", "lm_head"),
            _ => ("embed_tokens", "lm_head"),
        };
        g.push(ParamGroup::new(embed_name, embed_name, ParamGroupKind::Embedding, spec.vocab_size, h, false, 1));
        if spec.positional == Positional::Learned {
            g.push(ParamGroup::new(
                "wpe",
                "wpe",
                ParamGroupKind::PositionEmbedding,
                spec.max_position_embeddings,
                h,
                false,
                1,
            ));
        }

        // Attention.
        let norm_bias = spec.norm == NormKind::LayerNorm;
        match spec.attention {
            AttnLayout::Separate => {
                let p = "layers.*.self_attn.";
                g.push(ParamGroup::linear(
                    &format!("{p}q_proj"),
                    "q_proj",
                    Attention,
                    h,
                    spec.q_width(),
                    spec.qkv_bias,
                    l,
                ));
                g.push(ParamGroup::linear(
                    &format!("{p}k_proj"),
                    "k_proj",
                    Attention,
                    h,
                    spec.kv_width(),
                    spec.qkv_bias,
                    l,
                ));
                g.push(ParamGroup::linear(
                    &format!("{p}v_proj"),
                    "v_proj",
                    Attention,
                    h,
                    spec.kv_width(),
                    spec.qkv_bias,
                    l,
                ));
                g.push(ParamGroup::linear(
                    &format!("{p}o_proj"),
                    "o_proj",
                    Attention,
                    spec.attn_out_width(),
                    h,
                    spec.o_bias,
                    l,
                ));
            }
            AttnLayout::FusedQkv => {
                let qkv = spec.q_width() + 2 * spec.kv_width();
                let (path, qkv_name, o_name) = match f {
                    Family::Gpt2 => ("h.*.attn.", "c_attn", "c_proj"),
                    Family::Phi3 => ("layers.*.self_attn.", "qkv_proj", "o_proj"),
                    Family::Falcon => ("h.*.self_attention.", "query_key_value", "dense"),
                    _ => ("layers.*.attention.", "query_key_value", "dense"),
                };
                g.push(ParamGroup::linear(&format!("{path}{qkv_name}"), qkv_name, Attention, h, qkv, spec.qkv_bias, l));
                g.push(ParamGroup::linear(
                    &format!("{path}{o_name}"),
                    o_name,
                    Attention,
                    spec.attn_out_width(),
                    h,
                    spec.o_bias,
                    l,
                ));
            }
            AttnLayout::Mla => {
                let m = spec
                    .mla
                    .as_ref()
                    .ok_or_else(|| CoreError::invalid("attention", "MLA layout without MLA dimensions"))?;
                let p = "layers.*.self_attn.";
                let q_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
                match m.q_lora_rank {
                    Some(r) => {
                        g.push(ParamGroup::linear(
                            &format!("{p}q_a_proj"),
                            "q_a_proj",
                            Attention,
                            h,
                            r,
                            spec.qkv_bias,
                            l,
                        ));
                        g.push(ParamGroup::new(
                            &format!("{p}q_a_layernorm"),
                            "q_a_layernorm",
                            ParamGroupKind::Norm,
                            1,
                            r,
                            false,
                            l,
                        ));
                        g.push(ParamGroup::linear(
                            &format!("{p}q_b_proj"),
                            "q_b_proj",
                            Attention,
                            r,
                            spec.num_heads * q_head,
                            false,
                            l,
                        ));
                    }
                    None => g.push(ParamGroup::linear(
                        &format!("{p}q_proj"),
                        "q_proj",
                        Attention,
                        h,
                        spec.num_heads * q_head,
                        false,
                        l,
                    )),
                }
                g.push(ParamGroup::linear(
                    &format!("{p}kv_a_proj_with_mqa"),
                    "kv_a_proj_with_mqa",
                    Attention,
                    h,
                    m.kv_lora_rank + m.qk_rope_head_dim,
                    spec.qkv_bias,
                    l,
                ));
                g.push(ParamGroup::new(
                    &format!("{p}kv_a_layernorm"),
                    "kv_a_layernorm",
                    ParamGroupKind::Norm,
                    1,
                    m.kv_lora_rank,
                    false,
                    l,
                ));
                g.push(ParamGroup::linear(
                    &format!("{p}kv_b_proj"),
                    "kv_b_proj",
                    Attention,
                    m.kv_lora_rank,
                    spec.num_heads * (m.qk_nope_head_dim + m.v_head_dim),
                    false,
                    l,
                ));
                g.push(ParamGroup::linear(
                    &format!("{p}o_proj"),
                    "o_proj",
                    Attention,
                    spec.num_heads * m.v_head_dim,
                    h,
                    spec.o_bias,
                    l,
                ));
            }
        }
        if spec.qk_norm {
            g.push(ParamGroup::new(
                "layers.*.self_attn.q_norm",
                "q_norm",
                ParamGroupKind::Norm,
                1,
                spec.head_dim,
                false,
                l,
            ));
            g.push(ParamGroup::new(
                "layers.*.self_attn.k_norm",
                "k_norm",
                ParamGroupKind::Norm,
                1,
                spec.head_dim,
                false,
                l,
            ));
        }

        // Layer norms.
        g.push(ParamGroup::new(
            "layers.*.norms",
            "norm",
            ParamGroupKind::Norm,
            1,
            h,
            norm_bias,
            l * spec.norms_per_layer,
        ));

        // MLPs: dense layers, then MoE layers.
        let moe_layers = spec.moe_layers();
        let dense_layers = l - moe_layers;
        if dense_layers > 0 {
            push_mlp(&mut g, spec, "layers.*.mlp.", Mlp, spec.intermediate_size, dense_layers, dense_layers);
        }
        if let Some(moe) = &spec.moe {
            if moe_layers > 0 {
                let e = moe.num_experts;
                let router = if f == Family::Mixtral { "layers.*.block_sparse_moe.gate" } else { "layers.*.mlp.gate" };
                g.push(ParamGroup::linear(router, "gate", Router, h, e, false, moe_layers));
                if moe.router_bias {
                    g.push(ParamGroup::new(
                        "layers.*.mlp.gate.e_score_correction_bias",
                        "e_score_correction_bias",
                        ParamGroupKind::Other,
                        1,
                        e,
                        false,
                        moe_layers,
                    ));
                }
                let before = g.len();
                push_mlp(
                    &mut g,
                    spec,
                    "layers.*.mlp.experts.*.",
                    Expert,
                    moe.expert_intermediate,
                    moe_layers * e,
                    moe_layers * moe.experts_per_token,
                );
                if f == Family::Mixtral {
                    // Mixtral names its expert matrices w1 (gate), w3 (up), w2 (down).
                    for (grp, name) in g[before..].iter_mut().zip(["w1", "w3", "w2"]) {
                        grp.module = name.to_string();
                        grp.path = format!("layers.*.block_sparse_moe.experts.*.{name}");
                    }
                }
                if moe.shared_experts > 0 {
                    let prefix = if f == Family::Qwen2Moe {
                        "layers.*.mlp.shared_expert."
                    } else {
                        "layers.*.mlp.shared_experts."
                    };
                    // DeepSeek fuses its shared experts into one MLP of n_shared × width.
                    let copies = moe_layers;
                    push_mlp(
                        &mut g,
                        spec,
                        prefix,
                        SharedExpert,
                        moe.shared_intermediate * moe.shared_experts,
                        copies,
                        copies,
                    );
                }
                if moe.shared_expert_gate {
                    g.push(ParamGroup::linear(
                        "layers.*.mlp.shared_expert_gate",
                        "shared_expert_gate",
                        Router,
                        h,
                        1,
                        false,
                        moe_layers,
                    ));
                }
            }
        }

        // Final norm and head.
        g.push(ParamGroup::new("norm", "norm", ParamGroupKind::Norm, 1, h, norm_bias, 1));
        if !spec.tied_embeddings {
            g.push(ParamGroup::linear(lm_name, lm_name, LmHead, h, spec.vocab_size, false, 1));
        }
        Ok(ParamLayout { groups: g })
    }

    /// Total parameters (tied weights counted once).
    pub fn total(&self) -> Result<u64, CoreError> {
        self.groups.iter().try_fold(0u64, |acc, grp| add("params_total", acc, grp.params()?))
    }

    /// Parameters each token passes through (MoE: top-k experts only).
    pub fn active(&self) -> Result<u64, CoreError> {
        self.groups.iter().try_fold(0u64, |acc, grp| add("params_active", acc, grp.active_params()?))
    }

    /// Sum of parameters over the groups that match `pred`.
    pub fn sum_where(&self, pred: impl Fn(&ParamGroup) -> bool) -> Result<u64, CoreError> {
        self.groups.iter().filter(|g| pred(g)).try_fold(0u64, |acc, grp| add("params", acc, grp.params()?))
    }

    /// Embedding table parameters (token + position).
    pub fn embedding_params(&self) -> Result<u64, CoreError> {
        self.sum_where(|g| matches!(g.kind, ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding))
    }

    /// Leaf module names of linear layers inside the decoder blocks (what
    /// `all-linear` means to PEFT: every linear but the output head).
    pub fn linear_module_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .iter()
            .filter(|g| matches!(g.kind, ParamGroupKind::Linear(r) if r != LinearRole::LmHead))
            .map(|g| g.module.clone())
            .collect();
        names.dedup();
        let mut seen = std::collections::BTreeSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }
}

fn push_mlp(
    g: &mut Vec<ParamGroup>,
    spec: &ModelSpec,
    prefix: &str,
    role: LinearRole,
    width: u64,
    copies: u64,
    active: u64,
) {
    let h = spec.hidden_size;
    let b = spec.mlp_bias;
    let mut add = |module: &str, d_in: u64, d_out: u64| {
        let mut grp = ParamGroup::linear(&format!("{prefix}{module}"), module, role, d_in, d_out, b, copies);
        grp.active_copies = active;
        g.push(grp);
    };
    match (spec.mlp, spec.family) {
        (MlpKind::Gated, Family::Phi3) => {
            add("gate_up_proj", h, 2 * width);
            add("down_proj", width, h);
        }
        (MlpKind::Gated, _) => {
            add("gate_proj", h, width);
            add("up_proj", h, width);
            add("down_proj", width, h);
        }
        (MlpKind::Plain, Family::Gpt2) => {
            add("c_fc", h, width);
            add("c_proj", width, h);
        }
        (MlpKind::Plain, _) => {
            add("dense_h_to_4h", h, width);
            add("dense_4h_to_h", width, h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama2_7b_by_hand() {
        // embed 32000·4096 = 131,072,000 (×2: untied lm_head)
        // per layer: attn 4·4096² = 67,108,864; mlp 3·4096·11008 = 135,266,304; norms 2·4096
        // 32 · 202,383,360 + 262,144,000 + 4096 = 6,738,415,616
        let m = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
        assert_eq!(ParamLayout::of(&m).unwrap().total().unwrap(), 6_738_415_616);
    }

    #[test]
    fn gqa_shrinks_kv_projections() {
        // Mistral-7B: kv_heads 8 → k,v are 4096×1024.
        let m = ModelSpec::llama_like("mistral-7b", 4096, 32, 32, 8, 14336, 32000);
        assert_eq!(ParamLayout::of(&m).unwrap().total().unwrap(), 7_241_732_096);
    }

    #[test]
    fn all_linear_names() {
        let m = ModelSpec::llama_like("x", 64, 2, 4, 4, 128, 100);
        let names = ParamLayout::of(&m).unwrap().linear_module_names();
        assert_eq!(names, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]);
    }
}
