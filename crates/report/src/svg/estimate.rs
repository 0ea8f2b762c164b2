//! `estimate --svg`: the per-GPU memory as one stacked bar of categories
//! against the card's capacity, with the headroom or the shortfall.

use super::{fit_text, text_width, Lang, Svg, BAD, GOOD, INK, MUTED};
use crate::estimate::{category_keys, EstimateReport, FitInfo};
use crate::format::bytes;

/// A category's name in the chart's language.
pub fn category_label(key: &str, lang: Lang) -> &'static str {
    let (en, zh) = match key {
        "weights" => ("weights", "权重"),
        "master_weights" => ("master weights", "主权重"),
        "gradients" => ("gradients", "梯度"),
        "optimizer_states" => ("optimizer states", "优化器状态"),
        "activations" => ("activations", "激活值"),
        "kv_cache" => ("KV cache", "KV 缓存"),
        "logits" => ("logits", "logits"),
        "temporaries" => ("temporaries", "临时缓冲"),
        "runtime" => ("runtime", "运行时"),
        "margin" => ("margin", "缓存预留"),
        _ => ("other", "其他"),
    };
    lang.pick(en, zh)
}

/// A category's colour (the same in every chart and on the page).
pub fn category_color(key: &str) -> &'static str {
    match key {
        "weights" => "#3d6fd1",
        "master_weights" => "#7a5cc7",
        "gradients" => "#e0894a",
        "optimizer_states" => "#c9514f",
        "activations" => "#2f9e72",
        "kv_cache" => "#2aa6c1",
        "logits" => "#c8a23a",
        "temporaries" => "#9a7b62",
        "runtime" => "#7d8696",
        "margin" => "#b9c0cc",
        _ => "#999999",
    }
}

const W: f64 = 960.0;
const LEFT: f64 = 20.0;
const RIGHT: f64 = 20.0;
const BAR_Y: f64 = 78.0;
const BAR_H: f64 = 46.0;

/// The stacked bar. Without a card (`fit` absent) the bar alone.
pub fn bar(r: &EstimateReport, lang: Lang) -> String {
    let total = r.per_gpu.total_bytes;
    let cats: Vec<(&'static str, u64)> = category_keys()
        .into_iter()
        .filter_map(|k| r.per_gpu.categories.get(k).copied().filter(|b| *b > 0).map(|b| (k, b)))
        .collect();
    let legend_rows = cats.len().div_ceil(4).max(1);
    let h = BAR_Y + BAR_H + 62.0 + 22.0 * legend_rows as f64;
    let title = format!(
        "{} — {} {} · {}",
        r.model.name,
        lang.pick("per-GPU memory", "单卡显存"),
        bytes(total),
        r.fit.as_ref().map(|f| f.gpu.as_str()).unwrap_or(lang.pick("no card chosen", "未选显卡"))
    );
    let mut s = Svg::new(W, h, &title);
    s.hatch("vf-short", BAD, "#fbe3e3");

    headline(&mut s, r, total, lang);

    let card = r.fit.as_ref().map(|f| f.gpu_memory_bytes);
    let span = card.unwrap_or(0).max(total).max(1) as f64 * if card.is_some() { 1.04 } else { 1.0 };
    let px = |b: u64| LEFT + (W - LEFT - RIGHT) * b as f64 / span;

    // the bar: one segment per category, in the ledger's order
    let mut at = 0u64;
    s.rect(LEFT, BAR_Y, W - LEFT - RIGHT, BAR_H, "#f1f3f7", r#" rx="6""#, "");
    for (k, b) in &cats {
        let (x0, x1) = (px(at), px(at + b));
        let label = category_label(k, lang);
        let tip = format!("{label}: {} ({:.1}%)", bytes(*b), *b as f64 / total.max(1) as f64 * 100.0);
        s.rect(x0, BAR_Y, x1 - x0, BAR_H, category_color(k), r##" stroke="#ffffff" stroke-width="1""##, &tip);
        let wpx = x1 - x0 - 8.0;
        let both = format!("{label} {}", bytes(*b));
        let inside = if text_width(&both, 12.0) <= wpx {
            both
        } else if text_width(label, 12.0) <= wpx {
            label.to_string()
        } else {
            String::new()
        };
        if !inside.is_empty() {
            s.text(
                (x0 + x1) / 2.0,
                BAR_Y + BAR_H / 2.0 + 4.5,
                &inside,
                "middle",
                r##" font-size="12" fill="#ffffff""##,
            );
        }
        at += b;
    }

    if let (Some(mem), Some(f)) = (card, &r.fit) {
        card_marker(&mut s, f, mem, total, &px, lang);
    }
    legend(&mut s, &cats, total, lang);
    s.finish()
}

/// The verdict in words, and what the workload needs per GPU.
fn headline(s: &mut Svg, r: &EstimateReport, total: u64, lang: Lang) {
    let (headline, color) = match &r.fit {
        Some(f) if f.fits => (
            format!(
                "{} {} · {} {}",
                lang.pick("Fits on", "放得下："),
                f.gpu,
                lang.pick("headroom", "剩余"),
                bytes(f.headroom_bytes.max(0) as u64)
            ),
            GOOD,
        ),
        Some(f) => (
            format!(
                "{} {} · {} {}",
                lang.pick("Does not fit on", "放不下："),
                f.gpu,
                lang.pick("short by", "缺"),
                bytes(f.headroom_bytes.unsigned_abs().min(u64::MAX as u128) as u64)
            ),
            BAD,
        ),
        None => (format!("{} {}", lang.pick("Needs", "需要"), bytes(total)), INK),
    };
    s.head_start(58.0);
    s.text(LEFT, 26.0, &headline, "start", &format!(r#" font-size="19" font-weight="600" fill="{color}""#));
    let sub = format!(
        "{} {} {} · {} · {}",
        lang.pick("needs", "需要"),
        bytes(total),
        lang.pick("per GPU", "每卡"),
        r.model.name,
        workload_words(r, lang)
    );
    s.text(LEFT, 48.0, &sub, "start", &format!(r#" fill="{MUTED}""#));
    s.head_end();
}

/// The card: a line at its capacity, the headroom or the shortfall below the bar.
fn card_marker(s: &mut Svg, f: &FitInfo, mem: u64, total: u64, px: &dyn Fn(u64) -> f64, lang: Lang) {
    let x = px(mem);
    if !f.fits {
        s.rect(x, BAR_Y, px(total) - x, BAR_H, "url(#vf-short)", r#" opacity="0.55""#, "");
    }
    s.line(x, BAR_Y - 12.0, x, BAR_Y + BAR_H + 12.0, INK, r#" stroke-width="2" stroke-dasharray="5 3""#);
    let cap = format!("{} {}", f.gpu, bytes(mem));
    let anchor = if x > W - 200.0 { "end" } else { "start" };
    let dx = if anchor == "end" { -6.0 } else { 6.0 };
    s.text(x + dx, BAR_Y - 4.0, &fit_text(&cap, 300.0, 12.0), anchor, r#" font-size="12" font-weight="600""#);
    let (a, b) = if f.fits { (px(total), x) } else { (x, px(total)) };
    let y = BAR_Y + BAR_H + 14.0;
    let color = if f.fits { GOOD } else { BAD };
    s.line(a, y, b, y, color, r#" stroke-width="2""#);
    s.line(a, y - 5.0, a, y + 5.0, color, r#" stroke-width="2""#);
    s.line(b, y - 5.0, b, y + 5.0, color, r#" stroke-width="2""#);
    let words = if f.fits {
        format!("{} {}", lang.pick("headroom", "剩余"), bytes(f.headroom_bytes.max(0) as u64))
    } else {
        format!(
            "{} {}",
            lang.pick("short by", "缺"),
            bytes(f.headroom_bytes.unsigned_abs().min(u64::MAX as u128) as u64)
        )
    };
    let mid = ((a + b) / 2.0).clamp(LEFT + 60.0, W - RIGHT - 60.0);
    s.text(mid, y + 17.0, &words, "middle", &format!(r#" font-size="12" font-weight="600" fill="{color}""#));
}

/// The legend: swatch, name, bytes, share.
fn legend(s: &mut Svg, cats: &[(&'static str, u64)], total: u64, lang: Lang) {
    let y0 = BAR_Y + BAR_H + 50.0;
    let col = (W - LEFT - RIGHT) / 4.0;
    for (i, (k, b)) in cats.iter().enumerate() {
        let (cx, cy) = (LEFT + col * (i % 4) as f64, y0 + 22.0 * (i / 4) as f64);
        s.rect(cx, cy - 10.0, 12.0, 12.0, category_color(k), r#" rx="2""#, "");
        let share = *b as f64 / total.max(1) as f64 * 100.0;
        let t = format!("{} {} · {:.1}%", category_label(k, lang), bytes(*b), share);
        s.text(cx + 18.0, cy, &fit_text(&t, col - 24.0, 12.5), "start", r#" font-size="12.5""#);
    }
}

fn workload_words(r: &EstimateReport, lang: Lang) -> String {
    let w = &r.workload;
    let task = match w.task.as_str() {
        "infer" => lang.pick("inference", "推理"),
        "train" => lang.pick("full fine-tune", "全量微调"),
        "lora" => "LoRA",
        "qlora" => "QLoRA",
        _ => "",
    };
    let gpus = if r.gpus == 1 {
        lang.pick("1 GPU", "1 张卡").to_string()
    } else {
        format!("{} {}", r.gpus, lang.pick("GPUs", "张卡"))
    };
    format!("{task} {} · batch {} · {} {} · {gpus}", w.dtype, w.batch, lang.pick("seq", "序列"), w.seq)
}
