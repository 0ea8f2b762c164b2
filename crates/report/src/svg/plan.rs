//! `plan --svg`: path 1, the switch ladder on the user's card, as a column
//! of per-GPU memory after each switch against the card's line.

use super::{axis, fit_text, tick, Lang, Svg, BAD, GOOD, GRID, HALO, INK, MUTED, WARN};
use crate::format::bytes;
use crate::plan::PlanDocument;
use vramfit_plan::{Ladder, StepStatus};

/// A ladder step's name in the chart's language (the planner's names).
pub fn step_label(name: &str, lang: Lang) -> String {
    let zh = match name {
        "mixed precision" => "混合精度",
        "gradient accumulation" => "梯度累积",
        "activation checkpointing" => "激活检查点",
        "8-bit optimizer" => "8 位优化器",
        "LoRA" => "LoRA",
        "QLoRA" => "QLoRA",
        "CPU offload (optimizer)" => "CPU 卸载（优化器）",
        "CPU offload (parameters too)" => "CPU 卸载（含参数）",
        "fp8 KV cache" => "fp8 KV 缓存",
        "int8 weights" => "int8 权重",
        "int4 weights" => "int4 权重",
        _ => return name.to_string(),
    };
    match lang {
        Lang::En => name.to_string(),
        Lang::Zh => zh.to_string(),
    }
}

/// A status in words.
pub fn status_label(s: StepStatus, lang: Lang) -> &'static str {
    match s {
        StepStatus::Applied => lang.pick("applied", "已应用"),
        StepStatus::AlreadyOn => lang.pick("already on", "已开启"),
        StepStatus::NotAllowed => lang.pick("not allowed", "未允许"),
        StepStatus::NotApplicable => lang.pick("n/a", "不适用"),
        StepStatus::Refused => lang.pick("refused", "被拒绝"),
        StepStatus::Skipped => lang.pick("saves nothing", "无节省"),
    }
}

const W: f64 = 960.0;
const H: f64 = 420.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 70.0;
const PLOT_H: f64 = 220.0;

/// One column: name, per-GPU bytes, status (none: the job as given), fits, detail.
type Column = (String, Option<u64>, Option<StepStatus>, bool, String);

/// The ladder chart, or `None` when the plan has no ladder (no `--have`).
pub fn ladder(doc: &PlanDocument, lang: Lang) -> Option<String> {
    doc.plan.software.as_ref().map(|l| chart(l, lang))
}

fn chart(l: &Ladder, lang: Lang) -> String {
    // the job as given, then every step
    let mut cols: Vec<Column> =
        vec![(lang.pick("as given", "原样").to_string(), l.start_bytes, None, l.start_fits, String::new())];
    for s in &l.steps {
        cols.push((step_label(&s.name, lang), s.per_gpu_bytes, Some(s.status), s.fits, s.detail.clone()));
    }
    let max = cols.iter().filter_map(|c| c.1).max().unwrap_or(0).max(l.gpu_memory_bytes);
    let (top, step) = axis(max + max / 12);
    let y = |b: u64| TOP + PLOT_H * (1.0 - b as f64 / top as f64);
    let title =
        format!("{} {} ({})", lang.pick("Switches on", "在此卡上的软件开关："), l.gpu_name, bytes(l.gpu_memory_bytes));
    let mut s = Svg::new(W, H, &title);
    s.hatch("vf-skip", "#c9ced8", "#f4f6f9");
    s.text(LEFT - 56.0, 26.0, &title, "start", r#" font-size="18" font-weight="600""#);
    let sub = match l.first_fit {
        Some(i) => format!(
            "{} {}",
            lang.pick("fits from:", "从此步起放得下："),
            l.steps.get(i).map(|s| step_label(&s.name, lang)).unwrap_or_default()
        ),
        None if l.start_fits => lang.pick("fits as given", "原样即可放下").to_string(),
        None => lang.pick("no switch on this card makes it fit", "此卡上任何开关都放不下").to_string(),
    };
    s.text(LEFT - 56.0, 48.0, &sub, "start", &format!(r#" fill="{MUTED}""#));

    // axis and grid
    let mut t = 0;
    while t <= top {
        let yy = y(t);
        s.line(LEFT, yy, W - RIGHT, yy, GRID, "");
        s.text(LEFT - 8.0, yy + 4.0, &tick(t), "end", &format!(r#" font-size="11" fill="{MUTED}""#));
        t += step;
    }

    // the card line, under the columns' labels
    let yc = y(l.gpu_memory_bytes);
    s.line(LEFT, yc, W - RIGHT, yc, BAD, r#" stroke-width="2" stroke-dasharray="6 4""#);

    let n = cols.len() as f64;
    let slot = (W - LEFT - RIGHT) / n;
    let bw = (slot * 0.62).min(70.0);
    // one label size for every column: the longest word fits its column
    let longest = cols.iter().flat_map(|c| c.0.split(' ')).map(|w| super::text_width(w, 1.0)).fold(0.0, f64::max);
    let label_size = ((slot - 4.0) / longest.max(1.0)).clamp(9.0, 11.5);
    for (i, (name, b, status, fits, detail)) in cols.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let kept = matches!(status, None | Some(StepStatus::Applied));
        match b {
            Some(b) => {
                let (fill, extra) = match (kept, fits) {
                    (true, true) => (GOOD, ""),
                    (true, false) => (WARN, ""),
                    (false, _) => ("url(#vf-skip)", r##" stroke="#c9ced8""##),
                };
                let tip = format!(
                    "{name}: {}{}",
                    bytes(*b),
                    if detail.is_empty() { String::new() } else { format!(" — {detail}") }
                );
                s.rect(cx - bw / 2.0, y(*b), bw, y(0) - y(*b), fill, &format!(r#" rx="3"{extra}"#), &tip);
                s.text(cx, y(*b) - 6.0, &bytes(*b), "middle", &format!(r#" font-size="11.5" font-weight="600"{HALO}"#));
            }
            None => {
                s.text(cx, y(0) - 8.0, "—", "middle", &format!(r#" fill="{MUTED}""#));
            }
        }
        // the name under the column, on up to three lines
        let size = label_size;
        let lines = wrap(name, slot - 4.0, size, 3);
        for (k, l) in lines.iter().enumerate() {
            s.text(cx, y(0) + 16.0 + 14.0 * k as f64, l, "middle", &format!(r#" font-size="{size:.1}""#));
        }
        if let Some(st) = status {
            if *st != StepStatus::Applied {
                s.text(
                    cx,
                    y(0) + 60.0,
                    status_label(*st, lang),
                    "middle",
                    &format!(r#" font-size="10.5" fill="{MUTED}""#),
                );
            }
        }
    }

    // legend, with the card line
    let ly = H - 18.0;
    let card = format!("{} {}", l.gpu_name, bytes(l.gpu_memory_bytes));
    let mut x = LEFT - 56.0;
    s.line(x, ly - 4.0, x + 22.0, ly - 4.0, BAD, r#" stroke-width="2" stroke-dasharray="6 4""#);
    s.text(x + 28.0, ly, &card, "start", &format!(r#" font-size="12" font-weight="600" fill="{BAD}""#));
    x += 52.0 + super::text_width(&card, 12.0);
    let items = [
        (GOOD, lang.pick("kept, fits", "保留，放得下")),
        (WARN, lang.pick("kept, still too big", "保留，仍放不下")),
        ("url(#vf-skip)", lang.pick("not kept", "未保留")),
    ];
    for (c, t) in items {
        s.rect(x, ly - 10.0, 12.0, 12.0, c, r##" rx="2" stroke="#c9ced8""##, "");
        s.text(x + 18.0, ly, t, "start", &format!(r#" font-size="12" fill="{INK}""#));
        x += 36.0 + super::text_width(t, 12.0);
    }
    s.finish()
}

/// Words of `s` in at most `max` lines of `width` px (the last one cut).
fn wrap(s: &str, width: f64, size: f64, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    // a word wider than the column is broken with a hyphen
    let mut words: Vec<String> = Vec::new();
    for w in s.split(' ') {
        let mut rest = w.to_string();
        while super::text_width(&rest, size) > width && rest.chars().count() > 4 {
            let mut head = String::new();
            for c in rest.chars() {
                if super::text_width(&format!("{head}{c}-"), size) > width {
                    break;
                }
                head.push(c);
            }
            if head.is_empty() {
                break;
            }
            rest = rest[head.len()..].to_string();
            words.push(format!("{head}-"));
        }
        words.push(rest);
    }
    for w in words.iter().map(String::as_str) {
        let next = if cur.is_empty() { w.to_string() } else { format!("{cur} {w}") };
        if cur.is_empty() || super::text_width(&next, size) <= width {
            cur = next;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = w.to_string();
        }
    }
    lines.push(cur);
    if lines.len() > max {
        let rest = lines[max - 1..].join(" ");
        lines.truncate(max - 1);
        lines.push(rest);
    }
    lines.iter().map(|l| fit_text(l, width, size)).collect()
}
