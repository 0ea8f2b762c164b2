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
use crate::hf::{self, FamilyNames, MlpNames};
use crate::model::{Attention as AttnLayout, Ffn, LayerKind, Mixer, MlpKind, ModelSpec, NormKind, Positional};
use crate::units::{add, product};
use serde::{Deserialize, Serialize};
use LinearRole::{Attention, Expert, Mlp, Router, SharedExpert};

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

impl LinearRole {
    pub const ALL: [LinearRole; 6] = [
        LinearRole::Attention,
        LinearRole::Mlp,
        LinearRole::Expert,
        LinearRole::SharedExpert,
        LinearRole::Router,
        LinearRole::LmHead,
    ];

    /// The JSON spelling (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            LinearRole::Attention => "attention",
            LinearRole::Mlp => "mlp",
            LinearRole::Expert => "expert",
            LinearRole::SharedExpert => "shared_expert",
            LinearRole::Router => "router",
            LinearRole::LmHead => "lm_head",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "role")]
pub enum ParamGroupKind {
    Linear(LinearRole),
    Embedding,
    PositionEmbedding,
    Norm,
    /// free-standing vectors (router correction bias, sinks, SSM parameters, convolutions)
    Other,
    /// a vision tower's tensors (multimodal checkpoints)
    Vision,
}

impl ParamGroupKind {
    /// The JSON spelling of the kind (the serde tag: `linear`, `embedding`, …).
    pub fn name(self) -> &'static str {
        match self {
            ParamGroupKind::Linear(_) => "linear",
            ParamGroupKind::Embedding => "embedding",
            ParamGroupKind::PositionEmbedding => "position_embedding",
            ParamGroupKind::Norm => "norm",
            ParamGroupKind::Other => "other",
            ParamGroupKind::Vision => "vision",
        }
    }
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
    /// the decoder layers holding this group, `copies / layer_ids.len()` instances
    /// each (empty: outside the decoder layers); what pipeline stages and
    /// per-layer quantization exclusions need
    #[serde(skip)]
    pub layer_ids: Vec<u32>,
    /// kept whole on every tensor-parallel rank: MLA's down-projections
    /// `q_a_proj` and `kv_a_proj_with_mqa` (vLLM and SGLang build them as
    /// `ReplicatedLinear`, `DeepseekV2MLAAttention` in
    /// vllm/model_executor/models/deepseek_v2.py and
    /// sglang/srt/models/deepseek_v2.py; Megatron-Core's `MLASelfAttention`
    /// builds them with `parallel_mode="duplicated"`)
    #[serde(default, skip_serializing_if = "is_false")]
    pub tp_replicated: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
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
            layer_ids: Vec::new(),
            tp_replicated: false,
        }
    }

    /// The same group, kept whole on every tensor-parallel rank.
    fn replicated_under_tp(mut self) -> Self {
        self.tp_replicated = true;
        self
    }

    /// The same group placed in `ids` (its copies spread evenly over them).
    fn in_layers(mut self, ids: &[u32]) -> Self {
        self.layer_ids = ids.to_vec();
        self
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
    /// Module names and paths come from the family table ([`crate::hf`]).
    pub fn of(spec: &ModelSpec) -> Result<ParamLayout, CoreError> {
        spec.validate()?;
        let names = hf::names(spec.family);
        let layers = spec.layers();
        let mut g = Vec::new();
        push_embeddings(&mut g, spec, &names);
        push_attention(&mut g, spec, &names, &layers)?;
        push_linear_attention(&mut g, spec, &names, &layers);
        push_mamba(&mut g, spec, &names, &layers);
        push_norms(&mut g, spec);
        push_mlps(&mut g, spec, &names, &layers);
        // Final norm (encoders end on each layer's own LayerNorm) and head.
        if spec.encoder.is_none() {
            let n = names.final_norm;
            g.push(ParamGroup::new(n, leaf(n), ParamGroupKind::Norm, 1, spec.hidden_size, norm_bias(spec), 1));
        }
        if spec.encoder.as_ref().is_some_and(|e| e.pooler) {
            g.push(ParamGroup::linear(
                hf::POOLER,
                leaf(hf::POOLER),
                LinearRole::Mlp,
                spec.hidden_size,
                spec.hidden_size,
                true,
                1,
            ));
        }
        if !spec.tied_embeddings && spec.encoder.is_none() {
            let head = names.lm_head;
            g.push(ParamGroup::linear(
                head,
                head,
                LinearRole::LmHead,
                spec.hidden_size,
                spec.vocab_size,
                spec.lm_head_bias,
                1,
            ));
        }
        if let Some(v) = &spec.vision {
            crate::vision::push_vision(&mut g, v);
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

/// The leaf module name of a dotted path (`…mlp.shared_expert_gate` → `shared_expert_gate`).
fn leaf(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// LayerNorm has a bias (beta); RMSNorm does not.
fn norm_bias(spec: &ModelSpec) -> bool {
    spec.norm == NormKind::LayerNorm
}

/// Indices of the layers matching `pred`.
fn layer_ids(layers: &[LayerKind], pred: impl Fn(&LayerKind) -> bool) -> Vec<u32> {
    layers.iter().enumerate().filter(|(_, l)| pred(l)).map(|(i, _)| i as u32).collect()
}

/// Token embeddings, the learned position table when there is one, and an
/// encoder's token-type table and embedding LayerNorm.
fn push_embeddings(g: &mut Vec<ParamGroup>, spec: &ModelSpec, names: &FamilyNames) {
    let h = spec.hidden_size;
    g.push(ParamGroup::new(names.embed, leaf(names.embed), ParamGroupKind::Embedding, spec.vocab_size, h, false, 1));
    if spec.positional == Positional::Learned {
        let wpe = names.position_embed;
        g.push(ParamGroup::new(
            wpe,
            leaf(wpe),
            ParamGroupKind::PositionEmbedding,
            spec.max_position_embeddings,
            h,
            false,
            1,
        ));
    }
    if let Some(e) = &spec.encoder {
        let tt = hf::TOKEN_TYPE_EMBEDDINGS;
        g.push(ParamGroup::new(tt, leaf(tt), ParamGroupKind::PositionEmbedding, e.token_types, h, false, 1));
        let ln = hf::EMBEDDINGS_NORM;
        g.push(ParamGroup::new(ln, leaf(ln), ParamGroupKind::Norm, 1, h, true, 1));
    }
}

/// The attention projections of every attention layer, their q/k norms,
/// gpt-oss's sinks and the DeepSeek sparse-attention indexer.
fn push_attention(
    g: &mut Vec<ParamGroup>,
    spec: &ModelSpec,
    names: &FamilyNames,
    layers: &[LayerKind],
) -> Result<(), CoreError> {
    let ids = layer_ids(layers, |l| l.mixer.has_kv());
    if ids.is_empty() {
        return Ok(());
    }
    let (l, h) = (ids.len() as u64, spec.hidden_size);
    let n = names.attention(spec.attention);
    let p = n.prefix;
    // Qwen3-Next's q_proj also yields the output gate: twice as wide
    let q_width = if spec.attn_output_gate { 2 * spec.q_width() } else { spec.q_width() };
    let mut linear = |name: &str, d_in, d_out, bias| {
        g.push(ParamGroup::linear(&format!("{p}{name}"), name, Attention, d_in, d_out, bias, l).in_layers(&ids))
    };
    match spec.attention {
        AttnLayout::Separate => {
            let [q, k, v] = [n.inputs[0], n.inputs[1], n.inputs[2]];
            linear(q, h, q_width, spec.qkv_bias);
            linear(k, h, spec.kv_width(), spec.qkv_bias);
            linear(v, h, spec.kv_width(), spec.qkv_bias);
            linear(n.out, spec.attn_out_width(), h, spec.o_bias);
        }
        AttnLayout::FusedQkv => {
            linear(n.inputs[0], h, q_width + 2 * spec.kv_width(), spec.qkv_bias);
            linear(n.out, spec.attn_out_width(), h, spec.o_bias);
        }
        AttnLayout::Mla => push_mla(g, spec, p, &ids)?,
    }
    if spec.qk_norm {
        let (prefix, norms) = hf::QK_NORMS;
        // per head (Qwen3, Gemma 3: head_dim) or over the whole projection (OLMo 2)
        let widths =
            if spec.qk_norm_full_width { [spec.q_width(), spec.kv_width()] } else { [spec.head_dim, spec.head_dim] };
        for (name, width) in norms.into_iter().zip(widths) {
            let path = format!("{prefix}{name}");
            g.push(ParamGroup::new(&path, name, ParamGroupKind::Norm, 1, width, false, l).in_layers(&ids));
        }
    }
    if spec.attention_sinks {
        let s = hf::ATTENTION_SINKS;
        g.push(ParamGroup::new(s, leaf(s), ParamGroupKind::Other, 1, spec.num_heads, false, l).in_layers(&ids));
    }
    if let (Some(ix), Some(m)) = (&spec.indexer, &spec.mla) {
        // DeepSeek-V3.2 `Indexer` (inference/model.py): wq_b from the q latent,
        // wk and a LayerNorm'd key of one head, weights_proj giving each head's weight
        let q_in = m.q_lora_rank.unwrap_or(h);
        let x = hf::INDEXER;
        let mut push = |name: &str, kind, d_in, d_out, bias| {
            g.push(ParamGroup::new(&format!("{x}{name}"), name, kind, d_in, d_out, bias, l).in_layers(&ids))
        };
        push("wq_b", ParamGroupKind::Linear(Attention), q_in, ix.heads * ix.head_dim, false);
        push("wk", ParamGroupKind::Linear(Attention), h, ix.head_dim, false);
        push("k_norm", ParamGroupKind::Norm, 1, ix.head_dim, true);
        push("weights_proj", ParamGroupKind::Linear(LinearRole::Router), h, ix.heads, false);
    }
    Ok(())
}

/// DeepSeek multi-head latent attention (`modeling_deepseek_v3.py`): a
/// low-rank query (or a plain q_proj) and the compressed K/V latent.
fn push_mla(g: &mut Vec<ParamGroup>, spec: &ModelSpec, p: &str, ids: &[u32]) -> Result<(), CoreError> {
    let m = spec.mla.as_ref().ok_or_else(|| CoreError::invalid("attention", "MLA layout without MLA dimensions"))?;
    let (l, h, heads) = (ids.len() as u64, spec.hidden_size, spec.num_heads);
    let q_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
    let linear = |name: &str, d_in, d_out, bias| {
        ParamGroup::linear(&format!("{p}{name}"), name, Attention, d_in, d_out, bias, l).in_layers(ids)
    };
    let norm = |name: &str, width| {
        ParamGroup::new(&format!("{p}{name}"), name, ParamGroupKind::Norm, 1, width, false, l).in_layers(ids)
    };
    let n = hf::MLA_NAMES;
    match m.q_lora_rank {
        Some(r) => {
            g.push(linear(n.q_a, h, r, spec.qkv_bias).replicated_under_tp());
            g.push(norm(n.q_a_norm, r));
            g.push(linear(n.q_b, r, heads * q_head, false));
        }
        None => g.push(linear(n.q, h, heads * q_head, false)),
    }
    g.push(linear(n.kv_a, h, m.kv_lora_rank + m.qk_rope_head_dim, spec.qkv_bias).replicated_under_tp());
    g.push(norm(n.kv_a_norm, m.kv_lora_rank));
    g.push(linear(n.kv_b, m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim), false));
    g.push(linear(n.out, heads * m.v_head_dim, h, spec.o_bias));
    Ok(())
}

/// Gated DeltaNet layers (`Qwen3NextGatedDeltaNet`, `Qwen3_5GatedDeltaNet`):
/// the q/k/v/z input projection, the per-head beta and decay inputs, a
/// depthwise convolution over q, k and v, per-head `dt_bias` and `A_log`,
/// a gated RMSNorm of one value head and the output projection.
fn push_linear_attention(g: &mut Vec<ParamGroup>, spec: &ModelSpec, names: &FamilyNames, layers: &[LayerKind]) {
    let Some(la) = &spec.linear_attention else { return };
    let ids = layer_ids(layers, |l| l.mixer == Mixer::LinearAttention);
    if ids.is_empty() {
        return;
    }
    let (l, h) = (ids.len() as u64, spec.hidden_size);
    let key_dim = la.key_heads * la.key_head_dim;
    let value_dim = la.value_heads * la.value_head_dim;
    let p = names.linear_attention;
    let mut push = |name: &str, kind, d_in, d_out| {
        g.push(ParamGroup::new(&format!("{p}{name}"), name, kind, d_in, d_out, false, l).in_layers(&ids))
    };
    let lin = ParamGroupKind::Linear(Attention);
    match names.linear_attention_inputs {
        hf::LinearAttnInputs::Fused => {
            push("in_proj_qkvz", lin, h, 2 * key_dim + 2 * value_dim);
            push("in_proj_ba", lin, h, 2 * la.value_heads);
        }
        hf::LinearAttnInputs::Split => {
            push("in_proj_qkv", lin, h, 2 * key_dim + value_dim);
            push("in_proj_z", lin, h, value_dim);
            push("in_proj_b", lin, h, la.value_heads);
            push("in_proj_a", lin, h, la.value_heads);
        }
    }
    push("conv1d", ParamGroupKind::Other, la.conv_kernel, la.conv_dim());
    push("dt_bias", ParamGroupKind::Other, 1, la.value_heads);
    push("A_log", ParamGroupKind::Other, 1, la.value_heads);
    push("norm", ParamGroupKind::Norm, 1, la.value_head_dim);
    push("out_proj", lin, value_dim, h);
}

/// Mamba-2 mixers (`NemotronHMamba2Mixer`, Granite 4's `BambaMixer`,
/// `FalconH1Mixer`): in_proj to z, x, B, C and dt; a depthwise convolution
/// over x, B and C; per-head `dt_bias`, `A_log` and `D`; a gated RMSNorm
/// over d_inner (optional in Falcon-H1: `mamba_rms_norm`); out_proj.
fn push_mamba(g: &mut Vec<ParamGroup>, spec: &ModelSpec, names: &FamilyNames, layers: &[LayerKind]) {
    let Some(m) = &spec.mamba else { return };
    let ids = layer_ids(layers, |l| l.mixer.has_mamba());
    if ids.is_empty() {
        return;
    }
    let (l, h) = (ids.len() as u64, spec.hidden_size);
    let p = names.mamba;
    let mut push = |name: &str, kind, d_in, d_out, bias| {
        g.push(ParamGroup::new(&format!("{p}{name}"), name, kind, d_in, d_out, bias, l).in_layers(&ids))
    };
    let lin = ParamGroupKind::Linear(Attention);
    // projection_size = d_inner (z) + conv_dim (x, B, C) + heads (dt)
    push("in_proj", lin, h, m.inner() + m.conv_dim() + m.heads, m.proj_bias);
    push("conv1d", ParamGroupKind::Other, m.conv_kernel, m.conv_dim(), m.conv_bias);
    push("dt_bias", ParamGroupKind::Other, 1, m.heads, false);
    push("A_log", ParamGroupKind::Other, 1, m.heads, false);
    push("D", ParamGroupKind::Other, 1, m.heads, false);
    if m.gated_norm {
        push("norm", ParamGroupKind::Norm, 1, m.inner(), false);
    }
    push("out_proj", lin, m.inner(), h, m.proj_bias);
}

/// The layer norms of every layer, counted together.
fn push_norms(g: &mut Vec<ParamGroup>, spec: &ModelSpec) {
    let ids: Vec<u32> = (0..spec.num_layers as u32).collect();
    g.push(
        ParamGroup::new(
            "layers.*.norms",
            "norm",
            ParamGroupKind::Norm,
            1,
            spec.hidden_size,
            norm_bias(spec),
            spec.num_layers * spec.norms_per_layer,
        )
        .in_layers(&ids),
    );
}

/// MLPs: the dense layers, then the MoE layers (router, routed experts,
/// shared experts and their gate).
fn push_mlps(g: &mut Vec<ParamGroup>, spec: &ModelSpec, names: &FamilyNames, layers: &[LayerKind]) {
    let h = spec.hidden_size;
    let dense = layer_ids(layers, |l| l.ffn == Ffn::Dense);
    if !dense.is_empty() {
        let n = dense.len() as u64;
        push_mlp(g, spec, names.mlp(spec.mlp), Mlp, spec.intermediate_size, n, n, &dense);
    }
    let moe_ids = layer_ids(layers, |l| l.ffn == Ffn::Moe);
    let Some(moe) = spec.moe.as_ref().filter(|_| !moe_ids.is_empty()) else { return };
    let moe_layers = moe_ids.len() as u64;
    let e = moe.num_experts;
    let router = ParamGroup::linear(names.router, leaf(names.router), Router, h, e, moe.router_linear_bias, moe_layers);
    g.push(router.in_layers(&moe_ids));
    if moe.router_bias {
        let b = hf::ROUTER_BIAS;
        g.push(ParamGroup::new(b, leaf(b), ParamGroupKind::Other, 1, e, false, moe_layers).in_layers(&moe_ids));
    }
    let expert = names.expert(spec.mlp);
    let (copies, active) = (moe_layers * e, moe_layers * moe.experts_per_token);
    push_mlp(g, spec, expert, Expert, moe.expert_intermediate, copies, active, &moe_ids);
    if moe.shared_experts > 0 {
        // DeepSeek fuses its shared experts into one MLP of n_shared × width.
        let shared = MlpNames { prefix: names.shared_experts, ..names.mlp(spec.mlp) };
        let width = moe.shared_intermediate * moe.shared_experts;
        push_mlp(g, spec, shared, SharedExpert, width, moe_layers, moe_layers, &moe_ids);
    }
    if moe.shared_expert_gate {
        let sg = hf::SHARED_EXPERT_GATE;
        g.push(ParamGroup::linear(sg, leaf(sg), Router, h, 1, false, moe_layers).in_layers(&moe_ids));
    }
}

/// One MLP's matrices: each input projection (a fused gate_up is twice as
/// wide), then the down projection.
#[allow(clippy::too_many_arguments)]
fn push_mlp(
    g: &mut Vec<ParamGroup>,
    spec: &ModelSpec,
    names: MlpNames,
    role: LinearRole,
    width: u64,
    copies: u64,
    active: u64,
    ids: &[u32],
) {
    let h = spec.hidden_size;
    let fused_gate_up = spec.mlp == MlpKind::Gated && names.inputs.len() == 1;
    let up_width = if fused_gate_up { 2 * width } else { width };
    let mut add = |module: &str, d_in: u64, d_out: u64| {
        let path = format!("{}{module}", names.prefix);
        let mut grp = ParamGroup::linear(&path, module, role, d_in, d_out, spec.mlp_bias, copies).in_layers(ids);
        grp.active_copies = active;
        g.push(grp);
    };
    for module in names.inputs {
        add(module, h, up_width);
    }
    add(names.down, width, h);
}

/// Parameters of the multi-token-prediction layers a checkpoint ships
/// beside the model (DeepSeek-V3 `model.layers.61`, Qwen3.5 `mtp.*`): each
/// is one more decoder layer of the model's last kind plus its input
/// projection `eh_proj` (2·hidden → hidden) and three RMSNorms (enorm,
/// hnorm, the shared head's norm), as DeepSeek-V3's technical report §2.2
/// describes (other families' MTP modules, e.g. MiniMax-M2's, follow the same
/// shape as far as their configs tell). The shared embedding and output head
/// are not counted again.
pub fn mtp_params(spec: &ModelSpec) -> Result<u64, CoreError> {
    if spec.mtp_layers == 0 {
        return Ok(0);
    }
    let layout = ParamLayout::of(spec)?;
    let last = spec.num_layers.saturating_sub(1) as u32;
    let layer = layout
        .groups
        .iter()
        .filter(|g| g.layer_ids.contains(&last))
        .try_fold(0u64, |acc, g| add("mtp params", acc, g.params()? / g.layer_ids.len().max(1) as u64))?;
    let h = spec.hidden_size;
    let extra = product("mtp params", &[2 * h, h])? + 3 * h;
    product("mtp params", &[add("mtp params", layer, extra)?, spec.mtp_layers])
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
    fn json_spelling_is_the_name() {
        for r in LinearRole::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.name());
            let k = ParamGroupKind::Linear(r);
            assert_eq!(serde_json::to_value(k).unwrap()["kind"], k.name());
        }
        for k in [
            ParamGroupKind::Embedding,
            ParamGroupKind::PositionEmbedding,
            ParamGroupKind::Norm,
            ParamGroupKind::Other,
            ParamGroupKind::Vision,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap()["kind"], k.name());
        }
    }

    #[test]
    fn all_linear_names() {
        let m = ModelSpec::llama_like("x", 64, 2, 4, 4, 128, 100);
        let names = ParamLayout::of(&m).unwrap().linear_module_names();
        assert_eq!(names, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]);
    }
}
