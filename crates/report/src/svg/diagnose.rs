//! `diagnose --svg` on a memory snapshot: per device, the allocated and
//! reserved timeline (peak and OOMs marked) and the live bytes at the peak
//! by allocation site (the report's groups).

use super::{axis, fit_text, tick, Lang, Svg, BAD, GRID, MUTED};
use crate::diagnose::schema::{DeviceReportJson, SnapshotReportJson};
use crate::format::bytes;

const W: f64 = 960.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 20.0;
const PLOT_H: f64 = 190.0;
const TIMELINE_H: f64 = 290.0;
const SITE_ROW: f64 = 26.0;
const MAX_SITES: usize = 8;

const ALLOCATED: &str = "#3d6fd1";
const RESERVED: &str = "#b9c0cc";

fn sites_height(d: &DeviceReportJson) -> f64 {
    let n = d.groups.len().clamp(1, MAX_SITES) as f64;
    56.0 + SITE_ROW * n + 12.0
}

/// Both charts of every device, in one document.
pub fn snapshot(r: &SnapshotReportJson, title: &str, lang: Lang) -> String {
    let h: f64 = if r.devices.is_empty() { 80.0 } else { r.devices.iter().map(|d| TIMELINE_H + sites_height(d)).sum() };
    let mut s = Svg::new(W, h, title);
    if r.devices.is_empty() {
        s.text(20.0, 40.0, lang.pick("no devices in the snapshot", "快照中没有设备"), "start", "");
    }
    let mut y0 = 0.0;
    for d in &r.devices {
        timeline(&mut s, d, y0, lang);
        y0 += TIMELINE_H;
        sites(&mut s, d, y0, lang);
        y0 += sites_height(d);
    }
    s.finish()
}

fn timeline(s: &mut Svg, d: &DeviceReportJson, y0: f64, lang: Lang) {
    let top_y = y0 + 64.0;
    let peak = d.peak.as_ref().map(|p| p.allocated_bytes).unwrap_or(d.allocated_bytes);
    s.text(
        20.0,
        y0 + 28.0,
        &format!(
            "GPU {} — {} {} · {} {}",
            d.device,
            lang.pick("peak allocated", "峰值已分配"),
            bytes(peak),
            lang.pick("reserved at the snapshot", "快照时已保留"),
            bytes(d.reserved_bytes)
        ),
        "start",
        r#" font-size="17" font-weight="600""#,
    );
    let mut lx = 20.0;
    for (color, label, dot) in [
        (ALLOCATED, lang.pick("allocated", "已分配"), false),
        (RESERVED, lang.pick("reserved", "已保留"), false),
        (BAD, lang.pick("peak", "峰值"), true),
        (BAD, "OOM", false),
    ] {
        if dot {
            s.raw(&format!(r#"<circle cx="{:.1}" cy="{:.1}" r="5" fill="{color}"/>"#, lx + 6.0, y0 + 44.0));
        } else if label == "OOM" {
            s.line(lx + 6.0, y0 + 37.0, lx + 6.0, y0 + 51.0, color, r#" stroke-width="1.5" stroke-dasharray="4 3""#);
        } else {
            s.rect(lx, y0 + 38.0, 12.0, 12.0, color, r#" rx="2""#, "");
        }
        s.text(lx + 18.0, y0 + 48.0, label, "start", &format!(r#" font-size="12" fill="{MUTED}""#));
        lx += 36.0 + super::text_width(label, 12.0);
    }
    let pts = &d.timeline;
    if pts.len() < 2 {
        s.text(
            LEFT,
            top_y + 40.0,
            lang.pick(
                "no trace recorded (call torch.cuda.memory._record_memory_history() before the run)",
                "没有记录轨迹（请在运行前调用 torch.cuda.memory._record_memory_history()）",
            ),
            "start",
            &format!(r#" fill="{MUTED}""#),
        );
        return;
    }
    let max = pts.iter().map(|p| p.reserved_bytes.max(p.allocated_bytes)).max().unwrap_or(0).max(d.reserved_bytes);
    let (top, step) = axis(max);
    let n = (pts.len() - 1) as f64;
    let x = |i: usize| LEFT + (W - LEFT - RIGHT) * i as f64 / n;
    let y = |v: u64| top_y + PLOT_H * (1.0 - v as f64 / top.max(1) as f64);
    let mut t = 0;
    while t <= top {
        s.line(LEFT, y(t), W - RIGHT, y(t), GRID, "");
        s.text(LEFT - 8.0, y(t) + 4.0, &tick(t), "end", &format!(r#" font-size="11" fill="{MUTED}""#));
        t += step.max(1);
    }
    // reserved as an area, allocated as a line
    let mut area = format!("{:.1},{:.1} ", x(0), y(0));
    for (i, p) in pts.iter().enumerate() {
        area.push_str(&format!("{:.1},{:.1} ", x(i), y(p.reserved_bytes)));
    }
    area.push_str(&format!("{:.1},{:.1}", x(pts.len() - 1), y(0)));
    s.raw(&format!(
        r#"<polygon points="{area}" fill="{RESERVED}" opacity="0.55"><title>{}</title></polygon>"#,
        lang.pick("reserved", "已保留")
    ));
    let line: Vec<String> =
        pts.iter().enumerate().map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.allocated_bytes))).collect();
    s.raw(&format!(
        r#"<polyline fill="none" stroke="{ALLOCATED}" stroke-width="1.8" points="{}"><title>{}</title></polyline>"#,
        line.join(" "),
        lang.pick("allocated", "已分配")
    ));
    if let Some(pk) = &d.peak {
        if let Some(i) = pts.iter().position(|p| p.index == pk.index) {
            s.raw(&format!(
                r#"<circle cx="{:.1}" cy="{:.1}" r="5" fill="{BAD}"><title>{} {}</title></circle>"#,
                x(i),
                y(pk.allocated_bytes),
                lang.pick("peak", "峰值"),
                bytes(pk.allocated_bytes)
            ));
        }
    }
    for o in &d.ooms {
        if let Some(i) = pts.iter().position(|p| p.index == Some(o.index)) {
            s.raw(&format!(
                r#"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{BAD}" stroke-width="1.5" stroke-dasharray="4 3"><title>OOM: {3} {4} ({5})</title></line>"#,
                x(i),
                top_y,
                top_y + PLOT_H,
                bytes(o.requested_bytes),
                lang.pick("requested", "请求"),
                o.class
            ));
        }
    }
    s.text(
        LEFT + (W - LEFT - RIGHT) / 2.0,
        top_y + PLOT_H + 22.0,
        &format!("{} ({})", lang.pick("trace entries", "轨迹条目"), d.trace_entries),
        "middle",
        &format!(r#" font-size="12" fill="{MUTED}""#),
    );
}

fn sites(s: &mut Svg, d: &DeviceReportJson, y0: f64, lang: Lang) {
    s.text(
        20.0,
        y0 + 24.0,
        &format!(
            "GPU {} — {}",
            d.device,
            lang.pick("live at the peak, by where it was allocated", "峰值时存活的显存，按分配位置")
        ),
        "start",
        r#" font-size="15" font-weight="600""#,
    );
    if d.groups.is_empty() {
        s.text(
            20.0,
            y0 + 56.0,
            lang.pick("no live allocations at the peak", "峰值时没有存活的分配"),
            "start",
            &format!(r#" fill="{MUTED}""#),
        );
        return;
    }
    let mut groups: Vec<_> = d.groups.iter().collect();
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.label.cmp(&b.label)));
    let total: u64 = d.groups.iter().map(|g| g.bytes).sum();
    let max = groups.first().map(|g| g.bytes).unwrap_or(1).max(1);
    let label_w = 330.0;
    let bar_x = 20.0 + label_w + 10.0;
    let bar_w = W - RIGHT - bar_x - 170.0;
    for (i, g) in groups.iter().take(MAX_SITES).enumerate() {
        let y = y0 + 44.0 + SITE_ROW * i as f64;
        s.text(20.0, y + 13.0, &fit_text(&g.label, label_w, 12.5), "start", r#" font-size="12.5""#);
        let w = bar_w * g.bytes as f64 / max as f64;
        let tip = format!("{}: {} ({} ×)", g.label, bytes(g.bytes), g.count);
        s.rect(bar_x, y, w.max(1.0), SITE_ROW - 8.0, ALLOCATED, r#" rx="3""#, &tip);
        s.text(
            bar_x + w.max(1.0) + 8.0,
            y + 13.0,
            &format!("{} · {:.0}% · {}×", bytes(g.bytes), g.bytes as f64 / total.max(1) as f64 * 100.0, g.count),
            "start",
            &format!(r#" font-size="12" fill="{MUTED}""#),
        );
    }
}
