//! Hand-built profile tables from ../shared/reference/mig.md (A100-40GB from
//! the `-lgip` transcript and `-lgipp` sample; A30 names/fractions from the
//! MIG user guide). Kept here so the search is tested without the catalogue.
#![allow(dead_code)]

use vramfit_mig::{MigGpu, Profile};

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

#[allow(clippy::too_many_arguments)]
fn p(name: &str, id: u32, c: u8, m: u8, max: u8, starts: &[u8], mib: u64, sms: u32, special: bool) -> Profile {
    Profile {
        name: name.into(),
        id: Some(id),
        compute_slices: c,
        memory_slices: m,
        max_instances: max,
        starts: starts.to_vec(),
        memory_bytes: mib * MIB,
        sm_count: Some(sms),
        special,
        confirmed: true,
        note: None,
    }
}

pub fn a100_40gb() -> MigGpu {
    MigGpu {
        id: "a100-40gb".into(),
        name: "A100-SXM4-40GB".into(),
        memory_slices: 8,
        compute_slices: 7,
        whole_card_bytes: 40960 * MIB,
        full_card_sms: Some(108),
        profiles: vec![
            p("1g.5gb", 19, 1, 1, 7, &[0, 1, 2, 3, 4, 5, 6], 4864, 14, false),
            p("1g.5gb+me", 20, 1, 1, 1, &[0, 1, 2, 3, 4, 5, 6], 4864, 14, true),
            p("1g.10gb", 15, 1, 2, 4, &[0, 2, 4, 6], 9984, 14, false),
            p("2g.10gb", 14, 2, 2, 3, &[0, 2, 4], 9984, 28, false),
            p("3g.20gb", 9, 3, 4, 2, &[0, 4], 20091, 42, false),
            p("4g.20gb", 5, 4, 4, 1, &[0], 20091, 56, false),
            p("7g.40gb", 0, 7, 8, 1, &[0], 40448, 98, false),
        ],
        source: "test table (mig.md)".into(),
    }
}

pub fn a30() -> MigGpu {
    MigGpu {
        id: "a30".into(),
        name: "A30".into(),
        memory_slices: 4,
        compute_slices: 4,
        whole_card_bytes: 24576 * MIB,
        full_card_sms: Some(56),
        profiles: vec![
            p("1g.6gb", 14, 1, 1, 4, &[0, 1, 2, 3], 5836, 14, false),
            p("2g.12gb", 5, 2, 2, 2, &[0, 2], 11672, 28, false),
            p("4g.24gb", 0, 4, 4, 1, &[0], 23344, 56, false),
        ],
        source: "test table (mig.md)".into(),
    }
}
