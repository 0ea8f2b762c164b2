//! The snapshot timeline as a self-contained SVG, drawn like memory_viz's
//! "Active Memory Timeline" (torch/utils/viz/MemoryViz.js): allocated
//! memory as stacked areas of the largest allocation sites over the trace,
//! reserved memory as a line above them, the peak and every OOM marked.
//! Hand-written: a few polygons and lines need no plotting library.

use crate::classify::b;
use crate::snapshot::{DeviceReport, SnapshotReport};
use std::fmt::Write;

const W: f64 = 980.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 84.0;
const PLOT_W: f64 = 560.0;
const TOP: f64 = 46.0;
const PLOT_H: f64 = 230.0;
const LEGEND_X: f64 = LEFT + PLOT_W + 24.0;

/// Band colours (tableau10, as matplotlib's default cycle); the band
/// "allocated before the trace" is grey, "other sites" light grey.
const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn band_color(label: &str, i: usize) -> &'static str {
    match label {
        crate::snapshot::SITE_BEFORE_TRACE => "#c7c7c7",
        crate::snapshot::SITE_OTHER => "#e4e4e4",
        _ => PALETTE[i % PALETTE.len()],
    }
}

fn short(label: &str, n: usize) -> String {
    if label.chars().count() <= n {
        label.to_string()
    } else {
        let mut s: String = label.chars().take(n - 1).collect();
        s.push('…');
        s
    }
}

/// A round tick step (1, 2 or 5 × a power of ten of KiB/MiB/GiB) and how
/// many ticks reach `top` (3 to 6).
fn nice_ticks(top: u64) -> (u64, u64) {
    let unit: u64 = match top {
        t if t >= 1 << 30 => 1 << 30,
        t if t >= 1 << 20 => 1 << 20,
        t if t >= 1 << 10 => 1 << 10,
        _ => 1,
    };
    let v = top as f64 / unit as f64;
    let raw = v / 4.0;
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * p).find(|s| s * 6.0 >= v).unwrap_or(10.0 * p);
    let step_bytes = ((step * unit as f64).round() as u64).max(1);
    (step_bytes, top.div_ceil(step_bytes).max(1))
}

/// One panel per device.
pub fn timeline(report: &SnapshotReport, title: &str) -> String {
    let panels = report.devices.len().max(1);
    let h = PANEL_H * panels as f64 + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<title>{}</title>"#, esc(title));
    if report.devices.is_empty() {
        let _ = writeln!(s, r#"<text x="{LEFT}" y="{TOP}">no devices in the snapshot</text>"#);
    }
    for (pi, d) in report.devices.iter().enumerate() {
        panel(&mut s, d, PANEL_H * pi as f64);
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, d: &DeviceReport, y0: f64) {
    let pts = &d.timeline;
    let top = pts.iter().map(|p| p.reserved.max(p.allocated)).max().unwrap_or(0).max(d.reserved).max(1);
    let (tick, ticks) = nice_ticks(top);
    let max = tick.saturating_mul(ticks).max(1);
    let n_entries = d.trace_entries.max(1) as f64;
    let sc = Scale { y0, n_entries, max };
    let headline = match &d.peak {
        Some(p) => format!("GPU {}: peak {} allocated, {} reserved then", d.device, b(p.allocated), b(p.reserved)),
        None => format!("GPU {}: {} allocated, {} reserved at the snapshot", d.device, b(d.allocated), b(d.reserved)),
    };
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        y0 + 24.0,
        esc(&headline)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#999"/>"##,
        y0 + TOP
    );
    y_axis(s, &sc, tick, ticks);
    x_axis_label(s, d, y0);
    if pts.len() < 2 {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">no trace recorded (enable torch.cuda.memory._record_memory_history before the run)</text>"#,
            LEFT + 10.0,
            y0 + TOP + 20.0
        );
    } else {
        stacked_bands(s, d, &sc);
        lines_and_marks(s, d, &sc);
    }
    legend(s, d, y0);
}

/// Plot coordinates of one panel: x by trace entry (the baseline at 0,
/// entry i at i + 1), y by bytes up to `max`.
struct Scale {
    y0: f64,
    n_entries: f64,
    max: u64,
}

impl Scale {
    fn x(&self, p: &crate::snapshot::Point) -> f64 {
        LEFT + PLOT_W * p.index.map(|i| i as f64 + 1.0).unwrap_or(0.0) / self.n_entries
    }
    fn y(&self, v: u64) -> f64 {
        self.y0 + TOP + PLOT_H * (1.0 - v as f64 / self.max as f64)
    }
}

/// The y axis: round steps in binary units.
fn y_axis(s: &mut String, sc: &Scale, tick: u64, ticks: u64) {
    for q in 0..=ticks {
        let v = tick * q;
        let yy = sc.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            yy + 4.0,
            esc(&b(v))
        );
    }
}

/// The x axis label: seconds when the trace has times, else entries.
fn x_axis_label(s: &mut String, d: &DeviceReport, y0: f64) {
    let pts = &d.timeline;
    let t0 = pts.first().and_then(|p| p.time_us);
    let t1 = pts.last().and_then(|p| p.time_us);
    let axis = match (t0, t1) {
        (Some(a), Some(z)) if z - a >= 1_000_000 => {
            format!("{} trace entries over {:.1} s", d.trace_entries, (z - a) as f64 / 1e6)
        }
        (Some(a), Some(z)) if z > a => {
            format!("{} trace entries over {:.1} ms", d.trace_entries, (z - a) as f64 / 1e3)
        }
        _ => format!("{} trace entries", d.trace_entries),
    };
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + PLOT_W / 2.0,
        y0 + TOP + PLOT_H + 16.0,
        esc(&axis)
    );
}

/// The sites as stacked bands, bottom first.
fn stacked_bands(s: &mut String, d: &DeviceReport, sc: &Scale) {
    let pts = &d.timeline;
    let mut below = vec![0u64; pts.len()];
    for (bi, site) in d.sites.iter().enumerate() {
        let above: Vec<u64> =
            pts.iter().zip(&below).map(|(p, lo)| lo.saturating_add(p.by_site.get(bi).copied().unwrap_or(0))).collect();
        let mut poly = String::new();
        for (p, v) in pts.iter().zip(&above) {
            let _ = write!(poly, "{:.1},{:.1} ", sc.x(p), sc.y(*v));
        }
        for (p, v) in pts.iter().zip(&below).rev() {
            let _ = write!(poly, "{:.1},{:.1} ", sc.x(p), sc.y(*v));
        }
        let _ = writeln!(
            s,
            r#"<polygon fill="{}" stroke="none" points="{}"><title>{}</title></polygon>"#,
            band_color(&site.label, bi),
            poly.trim_end(),
            esc(&site.label)
        );
        below = above;
    }
}

/// The allocated and reserved lines, the peak and every OOM.
fn lines_and_marks(s: &mut String, d: &DeviceReport, sc: &Scale) {
    let pts = &d.timeline;
    let y0 = sc.y0;
    for (field, color, dash, label) in
        [(false, "#222222", "", "allocated"), (true, "#555555", r#" stroke-dasharray="5 3""#, "reserved")]
    {
        let mut line = String::new();
        for p in pts {
            let v = if field { p.reserved } else { p.allocated };
            let _ = write!(line, "{:.1},{:.1} ", sc.x(p), sc.y(v));
        }
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.2"{dash} points="{}"><title>{label}</title></polyline>"#,
            line.trim_end()
        );
    }
    if let Some(pk) = &d.peak {
        let (px, py) = (sc.x(pk), sc.y(pk.allocated));
        let _ = writeln!(
            s,
            r#"<circle cx="{px:.1}" cy="{py:.1}" r="4" fill="red"><title>peak {}</title></circle><text x="{:.1}" y="{:.1}" fill="red" stroke="white" stroke-width="3" paint-order="stroke" text-anchor="{}">peak {}</text>"#,
            esc(&b(pk.allocated)),
            px + if px > LEFT + PLOT_W * 0.8 { -6.0 } else { 6.0 },
            (py - 6.0).max(y0 + TOP + 10.0),
            if px > LEFT + PLOT_W * 0.8 { "end" } else { "start" },
            esc(&b(pk.allocated))
        );
    }
    for o in &d.ooms {
        if let Some(p) = pts.iter().find(|p| p.index == Some(o.index)) {
            let _ = writeln!(
                s,
                r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="red" stroke-width="1.5" stroke-dasharray="4 2"><title>OOM: {3} requested ({4})</title></line><text x="{0:.1}" y="{5:.1}" fill="red" stroke="white" stroke-width="3" paint-order="stroke" text-anchor="end">OOM: {3} requested </text>"#,
                sc.x(p),
                y0 + TOP,
                y0 + TOP + PLOT_H,
                esc(&b(o.requested)),
                o.class.key(),
                y0 + TOP - 4.0
            );
        }
    }
}

/// The legend: bands top first, as stacked, then the lines and marks.
fn legend(s: &mut String, d: &DeviceReport, y0: f64) {
    let mut ly = y0 + TOP + 4.0;
    let _ = writeln!(
        s,
        r#"<text x="{LEGEND_X}" y="{ly:.1}" font-weight="bold">allocated by site: most held (at the peak)</text>"#
    );
    ly += 16.0;
    for (bi, site) in d.sites.iter().enumerate().rev() {
        let _ = writeln!(
            s,
            r#"<rect x="{LEGEND_X}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}">{} ({}) {}</text>"#,
            ly - 9.0,
            band_color(&site.label, bi),
            LEGEND_X + 14.0,
            ly,
            esc(&b(site.max_bytes)),
            esc(&b(site.peak_bytes)),
            esc(&short(&site.label, 34))
        );
        ly += 15.0;
    }
    ly += 4.0;
    let _ = writeln!(
        s,
        r##"<line x1="{LEGEND_X}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#555" stroke-dasharray="5 3"/><text x="{:.1}" y="{:.1}">reserved (segments)</text>"##,
        LEGEND_X + 10.0,
        ly - 4.0,
        ly - 4.0,
        LEGEND_X + 14.0,
        ly
    );
    ly += 15.0;
    let _ = writeln!(
        s,
        r##"<line x1="{LEGEND_X}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#222"/><text x="{:.1}" y="{:.1}">allocated</text>"##,
        LEGEND_X + 10.0,
        ly - 4.0,
        ly - 4.0,
        LEGEND_X + 14.0,
        ly
    );
    ly += 15.0;
    let _ = writeln!(s, r#"<text x="{LEGEND_X}" y="{ly:.1}" fill="red">● peak   ┆ OOM</text>"#);
}
