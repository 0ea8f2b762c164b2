//! `vramfit calibrate --set throughput`: the planner's time model against
//! the published throughputs of `calibration/data/published/throughput.jsonl`
//! (llm-foundry, torchtitan, torchtune, fms-acceleration, LLaMA-Factory,
//! TensorRT-LLM, ZeRO-Offload; each with its URL and quote). Prints the
//! ratio modelled / published per case and exits 1 when the median ratio
//! leaves 0.85–1.15 or a case leaves 0.6–1.6. Cases the time model does not
//! cover (eager batch-1 generation, a GPU outside the catalogue, no
//! architecture) are listed with the reason and not counted.
//!
//! The cases are read by `vramfit_ingest::calibration::throughput`, compared
//! by `vramfit_plan::calibrate::compare_throughput` and rendered by
//! `vramfit_report::throughput`: this is the command's I/O.

use vramfit_ingest::calibration::throughput::{embedded_throughput, THROUGHPUT_FILE};
use vramfit_plan::calibrate::compare_throughput;
use vramfit_plan::TimeModel;
use vramfit_report::throughput::{json, render, ThroughputDocument};

/// The CLI entry: the embedded set, the embedded GPU catalogue, the default time model.
pub fn run(as_json: bool) -> anyhow::Result<crate::Outcome> {
    let cat = vramfit_catalog::offers::load(None)?;
    let cases = embedded_throughput(&cat.gpus)?;
    let doc = ThroughputDocument::new(compare_throughput(&cases, &TimeModel::default()));
    let stdout = if as_json { json(&doc) + "\n" } else { render(&doc, THROUGHPUT_FILE) };
    Ok(crate::Outcome { stdout, code: if doc.comparison.pass { 0 } else { 1 } })
}
