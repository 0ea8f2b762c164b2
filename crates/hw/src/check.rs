//! One machine check, decided: the machine as read, what was expected, the
//! verdict, and every inference the report shows (MIG device profiles). No
//! I/O; the report crate turns a [`Checked`] into the JSON schema.

use crate::bandwidth::judge::{judge, BandwidthReport, Measurements};
use crate::machine::Machine;
use crate::mig::LgipRow;
use crate::verdict::{infer_mig_profile, verdict, Expectation, RefCard, Verdict};

/// Where a MIG device's profile name comes from (serialised as
/// [`ProfileSource::describe`] says it, the `check --json` schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ProfileSource {
    /// the source prints it (`nvidia-smi -L`)
    #[serde(rename = "named by the source")]
    NamedBySource,
    /// the one profile of the card whose `-lgip` size is within the slice
    /// tolerance and whose SM count matches
    #[serde(rename = "inferred from memory and SM count")]
    Inferred,
}

impl ProfileSource {
    pub fn describe(self) -> &'static str {
        match self {
            ProfileSource::NamedBySource => "named by the source",
            ProfileSource::Inferred => "inferred from memory and SM count",
        }
    }
}

/// A MIG device's profile and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProfile {
    pub profile: String,
    pub source: ProfileSource,
}

/// A decided check.
#[derive(Debug, Clone)]
pub struct Checked {
    pub machine: Machine,
    /// rows of `nvidia-smi mig -lgip`, when given
    pub mig_profiles: Vec<LgipRow>,
    pub expectation: Expectation,
    /// whether any expectation was given (`--expect`, `--expect-nvlink`)
    pub judged: bool,
    pub verdict: Verdict,
    /// per GPU, per MIG device: its profile, when known
    pub device_profiles: Vec<Vec<Option<DeviceProfile>>>,
    /// the bandwidth reports judged, when any was given (their findings are
    /// also in the verdict)
    pub bandwidth: Option<BandwidthReport>,
}

/// Check `machine` and the bandwidth reports against `expectation` with the known cards `refs`.
pub fn check(
    machine: Machine,
    mig_profiles: Vec<LgipRow>,
    measurements: &Measurements,
    expectation: Expectation,
    refs: &[RefCard],
) -> Checked {
    let mut v = verdict(&machine, &expectation, refs);
    let bandwidth = (!measurements.is_empty()).then(|| judge(measurements, &machine, &expectation, refs));
    if let Some(b) = &bandwidth {
        v.findings.extend(b.findings.iter().cloned());
        v.ok = !v.findings.iter().any(|f| f.level == crate::verdict::Level::Fail);
    }
    let device_profiles = machine
        .gpus
        .iter()
        .map(|g| {
            g.mig_devices
                .iter()
                .map(|d| match (&d.profile, d.memory_total_bytes) {
                    (Some(p), _) => Some(DeviceProfile { profile: p.clone(), source: ProfileSource::NamedBySource }),
                    (None, Some(b)) => infer_mig_profile(&g.name, g.memory_total_bytes, b, d.sm_count, refs)
                        .map(|profile| DeviceProfile { profile, source: ProfileSource::Inferred }),
                    (None, None) => None,
                })
                .collect()
        })
        .collect();
    let judged = expectation.count.is_some() || expectation.card.is_some() || expectation.nvlink;
    Checked { machine, mig_profiles, expectation, judged, verdict: v, device_profiles, bandwidth }
}
