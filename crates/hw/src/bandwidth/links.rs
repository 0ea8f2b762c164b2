//! What a link should give: nominal PCIe and NVLink rates per direction,
//! and the share of them a copy benchmark typically measures.

use crate::verdict::RefCard;
use vramfit_core::GpuArch;

/// Nominal PCIe rate per lane and direction, GB/s, by generation: the
/// signalling rate times the encoding efficiency, over 8 bits. PCI-SIG base
/// specifications: gen1 2.5 GT/s and gen2 5 GT/s with 8b/10b; gen3 8,
/// gen4 16, gen5 32 GT/s with 128b/130b; gen6 64 GT/s PAM4 with 242/256-byte
/// FLITs (../shared/reference/gpus.md, "PCIe x16 bandwidth": 15.75, 31.5,
/// 63, ~121 GB/s per direction at x16).
pub fn pcie_lane_gbs(gen: u32) -> Option<f64> {
    let (gts, enc) = match gen {
        1 => (2.5, 8.0 / 10.0),
        2 => (5.0, 8.0 / 10.0),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        6 => (64.0, 242.0 / 256.0),
        _ => return None,
    };
    Some(gts * enc / 8.0)
}

/// Nominal PCIe rate of a link, one direction, GB/s.
pub fn pcie_gbs(gen: u32, width: u32) -> Option<f64> {
    (1..=32).contains(&width).then_some(())?;
    Some(pcie_lane_gbs(gen)? * width as f64)
}

/// Share of the nominal rate a pinned copy measures on a healthy link.
/// PCIe: ../shared/reference/gpus.md "typical measured pinned H2D" (gen3
/// ~12–13 of 15.75, gen4 ~24–26 of 31.5, gen5 ~50–55 of 63 GB/s: 0.76–0.87);
/// NVIDIA/nvbandwidth#50 (P2P over PCIe gen4 "almost 80%"). NVLink: each
/// 25 GB/s link gives ~20 GB/s with 128-byte payloads (sjeaugey,
/// NVIDIA/nccl-tests#149); an H100 SXM5 P2P test measures 376–380 of
/// 450 GB/s per direction (NVIDIA/nccl#1264). Both ≈ 0.8.
pub const TYPICAL_EFFICIENCY: f64 = 0.8;

/// A measurement below this share of the nominal rate is a finding: three
/// quarters of [`TYPICAL_EFFICIENCY`], i.e. well below what a healthy link
/// of that kind gives (an A100's gen4 x16 link measuring 12.3 GB/s is 39%).
pub const FINDING_SHARE: f64 = 0.6;

/// The fastest PCIe link any GPU here has: gen5 x16. A GPU↔GPU copy faster
/// than this cannot have crossed PCIe.
pub const WIDEST_PCIE_GEN: u32 = 5;

/// NVLink rate per link and direction, GB/s, by the card's NVLink.
/// - V100 (NVLink 2): 300 GB/s over 6 links both ways → 25 (V100 datasheet)
/// - A100 (NVLink 3): `nvidia-smi nvlink -s` shows 25 GB/s per link (gpus.md)
/// - GA102 bridge (RTX 3090, RTX A6000): `nvidia-smi nvlink -s` shows 14.062 GB/s
/// - H100/H200 (NVLink 4): 900 GB/s over 18 links both ways → 25 (datasheet;
///   `nvlink -s` prints the 26.562 GB/s line rate, SOURCES.md capture)
/// - B200 (NVLink 5): 1.8 TB/s over 18 links → 50 (datasheet, unconfirmed)
pub fn nvlink_link_gbs(card: &RefCard) -> Option<f64> {
    card.nvlink_gbs?;
    Some(match card.arch? {
        GpuArch::Volta => 25.0,
        GpuArch::Ampere if card.family.starts_with("rtx") || card.family.starts_with("a6000") => 14.0625,
        GpuArch::Ampere | GpuArch::Hopper => 25.0,
        GpuArch::Blackwell => 50.0,
        GpuArch::Turing | GpuArch::Ada | GpuArch::Cdna3 => return None,
    })
}

/// Links one GPU of this card has (its NVLink aggregate over both
/// directions, over twice the per-link rate): 6 (V100), 12 (A100), 4 (RTX
/// 3090 bridge), 18 (H100, B200).
pub fn nvlink_links(card: &RefCard) -> Option<u32> {
    let per = nvlink_link_gbs(card)?;
    Some((card.nvlink_gbs? / 2.0 / per).round() as u32)
}

/// The PCIe generation whose nominal rate at `width` a measurement looks
/// like: the newest generation of which it reaches [`FINDING_SHARE`].
pub fn looks_like_gen(gbs: f64, width: u32) -> Option<u32> {
    (1..=6).rev().find(|&g| pcie_gbs(g, width).is_some_and(|n| gbs >= n * FINDING_SHARE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominal_pcie_rates_match_the_reference_table() {
        // gpus.md: 15.75, 31.5, 63 GB/s per direction at x16
        assert!((pcie_gbs(3, 16).unwrap() - 15.754).abs() < 0.01);
        assert!((pcie_gbs(4, 16).unwrap() - 31.508).abs() < 0.01);
        assert!((pcie_gbs(5, 16).unwrap() - 63.015).abs() < 0.01);
        assert!((pcie_gbs(6, 16).unwrap() - 121.0).abs() < 0.01);
        assert_eq!(pcie_gbs(7, 16), None);
        assert_eq!(pcie_gbs(4, 0), None);
        // an A100 measuring 12.3 GB/s host→device looks like gen3 x16, not gen4
        assert_eq!(looks_like_gen(12.3, 16), Some(3));
        assert_eq!(looks_like_gen(24.5, 16), Some(4));
        assert_eq!(looks_like_gen(3.8, 16), Some(1));
    }

    #[test]
    fn nvlink_links_from_the_catalogue_aggregate() {
        let card = |arch: GpuArch, family: &str, gbs: f64| RefCard {
            arch: Some(arch),
            family: family.into(),
            nvlink_gbs: Some(gbs),
            ..RefCard::default()
        };
        assert_eq!(nvlink_links(&card(GpuArch::Hopper, "h100", 900.0)), Some(18));
        assert_eq!(nvlink_links(&card(GpuArch::Ampere, "a100", 600.0)), Some(12));
        assert_eq!(nvlink_links(&card(GpuArch::Volta, "v100", 300.0)), Some(6));
        assert_eq!(nvlink_links(&card(GpuArch::Ampere, "rtx3090", 112.5)), Some(4));
        assert_eq!(nvlink_links(&RefCard { arch: Some(GpuArch::Hopper), ..RefCard::default() }), None);
    }
}
