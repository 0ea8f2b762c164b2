//! What a file is, from its content: the banners and headers each tool
//! prints ([`crate::foreign::identify`]), never the file's name, so a
//! folder of outputs saved under any names reads the same.

use crate::foreign::{identify, Kind};

/// The kind of output a text is, when any tool's output is recognised.
pub fn recognise(text: &str) -> Option<Kind> {
    identify(text)
}

/// Whether the fleet check reads this kind (AMD tools' outputs are named, not read).
pub fn is_read(kind: Kind) -> bool {
    !matches!(kind, Kind::RocmSmi | Kind::AmdSmi)
}

/// The order files are merged in: the fullest GPU report first, so a
/// later, thinner one only fills what it lacks.
pub fn priority(kind: Option<Kind>) -> u8 {
    match kind {
        Some(Kind::NvidiaSmiXml) => 0,
        Some(Kind::NvidiaSmiQuery) => 1,
        Some(Kind::NvidiaSmiList) => 2,
        Some(Kind::NvidiaSmiTopo) => 3,
        Some(Kind::NvidiaSmiVersion) => 4,
        Some(Kind::NvidiaSmiTable) => 5,
        Some(Kind::MigInstances) | Some(Kind::MigProfiles) => 6,
        Some(Kind::CollectManifest) => 7,
        _ => 8,
    }
}
