//! Sizing a service from its parameter count alone, when no measured size
//! is given: the lower bound of what training it keeps on its instance.

use vramfit_core::CoreError;

/// Bytes per parameter that mixed-precision Adam training keeps for the
/// whole run: 2 (bf16/fp16 weights) + 2 (16-bit gradients) + 4 + 4 + 4 (fp32
/// master weights, Adam's `exp_avg` and `exp_avg_sq`) = 16. Source: ZeRO
/// (Rajbhandari et al. 2020, §3.1: "2Ψ + 2Ψ + KΨ" model states with K = 12
/// for mixed-precision Adam). The same split as core's `Precision::MixedBf16`
/// with AdamW (tests/sizing.rs checks the two agree).
pub const TRAIN_BYTES_PER_PARAM: u64 = 16;

/// Model states of mixed-precision Adam training for `params` parameters:
/// a lower bound (activations, temporaries and the CUDA context are not
/// counted), so a MIG instance smaller than this can never hold the job.
pub fn training_state_bytes(params: u64) -> Result<u64, CoreError> {
    vramfit_core::units::product("training state (params x 16 B)", &[params, TRAIN_BYTES_PER_PARAM])
}
