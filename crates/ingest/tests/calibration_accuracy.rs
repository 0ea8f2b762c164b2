//! Training estimates (group C) against PyTorch measurements of the
//! embedded calibration sets. Prints the error per case; fails when the
//! median |error| of tensor_peak_bytes exceeds 3% or any case exceeds 10%.

use vramfit_core::{estimate, Task};
use vramfit_ingest::calibration::{embedded, Group};

#[test]
fn group_c_training_peak_accuracy() {
    let cases = embedded().expect("embedded calibration cases parse");
    let mut errs = Vec::new();
    for c in cases.iter().filter(|c| c.group == Group::C) {
        let w = c.workload.as_ref().expect("group C has a workload");
        assert!(matches!(w.task, Task::Train(_)));
        let l = estimate(&c.spec, w).unwrap_or_else(|e| panic!("{}: {e}", c.id));
        let measured = c.measured.tensor_peak_bytes.expect("peak_total") as f64;
        let est = l.tensor_peak_bytes() as f64;
        let err = (est - measured) / measured * 100.0;
        println!(
            "{:60} est {:>15} meas {:>15} {:+7.2}%  phase est {} meas {}",
            c.id,
            est as u64,
            measured as u64,
            err,
            l.peak_phase.name(),
            c.measured.peak_phase.as_deref().unwrap_or("?")
        );
        if let Some(t) = c.measured.trainable_params {
            assert_eq!(l.params_trainable, t, "{}: trainable params are exact", c.id);
        }
        errs.push(err.abs());
    }
    assert!(errs.len() >= 29, "expected the 29 shared group C cases at least, got {}", errs.len());
    errs.sort_by(|a, b| a.total_cmp(b));
    let median = errs[errs.len() / 2];
    let max = errs[errs.len() - 1];
    println!("group C: {} cases, median |error| {median:.2}%, max |error| {max:.2}%", errs.len());
    assert!(median <= 3.0, "median |error| {median:.2}% > 3%");
    assert!(max <= 10.0, "max |error| {max:.2}% > 10%");
}
