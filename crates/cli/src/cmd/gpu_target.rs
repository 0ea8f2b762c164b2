//! `--gpu` / `--gpu-mem` as a fit target: the flags parsed here, the
//! choice made by `vramfit_hw::select` (a catalogue card, a card given by
//! its memory, or the local GPUs NVML reads, against their free memory).

use crate::error::OnField;
pub use vramfit_hw::select::FitTarget;
use vramfit_hw::select::{Card, CudaEnv};
use vramfit_hw::NvmlProbe;

/// The target `--gpu` / `--gpu-mem` name; `gpus_needed` is the workload's
/// GPU count (for `--gpu auto`; 0: every usable GPU, as llama.cpp uses).
pub fn target(gpu: Option<&str>, gpu_mem: Option<&str>, gpus_needed: u64) -> anyhow::Result<Option<FitTarget>> {
    let card = match (gpu_mem, gpu) {
        (Some(m), _) => Card::Memory { bytes: parse_memory(m).on_field("gpu-mem")?, given: m },
        (None, Some(name)) if name.trim().eq_ignore_ascii_case("auto") => Card::Local,
        (None, Some(name)) => Card::Named(name),
        (None, None) => return Ok(None),
    };
    let field = if gpu_mem.is_some() { "gpu-mem" } else { "gpu" };
    Ok(Some(vramfit_hw::select::target(card, gpus_needed, &NvmlProbe, &CudaEnv::from_process()).on_field(field)?))
}

/// A memory size with its unit: binary `KiB`/`MiB`/`GiB`/`TiB`, or decimal
/// `KB`/`MB`/`GB`/`TB` (powers of 1000, as on a spec sheet: `24GB` is less
/// than `24GiB`, never more, so a decimal figure cannot make a card look
/// bigger than it is). Bare numbers are refused: the unit decides a 7%
/// difference.
pub fn parse_memory(s: &str) -> anyhow::Result<u64> {
    // 1 MiB .. 1 PiB: a GPU's memory, not a typo
    Ok(vramfit_core::quantity::parse_size("--gpu-mem", s, (1 << 20)..=(1 << 50))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_hw::select::{from_machine, CudaEnv};
    use vramfit_hw::{Gpu, Machine, MigMode};

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn gpu(i: u32, name: &str, total_mib: u64, used_mib: u64, reserved_mib: u64) -> Gpu {
        let mut g = Gpu::new(i, name);
        g.memory_total_bytes = Some(total_mib * MIB);
        g.memory_used_bytes = Some(used_mib * MIB);
        g.memory_reserved_bytes = Some(reserved_mib * MIB);
        g.memory_free_bytes = Some((total_mib - used_mib - reserved_mib) * MIB);
        g.mig_current = MigMode::Disabled;
        g
    }

    fn machine(gpus: Vec<Gpu>) -> Machine {
        Machine { sources: vec!["NVML".into()], gpus, ..Machine::default() }
    }

    #[test]
    fn memory_sizes_with_units() {
        assert_eq!(parse_memory("24GiB").unwrap(), 24 * GIB);
        assert_eq!(parse_memory("24576 MiB").unwrap(), 24 * GIB);
        assert_eq!(parse_memory("24GB").unwrap(), 24_000_000_000);
        // fractions round up to whole bytes (core::quantity)
        assert_eq!(parse_memory("79.6gib").unwrap(), (79.6 * GIB as f64).ceil() as u64);
        for bad in ["24", "24 GiBs", "-1GiB", "0GiB", "1e400GiB", "GiB", "2PiB", "99999999TB"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn auto_fit_renders_free_memory_and_what_others_hold() {
        use vramfit_report::estimate::{EstimateReport, FitInfo, WorkloadInfo};
        // 15.46 GiB needed: the whole card (23.99 GiB) would fit, its free memory does not
        let m = machine(vec![gpu(0, "NVIDIA GeForce RTX 4090", 24564, 9000, 0)]);
        let t = from_machine(&m, 1, &CudaEnv::default()).unwrap();
        let r = vramfit_ingest::resolve::resolve_with_env("llama-2-7b", &|_| None).unwrap();
        let w = vramfit_core::Workload::default();
        let ledger = vramfit_core::estimate(&r.spec, &w).unwrap();
        let f = vramfit_core::infer::fit(&ledger, t.memory_bytes, t.memory_bytes);
        let fit = FitInfo::of(&t.name, &f, None, t.detected.clone());
        let wi = WorkloadInfo {
            task: "infer".into(),
            dtype: "bf16".into(),
            kv_dtype: None,
            batch: 1,
            seq: 4096,
            concurrency: None,
            tp: 1,
            pp: 1,
            dp: 1,
            ep: None,
            etp: None,
            dp_attention: None,
            engine_version: None,
            settings: Default::default(),
            cp: None,
        };
        let model = crate::cmd::estimate::model_info(&r, 0).unwrap();
        let report = EstimateReport::new(model, wi, &ledger, None, Some(fit));
        let text = report.to_text(false);
        assert!(
            text.contains("NVIDIA GeForce RTX 4090 (GPU 0, free memory): DOES NOT FIT — needs 15.46 GiB of 15.20 GiB"),
            "{text}"
        );
        assert!(
            text.contains(
                "GPU 0 NVIDIA GeForce RTX 4090 (NVML): 15.20 GiB free of 23.99 GiB; other processes hold 8.79 GiB"
            ),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["fit"]["gpu_memory_bytes"], (24564u64 - 9000) * MIB);
        assert_eq!(json["fit"]["usable_bytes"], (24564u64 - 9000) * MIB);
        assert_eq!(json["fit"]["detected"]["gpus"][0]["used_bytes"], 9000 * MIB);
    }
}
