//! Weight bytes per GPU: dtype or quantization per parameter group, split
//! by tensor and pipeline parallelism. Shared by inference and training.

use crate::dtype::DType;
use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger};
use crate::params::{LinearRole, ParamGroup, ParamGroupKind, ParamLayout};
use crate::quant::QuantSpec;
use crate::units::{add, div_ceil, mul_div_ceil, product, sum};

/// How a group is laid out over `tp` tensor-parallel ranks.
///
/// Megatron / vLLM: attention heads and MLP widths split column/row-wise;
/// embeddings and the output head split over the vocabulary; norms and
/// routers are replicated.
pub fn tp_shards(group: &ParamGroup) -> bool {
    if group.tp_replicated {
        return false;
    }
    match group.kind {
        ParamGroupKind::Linear(LinearRole::Router) => false,
        ParamGroupKind::Linear(_) | ParamGroupKind::Embedding => true,
        // vision towers: counted whole on every rank (vLLM shards some, not all)
        ParamGroupKind::PositionEmbedding | ParamGroupKind::Norm | ParamGroupKind::Other | ParamGroupKind::Vision => {
            false
        }
    }
}

/// Does this group live in the decoder layers (and so split over pipeline stages)?
pub fn in_layers(group: &ParamGroup) -> bool {
    !group.layer_ids.is_empty() || group.path.starts_with("layers.") || group.path.starts_with("h.")
}

/// Is the group quantized when `quant` is set?
pub fn quantized(group: &ParamGroup) -> bool {
    matches!(
        group.kind,
        ParamGroupKind::Linear(LinearRole::Attention | LinearRole::Mlp | LinearRole::Expert | LinearRole::SharedExpert)
    )
}

/// Per-GPU share of `bytes` for a group on the worst pipeline stage.
///
/// Layers split as ceil(L / pp) per stage; embeddings sit on the first
/// stage and the head on the last, so with pp > 1 the worst stage holds
/// its layers plus the larger of the two ends (`ends` is handled by the caller).
pub fn shard(group: &ParamGroup, bytes: u64, layers: u64, tp: u64, pp: u64) -> Result<u64, CoreError> {
    let mut b = bytes;
    if tp > 1 && tp_shards(group) {
        b = div_ceil(b, tp);
    }
    if pp > 1 && in_layers(group) {
        let per_stage = layers.div_ceil(pp);
        b = if group.layer_ids.is_empty() {
            mul_div_ceil("pipeline stage weights", b, per_stage, layers)?
        } else {
            // the stage holding most of this group's layers (MoE layers after
            // dense ones, a hybrid's attention layers are not spread evenly)
            let mut most = 0u64;
            for stage in 0..pp {
                let range = stage * per_stage..(stage + 1) * per_stage;
                most = most.max(group.layer_ids.iter().filter(|&&i| range.contains(&u64::from(i))).count() as u64);
            }
            mul_div_ceil("pipeline stage weights", b, most, group.layer_ids.len() as u64)?
        };
    }
    Ok(b)
}

/// The names a checkpoint may give one instance of `group` in layer `layer`
/// (causal LM, a multimodal model's `language_model`, Nemotron-H's `backbone`).
fn module_names(group: &ParamGroup, layer: Option<u32>) -> [String; 4] {
    let mut path = group.path.clone();
    if let Some(i) = layer {
        path = path.replacen('*', &i.to_string(), 1);
    }
    // expert index: the patterns of real configs never single out one expert
    let path = path.replace('*', "0");
    [format!("model.{path}"), format!("model.language_model.{path}"), format!("backbone.{path}"), path]
}

/// Instances of `group` the checkpoint leaves unquantized (its
/// `modules_to_not_convert` / `exclude_modules` / `ignore`).
pub fn skipped_copies(group: &ParamGroup, q: &QuantSpec) -> u64 {
    if q.skip_modules.is_empty() {
        return 0;
    }
    if group.layer_ids.is_empty() {
        return if module_names(group, None).iter().any(|n| q.skips(n)) { group.copies } else { 0 };
    }
    let per_layer = group.copies / group.layer_ids.len() as u64;
    let skipped =
        group.layer_ids.iter().filter(|&&i| module_names(group, Some(i)).iter().any(|n| q.skips(n))).count() as u64;
    skipped * per_layer
}

/// Totals of a weight computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WeightBytes {
    /// whole model, one copy
    pub full: u64,
    /// worst GPU after TP/PP splits
    pub per_gpu: u64,
    /// per GPU, the part that is quantized linear weights
    pub quantized_per_gpu: u64,
}

/// Bytes of one group in the whole model. A linear given a `quant` is stored
/// quantized (callers decide which: [`quantized`], or the head where a framework
/// quantizes it too); anything else in `dtype`.
pub fn group_bytes(group: &ParamGroup, dtype: DType, quant: Option<&QuantSpec>) -> Result<u64, CoreError> {
    match quant {
        Some(q) if group.is_linear() => {
            let (m, _) = q.matrix_bytes(group.d_in, group.d_out)?;
            let bias = product("bias", &[group.bias_elems(), q.compute_dtype.bytes()?])?;
            let skipped = skipped_copies(group, q);
            let quantized = product(&group.path, &[sum(&group.path, &[m, bias])?, group.copies - skipped])?;
            // instances the checkpoint keeps in the compute dtype
            let per = add(&group.path, group.weight_elems()?, group.bias_elems())?;
            let plain = product(&group.path, &[per, skipped, q.compute_dtype.bytes()?])?;
            sum(&group.path, &[quantized, plain])
        }
        _ => {
            let n = group.params()?;
            dtype.bytes_for(n).ok_or_else(|| CoreError::Overflow { what: group.path.clone() })
        }
    }
}

/// Push weight entries (per GPU) into `ledger` and return the totals.
///
/// `dtype` is the storage of everything unquantized; with `quant`, the
/// decoder linears use the quantized format and the rest stays in
/// `quant.compute_dtype`.
pub fn push_weights(
    ledger: &mut Ledger,
    layout: &ParamLayout,
    layers: u64,
    dtype: DType,
    quant: Option<&QuantSpec>,
    tp: u64,
    pp: u64,
) -> Result<WeightBytes, CoreError> {
    push_weights_ep(ledger, layout, layers, dtype, quant, false, tp, pp, 1, 0)
}

/// As [`push_weights`], with the output head quantized too when
/// `quantize_head` (LitGPT's bitsandbytes precision replaces every
/// `nn.Linear`), and the routed experts split whole over `ep`
/// expert-parallel ranks (each rank holds ⌈experts / ep⌉ of the `experts`
/// of every MoE layer, unsplit by TP: vLLM `FusedMoE` with
/// `--enable-expert-parallel` places `local_num_experts` per EP rank,
/// `determine_expert_map`) on their own ledger line; `ep` 1 splits them by
/// TP like any linear.
#[allow(clippy::too_many_arguments)]
pub fn push_weights_ep(
    ledger: &mut Ledger,
    layout: &ParamLayout,
    layers: u64,
    dtype: DType,
    quant: Option<&QuantSpec>,
    quantize_head: bool,
    tp: u64,
    pp: u64,
    ep: u64,
    experts: u64,
) -> Result<WeightBytes, CoreError> {
    let ep_split = ep > 1 && experts > 0;
    let per_rank = experts.div_ceil(ep.max(1));
    let mut routed = (0u64, 0u64, 0u64);
    let rest_dtype = quant.map(|q| q.compute_dtype).unwrap_or(dtype);
    let mut lin = (0u64, 0u64, 0u64); // params, full bytes, per-gpu bytes
    let mut emb = (0u64, 0u64, 0u64);
    let mut head = (0u64, 0u64, 0u64);
    let mut small = (0u64, 0u64, 0u64);
    let mut vision = (0u64, 0u64, 0u64);
    for g in &layout.groups {
        let is_q = quant.is_some() && (quantized(g) || (quantize_head && g.role() == Some(LinearRole::LmHead)));
        let full = group_bytes(g, if is_q { dtype } else { rest_dtype }, if is_q { quant } else { None })?;
        if ep_split && g.role() == Some(LinearRole::Expert) {
            // whole experts: no TP split; this rank's share of each layer's experts
            let stage = shard(g, full, layers, 1, pp)?;
            let per = mul_div_ceil("routed expert weights", stage, per_rank, experts)?;
            routed.0 = add("params", routed.0, g.params()?)?;
            routed.1 = sum("weights", &[routed.1, full])?;
            routed.2 = sum("weights", &[routed.2, per])?;
            continue;
        }
        let per = shard(g, full, layers, tp, pp)?;
        let slot = match g.kind {
            ParamGroupKind::Linear(LinearRole::LmHead) => &mut head,
            ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding => &mut emb,
            ParamGroupKind::Linear(LinearRole::Router) | ParamGroupKind::Norm | ParamGroupKind::Other => &mut small,
            ParamGroupKind::Vision => &mut vision,
            ParamGroupKind::Linear(_) => &mut lin,
        };
        slot.0 = add("params", slot.0, g.params()?)?;
        slot.1 = sum("weights", &[slot.1, full])?;
        slot.2 = sum("weights", &[slot.2, per])?;
    }
    // With pipeline stages, embeddings live on the first stage and the head
    // on the last: the worst stage carries the larger end, not both.
    let ends_per_gpu = if pp > 1 { emb.2.max(head.2) } else { sum("weights", &[emb.2, head.2])? };
    let split = split_note(tp, pp);
    let lin_label = match quant {
        Some(q) => format!("decoder linear weights ({})", q.label),
        None => format!("decoder linear weights ({dtype})"),
    };
    let lin_formula = match quant {
        Some(q) => q.formula().to_string(),
        None => format!("params × {} B", dtype.bytes()?),
    };
    ledger.push(
        Category::Weights,
        lin_label,
        lin.2,
        Explanation::new(format!("{lin_formula} per matrix, summed; {split}"))
            .term("params", lin.0)
            .term("bytes (whole model)", lin.1),
    );
    let end_label =
        if pp > 1 { "embeddings / output head (worst stage holds the larger)" } else { "embeddings + output head" };
    ledger.push(
        Category::Weights,
        format!("{end_label} ({rest_dtype})"),
        ends_per_gpu,
        Explanation::new(format!(
            "(vocab × hidden [+ positions × hidden]) × {} B, lm_head unless tied{}; vocab-parallel over TP",
            rest_dtype.bytes()?,
            if quantize_head && quant.is_some() { " (lm_head quantized)" } else { "" }
        ))
        .term("embedding params", emb.0)
        .term("lm_head params", head.0)
        .note(if quant.is_some() {
            "quantized checkpoints keep embeddings and lm_head in 16-bit"
        } else {
            "same dtype as the rest"
        }),
    );
    ledger.push(
        Category::Weights,
        format!("norms, routers, biases ({rest_dtype})"),
        small.2,
        Explanation::new(format!("params × {} B, replicated on every TP rank", rest_dtype.bytes()?))
            .term("params", small.0),
    );
    if vision.0 > 0 {
        ledger.push(
            Category::Weights,
            format!("vision tower ({rest_dtype})"),
            vision.2,
            Explanation::new(format!("params × {} B, whole on every GPU", rest_dtype.bytes()?))
                .term("params", vision.0)
                .note("transformers' *ForConditionalGeneration and vLLM load the tower with the model; counted whole on every TP rank and pipeline stage (an engine that shards it or keeps it on the first stage needs less)"),
        );
    }
    if ep_split {
        push_routed_experts(ledger, routed, experts, ep, pp);
    }
    let full = sum("weights", &[lin.1, emb.1, head.1, small.1, vision.1, routed.1])?;
    let per_gpu = sum("weights", &[lin.2, ends_per_gpu, small.2, vision.2, routed.2])?;
    let quantized = if quant.is_some() { sum("weights", &[lin.2, routed.2])? } else { 0 };
    Ok(WeightBytes { full, per_gpu, quantized_per_gpu: quantized })
}

fn split_note(tp: u64, pp: u64) -> String {
    match (tp, pp) {
        (1, 1) => "one GPU holds all".to_string(),
        (t, 1) => format!("÷ TP {t}"),
        (1, p) => format!("layers over PP {p} stages (ceil(L/{p}) per stage)"),
        (t, p) => format!("÷ TP {t}, layers over PP {p} stages"),
    }
}

/// The ledger line of the routed experts split whole over `ep` ranks
/// ([`push_weights_ep`]): (params, bytes of the whole model, bytes per GPU).
fn push_routed_experts(ledger: &mut Ledger, routed: (u64, u64, u64), experts: u64, ep: u64, pp: u64) {
    let per_rank = experts.div_ceil(ep.max(1));
    ledger.push(
        Category::Weights,
        format!("routed experts, {per_rank} of {experts} per rank (expert parallel {ep})"),
        routed.2,
        Explanation::new(format!(
            "expert bytes (whole model) × ⌈{experts} / {ep}⌉ / {experts}, each expert whole on one rank (not split by TP){}",
            if pp > 1 { ", this stage's layers" } else { "" }
        ))
        .term("expert params (whole model)", routed.0)
        .term("expert bytes (whole model)", routed.1)
        .term("experts per rank", per_rank)
        .note("vLLM --enable-expert-parallel / SGLang --ep-size: EP spans the TP group; attention stays TP-split"),
    );
}

/// Bytes of the routed experts' weights on the worst GPU (MoE; 0 for a dense
/// model), stored as [`push_weights`] stores them: what a decode step reads
/// only for the experts its tokens are routed to. Shared experts, attention
/// and the rest are read by every token.
pub fn routed_expert_bytes_per_gpu(
    layout: &ParamLayout,
    layers: u64,
    dtype: DType,
    quant: Option<&QuantSpec>,
    tp: u64,
    pp: u64,
) -> Result<u64, CoreError> {
    let rest_dtype = quant.map(|q| q.compute_dtype).unwrap_or(dtype);
    let mut total = 0u64;
    for g in layout.groups.iter().filter(|g| g.role() == Some(LinearRole::Expert)) {
        let is_q = quant.is_some() && quantized(g);
        let full = group_bytes(g, if is_q { dtype } else { rest_dtype }, if is_q { quant } else { None })?;
        total = add("routed expert weights", total, shard(g, full, layers, tp, pp)?)?;
    }
    Ok(total)
}
