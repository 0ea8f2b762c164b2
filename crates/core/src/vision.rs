//! Vision towers shipped in multimodal checkpoints, laid out as parameter
//! groups of kind [`ParamGroupKind::Vision`] (kept in the compute dtype and
//! counted whole on every GPU: never quantized, never split).
//!
//! Layouts follow transformers' modeling files: `modeling_siglip.py`
//! (`SiglipVisionTransformer` without its head) with Gemma 3's
//! `Gemma3MultiModalProjector`; `modeling_qwen2_5_vl.py`
//! (`Qwen2_5_VisionTransformerPretrainedModel`); `modeling_qwen3_vl.py`
//! (`Qwen3VLVisionModel`, also Qwen3.5's tower); `modeling_llama4.py`
//! (`Llama4VisionModel`, `Llama4MultiModalProjector`). Checked against transformers'
//! own parameter counts in the preset tests.

use crate::model::{VisionKind, VisionSpec};
use crate::params::{ParamGroup, ParamGroupKind};

fn group(g: &mut Vec<ParamGroup>, path: &str, d_in: u64, d_out: u64, bias: bool, copies: u64) {
    let module = path.rsplit('.').next().unwrap_or(path);
    g.push(ParamGroup {
        path: path.to_string(),
        module: module.to_string(),
        kind: ParamGroupKind::Vision,
        d_in,
        d_out,
        bias,
        copies,
        active_copies: copies,
        layer_ids: Vec::new(),
        tp_replicated: false,
    });
}

/// Push the groups of the tower `v`.
pub fn push_vision(g: &mut Vec<ParamGroup>, v: &VisionSpec) {
    let (h, i, l) = (v.hidden_size, v.intermediate_size, v.layers);
    let patch_in = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
    let merged = h * v.spatial_merge * v.spatial_merge;
    match v.kind {
        VisionKind::SiglipGemma3 => {
            group(g, "vision_tower.embeddings.patch_embedding", patch_in, h, true, 1);
            group(g, "vision_tower.embeddings.position_embedding", v.position_embeddings, h, false, 1);
            group(g, "vision_tower.encoder.layers.*.layer_norms", 1, h, true, 2 * l);
            group(g, "vision_tower.encoder.layers.*.self_attn.q_k_v_out_proj", h, h, true, 4 * l);
            group(g, "vision_tower.encoder.layers.*.mlp.fc1", h, i, true, l);
            group(g, "vision_tower.encoder.layers.*.mlp.fc2", i, h, true, l);
            group(g, "vision_tower.post_layernorm", 1, h, true, 1);
            // Gemma3MultiModalProjector: a vision-hidden × text-hidden matrix and an RMSNorm
            group(g, "multi_modal_projector.mm_input_projection_weight", h, v.out_hidden_size, false, 1);
            group(g, "multi_modal_projector.mm_soft_emb_norm", 1, h, false, 1);
        }
        VisionKind::Qwen25Vl => {
            group(g, "visual.patch_embed.proj", patch_in, h, false, 1);
            group(g, "visual.blocks.*.norms", 1, h, false, 2 * l);
            group(g, "visual.blocks.*.attn.qkv", h, 3 * h, true, l);
            group(g, "visual.blocks.*.attn.proj", h, h, true, l);
            group(g, "visual.blocks.*.mlp.gate_up_proj", h, i, true, 2 * l);
            group(g, "visual.blocks.*.mlp.down_proj", i, h, true, l);
            group(g, "visual.merger.ln_q", 1, h, false, 1);
            group(g, "visual.merger.mlp.0", merged, merged, true, 1);
            group(g, "visual.merger.mlp.2", merged, v.out_hidden_size, true, 1);
        }
        VisionKind::Qwen3Vl => {
            group(g, "visual.patch_embed.proj", patch_in, h, true, 1);
            if v.position_embeddings > 0 {
                group(g, "visual.pos_embed", v.position_embeddings, h, false, 1);
            }
            group(g, "visual.blocks.*.norms", 1, h, true, 2 * l);
            group(g, "visual.blocks.*.attn.qkv", h, 3 * h, true, l);
            group(g, "visual.blocks.*.attn.proj", h, h, true, l);
            group(g, "visual.blocks.*.mlp.linear_fc1", h, i, true, l);
            group(g, "visual.blocks.*.mlp.linear_fc2", i, h, true, l);
            group(g, "visual.merger.norm", 1, h, true, 1);
            group(g, "visual.merger.linear_fc1", merged, merged, true, 1);
            group(g, "visual.merger.linear_fc2", merged, v.out_hidden_size, true, 1);
            let d = v.deepstack_mergers;
            if d > 0 {
                group(g, "visual.deepstack_merger_list.*.norm", 1, merged, true, d);
                group(g, "visual.deepstack_merger_list.*.linear_fc1", merged, merged, true, d);
                group(g, "visual.deepstack_merger_list.*.linear_fc2", merged, v.out_hidden_size, true, d);
            }
        }
        VisionKind::Llama4 => {
            // Llama4UnfoldConvolution: a bias-free linear over each unfolded patch
            group(g, "vision_model.patch_embedding.linear", patch_in, h, false, 1);
            group(g, "vision_model.class_embedding", 1, h, false, 1);
            // (image / patch)² patches + the class token
            group(g, "vision_model.positional_embedding_vlm", v.position_embeddings, h, false, 1);
            group(g, "vision_model.layernorm_pre_post", 1, h, true, 2);
            group(g, "vision_model.model.layers.*.layer_norms", 1, h, true, 2 * l);
            group(g, "vision_model.model.layers.*.self_attn.q_k_v_o_proj", h, h, true, 4 * l);
            group(g, "vision_model.model.layers.*.mlp.fc1", h, i, true, l);
            group(g, "vision_model.model.layers.*.mlp.fc2", i, h, true, l);
            // Llama4VisionPixelShuffleMLP: pixel shuffle merges spatial_merge² patches, then
            // Llama4VisionMLP2 fc1 (merged → projector_input_dim) and fc2, both bias-free
            group(g, "vision_model.vision_adapter.mlp.fc1", merged, v.projector_dim, false, 1);
            group(g, "vision_model.vision_adapter.mlp.fc2", v.projector_dim, v.projector_dim, false, 1);
            group(g, "multi_modal_projector.linear_1", v.projector_dim, v.out_hidden_size, false, 1);
        }
    }
}
