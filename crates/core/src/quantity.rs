//! Quantities a user types: memory sizes (`12GiB`, `24GB`, `800 MiB`) and
//! counts (`1.5B` parameters, `500M` tokens, `8k` context, `1e9`). One
//! grammar, one parser, pure (no I/O); every error names the flag.
//!
//! What the letters mean depends on what the flag asks for, never on a
//! guess from the value:
//!
//! - **Sizes** ([`parse_size`]) need a unit. `KiB MiB GiB TiB PiB` are
//!   binary (2^10…2^50), `KB MB GB TB PB` are decimal (10^3…10^15, SI, as
//!   cloud price sheets and `nvidia-smi --query` "GB" columns mean them),
//!   `B`/`bytes` are bytes; units are case-insensitive (nobody types bits
//!   here). A bare `K`/`M`/`G`/`T` is refused as ambiguous (binary or
//!   decimal?). A plain byte count must be written out (`4096B`): a size
//!   below 1 KiB with the unit `B` (`7B`, `13B`) is refused, because that is
//!   how a parameter count is written, and a 13-byte service is never meant.
//!   Fractions are rounded **up** to whole bytes (a need is never shrunk).
//! - **Counts** ([`parse_count`]) take an optional SI suffix: `k` thousand,
//!   `M` million, `B` or `G` billion, `T` trillion (case-insensitive, so
//!   `350m` is 350 million, as model names write it). `B` is **billions**
//!   here. A size unit (`GB`, `GiB`) is refused: a count is not bytes. A
//!   count must come out whole (`1.5B` is fine, `1.5` is not).
//! - **Token lengths** ([`parse_tokens`]: `--context`, `--max-model-len`,
//!   `--max-num-batched-tokens`, llama.cpp's `-c`, a MIG service's `ctx=`)
//!   take `k`/`K` = 1024 and `m`/`M` = 1024² tokens, case-insensitive, as
//!   context windows are named: Llama 3.1's "128K" is 131,072 tokens, so
//!   `128k` and `128K` are both 131,072 and `32k` is 32,768. (vLLM's
//!   `--max-model-len` reads lowercase `k` as 1000: its `128k` is 128,000,
//!   2.4 % fewer tokens than vramfit sizes, so vramfit's answer errs on the
//!   safe side.) The result must be whole (`1.5k` = 1536 is; `0.3k` is not);
//!   a size unit or `B`/`G`/`T` is refused.
//!
//! Both accept a decimal point, an exponent (`1e9`, `1.5e1GiB`), `_` between
//! digits (`1_000_000`), spaces around the unit, and a leading `+`. The
//! arithmetic is exact (integers, no floating point), so `4.5GB` is exactly
//! 4,500,000,000 bytes and `1.1B` exactly 1,100,000,000.

use std::ops::RangeInclusive;

/// What was wrong with a typed quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Empty,
    /// the part before the unit is not a number
    NotANumber {
        number: String,
    },
    /// negative, or zero where the range starts at 1
    NotPositive,
    /// a size without a unit
    NoUnit,
    /// `K`, `M`, `G`, `T` in a size: binary or decimal?
    AmbiguousUnit {
        unit: String,
    },
    UnknownUnit {
        unit: String,
    },
    /// `NB` with N below 1 KiB in a size: reads as a parameter count
    BytesLookLikeCount,
    /// a size unit given where a count is asked for
    SizeForCount {
        unit: String,
    },
    /// a count that comes out fractional
    NotWhole,
    OutOfRange {
        min: u64,
        max: u64,
    },
}

/// Which kind of quantity the flag asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Size,
    Count,
    /// a token length: `k` = 1024 ([`parse_tokens`])
    Tokens,
}

/// A typed quantity that could not be read; `flag` names where it was typed
/// (`--tokens`, `service 'chat'`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError {
    pub flag: String,
    pub text: String,
    pub kind: Kind,
    pub problem: Problem,
}

impl std::fmt::Display for QuantityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (flag, text) = (&self.flag, &self.text);
        let what = match self.kind {
            Kind::Size => "size ",
            Kind::Count | Kind::Tokens => "",
        };
        let example = match self.kind {
            Kind::Size => "e.g. 12GiB or 24GB",
            Kind::Count => "e.g. 8192, 8k, 1.5B, 500M, 1e9",
            Kind::Tokens => "tokens, e.g. 8192, 32k or 128K: k = 1024",
        };
        match &self.problem {
            Problem::Empty => write!(f, "{flag}: no value given ({example})"),
            Problem::NotANumber { number } if number.is_empty() || number == text => {
                write!(f, "{flag}: {what}'{text}' is not a number ({example})")
            }
            Problem::NotANumber { number } => write!(f, "{flag}: {what}{text}: '{number}' is not a number ({example})"),
            Problem::NotPositive => write!(f, "{flag}: {what}{text} must be positive"),
            Problem::NoUnit => write!(f, "{flag}: {what}{text} has no unit: write e.g. {text}GiB or {text}GB"),
            Problem::AmbiguousUnit { unit } => {
                let num = text.trim().trim_end_matches(unit.as_str()).trim();
                write!(f, "{flag}: {what}{text}: unit '{unit}' is ambiguous: write {num}{unit}iB (binary) or {num}{unit}B (decimal)")
            }
            Problem::UnknownUnit { unit } => match self.kind {
                Kind::Size => write!(f, "{flag}: {what}{text}: unknown unit '{unit}' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"),
                Kind::Count => write!(f, "{flag}: {text}: unknown suffix '{unit}' (k, M, B or G, T; {example})"),
                Kind::Tokens => write!(f, "{flag}: {text}: unknown suffix '{unit}' ({example}, M = 1024²)"),
            },
            Problem::BytesLookLikeCount => write!(
                f,
                "{flag}: {what}{text} would be {} bytes: write a size with KiB/MiB/GiB or KB/MB/GB (a parameter count like 7B is not a size)",
                text.trim().trim_end_matches(['B', 'b']).trim()
            ),
            Problem::SizeForCount { unit } if self.kind == Kind::Tokens => {
                write!(f, "{flag}: {text} is a size ('{unit}'), not a number of tokens ({example})")
            }
            Problem::SizeForCount { unit } => {
                write!(f, "{flag}: {text} is a size ('{unit}'), not a count: {example} (B = billion)")
            }
            Problem::NotWhole if self.kind == Kind::Tokens => {
                write!(f, "{flag}: {text} is not a whole number of tokens ({example})")
            }
            Problem::NotWhole => write!(f, "{flag}: {text} is not a whole number"),
            Problem::OutOfRange { .. } if self.kind == Kind::Size && self.problem_max() == Some(u64::MAX) => {
                write!(f, "{flag}: {what}{text} is out of range (16 EiB or more)")
            }
            Problem::OutOfRange { min, max } => match self.kind {
                Kind::Size => write!(f, "{flag}: {what}{text} must be between {min} and {max} bytes"),
                Kind::Count | Kind::Tokens => write!(f, "{flag}: {text} must be between {min} and {max}"),
            },
        }
    }
}

impl QuantityError {
    fn problem_max(&self) -> Option<u64> {
        match self.problem {
            Problem::OutOfRange { max, .. } => Some(max),
            _ => None,
        }
    }
}

impl std::error::Error for QuantityError {}

/// Does `text` look like a typed quantity rather than a name: an optional
/// sign, a number (digits, `.`, `_`, an exponent), optional spaces, then
/// letters only? `12GiB`, `-1GiB`, `1..2GiB`, `7B` do; `llama-2-7b` and
/// `01-ai/Yi-6B` do not. Used where one value may be either (a MIG service
/// is `NAME=SIZE` or `NAME=MODEL`).
pub fn looks_like_quantity(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let num_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    if !t[..num_end].chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let mut rest = &t[num_end..];
    if let Some(e) = rest.strip_prefix(['e', 'E']) {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        let d = e.find(|c: char| !c.is_ascii_digit()).unwrap_or(e.len());
        if d > 0 {
            rest = &e[d..];
        }
    }
    rest.trim_start().chars().all(|c| c.is_ascii_alphabetic())
}

/// Parse a memory size (module doc) into bytes within `range`.
pub fn parse_size(flag: &str, text: &str, range: RangeInclusive<u64>) -> Result<u64, QuantityError> {
    parse(flag, text, Kind::Size, range)
}

/// Parse a count (module doc) within `range`.
pub fn parse_count(flag: &str, text: &str, range: RangeInclusive<u64>) -> Result<u64, QuantityError> {
    parse(flag, text, Kind::Count, range)
}

/// Parse a token length (module doc: `k`/`K` = 1024) within `range`.
pub fn parse_tokens(flag: &str, text: &str, range: RangeInclusive<u64>) -> Result<u64, QuantityError> {
    parse(flag, text, Kind::Tokens, range)
}

/// Largest number of significant digits read (beyond it a number is refused
/// as out of range; 30 digits × the largest unit still fits in u128).
const MAX_DIGITS: usize = 30;
/// Largest exponent magnitude (`1e30` is already beyond any quantity here).
const MAX_EXPONENT: i32 = 30;

/// A decimal number as integers: `mantissa × 10^exp10`.
struct Decimal {
    negative: bool,
    mantissa: u128,
    exp10: i32,
}

/// Split `text` into the number and the unit (trimmed).
fn split_unit(t: &str) -> (&str, &str) {
    let bytes = t.as_bytes();
    let mut end = 0;
    while end < bytes.len() {
        let c = bytes[end] as char;
        let exponent_start = (c == 'e' || c == 'E')
            && end > 0
            && bytes[end - 1].is_ascii_digit()
            && t[end + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '+' || d == '-')
            && t[end + 1..].trim_start_matches(['+', '-']).starts_with(|d: char| d.is_ascii_digit());
        let exponent_sign = (c == '+' || c == '-') && end > 0 && matches!(bytes[end - 1], b'e' | b'E');
        if c.is_ascii_digit()
            || c == '.'
            || c == '_'
            || exponent_start
            || exponent_sign
            || (end == 0 && (c == '+' || c == '-'))
        {
            end += 1;
        } else {
            break;
        }
    }
    (t[..end].trim(), t[end..].trim())
}

fn parse_decimal(num: &str) -> Option<Decimal> {
    let (negative, body) = match num.as_bytes().first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let exp10: i32 = match exp {
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let v: i32 = digits.parse().ok()?;
            if e.starts_with('-') {
                -v
            } else {
                v
            }
        }
        None => 0,
    };
    let (int_part, frac_part) = match mant.split_once('.') {
        Some((i, f)) => (i, f),
        None => (mant, ""),
    };
    // `_` only between digits
    let clean = |s: &str| -> Option<String> {
        if s.starts_with('_') || s.ends_with('_') || s.contains("__") {
            return None;
        }
        let d: String = s.chars().filter(|&c| c != '_').collect();
        d.bytes().all(|b| b.is_ascii_digit()).then_some(d)
    };
    let (int_digits, frac_digits) = (clean(int_part)?, clean(frac_part)?);
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let digits = format!("{int_digits}{frac_digits}");
    let digits = digits.trim_start_matches('0');
    // trailing zeros of the fraction carry no value; keep the mantissa small
    let mut frac_len = frac_digits.len() as i32;
    let mut digits = digits.to_string();
    while frac_len > 0 && digits.ends_with('0') {
        digits.pop();
        frac_len -= 1;
    }
    if digits.len() > MAX_DIGITS {
        return Some(Decimal { negative, mantissa: u128::MAX, exp10: MAX_EXPONENT + 1 });
    }
    let mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    Some(Decimal { negative, mantissa, exp10: exp10 - frac_len })
}

fn size_unit(unit: &str) -> Result<Option<u128>, Problem> {
    let u = unit.to_ascii_lowercase();
    Ok(Some(match u.as_str() {
        "" => return Ok(None),
        "b" | "byte" | "bytes" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        "k" | "m" | "g" | "t" | "p" => return Err(Problem::AmbiguousUnit { unit: unit.to_string() }),
        _ => return Err(Problem::UnknownUnit { unit: unit.to_string() }),
    }))
}

fn count_unit(unit: &str) -> Result<u128, Problem> {
    let u = unit.to_ascii_lowercase();
    Ok(match u.as_str() {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "b" | "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        _ if size_unit(unit).is_ok_and(|m| m.is_some()) => {
            return Err(Problem::SizeForCount { unit: unit.to_string() })
        }
        _ => return Err(Problem::UnknownUnit { unit: unit.to_string() }),
    })
}

fn tokens_unit(unit: &str) -> Result<u128, Problem> {
    Ok(match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        // `7B` is a parameter count, not 7 bytes: an unknown suffix here
        "b" => return Err(Problem::UnknownUnit { unit: unit.to_string() }),
        _ if size_unit(unit).is_ok_and(|m| m.is_some()) => {
            return Err(Problem::SizeForCount { unit: unit.to_string() })
        }
        _ => return Err(Problem::UnknownUnit { unit: unit.to_string() }),
    })
}

fn parse(flag: &str, text: &str, kind: Kind, range: RangeInclusive<u64>) -> Result<u64, QuantityError> {
    let err = |problem: Problem| QuantityError { flag: flag.to_string(), text: text.trim().to_string(), kind, problem };
    let t = text.trim();
    if t.is_empty() {
        return Err(err(Problem::Empty));
    }
    let (num, unit) = split_unit(t);
    let dec = parse_decimal(num).ok_or_else(|| err(Problem::NotANumber { number: num.to_string() }))?;
    let mult = match kind {
        Kind::Size => size_unit(unit).map_err(&err)?.ok_or_else(|| err(Problem::NoUnit))?,
        Kind::Count => count_unit(unit).map_err(&err)?,
        Kind::Tokens => tokens_unit(unit).map_err(&err)?,
    };
    if dec.negative && dec.mantissa > 0 {
        return Err(err(Problem::NotPositive));
    }
    let out_of_range = || err(Problem::OutOfRange { min: *range.start(), max: *range.end() });
    if dec.exp10.abs() > MAX_EXPONENT {
        return Err(if dec.mantissa == 0 { err(Problem::NotPositive) } else { out_of_range() });
    }
    let scaled = dec.mantissa.checked_mul(mult).ok_or_else(out_of_range)?;
    let value: u128 = if dec.exp10 >= 0 {
        scaled.checked_mul(10u128.pow(dec.exp10 as u32)).ok_or_else(out_of_range)?
    } else {
        let den = 10u128.pow((-dec.exp10) as u32);
        match kind {
            // a need is never rounded down
            Kind::Size => scaled.div_ceil(den),
            Kind::Count | Kind::Tokens if scaled % den != 0 => return Err(err(Problem::NotWhole)),
            Kind::Count | Kind::Tokens => scaled / den,
        }
    };
    if kind == Kind::Size && mult == 1 && value < 1024 && value > 0 {
        return Err(err(Problem::BytesLookLikeCount));
    }
    if value == 0 && *range.start() > 0 {
        return Err(err(Problem::NotPositive));
    }
    let v = u64::try_from(value).map_err(|_| out_of_range())?;
    if !range.contains(&v) {
        return Err(out_of_range());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY: RangeInclusive<u64> = 1..=u64::MAX;

    fn size(s: &str) -> Result<u64, QuantityError> {
        parse_size("--x", s, ANY)
    }
    fn count(s: &str) -> Result<u64, QuantityError> {
        parse_count("--x", s, ANY)
    }

    #[test]
    fn sizes_binary_decimal_and_rounding() {
        assert_eq!(size("12GiB").unwrap(), 12 << 30);
        assert_eq!(size("12 gib").unwrap(), 12 << 30);
        // decimal: 4.5 × 10^9 exactly
        assert_eq!(size("4.5GB").unwrap(), 4_500_000_000);
        assert_eq!(size("800 MiB").unwrap(), 800 << 20);
        // 1.5e1 GiB = 15 GiB
        assert_eq!(size("1.5e1GiB").unwrap(), 15 << 30);
        assert_eq!(size("+2GiB").unwrap(), 2 << 30);
        // 0.1 KiB = 102.4 B → rounded up to 103
        assert_eq!(parse_size("--x", "0.1KiB", 0..=u64::MAX).unwrap(), 103);
        assert_eq!(size("4096B").unwrap(), 4096);
        assert_eq!(size("1_024 MiB").unwrap(), 1 << 30);
        // 16 EiB − 1 is the largest size; 16 EiB is not
        assert_eq!(size("18446744073709551615 B").unwrap(), u64::MAX);
        assert!(matches!(size("16384PiB").unwrap_err().problem, Problem::OutOfRange { .. }));
    }

    #[test]
    fn size_errors_name_the_flag_and_the_problem() {
        let e = |s: &str| parse_size("service 'chat'", s, ANY).unwrap_err().to_string();
        assert_eq!(e("-1GiB"), "service 'chat': size -1GiB must be positive");
        assert_eq!(e("0GiB"), "service 'chat': size 0GiB must be positive");
        assert!(e("1..2GiB").starts_with("service 'chat': size 1..2GiB: '1..2' is not a number"));
        assert!(e("12GiBs").starts_with("service 'chat': size 12GiBs: unknown unit 'GiBs'"));
        assert_eq!(e("12"), "service 'chat': size 12 has no unit: write e.g. 12GiB or 12GB");
        assert!(e("12G").contains("'G' is ambiguous: write 12GiB (binary) or 12GB (decimal)"), "{}", e("12G"));
        // a parameter count typed as a size
        assert!(e("7B").contains("7B would be 7 bytes"), "{}", e("7B"));
        assert!(e("1.5B").contains("not a size"), "{}", e("1.5B"));
        assert_eq!(e("1e30GiB"), "service 'chat': size 1e30GiB is out of range (16 EiB or more)");
        assert_eq!(e("abc"), "service 'chat': size 'abc' is not a number (e.g. 12GiB or 24GB)");
        assert!(e("").contains("no value"));
    }

    #[test]
    fn counts_take_si_suffixes_and_b_is_billion() {
        assert_eq!(count("1.5B").unwrap(), 1_500_000_000);
        assert_eq!(count("13b").unwrap(), 13_000_000_000);
        assert_eq!(count("1G").unwrap(), 1_000_000_000);
        assert_eq!(count("500M").unwrap(), 500_000_000);
        assert_eq!(count("350m").unwrap(), 350_000_000);
        assert_eq!(count("8k").unwrap(), 8_000);
        assert_eq!(count("2.5k").unwrap(), 2_500);
        assert_eq!(count("1e9").unwrap(), 1_000_000_000);
        assert_eq!(count("1_000").unwrap(), 1_000);
        assert_eq!(count("2T").unwrap(), 2_000_000_000_000);
        assert_eq!(count("8192").unwrap(), 8192);
        // 1.10 has a trailing zero: still exact
        assert_eq!(count("1.10B").unwrap(), 1_100_000_000);
    }

    #[test]
    fn count_errors() {
        let e = |s: &str| parse_count("--tokens", s, 1..=1_000_000_000_000_000_000).unwrap_err();
        assert!(matches!(e("12GB").problem, Problem::SizeForCount { .. }));
        assert!(e("12GiB").to_string().contains("is a size"), "{}", e("12GiB"));
        assert_eq!(e("1.5").problem, Problem::NotWhole);
        assert_eq!(e("0").problem, Problem::NotPositive);
        assert_eq!(e("-3k").problem, Problem::NotPositive);
        assert!(matches!(e("1e30").problem, Problem::OutOfRange { .. }));
        assert!(matches!(e("lots").problem, Problem::NotANumber { .. }));
        assert!(matches!(e("3 apples").problem, Problem::UnknownUnit { .. }));
        assert!(e("lots").to_string().starts_with("--tokens: "));
        assert!(matches!(e("1__0").problem, Problem::NotANumber { .. }));
        assert!(matches!(e("_10").problem, Problem::NotANumber { .. }));
    }

    #[test]
    fn token_lengths_read_k_as_1024_in_either_case() {
        let t = |s: &str| parse_tokens("--context", s, 1..=u64::MAX);
        assert_eq!(t("128k").unwrap(), 131_072);
        assert_eq!(t("128K").unwrap(), 131_072);
        assert_eq!(t("32K").unwrap(), 32_768);
        assert_eq!(t("1.5k").unwrap(), 1536);
        assert_eq!(t("1M").unwrap(), 1 << 20);
        assert_eq!(t("8192").unwrap(), 8192);
        assert_eq!(t(" 4k ").unwrap(), 4096);
        assert_eq!(t("1e4").unwrap(), 10_000);
        let e = |s: &str| t(s).unwrap_err().to_string();
        assert_eq!(
            e("0.3k"),
            "--context: 0.3k is not a whole number of tokens (tokens, e.g. 8192, 32k or 128K: k = 1024)"
        );
        assert_eq!(
            e("128x"),
            "--context: 128x: unknown suffix 'x' (tokens, e.g. 8192, 32k or 128K: k = 1024, M = 1024²)"
        );
        assert!(e("7B").contains("unknown suffix 'B'"), "{}", e("7B"));
        assert!(e("8GiB").contains("is a size ('GiB'), not a number of tokens"), "{}", e("8GiB"));
        assert_eq!(e("0"), "--context: 0 must be positive");
        assert_eq!(e("-4k"), "--context: -4k must be positive");
        assert!(e("lots").starts_with("--context: 'lots' is not a number (tokens, e.g."), "{}", e("lots"));
        assert!(matches!(t("1e30").unwrap_err().problem, Problem::OutOfRange { .. }));
    }

    #[test]
    fn quantity_or_name() {
        for q in ["12GiB", "-1GiB", "0GiB", "1..2GiB", "12 GiB", "7B", "1e30GiB", "12GiBs", "12"] {
            assert!(looks_like_quantity(q), "{q}");
        }
        for n in ["llama-2-7b", "01-ai/Yi-6B", "tinyllama-1.1b", "", "GiB", "./model"] {
            assert!(!looks_like_quantity(n), "{n}");
        }
    }
}
