//! Byte arithmetic that cannot overflow silently.
//!
//! Every byte count in vramfit is a `u64`. Products are formed in `u128`
//! and narrowed with a check, so "1T parameters × 1M tokens × 1024
//! requests" becomes a [`CoreError::Overflow`] naming the quantity, never a
//! wrapped number.

use crate::error::CoreError;

/// Binary gibibyte, the unit of all human-readable output.
pub const GIB: u64 = 1 << 30;
/// Binary mebibyte.
pub const MIB: u64 = 1 << 20;

/// A byte count. Plain `u64` alias: serde writes it as an integer.
pub type Bytes = u64;

/// Multiply factors into a byte count, failing with the name of `what`
/// instead of wrapping.
pub fn product(what: &str, factors: &[u64]) -> Result<u64, CoreError> {
    let mut acc: u128 = 1;
    for &f in factors {
        acc = acc.checked_mul(f as u128).ok_or_else(|| overflow(what))?;
        if acc > u64::MAX as u128 {
            return Err(overflow(what));
        }
    }
    Ok(acc as u64)
}

/// `numerator * a / b` without intermediate overflow (rounded up).
pub fn mul_div_ceil(what: &str, a: u64, numerator: u64, denominator: u64) -> Result<u64, CoreError> {
    if denominator == 0 {
        return Err(CoreError::Invalid { field: what.to_string(), reason: "division by zero".into() });
    }
    let v = (a as u128 * numerator as u128).div_ceil(denominator as u128);
    u64::try_from(v).map_err(|_| overflow(what))
}

/// Checked sum of byte counts.
pub fn sum(what: &str, parts: &[u64]) -> Result<u64, CoreError> {
    parts.iter().try_fold(0u64, |acc, &p| acc.checked_add(p)).ok_or_else(|| overflow(what))
}

/// Checked addition.
pub fn add(what: &str, a: u64, b: u64) -> Result<u64, CoreError> {
    a.checked_add(b).ok_or_else(|| overflow(what))
}

/// Checked product of two factors.
pub fn mul(what: &str, a: u64, b: u64) -> Result<u64, CoreError> {
    a.checked_mul(b).ok_or_else(|| overflow(what))
}

/// `a − b` where `b` is a part of `a` (e.g. the adapters inside the
/// weights): a negative result means vramfit broke its own bookkeeping,
/// which is an internal error, never a silent 0.
pub fn part_of(what: &str, a: u64, b: u64) -> Result<u64, CoreError> {
    a.checked_sub(b).ok_or_else(|| CoreError::Internal(format!("{what}: part {b} B is larger than its whole {a} B")))
}

/// Ceiling division for splitting over GPUs (a shard is never rounded down).
pub fn div_ceil(a: u64, n: u64) -> u64 {
    if n == 0 {
        a
    } else {
        a.div_ceil(n)
    }
}

/// Apply a fractional factor (e.g. 0.2 headroom) to a byte count, rounding up.
pub fn scale(what: &str, bytes: u64, factor: f64) -> Result<u64, CoreError> {
    if !factor.is_finite() || factor < 0.0 {
        return Err(CoreError::Invalid {
            field: what.to_string(),
            reason: format!("factor {factor} is not a finite non-negative number"),
        });
    }
    let v = (bytes as f64 * factor).ceil();
    if v >= u64::MAX as f64 {
        return Err(overflow(what));
    }
    Ok(v as u64)
}

/// A size input must be at least 1 and at most `max` (a bound no real
/// model or job reaches): the one check behind every "zero or absurd" error.
pub fn check_size(field: &str, v: u64, max: u64) -> Result<(), CoreError> {
    if v == 0 {
        Err(CoreError::invalid(field, "must be at least 1"))
    } else if v > max {
        Err(CoreError::invalid(field, format!("{v} is absurdly large (limit {max})")))
    } else {
        Ok(())
    }
}

/// Bytes to GiB for display.
pub fn to_gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

/// A byte count for people, in binary units: `12.55 GiB`, `512.0 MiB`,
/// `1.5 KiB`, `812 B`. The one rendering of a size in text (reports, notes,
/// the names of cards given by their memory).
pub fn fmt_bytes(b: u64) -> String {
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

fn overflow(what: &str) -> CoreError {
    CoreError::Overflow { what: what.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_overflows_cleanly() {
        // 1T params x 1M tokens x 1024 requests does not fit in u64.
        let r = product("kv_cache", &[1_000_000_000_000, 1_000_000, 1024]);
        assert!(matches!(r, Err(CoreError::Overflow { .. })));
        assert_eq!(product("x", &[2, 3, 7]).unwrap(), 42);
    }

    #[test]
    fn mul_div_rounds_up() {
        assert_eq!(mul_div_ceil("x", 10, 1, 3).unwrap(), 4);
        assert_eq!(mul_div_ceil("x", u64::MAX, 1, 2).unwrap(), u64::MAX / 2 + 1);
        assert!(mul_div_ceil("x", u64::MAX, 3, 1).is_err());
    }

    #[test]
    fn mul_and_part_of() {
        assert_eq!(mul("x", 6, 7).unwrap(), 42);
        assert!(matches!(mul("x", u64::MAX, 2), Err(CoreError::Overflow { .. })));
        assert_eq!(part_of("x", 10, 4).unwrap(), 6);
        assert!(matches!(part_of("x", 4, 10), Err(CoreError::Internal(_))));
    }

    #[test]
    fn sum_and_scale() {
        assert!(sum("x", &[u64::MAX, 1]).is_err());
        assert_eq!(scale("m", 100, 0.2).unwrap(), 20);
        assert!(scale("m", 100, f64::NAN).is_err());
    }
}
