//! The known cards a machine is compared with: the GPU catalogue joined
//! with the MIG tables (slice sizes) and the PCI device ids, and the card
//! an `--expect` model names. (Issue 9: this matching, with its tolerance,
//! lived in the CLI.)

use vramfit_catalog::gpus::{builtin_gpus, builtin_pci_ids, find_gpu, GpuPciIds};
use vramfit_catalog::mig::builtin_mig_tables;
use vramfit_core::GpuSpec;
use vramfit_mig::MigGpu;

use crate::error::HwError;
use crate::verdict::{family_of, norm, within, Expectation, RefCard, RefSlice, WHOLE_CARD_TOLERANCE};

/// How far a MIG table's whole-card memory may be from a catalogue card's
/// for the table to be that card's: the whole-card tolerance (nvidia-smi
/// totals differ by a few MiB between drivers; the A100-40GB table says
/// 40960 MiB, the H100-80GB one 81559).
pub const MIG_TABLE_TOLERANCE: f64 = WHOLE_CARD_TOLERANCE;

/// One reference card per catalogue GPU: its family token, whole-card
/// memory, the MIG profiles of every table of the same family whose
/// whole-card memory is within [`MIG_TABLE_TOLERANCE`], and its PCI ids.
pub fn reference_cards(gpus: &[GpuSpec], tables: &[&MigGpu], pci: &[GpuPciIds]) -> Vec<RefCard> {
    gpus.iter()
        .map(|g| {
            let family = family_of(&g.id);
            let mig_profiles = tables
                .iter()
                .filter(|t| {
                    family_of(&t.id) == family && within(t.whole_card_bytes, g.memory_bytes(), MIG_TABLE_TOLERANCE)
                })
                .flat_map(|t| {
                    t.profiles.iter().map(|p| RefSlice {
                        profile: p.name.clone(),
                        bytes: p.memory_bytes,
                        sms: p.sm_count,
                    })
                })
                .collect();
            let ids = pci.iter().filter(|p| p.gpu == g.id);
            RefCard {
                id: g.id.clone(),
                name: g.name.clone(),
                family,
                whole_mib: g.memory_mib,
                mig_profiles,
                pci_device_ids: ids.clone().flat_map(|p| p.device_ids.iter().copied()).collect(),
                product_names: ids.flat_map(|p| p.product_names.iter().cloned()).collect(),
                pcie_gen: Some(g.pcie_gen),
                nvlink_gbs: g.nvlink_gbs,
                arch: g.arch,
                memory_gbs: Some(g.bandwidth_gbs),
            }
        })
        .collect()
}

/// The catalogue's GPUs and the reference cards built from the embedded data.
pub fn builtin_reference_cards() -> Result<(Vec<GpuSpec>, Vec<RefCard>), HwError> {
    let catalog = |e: &dyn std::fmt::Display| HwError::Catalog { message: e.to_string() };
    let gpus = builtin_gpus().map_err(|e| catalog(&e))?;
    let tables = builtin_mig_tables().map_err(|e| catalog(&e))?;
    let pci = builtin_pci_ids(&gpus).map_err(|e| catalog(&e))?;
    let table_refs: Vec<&MigGpu> = tables.iter().map(|t| &t.gpu).collect();
    let refs = reference_cards(&gpus, &table_refs, &pci);
    Ok((gpus, refs))
}

/// Variant tokens a model name can carry (`H100-SXM`, `A100 80GB PCIe`, `H100 NVL`).
const VARIANT_TOKENS: [&str; 4] = ["sxm", "pcie", "nvl", "hbm3"];

/// What `--expect COUNTxMODEL` asks for: the catalogue card `model` names
/// (its display name replaced by the model as typed), and whether the
/// model names a variant.
pub fn expectation(
    count: Option<u32>,
    model: Option<&str>,
    nvlink: bool,
    gpus: &[GpuSpec],
    refs: &[RefCard],
) -> Result<Expectation, String> {
    let card = match model {
        None => None,
        Some(m) => {
            let spec = find_gpu(gpus, m).map_err(|e| format!("--expect: {e}"))?;
            let mut r = refs
                .iter()
                .find(|r| r.id == spec.id)
                .cloned()
                .ok_or_else(|| format!("--expect: {} has no reference entry", spec.id))?;
            r.name = m.to_string();
            Some(r)
        }
    };
    let variant_named = model.is_some_and(|m| VARIANT_TOKENS.iter().any(|t| norm(m).contains(t)));
    Ok(Expectation { count, card, nvlink, variant_named })
}
