//! Printed byte sizes as the frameworks write them, parsed exactly, with
//! the rounding the printer applied kept as a tolerance.
//!
//! PyTorch's `format_size` prints two decimals (`20.00 MiB`, `0 bytes`);
//! `memory_summary` prints integers (`682537 KiB`, old releases `2048 KB`);
//! XLA prints `372.76MiB` / `48.5KiB` / `0B`; vLLM prints `23.58GiB`. All
//! units here are binary: PyTorch's old `KB`/`MB`/`GB` were powers of 1024
//! too (the same `format_size` code divided by 1024).

use serde::Serialize;

/// A size read from text: the bytes it stands for, and how far off the
/// printed rounding can make that (half of the last printed digit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Size {
    pub bytes: u64,
    /// ± bytes the printed rounding allows
    #[serde(rename = "tolerance_bytes")]
    pub tolerance: u64,
    /// the text as printed, e.g. `20.00 MiB`
    pub text: String,
}

impl Size {
    pub fn exact(bytes: u64) -> Size {
        Size { bytes, tolerance: 0, text: format!("{bytes} bytes") }
    }
    /// Upper bound of the true value.
    pub fn hi(&self) -> u64 {
        self.bytes.saturating_add(self.tolerance)
    }
    /// Lower bound of the true value.
    pub fn lo(&self) -> u64 {
        self.bytes.saturating_sub(self.tolerance)
    }
}

/// Multiplier of a unit name, or None.
pub fn unit_multiplier(unit: &str) -> Option<u64> {
    Some(match unit {
        "bytes" | "byte" | "B" => 1,
        "KiB" | "KB" | "K" | "k" => 1 << 10,
        "MiB" | "MB" | "M" => 1 << 20,
        "GiB" | "GB" | "G" => 1 << 30,
        "TiB" | "TB" | "T" => 1 << 40,
        "PiB" | "PB" => 1 << 50,
        _ => return None,
    })
}

/// Parse `"<number> <unit>"` or `"<number><unit>"`. Returns None for
/// anything else (the callers report which field it was).
pub fn parse_size(s: &str) -> Option<Size> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult = unit_multiplier(unit)? as u128;
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int_part.is_empty() || int_part.len() > 20 || frac_part.len() > 6 {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit()) || !frac_part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = digits.parse().ok()?;
    let scale: u128 = 10u128.pow(frac_part.len() as u32);
    // round half up: (mantissa * mult + scale/2) / scale
    let bytes = mantissa.checked_mul(mult)?.checked_add(scale / 2)? / scale;
    let bytes = u64::try_from(bytes).ok()?;
    // half of one unit in the last printed place
    let tolerance = if mult == 1 && frac_part.is_empty() { 0 } else { (mult / scale / 2) as u64 };
    Some(Size { bytes, tolerance, text: t.to_string() })
}

/// A size in the compact text: a number and its unit, no space between
/// (`20.00MiB`, `0bytes`).
pub(crate) const CSIZE: &str = r"(\d{1,20}(?:\.\d{1,6})?(?:bytes|[KMGTP]i?B))";

/// A compact size back in PyTorch's print form (`20.00 MiB`).
pub(crate) fn csize(s: &str) -> Option<Size> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, u) = s.split_at(split);
    parse_size(&format!("{n} {u}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytorch_format_size() {
        // 20.00 MiB = 20 × 1048576 = 20971520; ± 0.005 MiB = 5242 B
        let s = parse_size("20.00 MiB").unwrap();
        assert_eq!(s.bytes, 20_971_520);
        assert_eq!(s.tolerance, 5242);
        // 2.87 GiB = 287 × 1073741824 / 100 = 3081639034.88 → 3081639035
        assert_eq!(parse_size("2.87 GiB").unwrap().bytes, 3_081_639_035);
        assert_eq!(parse_size("0 bytes").unwrap(), Size { bytes: 0, tolerance: 0, text: "0 bytes".into() });
        assert_eq!(parse_size("576.00 KiB").unwrap().bytes, 576 * 1024);
    }

    #[test]
    fn summary_and_xla_forms() {
        assert_eq!(parse_size("682537 KiB").unwrap().bytes, 682_537 * 1024);
        assert_eq!(parse_size("2048 KB").unwrap().bytes, 2048 * 1024);
        assert_eq!(parse_size("0B").unwrap().bytes, 0);
        // 48.5KiB = 49664 B exactly
        assert_eq!(parse_size("48.5KiB").unwrap().bytes, 49_664);
        assert_eq!(parse_size("7406166528 bytes").unwrap().tolerance, 0);
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "MiB", "1.2.3 MiB", "12 parsecs", "99999999999999999999999 GiB", ". MiB"] {
            assert!(parse_size(s).is_none(), "{s}");
        }
    }
}
