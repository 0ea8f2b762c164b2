//! The fit verdict: a ledger against the memory of one card.

use crate::explain::Explanation;
use crate::ledger::{Category, Ledger};
use serde::{Deserialize, Serialize};

/// The guide's rule of thumb: order capacity at the computed need × 1.2
/// (20% headroom for what no model sees: other kernels' workspaces, a
/// longer batch than planned, fragmentation over a long run). vramfit's
/// total already models the allocator, so this is reported beside the
/// verdict, never added to the total (`--margin 0.2` adds it there).
pub const GUIDE_HEADROOM: f64 = 1.2;

/// The job against the guide's 20% headroom: `need` is the total per GPU
/// × [`GUIDE_HEADROOM`], rounded up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuideHeadroom {
    pub need_bytes: u64,
    pub fits: bool,
    /// usable memory left over that need (negative: short by)
    pub spare_bytes: i128,
}

impl GuideHeadroom {
    /// `required` bytes with 20% on top, against `usable` bytes.
    pub fn of(required: u64, usable: u64) -> GuideHeadroom {
        // exact in integers: ⌈required × 6 / 5⌉ (u128: no overflow)
        let need = (u128::from(required) * 6).div_ceil(5);
        let need_bytes = u64::try_from(need).unwrap_or(u64::MAX);
        GuideHeadroom { need_bytes, fits: need <= u128::from(usable), spare_bytes: usable as i128 - need as i128 }
    }
}

/// Fit against one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// the card's memory as given (nvidia-smi's total, or the free memory of a local GPU)
    pub gpu_memory_bytes: u64,
    /// what the job may use of it: CUDA's total (nvidia-smi's less the driver's
    /// reservation), the free memory of a local GPU, or a `--gpu-util` budget
    pub usable_bytes: u64,
    pub required_bytes: u64,
    pub fits: bool,
    /// usable memory left (negative: short by)
    pub headroom_bytes: i128,
    /// fits / tight / does not fit (see [`FitVerdict`])
    pub verdict: FitVerdict,
    /// the same total with the guide's 20% headroom on top
    pub guide_headroom: GuideHeadroom,
    pub explain: Explanation,
}

/// The fit in one word. `Tight`: the whole estimate does not fit, but
/// everything except the margin does (the caching allocator's overhead and
/// any `--margin` headroom): the job may start and run until the allocator's
/// rounding and fragmentation need the memory (a practitioner's "it might
/// just fit, expect OOMs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitVerdict {
    Fits,
    Tight,
    DoesNotFit,
}

impl FitVerdict {
    /// The verdict of `required` bytes, `margin` of them the margin category, against `usable` bytes.
    pub fn of(required: u64, margin: u64, usable: u64) -> FitVerdict {
        if required <= usable {
            FitVerdict::Fits
        } else if required.saturating_sub(margin) <= usable {
            FitVerdict::Tight
        } else {
            FitVerdict::DoesNotFit
        }
    }
}

/// The fit of a ledger on a card of `gpu_memory_bytes` of which the job may use `usable_bytes`.
pub fn fit(ledger: &Ledger, gpu_memory_bytes: u64, usable_bytes: u64) -> Fit {
    let required = ledger.total_bytes();
    let margin = ledger.bytes(Category::Margin);
    let without_margin = required.saturating_sub(margin);
    let verdict = FitVerdict::of(required, margin, usable_bytes);
    Fit {
        gpu_memory_bytes,
        usable_bytes,
        required_bytes: required,
        fits: required <= usable_bytes,
        headroom_bytes: usable_bytes as i128 - required as i128,
        verdict,
        guide_headroom: GuideHeadroom::of(required, usable_bytes),
        explain: Explanation::new(
            "fits when total per GPU (tensors + allocator + runtime [+ --margin]) ≤ usable memory; headroom = usable − total; \
             tight when only total − margin (the allocator's overhead and --margin) ≤ usable memory",
        )
        .term("GPU memory", gpu_memory_bytes)
        .term("usable memory", usable_bytes)
        .term("total per GPU", required)
        .term("total per GPU without the margin", without_margin)
        .note("beside the verdict, not in it: the guide's rule, the total × 1.2, against the same usable memory (fit.guide_headroom)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guides_headroom_is_the_total_times_1_2_rounded_up() {
        let g = GuideHeadroom::of(10, 12);
        assert_eq!((g.need_bytes, g.fits, g.spare_bytes), (12, true, 0));
        let g = GuideHeadroom::of(11, 13);
        // 13.2 → 14: one byte short
        assert_eq!((g.need_bytes, g.fits, g.spare_bytes), (14, false, -1));
        let g = GuideHeadroom::of(u64::MAX, u64::MAX);
        assert_eq!(g.need_bytes, u64::MAX);
        assert!(!g.fits);
    }
}
