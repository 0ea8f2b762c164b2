//! `estimate --sweep`: the estimate's neighbourhood. The searches and the
//! fits are `vramfit_core::sweep`; each variant is the workload flags with
//! one value changed (`--dtype`, or `--task` for training), built by the
//! same [`WorkloadArgs::build_with_notes`] as the point itself, so a
//! variant's bytes are what `vramfit estimate --dtype int4 …` prints.

use crate::cmd::gpu_target::FitTarget;
use crate::cmd::train_args::TaskKind;
use crate::cmd::workload_args::WorkloadArgs;
use vramfit_core::{estimate, fit, Ledger, ModelSpec, Task, Workload};
use vramfit_plan::sweep::{cards, knobs, largest};
use vramfit_report::sweep::{CardInfo, LargestInfo, SweepInfo, VariantInfo};

/// Weight formats of the inference sweep (`--dtype` values).
pub const INFERENCE_FORMATS: [&str; 5] = ["bf16", "fp8", "int8", "int4", "nf4"];
/// Methods of the training sweep (`--task` values).
pub const TRAINING_METHODS: [(TaskKind, &str); 3] =
    [(TaskKind::Train, "train"), (TaskKind::Lora, "lora"), (TaskKind::Qlora, "qlora")];

fn label(w: &Workload) -> String {
    match &w.task {
        Task::Inference(s) => s.weights_label(),
        Task::Train(t) => format!("{} {}", t.kind.name(), t.precision.name()),
    }
}

/// The sweep of the job `args` describe (`workload`, `ledger`: the point
/// itself), against `gpu` when one was named.
pub fn sweep(
    args: &WorkloadArgs,
    spec: &ModelSpec,
    workload: &Workload,
    ledger: &Ledger,
    gpu: Option<&FitTarget>,
) -> anyhow::Result<SweepInfo> {
    let memory = gpu.map(|g| (g.memory_bytes, g.usable_bytes()));
    let largest_info = match memory {
        Some((_, usable)) => knobs(workload)
            .into_iter()
            .map(|k| largest(spec, workload, k, usable).map(|l| LargestInfo::from(&l)))
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let point = label(workload);
    let variant = |flag: &'static str, value: &str, a: WorkloadArgs| -> VariantInfo {
        let built = a.build_with_notes(spec).and_then(|(w, _)| Ok((estimate(spec, &w)?, label(&w))));
        match built {
            Ok((l, lbl)) => {
                let f = memory.map(|(m, usable)| fit(&l, m, usable));
                VariantInfo {
                    flag,
                    value: value.to_string(),
                    current: lbl == point && l.total_bytes() == ledger.total_bytes(),
                    label: lbl,
                    total_bytes: Some(l.total_bytes()),
                    fits: f.as_ref().map(|f| f.fits),
                    headroom_bytes: f.as_ref().map(|f| f.headroom_bytes),
                    error: None,
                }
            }
            Err(e) => VariantInfo {
                flag,
                value: value.to_string(),
                label: String::new(),
                current: false,
                total_bytes: None,
                fits: None,
                headroom_bytes: None,
                error: Some(crate::error_text(&e)),
            },
        }
    };
    let variants = match workload.task {
        Task::Inference(_) => INFERENCE_FORMATS
            .iter()
            .map(|d| variant("--dtype", d, WorkloadArgs { dtype: Some(d.to_string()), ..args.clone() }))
            .collect(),
        Task::Train(_) => TRAINING_METHODS
            .iter()
            .map(|(k, name)| variant("--task", name, WorkloadArgs { task: *k, ..args.clone() }))
            .collect(),
    };
    let catalogue = vramfit_catalog::gpus::builtin_gpus()?;
    Ok(SweepInfo {
        gpu: gpu.map(|g| g.name.clone()),
        gpu_memory_bytes: memory.map(|(m, _)| m),
        largest: largest_info,
        variants,
        cards: cards(ledger, workload, &catalogue).iter().map(CardInfo::from).collect(),
    })
}
