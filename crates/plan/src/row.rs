//! One priced, scored candidate as a plan row.

use crate::report::PlanRow;
use crate::search::{self, Search};
use crate::summary::{summarize, switches};
use crate::types::{Billing, Scored};
use vramfit_core::dtype::DType;
use vramfit_core::hardware::Link;
use vramfit_core::workload::Task;

/// The plan row of a scored candidate (None: its setup was refused or its
/// offer names an unknown GPU).
pub fn row(s: &Search, sc: &Scored) -> Option<PlanRow> {
    let e = &s.entries[sc.mem as usize];
    let m = s.mem_of(sc)?;
    let offer = s.offer(sc.offer);
    let gpu = s.offer_gpu(sc.offer)?;
    let workload = s.workload_on(sc.mem, sc.offer);
    let cap = match &offer.slice {
        Some(sl) => sl.memory_bytes(),
        None => gpu.usable_bytes(),
    };
    let (my, yd) = match search::yearly(s.book, offer) {
        Some((p, ids)) => {
            let units = offer.units_for(sc.gpus).max(sc.machines) as f64;
            (Some(p.scale(units)), ids)
        }
        None => (None, Vec::new()),
    };
    let mut notes = Vec::new();
    if let Task::Train(t) = &workload.task {
        if !gpu.bf16 && t.precision.compute_dtype() == DType::BF16 {
            notes.push(format!("{} has no bf16: run the same setup in fp16 (same memory)", gpu.name));
        }
    }
    if sc.ram_unchecked && !s.check_ram {
        notes.push(format!(
            "offload needs {:.0} GB of host RAM{} (DeepSpeed's estimate): check your machine has it",
            sc.host_ram as f64 / 1e9,
            if sc.machines > 1 { " per machine" } else { "" }
        ));
    } else if sc.ram_unchecked {
        notes.push(format!(
            "offload needs {:.0} GB of host RAM{} (DeepSpeed's estimate); the offer does not list its RAM (assumed {:.0} GB per GPU): confirm it before renting",
            sc.host_ram as f64 / 1e9,
            if sc.machines > 1 { " per machine" } else { "" },
            search::ASSUMED_RAM_GB_PER_GPU
        ));
    } else if sc.host_ram > 0 {
        notes.push(format!(
            "offload needs {:.0} GB of host RAM{} (DeepSpeed's estimate); the machine has {:.0} GB{}",
            sc.host_ram as f64 / 1e9,
            if sc.machines > 1 { " per machine" } else { "" },
            offer.ram_gb.unwrap_or(0.0),
            if sc.upgrade.is_some() { " before the upgrade" } else { "" }
        ));
    }
    if let Some(sl) = &offer.slice {
        notes.push(if sl.mig {
            format!(
                "{} instance: {:.0}% of the card's SMs and its own memory; for inference and small jobs (no NVLink, no offload, one instance per job)",
                sl.label,
                sl.fraction * 100.0
            )
        } else {
            format!("{} slice of one card: compute and bandwidth shared", sl.label)
        });
    }
    let upgrades = sc.upgrade.map(|u| vec![s.book.upgrades[u as usize].name.clone()]).unwrap_or_default();
    let mut setup = summarize(&workload);
    if let Task::Inference(i) = &s.base.task {
        setup.gpus = sc.gpus;
        setup.replicas = e.key.replicas.max(1);
        setup.dp = setup.replicas;
        setup.global_batch = i.concurrency;
    }
    let months_billed = match sc.billing {
        Billing::Monthly => sc.billed_months,
        Billing::Hourly => None,
    };
    Some(PlanRow {
        offer_id: offer.id.clone(),
        provider: offer.provider.clone(),
        offer_name: offer.name.clone(),
        gpu_id: gpu.id.clone(),
        gpu_name: gpu.name.clone(),
        gpus: sc.gpus,
        machines: sc.machines,
        link: if gpu.nvlink_gbs.is_some() { offer.link } else { Link::Pcie },
        fabric: if sc.machines > 1 { offer.fabric } else { None },
        currency: offer.currency.clone(),
        flags: offer.flags.clone(),
        switches: switches(s.base, &workload),
        setup,
        per_gpu_bytes: m.total,
        gpu_memory_bytes: cap,
        headroom_bytes: cap as i128 - m.total as i128,
        model_states_bytes: m.model_states,
        cpu_bytes: m.cpu,
        host_ram_bytes: sc.host_ram,
        host_cpu_cores: offer.cpu_cores,
        host_ram_gb: offer.ram_gb,
        fits: m.total <= cap,
        slowdown: sc.slowdown,
        step: sc.step,
        tokens_per_s: sc.tokens_per_s,
        monthly: sc.monthly,
        monthly_yearly: my,
        yearly_discounts: yd,
        hourly: sc.hourly,
        hourly_prorated: sc.hourly_prorated,
        job_hours: sc.job_hours,
        job_tokens: sc.job_tokens,
        job_cost: sc.job_cost,
        months_billed,
        billed: sc.billed,
        billing: sc.billing,
        rank_cost: sc.rank_cost,
        complexity: e.complexity,
        peak: sc.peak,
        peak_tflops: sc.peak_tflops,
        upgrades,
        notes,
        workload: Some(workload),
    })
}
