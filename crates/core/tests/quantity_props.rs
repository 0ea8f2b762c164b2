//! Properties of the typed-quantity parser (crates/core/src/quantity.rs):
//! total on any text, exact on every unit, and the two meanings of `B`.

use proptest::prelude::*;
use vramfit_core::quantity::{looks_like_quantity, parse_count, parse_size, parse_tokens, Problem};

const ANY: std::ops::RangeInclusive<u64> = 1..=u64::MAX;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics(s in "\\PC{0,40}") {
        let _ = parse_size("--x", &s, 0..=u64::MAX);
        let _ = parse_count("--x", &s, 0..=u64::MAX);
        let _ = parse_tokens("--x", &s, 0..=u64::MAX);
        let _ = looks_like_quantity(&s);
    }

    #[test]
    fn never_panics_on_number_shaped_text(s in "[+-]?[0-9_.]{0,25}([eE][+-]?[0-9]{0,4})? ?[a-zA-Z]{0,5}") {
        let a = parse_size("--x", &s, 0..=u64::MAX);
        let b = parse_count("--x", &s, 0..=u64::MAX);
        // an error always names the flag
        if let Err(e) = a { prop_assert!(e.to_string().starts_with("--x: ")); }
        if let Err(e) = b { prop_assert!(e.to_string().starts_with("--x: ")); }
        if let Err(e) = parse_tokens("--x", &s, 0..=u64::MAX) { prop_assert!(e.to_string().starts_with("--x: ")); }
    }

    #[test]
    fn token_k_is_1024_in_either_case(n in 1u64..(1 << 30), upper in any::<bool>()) {
        let k = if upper { "K" } else { "k" };
        prop_assert_eq!(parse_tokens("--x", &format!("{n}{k}"), ANY).unwrap(), n << 10);
        prop_assert_eq!(parse_tokens("--x", &n.to_string(), ANY).unwrap(), n);
    }

    #[test]
    fn binary_units_are_exact(n in 1u64..(1 << 20), unit in 0usize..4) {
        let (name, shift) = [("KiB", 10), ("MiB", 20), ("GiB", 30), ("TiB", 40)][unit];
        prop_assert_eq!(parse_size("--x", &format!("{n}{name}"), ANY).unwrap(), n << shift);
        prop_assert_eq!(parse_size("--x", &format!("{n} {}", name.to_ascii_lowercase()), ANY).unwrap(), n << shift);
    }

    #[test]
    fn decimal_units_are_exact_and_round_up(int in 0u64..100_000, frac in 0u64..1000, unit in 0usize..4) {
        let (name, mult) = [("KB", 1_000u128), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000)][unit];
        let text = format!("{int}.{frac:03}{name}");
        // (int·1000 + frac) × mult / 1000, rounded up
        let want = ((int as u128 * 1000 + frac as u128) * mult).div_ceil(1000) as u64;
        match parse_size("--x", &text, ANY) {
            Ok(v) => prop_assert_eq!(v, want),
            Err(e) => prop_assert!(want < 1024 || want == 0, "{}: {}", text, e),
        }
    }

    #[test]
    fn b_is_billions_in_a_count_and_bytes_in_a_size(n in 1u64..1_000_000) {
        prop_assert_eq!(parse_count("--x", &format!("{n}B"), ANY).unwrap(), n * 1_000_000_000);
        let size = parse_size("--x", &format!("{n}B"), ANY);
        if n < 1024 {
            prop_assert_eq!(size.unwrap_err().problem, Problem::BytesLookLikeCount);
        } else {
            prop_assert_eq!(size.unwrap(), n);
        }
    }

    #[test]
    fn count_suffixes_scale(n in 1u64..1_000_000, s in 0usize..4) {
        let (suffix, mult) = [("k", 1_000u64), ("M", 1_000_000), ("G", 1_000_000_000), ("T", 1_000_000_000_000)][s];
        prop_assert_eq!(parse_count("--x", &format!("{n}{suffix}"), ANY).unwrap(), n * mult);
        prop_assert_eq!(parse_count("--x", &format!("{n}{}", suffix.to_ascii_lowercase()), ANY).unwrap(), n * mult);
        prop_assert_eq!(parse_count("--x", &format!("{n}e3"), ANY).unwrap(), n * 1000);
    }

    #[test]
    fn plain_integers_round_trip(n in 0u64..u64::MAX) {
        prop_assert_eq!(parse_count("--x", &n.to_string(), 0..=u64::MAX).unwrap(), n);
    }

    #[test]
    fn range_is_enforced(n in 1u64..10_000, lo in 1u64..5_000, span in 0u64..5_000) {
        let r = parse_count("--x", &n.to_string(), lo..=lo + span);
        prop_assert_eq!(r.is_ok(), (lo..=lo + span).contains(&n));
    }
}
