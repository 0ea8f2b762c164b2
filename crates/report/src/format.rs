//! Number formatting shared by all renderers: binary units.

use vramfit_core::units::{GIB, MIB};

/// `12.55 GiB`, `512.0 MiB`, `812 B`.
pub fn bytes(b: u64) -> String {
    if b >= GIB {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.1} MiB", b as f64 / MIB as f64)
    } else if b >= 1024 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// Signed byte difference, e.g. `-2.31 GiB`.
pub fn signed_bytes(b: i128) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs().min(u64::MAX as u128) as u64))
    } else {
        bytes(b.min(u64::MAX as i128) as u64)
    }
}

/// Integer with thousands separators: `6,738,415,616`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `6.74B`, `124.4M` parameter counts.
pub fn params(n: u64) -> String {
    let f = n as f64;
    if f >= 1e12 {
        format!("{:.2}T", f / 1e12)
    } else if f >= 1e9 {
        format!("{:.2}B", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.1}M", f / 1e6)
    } else {
        thousands(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats() {
        assert_eq!(bytes(13_476_831_232), "12.55 GiB");
        assert_eq!(bytes(500 * MIB), "500.0 MiB");
        assert_eq!(thousands(6_738_415_616), "6,738,415,616");
        assert_eq!(params(6_738_415_616), "6.74B");
        assert_eq!(signed_bytes(-(GIB as i128)), "-1.00 GiB");
    }
}
