//! Long-context `generate` (issue 22): transformers runs the output head on the
//! last prompt token only, so a 128K prompt's logits are one row, not 31 GiB.

mod common;
use common::json;

/// transformers' `GenerationMixin` passes `logits_to_keep=1` to the model's forward
/// (v4.45+, PR #31292; spelled `num_logits_to_keep` until v4.49) and `_sample` copies
/// that row to fp32: 128256 × (2 + 4) B = 769,536 B, where every prompt token's
/// logits would be 131072 × 128256 × 2 B = 31.31 GiB.
#[test]
fn llama_3_1_8b_at_128k_keeps_one_row_of_logits() {
    let v = json(&["estimate", "llama-3.1-8b", "--context", "131072", "--json"], 0);
    let logits = v["per_gpu"]["categories"]["logits"].as_u64().unwrap();
    assert!(logits < 1 << 30, "{logits} B of logits");
    assert_eq!(logits, 128_256 * (2 + 4));
    // LitGPT's generate runs the head over the whole prompt (litgpt/generate/base.py
    // `next_token`: `model(x, input_pos)`, then `sample` takes the last row)
    let lit = json(&["estimate", "llama-3.1-8b", "--context", "131072", "--engine", "litgpt", "--json"], 0);
    assert_eq!(lit["per_gpu"]["categories"]["logits"].as_u64().unwrap(), 131_072 * 128_256 * 2);
}
