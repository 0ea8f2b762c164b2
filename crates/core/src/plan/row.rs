//! One priced, scored candidate as a plan row.

use super::pricing::HOURS_PER_MONTH;
use super::report::PlanRow;
use super::search::{self, Scored, Search};
use super::summary::{summarize, switches};
use crate::dtype::DType;
use crate::hardware::Link;
use crate::units::div_ceil;
use crate::workload::Task;

/// The plan row of a scored candidate (None: its setup was refused or its
/// offer names an unknown GPU).
pub fn row(s: &Search, sc: &Scored) -> Option<PlanRow> {
    let e = &s.entries[sc.mem as usize];
    let m = e.mem?;
    let offer = s.offer(sc.offer);
    let gpu = s.offer_gpu(sc.offer)?;
    let cap = match &offer.slice {
        Some(sl) => sl.memory_bytes(),
        None => gpu.memory_bytes(),
    };
    let (my, yd) = match search::yearly(s.book, offer) {
        Some((p, ids)) => {
            let units = offer.units_for(sc.gpus).max(sc.machines) as f64;
            (Some(p.scale(units)), ids)
        }
        None => (None, Vec::new()),
    };
    let mut notes = Vec::new();
    if let Task::Train(t) = &e.workload.task {
        if !gpu.bf16 && t.precision.compute_dtype() == DType::BF16 {
            notes.push(format!("{} has no bf16: run the same setup in fp16 (same memory)", gpu.name));
        }
        if let Task::Train(bt) = &s.base.task {
            let want = search::global_batch(bt, &s.base.parallelism);
            let got = search::global_batch(t, &e.workload.parallelism);
            if got != want {
                notes.push(format!(
                    "global batch {got} (asked {want}: not divisible over {} ranks)",
                    e.workload.parallelism.dp()
                ));
            }
        }
    }
    if sc.ram_unchecked {
        let per_machine = div_ceil(m.cpu, sc.machines.max(1));
        notes.push(format!(
            "offload needs {:.0} GB of host RAM{}; the offer does not list its RAM",
            per_machine as f64 / 1e9,
            if sc.machines > 1 { " per machine" } else { "" }
        ));
    }
    if let Some(sl) = &offer.slice {
        notes.push(format!("{} slice of one card: compute and bandwidth shared", sl.label));
    }
    let upgrades = sc.upgrade.map(|u| vec![s.book.upgrades[u as usize].name.clone()]).unwrap_or_default();
    let months_billed = match (sc.job_hours, offer.hourly) {
        (Some(h), None) if offer.monthly.is_some() => Some((h / HOURS_PER_MONTH).ceil().max(1.0) as u64),
        _ => None,
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
        currency: offer.currency.clone(),
        flags: offer.flags.clone(),
        setup: summarize(&e.workload),
        switches: switches(s.base, &e.workload),
        per_gpu_bytes: m.total,
        gpu_memory_bytes: cap,
        headroom_bytes: cap as i128 - m.total as i128,
        model_states_bytes: m.model_states,
        cpu_bytes: m.cpu,
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
        upgrades,
        notes,
        workload: Some(e.workload.clone()),
    })
}
