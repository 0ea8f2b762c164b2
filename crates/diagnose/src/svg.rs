//! The snapshot timeline as a self-contained SVG (hand-written: two
//! polylines and a few markers need no plotting library).

use crate::classify::b;
use crate::snapshot::SnapshotReport;
use std::fmt::Write;

const W: f64 = 900.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const PLOT_H: f64 = 180.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One panel per device: reserved (grey) and allocated (blue) over the
/// trace, the peak (red dot) and every OOM (red line).
pub fn timeline(report: &SnapshotReport, title: &str) -> String {
    let panels = report.devices.len().max(1);
    let h = PANEL_H * panels as f64 + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<title>{}</title>"#, esc(title));
    if report.devices.is_empty() {
        let _ = writeln!(s, r#"<text x="{LEFT}" y="{TOP}">no devices in the snapshot</text>"#);
    }
    for (pi, d) in report.devices.iter().enumerate() {
        let y0 = PANEL_H * pi as f64;
        let pts = &d.timeline;
        let max = pts.iter().map(|p| p.reserved.max(p.allocated)).max().unwrap_or(0).max(d.reserved).max(1);
        let n = pts.len().max(2) - 1;
        let x = |i: usize| LEFT + (W - LEFT - RIGHT) * i as f64 / n as f64;
        let y = |v: u64| y0 + TOP + PLOT_H * (1.0 - v as f64 / max as f64);
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">GPU {}: peak allocated {}, reserved {} now</text>"#,
            y0 + 24.0,
            d.device,
            esc(&d.peak.as_ref().map(|p| b(p.allocated)).unwrap_or_else(|| b(d.allocated))),
            esc(&b(d.reserved))
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{}" width="{}" height="{PLOT_H}" fill="none" stroke="#999"/>"##,
            y0 + TOP,
            W - LEFT - RIGHT
        );
        let _ =
            writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#, LEFT - 6.0, y0 + TOP + 4.0, esc(&b(max)));
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="end">0</text>"#, LEFT - 6.0, y0 + TOP + PLOT_H);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">trace entries ({})</text>"#,
            LEFT + (W - LEFT - RIGHT) / 2.0,
            y0 + TOP + PLOT_H + 18.0,
            d.trace_entries
        );
        if pts.len() >= 2 {
            for (field, color, label) in [(true, "#aaaaaa", "reserved"), (false, "#1f77b4", "allocated")] {
                let mut line = String::new();
                for (i, p) in pts.iter().enumerate() {
                    let v = if field { p.reserved } else { p.allocated };
                    let _ = write!(line, "{:.1},{:.1} ", x(i), y(v));
                }
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"><title>{label}</title></polyline>"#,
                    line.trim_end()
                );
            }
            if let Some(pk) = &d.peak {
                if let Some(i) = pts.iter().position(|p| p.index == pk.index) {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="red"><title>peak {}</title></circle>"#,
                        x(i),
                        y(pk.allocated),
                        esc(&b(pk.allocated))
                    );
                }
            }
            for o in &d.ooms {
                if let Some(i) = pts.iter().position(|p| p.index == Some(o.index)) {
                    let _ = writeln!(
                        s,
                        r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="red" stroke-dasharray="4 2"><title>OOM: {3} requested ({4})</title></line>"#,
                        x(i),
                        y0 + TOP,
                        y0 + TOP + PLOT_H,
                        esc(&b(o.requested)),
                        o.class.key()
                    );
                }
            }
        } else {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}">no trace recorded (enable _record_memory_history before the run)</text>"#,
                LEFT + 10.0,
                y0 + TOP + 20.0
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}"><tspan fill="#1f77b4">— allocated</tspan>  <tspan fill="#888">— reserved</tspan>  <tspan fill="red">● peak  ┆ OOM</tspan></text>"##,
            W - 300.0,
            y0 + 24.0
        );
    }
    s.push_str("</svg>\n");
    s
}
