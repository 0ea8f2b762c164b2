//! Compute efficiency from the GEMM shapes each GPU runs (issue 21, item 3):
//! the rule the training time model uses instead of the flat micro-batch
//! token rule wherever the card's SM count and the model's layer shapes are
//! known.
//!
//! Source: NVIDIA, "Matrix Multiplication Background User's Guide"
//! (DU-09799-001, <https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html>):
//! a GEMM's M × N output is split into tiles, one thread block each (§2.1);
//! cuBLAS's most efficient tiles are 256 × 128 (§2.3, "Typical Tile
//! Dimensions In cuBLAS And Performance"); the tiles run in waves of one per
//! SM, and a last wave that is partly empty leaves SMs idle for a whole tile's
//! time ("wave quantization", §3.2; its example is an A100 with 108 SMs).
//! Which tile cuBLAS picks for a shape is its heuristic's choice, so the tile
//! count is known only to within a wave: the last wave is on average half
//! full, and a GEMM of T tiles on S SMs runs at T / (T + S/2) of the rate of
//! a GEMM with no tail — W / (W + ½) in waves W = T / S. Nothing here is
//! fitted to a published throughput.
//!
//! The shapes are the ones each GPU runs under Megatron-style tensor
//! parallelism (Shoeybi et al. 2019 §3; Narayanan et al. 2021 §2.3): the
//! column-parallel QKV and MLP-up projections keep 1/tp of their output
//! features, the row-parallel attention-output and MLP-down projections 1/tp
//! of their inputs. Each linear of `in` → `out` features over `tokens` tokens
//! is three GEMMs of the same FLOPs — forward (output tokens × out), data
//! gradient (tokens × in) and weight gradient (in × out, reduced over the
//! tokens; not computed for frozen weights: LoRA/QLoRA) — and a fourth, a
//! second forward, under full recompute. So a TP-8 split of hidden 6144 runs
//! a QKV forward of 2048 × 2304 (144 tiles: 1.33 waves on an A100, 73 %),
//! while the same GEMM of hidden 25,600 (2048 × 9600, 600 tiles) runs at 92 %.

use serde::{Deserialize, Serialize};
use vramfit_core::hardware::GpuSpec;

/// The cuBLAS tile the guide calls most efficient (§2.3): 256 × 128 outputs.
pub const GEMM_TILE: (f64, f64) = (256.0, 128.0);

/// The per-GPU GEMMs of one transformer layer over one micro-batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmShapes {
    /// tokens of the micro-batch on this GPU (the GEMMs' M)
    pub tokens: f64,
    /// `(in, out)` features on this GPU of each linear of a layer: QKV,
    /// attention output, MLP up (gate and up fused: 2 × ffn when gated), MLP down
    pub linears: [(f64, f64); 4],
    /// weight gradients are computed (full training; adapters freeze the weights)
    pub weight_grads: bool,
    /// full recompute runs the forward twice
    pub recompute_forward: bool,
    /// the GEMMs' FLOP-weighted mean of 1 / tiles (see [`GemmShapes::new`]):
    /// what the efficiency needs of the shapes, computed once per setup
    pub inverse_tiles: f64,
}

impl GemmShapes {
    /// The layer's GEMMs (`linears` as `(in, out)` per GPU over `tokens`),
    /// with their FLOP-weighted mean of 1 / tiles precomputed. Each GEMM of F
    /// FLOPs and T tiles takes F / e = F · (1 + ½ · S / T) at e = W / (W + ½),
    /// W = T / S, so the layer's efficiency ΣF / Σ(F / e) is
    /// 1 / (1 + ½ · S · Σ(F / T) / ΣF): one multiplication per card.
    pub fn new(tokens: f64, linears: [(f64, f64); 4], weight_grads: bool, recompute_forward: bool) -> GemmShapes {
        let t = tokens.max(1.0);
        let (mut flops, mut per_tile) = (0.0, 0.0);
        for &(k, n) in &linears {
            if k <= 0.0 || n <= 0.0 {
                continue;
            }
            let f = 2.0 * t * k * n;
            let mut gemm = |rows: f64, cols: f64| {
                flops += f;
                per_tile += f / tiles(rows, cols);
            };
            gemm(t, n);
            gemm(t, k);
            if weight_grads {
                gemm(k, n);
            }
            if recompute_forward {
                gemm(t, n);
            }
        }
        let inverse_tiles = if flops > 0.0 { per_tile / flops } else { 0.0 };
        GemmShapes { tokens, linears, weight_grads, recompute_forward, inverse_tiles }
    }
}

/// Output tiles of an `m` × `n` GEMM: ⌈m/256⌉ · ⌈n/128⌉ (a partial tile is a whole one).
fn tiles(m: f64, n: f64) -> f64 {
    (m.max(1.0) / GEMM_TILE.0).ceil() * (n.max(1.0) / GEMM_TILE.1).ceil()
}

/// Streaming multiprocessors of a catalogue card, where a source states them;
/// None otherwise (the time model then keeps the micro-batch token rule).
/// A100/A800 (every memory size and form): 108, and A30: 56 (NVIDIA MIG user
/// guide, "Supported MIG profiles": the 7g/4g profiles' SM counts; the
/// project's `crates/catalog/data/mig_profiles.json` `full_card_sms`); H100
/// SXM5 and H100 NVL: 132 (the same MIG guide's H100 80GB / 94GB profiles);
/// H100 PCIe: 114 (`shared/reference/gpus.md`, from NVIDIA's H100 datasheet);
/// H800 as the H100 of its form (the same GH100 parts with NVLink cut). H200
/// SXM: 132 — the GH100 of the H100 SXM5 at the same dense bf16 rate (989.5
/// TFLOP/s, `shared/reference/gpus.md`), with more memory.
pub fn sm_count(gpu: &GpuSpec) -> Option<u32> {
    let id = gpu.id.as_str();
    if id.starts_with("a100-") || id.starts_with("a800-") {
        Some(108)
    } else if id == "a30" {
        Some(56)
    } else if matches!(id, "h100-sxm" | "h800-sxm" | "h100-nvl" | "h200-sxm") {
        Some(132)
    } else if matches!(id, "h100-pcie" | "h800-pcie") {
        Some(114)
    } else {
        None
    }
}

/// Share of the tail-free rate a GEMM with an `m` × `n` output reaches on
/// `sms` SMs: tiles T = ⌈m/256⌉ · ⌈n/128⌉ in waves W = T / sms, W / (W + ½)
/// (the module's note).
pub fn wave_efficiency(m: f64, n: f64, sms: f64) -> f64 {
    let waves = tiles(m, n) / sms.max(1.0);
    waves / (waves + 0.5)
}

/// The layer's compute efficiency on `sms` SMs, from its GEMMs'
/// [`GemmShapes::inverse_tiles`]: their FLOPs over the
/// time they take, each at its [`wave_efficiency`] (a harmonic mean weighted
/// by FLOPs: a linear's GEMMs each cost 2 · tokens · in · out), in the closed
/// form of [`GemmShapes::new`].
pub fn gemm_efficiency(inverse_tiles: f64, sms: f64) -> f64 {
    1.0 / (1.0 + 0.5 * sms.max(1.0) * inverse_tiles.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide's §3.2 arithmetic: tiles ⌈2048/256⌉ × ⌈2304/128⌉ = 8 × 18 =
    /// 144 on an A100's 108 SMs: W = 1.3333, 1.3333 / 1.8333 = 0.72727.
    #[test]
    fn wave_efficiency_by_hand() {
        let e = wave_efficiency(2048.0, 2304.0, 108.0);
        assert!((e - 1.3333333 / 1.8333333).abs() < 1e-6, "{e}");
        // a partial tile is a whole tile: 2049 rows are 9 tile rows
        assert!(wave_efficiency(2049.0, 2304.0, 108.0) > e);
        // more SMs, fewer waves: less efficient for the same shape
        assert!(wave_efficiency(2048.0, 2304.0, 132.0) < e);
    }

    /// Megatron-LM's Table 1 models at TP 8 (Narayanan et al. 2021): hidden
    /// 6144 vs 25,600, 2048 tokens, full recompute. By hand for 6144: QKV
    /// (6144 → 2304): fwd 2048 × 2304 → 144 tiles, 0.72727; dgrad 2048 × 6144 →
    /// 384 tiles, W 3.5556, 0.87671; wgrad 6144 × 2304 → 432 tiles, W 4,
    /// 0.88889; recompute 0.72727. Its time-weighted mean 4 / (1/0.72727 × 2 +
    /// 1/0.87671 + 1/0.88889) = 0.79909. The wider model's GEMMs run closer to
    /// the rate without a tail, which is what the paper's per-GPU throughput
    /// rising from 135 to 163 TFLOP/s says.
    #[test]
    fn wider_tp_shards_run_closer_to_peak() {
        let shapes = |h: f64, weight_grads: bool| {
            let linears = [(h, 3.0 * h / 8.0), (h / 8.0, h), (h, 4.0 * h / 8.0), (4.0 * h / 8.0, h)];
            GemmShapes::new(2048.0, linears, weight_grads, true)
        };
        let qkv_only = GemmShapes::new(2048.0, [(6144.0, 2304.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)], true, true);
        let by_hand = 4.0 / (2.0 / 0.727_272_7 + 1.0 / 0.876_712_3 + 1.0 / 0.888_888_9);
        assert!((gemm_efficiency(qkv_only.inverse_tiles, 108.0) - by_hand).abs() < 1e-6);
        let (narrow, wide) = (
            gemm_efficiency(shapes(6144.0, true).inverse_tiles, 108.0),
            gemm_efficiency(shapes(25600.0, true).inverse_tiles, 108.0),
        );
        assert!(narrow < 0.85 && wide > 0.93 && wide < 1.0, "{narrow} {wide}");
        // adapters compute no weight gradient: the tall-thin forward weighs more
        assert!(gemm_efficiency(shapes(6144.0, false).inverse_tiles, 108.0) < narrow);
    }

    #[test]
    fn sm_counts_follow_their_sources() {
        let card = |id: &str| GpuSpec {
            id: id.into(),
            name: id.into(),
            aliases: vec![],
            memory_mib: 81920,
            memory_gb: 80.0,
            bandwidth_gbs: 2039.0,
            bf16_tflops: 312.0,
            tf32_tflops: None,
            fp32_tflops: None,
            fp8_tflops: None,
            nvlink_gbs: None,
            pcie_gen: 4,
            mig_max: 0,
            bf16: true,
            arch: None,
            confirmed: false,
            source: "t".into(),
        };
        assert_eq!(sm_count(&card("a100-80gb-sxm")), Some(108));
        assert_eq!(sm_count(&card("h100-pcie")), Some(114));
        assert_eq!(sm_count(&card("h100-sxm")), Some(132));
        assert_eq!(sm_count(&card("rtx-4090")), None);
    }
}
