//! The GPU catalogue: `data/gpus.toml`, embedded, parsed by the same code
//! that reads a user's own file (`--catalog`), and looked up by the names
//! people type (`a100-80gb`, `A100 80GB`, `rtx-3090`, `3090`, `h100`).
//!
//! Parsing is total: a malformed file, a missing or mistyped field, an
//! unknown key or an impossible value (zero memory, negative bandwidth, a
//! duplicate id) is a [`CatalogError`] naming the file, the line and the
//! field. Nothing here reads files; callers hand over the text.

use serde::Deserialize;
use std::ops::Range;
use thiserror::Error;
use vramfit_core::{GpuArch, GpuSpec};

/// The embedded GPU catalogue.
pub const BUILTIN_GPUS_TOML: &str = include_str!("../data/gpus.toml");
/// Name the embedded file goes by in error messages.
pub const BUILTIN_GPUS_FILE: &str = "<builtin>/gpus.toml";

/// Largest catalogue file accepted (a real one is a few tens of KiB).
pub const MAX_CATALOG_BYTES: usize = 4 << 20;

/// Errors from reading catalogue files or looking names up in them.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CatalogError {
    /// The text is not valid TOML, or a field is missing, mistyped or unknown.
    #[error("{file}:{line}:{column}: {}{message}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Parse { file: String, line: usize, column: usize, field: Option<String>, message: String },
    /// A field parsed but its value is unusable.
    #[error("{file}:{line}: field `{field}`: {reason}")]
    Invalid { file: String, line: usize, field: String, reason: String },
    /// The file is larger than [`MAX_CATALOG_BYTES`].
    #[error("{file}: {bytes} bytes is too large for a catalogue file (limit {limit})")]
    TooLarge { file: String, bytes: usize, limit: usize },
    /// No GPU matches the name.
    #[error("unknown GPU '{query}'{}", suggest(suggestions))]
    UnknownGpu { query: String, suggestions: Vec<String> },
    /// A partial name: it begins the names of several GPUs (never resolved to one).
    #[error(
        "GPU name '{query}' is ambiguous: it begins the names of {}{}; give one of these ids",
        candidates.join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    AmbiguousGpu {
        query: String,
        candidates: Vec<String>,
        /// cards it also begins, past the listed ones
        more: usize,
    },
    /// An offer names a GPU id the catalogue does not have.
    #[error("{file}:{line}: field `gpu`: unknown GPU id '{gpu}'{}", suggest(suggestions))]
    UnknownOfferGpu { file: String, line: usize, gpu: String, suggestions: Vec<String> },
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", s.join(", "))
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// The key on the line where `span` starts (`key = value`), if any.
fn key_on_line(text: &str, span: &Range<usize>) -> Option<String> {
    let start = span.start.min(text.len());
    let line_start = text.get(..start)?.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = text.get(start..)?.find('\n').map(|i| start + i).unwrap_or(text.len());
    let line = text.get(line_start..line_end)?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
        Some(key.to_string())
    } else {
        None
    }
}

/// The field a serde message names (`missing field `x``, `unknown field `x``).
fn field_in_message(msg: &str) -> Option<String> {
    for marker in ["missing field `", "unknown field `", "duplicate field `"] {
        if let Some(i) = msg.find(marker) {
            let rest = &msg[i + marker.len()..];
            return rest.find('`').map(|j| rest[..j].to_string());
        }
    }
    None
}

/// Turn a toml error into a [`CatalogError::Parse`] with line, column and field.
pub(crate) fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> CatalogError {
    let message = e.message().trim().to_string();
    let (line, column, key) = match e.span() {
        Some(span) => {
            let (l, c) = line_col(text, span.start);
            (l, c, key_on_line(text, &span))
        }
        None => (1, 1, None),
    };
    let field = field_in_message(&message).or(key);
    CatalogError::Parse { file: file.to_string(), line, column, field, message }
}

/// Reject oversized input before parsing.
pub(crate) fn check_size(file: &str, text: &str) -> Result<(), CatalogError> {
    if text.len() > MAX_CATALOG_BYTES {
        return Err(CatalogError::TooLarge { file: file.to_string(), bytes: text.len(), limit: MAX_CATALOG_BYTES });
    }
    Ok(())
}

/// Line of `field = ` inside an entry's span (falls back to the entry's first line).
///
/// toml's span of an array-of-tables element may cover only its `[[...]]`
/// header, so the search runs from the span's start to the next table header.
pub(crate) fn field_line(text: &str, span: &Range<usize>, field: &str) -> usize {
    let start = span.start.min(text.len());
    let body = text.get(start..).unwrap_or("");
    let mut offset = start;
    for (i, l) in body.split_inclusive('\n').enumerate() {
        let t = l.trim_start();
        if i > 0 && t.starts_with('[') {
            break;
        }
        if let Some(rest) = t.strip_prefix(field) {
            if rest.trim_start().starts_with('=') {
                return line_col(text, offset).0;
            }
        }
        offset += l.len();
    }
    line_col(text, start).0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuFile {
    #[serde(default)]
    schema: Option<u32>,
    #[serde(default)]
    gpu: Vec<toml::Spanned<GpuRow>>,
    /// offers may live in the same user file; `offers.rs` reads them
    #[serde(default)]
    #[allow(dead_code)]
    offer: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    discount: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    upgrade: Option<toml::Value>,
    #[serde(default)]
    #[allow(dead_code)]
    replace: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuRow {
    id: String,
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    memory_mib: u64,
    memory_gb: f64,
    bandwidth_gbs: f64,
    bf16_tflops: f64,
    #[serde(default)]
    tf32_tflops: Option<f64>,
    #[serde(default)]
    fp32_tflops: Option<f64>,
    #[serde(default)]
    fp8_tflops: Option<f64>,
    #[serde(default)]
    nvlink_gbs: Option<f64>,
    pcie_gen: u8,
    #[serde(default)]
    mig_max: u8,
    #[serde(default = "yes")]
    bf16: bool,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    confirmed: bool,
    source: String,
}

fn yes() -> bool {
    true
}

/// Largest memory accepted per GPU (16 TiB in MiB): beyond is a typo.
const MAX_MEMORY_MIB: u64 = 16 << 20;

/// Parse a GPU catalogue (`[[gpu]]` tables). `file` names it in errors.
pub fn parse_gpus(text: &str, file: &str) -> Result<Vec<GpuSpec>, CatalogError> {
    check_size(file, text)?;
    let parsed: GpuFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    if let Some(s) = parsed.schema {
        if s != 1 {
            return Err(CatalogError::Invalid {
                file: file.into(),
                line: find_top_key(text, "schema"),
                field: "schema".into(),
                reason: format!("version {s} is not supported (expected 1)"),
            });
        }
    }
    let mut out: Vec<GpuSpec> = Vec::with_capacity(parsed.gpu.len());
    for spanned in parsed.gpu {
        let span = spanned.span();
        let row = spanned.into_inner();
        let bad = |field: &str, reason: String| CatalogError::Invalid {
            file: file.into(),
            line: field_line(text, &span, field),
            field: field.into(),
            reason,
        };
        if row.id.trim().is_empty() {
            return Err(bad("id", "must not be empty".into()));
        }
        if out.iter().any(|g| g.id.eq_ignore_ascii_case(&row.id)) {
            return Err(bad("id", format!("duplicate GPU id '{}'", row.id)));
        }
        if row.memory_mib == 0 || row.memory_mib > MAX_MEMORY_MIB {
            return Err(bad("memory_mib", format!("{} MiB is not a plausible GPU memory", row.memory_mib)));
        }
        let positive = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(())
            } else {
                Err(bad(field, format!("{v} must be a positive number")))
            }
        };
        positive("memory_gb", row.memory_gb)?;
        positive("bandwidth_gbs", row.bandwidth_gbs)?;
        positive("bf16_tflops", row.bf16_tflops)?;
        for (field, v) in
            [("tf32_tflops", row.tf32_tflops), ("fp32_tflops", row.fp32_tflops), ("fp8_tflops", row.fp8_tflops)]
        {
            if let Some(v) = v {
                positive(field, v)?;
            }
        }
        if let Some(v) = row.nvlink_gbs {
            positive("nvlink_gbs", v)?;
        }
        if !(1..=7).contains(&row.pcie_gen) {
            return Err(bad("pcie_gen", format!("{} is not a PCIe generation (1-7)", row.pcie_gen)));
        }
        if row.mig_max > 7 {
            return Err(bad("mig_max", format!("{} MIG instances: at most 7 exist", row.mig_max)));
        }
        // a name picks one card: no spelling of this card may name an earlier one
        let named =
            [("id", &row.id), ("name", &row.name)].into_iter().chain(row.aliases.iter().map(|a| ("aliases", a)));
        for (field, spelled) in named {
            let n = normalize(spelled);
            if let Some(other) = out.iter().find(|g| !n.is_empty() && spellings(g).any(|x| x == n)) {
                return Err(bad(
                    field,
                    format!(
                        "GPU '{}': '{spelled}' already names GPU '{}' (a name must pick one card)",
                        row.id, other.id
                    ),
                ));
            }
        }
        let arch = match row.arch.as_deref() {
            None => None,
            Some(a) => Some(GpuArch::parse(a).ok_or_else(|| {
                let known: Vec<&str> = GpuArch::ALL.iter().map(|a| a.name()).collect();
                bad(
                    "arch",
                    format!("GPU '{}': unknown architecture '{a}' (expected one of {})", row.id, known.join(", ")),
                )
            })?),
        };
        out.push(GpuSpec {
            id: row.id,
            name: row.name,
            aliases: row.aliases,
            memory_mib: row.memory_mib,
            memory_gb: row.memory_gb,
            bandwidth_gbs: row.bandwidth_gbs,
            bf16_tflops: row.bf16_tflops,
            tf32_tflops: row.tf32_tflops,
            fp32_tflops: row.fp32_tflops,
            fp8_tflops: row.fp8_tflops,
            nvlink_gbs: row.nvlink_gbs,
            pcie_gen: row.pcie_gen,
            mig_max: row.mig_max,
            bf16: row.bf16,
            arch,
            confirmed: row.confirmed,
            source: row.source,
        });
    }
    Ok(out)
}

fn find_top_key(text: &str, key: &str) -> usize {
    for (i, l) in text.lines().enumerate() {
        if let Some(rest) = l.trim_start().strip_prefix(key) {
            if rest.trim_start().starts_with('=') {
                return i + 1;
            }
        }
    }
    1
}

/// The embedded PCI device ids of the catalogue's cards (`vramfit check`).
pub const BUILTIN_PCI_IDS_TOML: &str = include_str!("../data/gpu_pci_ids.toml");
/// Name the embedded PCI id file goes by in error messages.
pub const BUILTIN_PCI_IDS_FILE: &str = "<builtin>/gpu_pci_ids.toml";

/// The PCI device ids of one catalogue card, with their source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPciIds {
    /// catalogue id
    pub gpu: String,
    /// PCI device ids (vendor 0x10DE)
    pub device_ids: Vec<u16>,
    /// names nvidia-smi prints for the card that do not say the variant
    pub product_names: Vec<String>,
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PciFile {
    #[serde(default)]
    pci: Vec<toml::Spanned<PciRow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PciRow {
    gpu: String,
    device_ids: Vec<String>,
    #[serde(default)]
    product_names: Vec<String>,
    source: String,
}

/// Parse a PCI id file (`[[pci]]` tables) against the catalogue `gpus`:
/// every `gpu` must be a catalogue id, every id four hex digits, each id
/// listed once, every entry sourced.
pub fn parse_pci_ids(text: &str, file: &str, gpus: &[GpuSpec]) -> Result<Vec<GpuPciIds>, CatalogError> {
    check_size(file, text)?;
    let parsed: PciFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    let mut out: Vec<GpuPciIds> = Vec::with_capacity(parsed.pci.len());
    for spanned in parsed.pci {
        let span = spanned.span();
        let row = spanned.into_inner();
        let bad = |field: &str, reason: String| CatalogError::Invalid {
            file: file.into(),
            line: field_line(text, &span, field),
            field: field.into(),
            reason,
        };
        if !gpus.iter().any(|g| g.id == row.gpu) {
            return Err(bad("gpu", format!("'{}' is not a catalogue GPU id", row.gpu)));
        }
        if row.source.trim().is_empty() {
            return Err(bad("source", "must say where the ids were read".into()));
        }
        let mut ids = Vec::with_capacity(row.device_ids.len());
        for d in &row.device_ids {
            let hex = d.trim_start_matches("0x");
            let id = (hex.len() == 4).then(|| u16::from_str_radix(hex, 16).ok()).flatten().ok_or_else(|| {
                bad("device_ids", format!("'{d}' is not a 16-bit PCI device id (four hex digits, e.g. 2330)"))
            })?;
            if out.iter().flat_map(|p| &p.device_ids).chain(&ids).any(|&x| x == id) {
                return Err(bad("device_ids", format!("{id:04X} is listed twice")));
            }
            ids.push(id);
        }
        if ids.is_empty() {
            return Err(bad("device_ids", "must list at least one id".into()));
        }
        out.push(GpuPciIds { gpu: row.gpu, device_ids: ids, product_names: row.product_names, source: row.source });
    }
    Ok(out)
}

/// The embedded PCI ids, checked against the embedded catalogue.
pub fn builtin_pci_ids(gpus: &[GpuSpec]) -> Result<Vec<GpuPciIds>, CatalogError> {
    parse_pci_ids(BUILTIN_PCI_IDS_TOML, BUILTIN_PCI_IDS_FILE, gpus)
}

/// The embedded catalogue.
pub fn builtin_gpus() -> Result<Vec<GpuSpec>, CatalogError> {
    parse_gpus(BUILTIN_GPUS_TOML, BUILTIN_GPUS_FILE)
}

/// Layer `user` entries over `base`: an entry with the same id replaces the
/// base one, new ids are appended. With `replace`, only `user` is kept.
pub fn merge_gpus(base: Vec<GpuSpec>, user: Vec<GpuSpec>, replace: bool) -> Vec<GpuSpec> {
    if replace {
        return user;
    }
    let mut out = base;
    for g in user {
        match out.iter_mut().find(|b| b.id.eq_ignore_ascii_case(&g.id)) {
            Some(slot) => *slot = g,
            None => out.push(g),
        }
    }
    out
}

/// Lowercase, letters and digits only, a leading "nvidia" dropped:
/// `NVIDIA A100-SXM4-80GB` → `a100sxm480gb`, `A100 80GB` = `a100-80gb`.
pub fn normalize(name: &str) -> String {
    let n: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    match n.strip_prefix("nvidia") {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => n,
    }
}

fn spellings(g: &GpuSpec) -> impl Iterator<Item = String> + '_ {
    std::iter::once(normalize(&g.id))
        .chain(std::iter::once(normalize(&g.name)))
        .chain(g.aliases.iter().map(|a| normalize(a)))
}

/// The GPU whose id, display name or alias is exactly `name` (case, spaces
/// and dashes ignored; no prefix or fuzzy match).
pub fn gpu_named<'a>(gpus: &'a [GpuSpec], name: &str) -> Option<&'a GpuSpec> {
    let q = normalize(name);
    if q.is_empty() {
        return None;
    }
    gpus.iter().find(|g| spellings(g).any(|s| s == q))
}

/// Most close names an unknown GPU name's error lists.
const MAX_CLOSE_NAMES: usize = 12;

/// Find a GPU by id, display name or alias (case, spaces, dashes and a
/// leading "NVIDIA" ignored): an exact match or an error, never a guess.
///
/// A name that only begins a catalogue name (`a100`, `h2`, `rtx-6000`) is
/// refused like any other unknown name: [`CatalogError::AmbiguousGpu`]
/// when it begins the names of several cards (listing them), else
/// [`CatalogError::UnknownGpu`] with the close names: the cards whose names
/// it begins, then up to three similar ids.
pub fn find_gpu<'a>(gpus: &'a [GpuSpec], name: &str) -> Result<&'a GpuSpec, CatalogError> {
    let q = normalize(name);
    if q.is_empty() {
        return Err(CatalogError::UnknownGpu { query: name.to_string(), suggestions: Vec::new() });
    }
    if let Some(g) = gpu_named(gpus, name) {
        return Ok(g);
    }
    let begun: Vec<String> =
        gpus.iter().filter(|g| spellings(g).any(|s| s.starts_with(&q))).map(|g| g.id.clone()).collect();
    if begun.len() > 1 {
        let more = begun.len().saturating_sub(MAX_CLOSE_NAMES);
        return Err(CatalogError::AmbiguousGpu {
            query: name.to_string(),
            candidates: begun.into_iter().take(MAX_CLOSE_NAMES).collect(),
            more,
        });
    }
    let mut scored: Vec<(f64, &str)> = gpus
        .iter()
        .filter(|g| !begun.contains(&g.id))
        .map(|g| {
            let best = spellings(g).map(|s| strsim::jaro_winkler(&q, &s)).fold(0.0, f64::max);
            (best, g.id.as_str())
        })
        .filter(|(s, _)| *s >= 0.7)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let suggestions = begun.into_iter().chain(scored.iter().take(3).map(|(_, id)| id.to_string())).collect();
    Err(CatalogError::UnknownGpu { query: name.to_string(), suggestions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_parses_and_is_sorted_by_memory() {
        let gpus = builtin_gpus().unwrap();
        assert!(gpus.len() >= 20, "{} GPUs", gpus.len());
        for w in gpus.windows(2) {
            assert!(
                (w[0].memory_mib, &w[0].id) <= (w[1].memory_mib, &w[1].id),
                "{} before {} breaks the memory/id order",
                w[0].id,
                w[1].id
            );
        }
        for g in &gpus {
            assert!(!g.source.is_empty(), "{} has no source", g.id);
            assert!(g.arch.is_some(), "{} has no arch", g.id);
        }
    }

    #[test]
    fn confirmed_nvidia_smi_totals() {
        // shared/reference/gpus.md, "Exact totals shown by nvidia-smi".
        let gpus = builtin_gpus().unwrap();
        let mib = |n: &str| find_gpu(&gpus, n).unwrap().memory_mib;
        assert_eq!(mib("a100-40gb"), 40960);
        assert_eq!(mib("a100-80gb"), 81920);
        assert_eq!(mib("rtx-4090"), 24564);
        assert_eq!(mib("h100"), 81559);
        // 81920 MiB = 85,899,345,920 bytes
        assert_eq!(find_gpu(&gpus, "a100-80gb").unwrap().memory_bytes(), 85_899_345_920);
    }

    #[test]
    fn names_people_type() {
        let gpus = builtin_gpus().unwrap();
        let id = |n: &str| find_gpu(&gpus, n).unwrap().id.clone();
        assert_eq!(id("a100-80gb"), "a100-80gb-sxm");
        assert_eq!(id("A100 80GB"), "a100-80gb-sxm");
        assert_eq!(id("NVIDIA A100-SXM4-80GB"), "a100-80gb-sxm");
        assert_eq!(id("rtx-3090"), "rtx-3090");
        assert_eq!(id("3090"), "rtx-3090");
        assert_eq!(id("RTX 3090"), "rtx-3090");
        assert_eq!(id("h100"), "h100-sxm");
        assert_eq!(id("T4"), "t4");
        assert_eq!(id("l40"), "l40"); // its own card, no longer a prefix of l40s
        assert_eq!(id("L40S"), "l40s");
        assert_eq!(id("h20"), "h20"); // not the H200
        assert_eq!(id("NVIDIA H20"), "h20");
        assert_eq!(id("h200"), "h200-sxm");
        assert_eq!(id("RTX 4090 D"), "rtx-4090d");
        assert_eq!(id("NVIDIA RTX 6000 Ada Generation"), "rtx-6000-ada");
        assert_eq!(id("NVIDIA A800-SXM4-80GB"), "a800-80gb-sxm");
    }

    /// Issue 24: the cards rented in China, each with the memory nvidia-smi
    /// shows (MiB) and its decimal GB.
    #[test]
    fn rented_cards_are_listed_with_their_nvidia_smi_memory() {
        let gpus = builtin_gpus().unwrap();
        let cards: [(&str, &str, u64, f64); 17] = [
            ("h20", "h20", 97871, 96.0),
            ("h800", "h800-sxm", 81559, 80.0),
            ("h800-pcie", "h800-pcie", 81559, 80.0),
            ("a800-40gb", "a800-40gb-pcie", 40960, 40.0),
            ("a800-80gb", "a800-80gb-sxm", 81920, 80.0),
            ("a800-80gb-pcie", "a800-80gb-pcie", 81920, 80.0),
            ("l20", "l20", 46068, 48.0),
            ("l40", "l40", 46068, 48.0),
            ("rtx-4090d", "rtx-4090d", 24564, 24.0),
            ("rtx-5090", "rtx-5090", 32607, 32.0),
            ("rtx-4080", "rtx-4080", 16376, 16.0),
            ("rtx-a6000", "rtx-a6000", 49140, 48.0),
            ("rtx-6000-ada", "rtx-6000-ada", 49140, 48.0),
            ("rtx-pro-6000", "rtx-pro-6000", 97887, 96.0),
            ("RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000", 97887, 96.0),
            ("a40", "a40", 46068, 48.0),
            ("a30", "a30", 24576, 24.0),
        ];
        for (name, want, mib, gb) in cards {
            let g = find_gpu(&gpus, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((g.id.as_str(), g.memory_mib, g.memory_gb), (want, mib, gb), "{name}");
            // the MiB total is below the decimal GB (ECC and the driver take some)
            assert!(g.memory_bytes() as f64 <= gb * 1e9 * 1.08, "{name}");
            assert!(g.bandwidth_gbs > 0.0 && g.bf16_tflops > 0.0 && !g.source.is_empty(), "{name}");
        }
        // the H20 is a 96 GB card, not the 141 GB H200
        assert!(find_gpu(&gpus, "h20").unwrap().memory_mib < find_gpu(&gpus, "h200").unwrap().memory_mib);
    }

    /// Issue 24: a name matches exactly or is refused, never by prefix.
    /// Every proper prefix of every id that is not itself a catalogue name
    /// (id, display name or alias) is refused, listing that id among the
    /// close names.
    #[test]
    fn no_prefix_of_an_id_picks_a_card() {
        let gpus = builtin_gpus().unwrap();
        let mut refused = 0;
        for g in &gpus {
            for end in 1..g.id.len() {
                let prefix = &g.id[..end];
                if gpu_named(&gpus, prefix).is_some() {
                    continue; // `h20` begins `h200-sxm` but is the H20's id
                }
                let (listed, more) = match find_gpu(&gpus, prefix) {
                    Ok(other) => panic!("'{prefix}' (a prefix of {}) picked {}", g.id, other.id),
                    Err(CatalogError::AmbiguousGpu { candidates, more, .. }) => (candidates, more),
                    Err(CatalogError::UnknownGpu { suggestions, .. }) => (suggestions, 0),
                    Err(other) => panic!("'{prefix}': {other:?}"),
                };
                // the listing is capped, and says how many it left out
                assert!(listed.contains(&g.id) || more > 0, "'{prefix}' lists {listed:?}, not {}", g.id);
                assert!(listed.len() <= MAX_CLOSE_NAMES, "'{prefix}' lists {listed:?}");
                refused += 1;
            }
        }
        assert!(refused >= 200, "{refused} prefixes refused");
    }

    #[test]
    fn names_that_once_guessed_are_refused_with_the_cards_listed() {
        let gpus = builtin_gpus().unwrap();
        let listed = |n: &str| match find_gpu(&gpus, n) {
            Err(CatalogError::AmbiguousGpu { candidates, .. }) => candidates,
            other => panic!("{n}: expected ambiguous, got {other:?}"),
        };
        // `v100` was an alias of the 16 GB SXM2 card; there are 16 and 32 GB V100s
        let v100 = listed("v100");
        assert!(v100.contains(&"v100-sxm2-16gb".into()) && v100.contains(&"v100-sxm2-32gb".into()), "{v100:?}");
        let h2 = listed("h2");
        assert!(h2.contains(&"h20".into()) && h2.contains(&"h200-sxm".into()), "{h2:?}");
        let e = find_gpu(&gpus, "rtx-6000").unwrap_err().to_string();
        assert!(e.contains("unknown GPU 'rtx-6000' (did you mean rtx-6000-ada, "), "{e}");
        // `a` begins more names than are listed: the count of the rest is given
        let e = find_gpu(&gpus, "a").unwrap_err();
        assert!(
            matches!(&e, CatalogError::AmbiguousGpu { candidates, more, .. } if candidates.len() == MAX_CLOSE_NAMES && *more > 0),
            "{e:?}"
        );
        assert!(e.to_string().contains(" more; give one of these ids"), "{e}");
        let a800 = listed("a800");
        assert_eq!(a800, ["a800-40gb-pcie", "a800-80gb-pcie", "a800-80gb-sxm"]);
        // one card begun: refused all the same, that card first among the close names
        match find_gpu(&gpus, "rtx-409") {
            Err(CatalogError::AmbiguousGpu { candidates, .. }) => assert!(candidates.contains(&"rtx-4090d".into())),
            other => panic!("{other:?}"),
        }
        match find_gpu(&gpus, "mi300") {
            Err(CatalogError::UnknownGpu { suggestions, .. }) => assert_eq!(suggestions[0], "mi300x"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_catalogue_name_picks_one_card() {
        let gpus = builtin_gpus().unwrap();
        for g in &gpus {
            for s in spellings(g) {
                let owners: Vec<&str> =
                    gpus.iter().filter(|o| spellings(o).any(|x| x == s)).map(|o| o.id.as_str()).collect();
                assert_eq!(owners, [g.id.as_str()], "'{s}'");
            }
        }
        // and a file that gives one name to two cards is refused, naming the field
        let two = format!(
            "{GOOD}{}",
            GOOD.replace("id = \"x1\"\nname = \"X1\"", "id = \"x2\"\nname = \"X2\"\naliases = [\"X-1\"]")
        );
        let e = parse_gpus(&two, "f.toml").unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { field, .. } if field == "aliases"), "{e:?}");
        assert!(e.to_string().contains("GPU 'x2': 'X-1' already names GPU 'x1'"), "{e}");
    }

    #[test]
    fn unknown_and_ambiguous_names() {
        let gpus = builtin_gpus().unwrap();
        match find_gpu(&gpus, "a100") {
            Err(CatalogError::AmbiguousGpu { candidates, .. }) => {
                assert!(candidates.contains(&"a100-40gb-sxm".to_string()));
                assert!(candidates.contains(&"a100-80gb-sxm".to_string()));
            }
            other => panic!("expected ambiguous, got {other:?}"),
        }
        let e = find_gpu(&gpus, "rtx-3080").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("unknown GPU 'rtx-3080'"), "{msg}");
        assert!(msg.contains("did you mean"), "{msg}");
        assert!(msg.contains("rtx-3090"), "{msg}");
        assert!(matches!(find_gpu(&gpus, "---"), Err(CatalogError::UnknownGpu { .. })));
    }

    #[test]
    fn builtin_pci_ids_name_catalogue_cards_once_each_with_a_source() {
        let gpus = builtin_gpus().unwrap();
        let ids = builtin_pci_ids(&gpus).unwrap();
        let of = |d: u16| ids.iter().find(|p| p.device_ids.contains(&d)).map(|p| p.gpu.as_str());
        // the pair nvidia-smi names alike (H100 SXM5 prints "NVIDIA H100 80GB HBM3")
        assert_eq!(of(0x2330), Some("h100-sxm"));
        assert_eq!(of(0x2331), Some("h100-pcie"));
        assert_eq!(of(0x20B0), Some("a100-40gb-sxm"));
        assert_eq!(of(0x20F1), Some("a100-40gb-pcie"));
        // issue 24: the variants nvidia-smi's totals cannot tell apart
        assert_eq!(of(0x2324), Some("h800-sxm"));
        assert_eq!(of(0x2322), Some("h800-pcie"));
        assert_eq!(of(0x20F3), Some("a800-80gb-sxm"));
        assert_eq!(of(0x20F5), Some("a800-80gb-pcie"));
        assert_eq!(of(0x26B5), Some("l40"));
        assert_eq!(of(0x26B9), Some("l40s"));
        assert!(ids.iter().all(|p| p.source.contains("pci.ids") || p.source.contains("nvidia-smi -q")));
        let e =
            parse_pci_ids("[[pci]]\ngpu = \"h100-sxm\"\ndevice_ids = [\"23300\"]\nsource = \"x\"\n", "p.toml", &gpus)
                .unwrap_err();
        assert!(e.to_string().contains("p.toml:3: field `device_ids`: '23300' is not a 16-bit PCI device id"), "{e}");
        let e = parse_pci_ids("[[pci]]\ngpu = \"h999\"\ndevice_ids = [\"2330\"]\nsource = \"x\"\n", "p.toml", &gpus)
            .unwrap_err();
        assert!(e.to_string().contains("'h999' is not a catalogue GPU id"), "{e}");
    }

    const GOOD: &str = r#"
[[gpu]]
id = "x1"
name = "X1"
memory_mib = 1024
memory_gb = 1.0
bandwidth_gbs = 100.0
bf16_tflops = 10.0
pcie_gen = 4
source = "test"
"#;

    #[test]
    fn user_file_parses_with_defaults() {
        let g = parse_gpus(GOOD, "mine.toml").unwrap();
        assert_eq!(g.len(), 1);
        assert!(g[0].bf16);
        assert_eq!(g[0].mig_max, 0);
        assert_eq!(g[0].nvlink_gbs, None);
    }

    #[test]
    fn mistyped_field_names_file_line_and_field() {
        let text = GOOD.replace("memory_mib = 1024", "memory_mib = \"lots\"");
        let e = parse_gpus(&text, "mine.toml").unwrap_err();
        match &e {
            CatalogError::Parse { file, line, field, .. } => {
                assert_eq!(file, "mine.toml");
                assert_eq!(*line, 5); // line 1 is the empty line after r#"
                assert_eq!(field.as_deref(), Some("memory_mib"));
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().starts_with("mine.toml:5:"), "{e}");
    }

    #[test]
    fn missing_and_unknown_fields_are_named() {
        let text = GOOD.replace("bandwidth_gbs = 100.0\n", "");
        let e = parse_gpus(&text, "f.toml").unwrap_err();
        assert!(matches!(&e, CatalogError::Parse { field: Some(f), .. } if f == "bandwidth_gbs"), "{e:?}");
        let text = GOOD.replace("pcie_gen = 4", "pcie_gen = 4\nmemroy = 3");
        let e = parse_gpus(&text, "f.toml").unwrap_err();
        assert!(matches!(&e, CatalogError::Parse { field: Some(f), .. } if f == "memroy"), "{e:?}");
    }

    #[test]
    fn impossible_values_name_line_and_field() {
        let text = GOOD.replace("bandwidth_gbs = 100.0", "bandwidth_gbs = -1.0");
        let e = parse_gpus(&text, "f.toml").unwrap_err();
        assert_eq!(
            e,
            CatalogError::Invalid {
                file: "f.toml".into(),
                line: 7,
                field: "bandwidth_gbs".into(),
                reason: "-1 must be a positive number".into()
            }
        );
        let text = GOOD.replace("memory_mib = 1024", "memory_mib = 0");
        assert!(matches!(parse_gpus(&text, "f.toml"), Err(CatalogError::Invalid { line: 5, .. })));
        let twice = format!("{GOOD}{GOOD}");
        let e = parse_gpus(&twice, "f.toml").unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { field, line: 13, .. } if field == "id"), "{e:?}");
    }

    #[test]
    fn architecture_is_parsed_and_an_unknown_one_named() {
        assert_eq!(parse_gpus(GOOD, "f.toml").unwrap()[0].arch, None);
        let text = GOOD.replace("pcie_gen = 4", "pcie_gen = 4\narch = \"Hopper\"");
        assert_eq!(parse_gpus(&text, "f.toml").unwrap()[0].arch, Some(GpuArch::Hopper));
        let text = GOOD.replace("pcie_gen = 4", "pcie_gen = 4\narch = \"hoppper\"");
        let e = parse_gpus(&text, "f.toml").unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { field, line: 10, .. } if field == "arch"), "{e:?}");
        assert!(
            e.to_string().contains("GPU 'x1': unknown architecture 'hoppper' (expected one of volta, turing, ampere"),
            "{e}"
        );
    }

    #[test]
    fn broken_toml_and_oversize() {
        let e = parse_gpus("[[gpu]\nid = ", "f.toml").unwrap_err();
        assert!(matches!(e, CatalogError::Parse { line: 1, .. }), "{e:?}");
        let big = " ".repeat(MAX_CATALOG_BYTES + 1);
        assert!(matches!(parse_gpus(&big, "f.toml"), Err(CatalogError::TooLarge { .. })));
        let e = parse_gpus("schema = 2\n", "f.toml").unwrap_err();
        assert!(matches!(e, CatalogError::Invalid { line: 1, .. }));
    }

    #[test]
    fn merge_replaces_by_id() {
        let base = builtin_gpus().unwrap();
        let n = base.len();
        let mut user = parse_gpus(GOOD, "u").unwrap();
        user[0].id = "t4".into();
        let merged = merge_gpus(base.clone(), user.clone(), false);
        assert_eq!(merged.len(), n);
        assert_eq!(find_gpu(&merged, "t4").unwrap().memory_mib, 1024);
        assert_eq!(merge_gpus(base, user, true).len(), 1);
    }
}
