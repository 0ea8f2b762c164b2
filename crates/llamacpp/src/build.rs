//! The llama.cpp builds whose memory rules differ, keyed by build number
//! (the `bNNNN` release tag: the commit count of ggml-org/llama.cpp).
//! `None` means the current build. Each rule says which build it starts at
//! and why that number; where the exact first build is not known, the
//! earlier rule is kept up to the first build known to carry the change,
//! and the rule that over-states VRAM is the one applied in between.

use serde::{Deserialize, Serialize};

/// First build known to reserve logits only for llama-server's slots:
/// ggml-org/llama.cpp PR #23861 "llama: limit max outputs of
/// `llama_context`" (commit de6f727aa, merged 2026-06-01) added
/// `n_outputs_max` to `llama_context_params`, and `server_n_outputs_max`
/// (`tools/server/server-context.cpp`) sets it to
/// `max(1, min(n_batch, n_parallel × (1 + draft tokens)))`. Tag b9442
/// (d4c8e2c29) does not have it, tag b9479 (0b7154066) does; builds
/// b9443–b9478 are treated as before it, which over-states their compute
/// buffer at worst.
pub const OUTPUTS_FOR_SLOTS: u64 = 9479;

/// First build known to reserve the flash-attention KQ mask in f16:
/// ggml-org/llama.cpp PR #23764 "llama: use f16 mask for FA to save VRAM"
/// (merged 2026-05-27; `llm_graph_input_attn_kv`, src/llama-graph.cpp).
/// Before it the mask was an f32 input cast to f16 for the backends, and
/// the f32 copy took compute-buffer room. Tag b9442 (d4c8e2c29) has it;
/// the tag before it that vramfit knows (19e92c33e) has no number, so
/// builds before b9442 keep the f32 mask (the larger buffer).
pub const F16_FA_MASK: u64 = 9442;

/// Last build known to repack host matrices (`CPU_REPACK`) beside a GPU:
/// b4897 (the ggml-org/ci log of the calibration set shows a
/// `CPU_REPACK model buffer` at -ngl 10). PR #12632 (merged 2025-03-28)
/// reordered the host buffer types to "ACCEL -> GPU host -> CPU extra ->
/// CPU" (`make_cpu_buft_list`, src/llama-model.cpp): a GPU's host buffer
/// type now takes every host weight whose op the GPU supports, and with
/// mmap the loader then demotes it to the plain CPU buffer ("avoid using a
/// host buffer when using mmap", `load_tensors`), so nothing is repacked
/// unless the build has no GPU backend. Builds after b4897 take the new
/// order: where a few of them still repacked, that is host memory, and
/// the GPU's compute buffer (which then takes over those ops) is
/// over-stated, never under-stated.
pub const LAST_REPACK_BESIDE_GPU: u64 = 4897;

/// First build known to store no V cache for MLA files: ggml-org/llama.cpp
/// PR #19067 "kv-cache : support V-less cache" (ggerganov, opened and
/// approved 2026-01-24) made `llama_kv_cache::llama_kv_cache`
/// (src/llama-kv-cache.cpp) allocate `has_v = !is_mla` — a file whose
/// header has `attention.key_length_mla` and `value_length_mla`
/// (`llama_hparams::is_mla()`, src/llama-hparams.cpp) keeps only the K
/// cache of `kv_lora_rank + n_rot` values per cell, and the graph reads V
/// as a view of its first `kv_lora_rank` values (`llm_graph_input_attn_k`).
/// Before it the same files got a V cache of `value_length` (=
/// `kv_lora_rank`) values as well. The tag that first carries the merge is
/// not known here: b7917 (91ea44e89, built 2026-02-02, the version line of
/// ggml-org/llama.cpp#19307) is a later tag of master and so carries it;
/// builds before b7917 keep the V cache (an over-statement for the ones
/// between the merge and b7917).
pub const V_LESS_MLA: u64 = 7917;

/// First build with one draft context for all of llama-server's slots:
/// ggml-org/llama.cpp PR #22838 "spec : parallel drafting support" (on top
/// of #22787 "spec : refactor ctx": "a single unified draft llama_context
/// for all sequences ... instead of one per each slot"), released as b9109
/// (2026-05-11; its release notes carry the refactor and drop incompatible
/// vocabularies). Before it, `server_context::load_model` built the draft's
/// launch as `params_dft.n_ctx = -cd or llama_n_ctx_seq(ctx)`,
/// `n_parallel = 1`, `cparams_dft.n_batch = n_ctx_dft`, and `init()` gave
/// every slot its own `llama_init_from_model(model_dft, cparams_dft)`
/// ("TODO: rework speculative decoding [TAG_SERVER_SPEC_REWORK]"); those
/// builds also refused a projector with a draft model ("err: speculative
/// decode is not supported by multimodal").
pub const SHARED_DRAFT_CONTEXT: u64 = 9109;

/// First build whose llama-server no longer turns draft-simple on by
/// itself when `-md` is given: `--spec-type` defaults to `none`, so the
/// draft model (and its context) is loaded but no draft tokens are
/// verified unless `--spec-type draft-simple` is passed. Release b9464
/// (2026-06-01: "remove draft-simple auto-enable", with the
/// `common_speculative_n_max()` helper); ggml-org/llama.cpp#25345
/// (2026-07-06) confirms "recent llama-server defaults --spec-type to
/// none ... the draft model loaded but speculation never engaged".
pub const SPEC_TYPE_DEFAULT_NONE: u64 = 9464;

/// First build counted as reserving the embeddings input beside the token
/// path: ggml-org/llama.cpp PR #18898 "graph : utilize
/// `ggml_build_forward_select()` to avoid reallocations" (opened
/// 2026-01-17, on PR #18550 "ggml : add ggml_build_forward_select") made
/// `llm_graph_context::build_inp_embd` (src/llama-graph.cpp) create the f32
/// input `inp_embd` of `n_embd_inp × n_tokens` in every graph, whether the
/// batch carries tokens or embeddings, and select one of the two paths
/// with `ggml_build_forward_select`. The token path is the one computed;
/// the unselected input is a leaf with no consumer: `ggml_gallocr`
/// allocates every leaf before the nodes ("allocate leafs",
/// `ggml_gallocr_alloc_graph_impl`, ggml/src/ggml-alloc.c) and frees a
/// tensor only when its last consumer has run, so its bytes are in the
/// compute buffer at the peak. Graph inputs go to the host backend
/// (`ggml_backend_sched_backend_id_from_cur`: "last backend (assumed
/// CPU)", cause "1.inp", ggml/src/ggml-backend.cpp). Measured on b11312 (calibration/data/measured/llamacpp-cpu.jsonl:
/// every CPU compute buffer was `n_embd × n_ubatch × 4` bytes above the
/// graph without it, 2.00 MiB for Qwen3-0.6B at -ub 512). The tag of the
/// merge is not known here: b4897 (the ggml-org/ci logs of the published
/// set, reproduced to 0.00 %) lacks it, so every later build gets it —
/// host memory over-stated by that one tensor for the builds before the
/// merge, never under-stated.
pub const EMBD_INPUT: u64 = 4898;

/// The build rules of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRules {
    /// the build number asked for (`None`: the current build)
    pub build: Option<u64>,
    /// the reserve graph outputs `n_outputs_max` rows (llama-server's
    /// slots) instead of the whole micro-batch
    pub outputs_for_slots: bool,
    /// the CPU backend repacks host matrices even with a GPU present
    pub repack_beside_gpu: bool,
    /// with flash attention the KQ mask is an f16 input (no f32 copy)
    pub f16_fa_mask: bool,
    /// MLA files (`is_mla`) keep no V cache: V is a view of the latent K
    pub v_less_mla: bool,
    /// llama-server keeps one draft context for all slots (else one per slot)
    pub shared_draft_context: bool,
    /// `-md` alone turns draft-simple on (before b9464; since, `--spec-type`
    /// defaults to none)
    pub draft_auto_spec: bool,
    /// every graph reserves the f32 embeddings input `inp_embd` beside the
    /// token path ([`EMBD_INPUT`])
    pub embd_input: bool,
}

impl BuildRules {
    pub fn of(build: Option<u64>) -> BuildRules {
        let at_least = |n: u64| build.is_none_or(|b| b >= n);
        BuildRules {
            build,
            outputs_for_slots: at_least(OUTPUTS_FOR_SLOTS),
            repack_beside_gpu: build.is_some_and(|b| b <= LAST_REPACK_BESIDE_GPU),
            f16_fa_mask: at_least(F16_FA_MASK),
            v_less_mla: at_least(V_LESS_MLA),
            shared_draft_context: at_least(SHARED_DRAFT_CONTEXT),
            draft_auto_spec: build.is_some_and(|b| b < SPEC_TYPE_DEFAULT_NONE),
            embd_input: at_least(EMBD_INPUT),
        }
    }

    /// How the build reads in text: "current" or "b4897".
    pub fn label(&self) -> String {
        match self.build {
            None => "current".into(),
            Some(b) => format!("b{b}"),
        }
    }
}

/// Rows of logits the reserve graph keeps: llama-server's
/// `n_outputs_max = max(1, min(n_batch, n_parallel × (1 + n_draft)))`
/// (`server_n_outputs_max`, tools/server/server-context.cpp: `n_outputs_per_seq
/// = 1 + common_speculative_n_max(&params.speculative)`, 0 draft tokens
/// without speculative decoding) on builds with [`OUTPUTS_FOR_SLOTS`], else
/// every token of the micro-batch (`n_outputs_max = n_batch` before it,
/// `llama_context` constructor); never more than the micro-batch's tokens.
pub fn reserved_outputs(rules: BuildRules, n_tokens: u64, n_batch: u64, n_parallel: u64, n_draft: u64) -> u64 {
    if rules.outputs_for_slots {
        let per_seq = n_draft.saturating_add(1);
        n_parallel.saturating_mul(per_seq).min(n_batch).max(1).min(n_tokens)
    } else {
        n_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_by_build() {
        let cur = BuildRules::of(None);
        assert!(cur.outputs_for_slots && !cur.repack_beside_gpu && cur.f16_fa_mask);
        assert!(!BuildRules::of(Some(F16_FA_MASK - 1)).f16_fa_mask);
        assert!(BuildRules::of(Some(F16_FA_MASK)).f16_fa_mask);
        assert_eq!(cur.label(), "current");
        let old = BuildRules::of(Some(4897));
        assert!(!old.outputs_for_slots && old.repack_beside_gpu);
        assert_eq!(old.label(), "b4897");
        assert!(!BuildRules::of(Some(4898)).repack_beside_gpu);
        assert!(!BuildRules::of(Some(OUTPUTS_FOR_SLOTS - 1)).outputs_for_slots);
        assert!(BuildRules::of(Some(OUTPUTS_FOR_SLOTS)).outputs_for_slots);
        assert!(cur.v_less_mla && BuildRules::of(Some(V_LESS_MLA)).v_less_mla);
        assert!(!BuildRules::of(Some(V_LESS_MLA - 1)).v_less_mla);
        assert!(cur.shared_draft_context && !BuildRules::of(Some(SHARED_DRAFT_CONTEXT - 1)).shared_draft_context);
        assert!(!cur.draft_auto_spec && BuildRules::of(Some(SPEC_TYPE_DEFAULT_NONE - 1)).draft_auto_spec);
        assert!(!BuildRules::of(Some(SPEC_TYPE_DEFAULT_NONE)).draft_auto_spec);
        // b4897 (the published ggml-org/ci logs) has no embeddings input; b11312 (measured) has
        assert!(!BuildRules::of(Some(4897)).embd_input && BuildRules::of(Some(11312)).embd_input);
        assert!(cur.embd_input);
    }

    /// server_n_outputs_max: max(1, min(n_batch, n_parallel)), capped by the micro-batch.
    #[test]
    fn outputs_reserved() {
        let cur = BuildRules::of(None);
        assert_eq!(reserved_outputs(cur, 512, 2048, 4, 0), 4);
        assert_eq!(reserved_outputs(cur, 2, 2048, 4, 0), 2);
        assert_eq!(reserved_outputs(cur, 512, 2, 4, 0), 2);
        assert_eq!(reserved_outputs(BuildRules::of(Some(9000)), 512, 2048, 4, 0), 512);
        // speculative decoding: 1 + n_draft outputs per slot
        // (server_n_outputs_max): 4 slots × (1 + 3) = 16; 4 × (1 + 64) = 260
        assert_eq!(reserved_outputs(cur, 512, 2048, 4, 3), 16);
        assert_eq!(reserved_outputs(cur, 512, 2048, 4, 64), 260);
        assert_eq!(reserved_outputs(cur, 512, 2048, 16, 64), 512, "capped by the micro-batch");
    }
}
