//! Charts as self-contained SVG, written by hand (a few rectangles and
//! lines need no plotting library): the CLI's `--svg` and the local web
//! page draw with these same functions, so a chart is snapshot-testable
//! and identical in both. Each renderer reads the command's JSON schema
//! types, never the engines. Labels come in English or Simplified Chinese
//! ([`Lang`]); numbers and units are the same in both.
//!
//! The markup uses presentation attributes only (no `style` attribute, no
//! `<style>`, no script, no external reference), so a page with a strict
//! Content-Security-Policy can inline it.

use crate::format::bytes;
use std::fmt::Write;

pub mod diagnose;
pub mod estimate;
pub mod mig;
pub mod plan;

/// The language of a chart's labels (the one language type: [`crate::i18n::Lang`]).
pub use crate::i18n::Lang;

/// System fonts only: nothing is fetched.
pub(crate) const FONT: &str =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'PingFang SC', 'Microsoft YaHei', 'WenQuanYi Micro Hei', sans-serif";

/// Text colour, muted text, grid lines.
pub(crate) const INK: &str = "#1d2433";
pub(crate) const MUTED: &str = "#5b6475";
pub(crate) const GRID: &str = "#e3e7ee";
pub(crate) const GOOD: &str = "#1f9d63";
pub(crate) const WARN: &str = "#d9822b";
pub(crate) const BAD: &str = "#d64545";
/// A white outline behind text drawn over bars or lines.
pub(crate) const HALO: &str = r##" stroke="#ffffff" stroke-width="4" stroke-linejoin="round" paint-order="stroke""##;

/// XML-escaped text.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // control characters are not allowed in XML 1.0
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Approximate width of `s` at `size` px: Latin glyphs ~0.56 em, CJK 1 em.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().map(|c| if (c as u32) < 0x2E80 { 0.56 } else { 1.0 }).sum::<f64>() * size
}

/// `s` cut to fit `width` px at `size`, with an ellipsis.
pub(crate) fn fit_text(s: &str, width: f64, size: f64) -> String {
    if text_width(s, size) <= width {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut next = out.clone();
        next.push(c);
        if text_width(&next, size) + 0.6 * size > width {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}

/// A document being written.
pub(crate) struct Svg {
    pub out: String,
}

impl Svg {
    /// `<svg>` of `w` × `h` with a title (for screen readers and tooltips).
    pub fn new(w: f64, h: f64, title: &str) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}" font-size="13" fill="{INK}">"#
        );
        let _ = writeln!(out, "<title>{}</title>", esc(title));
        let _ = writeln!(out, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
        Svg { out }
    }

    /// Open the headline block: the chart's first `height` px, which a page
    /// that shows the same verdict beside the chart may leave out.
    pub fn head_start(&mut self, height: f64) {
        let _ = writeln!(self.out, r#"<g class="vf-head" data-height="{height}">"#);
    }

    pub fn head_end(&mut self) {
        self.out.push_str("</g>\n");
    }

    pub fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Text at (x, y); `anchor` is `start`, `middle` or `end`; `extra` adds attributes.
    pub fn text(&mut self, x: f64, y: f64, s: &str, anchor: &str, extra: &str) {
        let _ = writeln!(self.out, r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}"{extra}>{}</text>"#, esc(s));
    }

    /// A rectangle with a tooltip (`tip`, may be empty).
    #[allow(clippy::too_many_arguments)]
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, extra: &str, tip: &str) {
        if tip.is_empty() {
            let _ = writeln!(
                self.out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}"{extra}/>"#,
                w.max(0.0),
                h.max(0.0)
            );
        } else {
            let _ = writeln!(
                self.out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}"{extra}><title>{}</title></rect>"#,
                w.max(0.0),
                h.max(0.0),
                esc(tip)
            );
        }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, extra: &str) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}"{extra}/>"#
        );
    }

    /// Diagonal hatching, referenced as `url(#id)`.
    pub fn hatch(&mut self, id: &str, color: &str, background: &str) {
        let _ = writeln!(
            self.out,
            r#"<defs><pattern id="{id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="{background}"/><line x1="0" y1="0" x2="0" y2="6" stroke="{color}" stroke-width="2"/></pattern></defs>"#
        );
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// A value axis from 0 to at least `max` bytes in round GiB (or MiB) steps:
/// (top of the axis, step).
pub(crate) fn axis(max: u64) -> (u64, u64) {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    let max = max.max(1);
    let unit = if max >= 2 * GIB { GIB } else { MIB };
    let in_units = max.div_ceil(unit);
    // a step of 1, 2 or 5 × 10^k units giving 4–8 ticks
    let mut step = 1u64;
    'outer: for pow in 0..12u32 {
        for m in [1u64, 2, 5] {
            let s = m * 10u64.pow(pow);
            if in_units.div_ceil(s) <= 8 {
                step = s;
                break 'outer;
            }
        }
    }
    let top = in_units.div_ceil(step) * step;
    (top.saturating_mul(unit), step.saturating_mul(unit))
}

/// A tick label: whole GiB or MiB.
pub(crate) fn tick(b: u64) -> String {
    if b == 0 {
        "0".to_string()
    } else if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else {
        bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_fits() {
        assert_eq!(esc("<a & 'b'>\u{1}"), "&lt;a &amp; &#39;b&#39;&gt; ");
        assert_eq!(fit_text("short", 100.0, 10.0), "short");
        let cut = fit_text("a very long label indeed", 60.0, 10.0);
        assert!(cut.ends_with('…') && text_width(&cut, 10.0) <= 60.0 + 6.0, "{cut}");
    }

    #[test]
    fn axes_are_round() {
        assert_eq!(axis(79 << 30), (80 << 30, 10 << 30));
        assert_eq!(axis(13 << 30), (14 << 30, 2 << 30));
        assert_eq!(axis(300 << 20), (300 << 20, 50 << 20));
        assert_eq!(axis(0), (1 << 20, 1 << 20));
        assert_eq!(tick(80 << 30), "80 GiB");
    }
}
