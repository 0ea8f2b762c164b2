//! `mig plan --svg`: each card drawn as its memory slices, every instance a
//! block over its placement (service, profile, compute slices), the part of
//! its memory the service does not need hatched as waste.

use super::{fit_text, text_width, Lang, Svg, BAD, GOOD, HALO, INK, MUTED};
use crate::format::bytes;
use crate::mig::{InstanceInfo, MigPlanReport};

/// Instance colours, one per service in order of appearance.
const PALETTE: [&str; 8] = ["#3d6fd1", "#2f9e72", "#e0894a", "#7a5cc7", "#2aa6c1", "#c9514f", "#c8a23a", "#9a7b62"];

const W: f64 = 960.0;
const LEFT: f64 = 92.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 74.0;
const ROW: f64 = 96.0;
const BOX_H: f64 = 74.0;

/// The layout of every card of the plan.
pub fn layout(r: &MigPlanReport, lang: Lang) -> String {
    let cards = r.layouts.len().max(1);
    let refused_h = if r.refused.is_empty() { 0.0 } else { 22.0 * r.refused.len() as f64 + 10.0 };
    let h = TOP + ROW * cards as f64 + 14.0 + refused_h;
    let title = format!(
        "{} × {} — {} {}",
        r.gpus_needed,
        r.gpu.name,
        lang.pick("MIG layout for", "MIG 切分："),
        r.services.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let mut s = Svg::new(W, h, &title);
    s.hatch("vf-waste", "#c9ced8", "#ffffff");
    headline(&mut s, r, lang);

    let slices = r.gpu.memory_slices.max(1) as f64;
    let cell = (W - LEFT - RIGHT) / slices;
    let color_of = |name: &str| -> &'static str {
        let i = r.services.iter().position(|s| s.name == name).unwrap_or(0);
        PALETTE[i % PALETTE.len()]
    };
    for (row, l) in r.layouts.iter().enumerate() {
        let y0 = TOP + ROW * row as f64;
        s.text(
            20.0,
            y0 + BOX_H / 2.0 - 2.0,
            &format!("GPU {}", l.index),
            "start",
            r#" font-size="15" font-weight="600""#,
        );
        s.text(
            20.0,
            y0 + BOX_H / 2.0 + 16.0,
            &format!("{}/{} {}", l.compute_slices_used, r.gpu.compute_slices, lang.pick("compute", "计算")),
            "start",
            &format!(r#" font-size="11" fill="{MUTED}""#),
        );
        // empty memory slices
        for i in 0..r.gpu.memory_slices {
            s.rect(
                LEFT + cell * i as f64 + 2.0,
                y0,
                cell - 4.0,
                BOX_H,
                "#f4f6f9",
                r##" rx="6" stroke="#d5dae3" stroke-dasharray="4 3""##,
                "",
            );
        }
        for inst in &l.instances {
            let x = LEFT + cell * inst.start as f64 + 2.0;
            let w = cell * inst.size as f64 - 4.0;
            instance_block(&mut s, inst, (x, y0, w), color_of(&inst.service), lang);
        }
        // slice ruler under the card
        for i in 0..=r.gpu.memory_slices {
            let x = LEFT + cell * i as f64;
            s.line(x, y0 + BOX_H + 4.0, x, y0 + BOX_H + 9.0, "#b9c0cc", "");
        }
    }
    let mut y = TOP + ROW * cards as f64 + 4.0;
    let ruler = format!(
        "{} {} {} · {}",
        r.gpu.memory_slices,
        lang.pick("memory slices of", "个显存切片，每片约"),
        bytes(r.gpu.whole_card_bytes / r.gpu.memory_slices.max(1) as u64),
        lang.pick("hatched: memory a service does not use", "斜线：服务用不到的显存"),
    );
    s.text(LEFT, y, &ruler, "start", &format!(r#" font-size="11.5" fill="{MUTED}""#));
    for f in &r.refused {
        y += 22.0;
        s.text(
            20.0,
            y,
            &fit_text(&format!("{} {}: {}", lang.pick("refused", "无法放置"), f.service, f.reason), W - 40.0, 12.0),
            "start",
            &format!(r#" font-size="12" fill="{BAD}""#),
        );
    }
    s.finish()
}

/// Fits or not, and the memory needed, sliced and wasted.
fn headline(s: &mut Svg, r: &MigPlanReport, lang: Lang) {
    let head = if r.fits {
        format!("{} {} × {}", lang.pick("Fits on", "放得下："), r.gpus_needed, r.gpu.name)
    } else {
        format!("{} ({} {})", lang.pick("Does not fit", "放不下"), r.gpus_needed, lang.pick("cards needed", "张卡才够"))
    };
    let color = if r.fits { GOOD } else { BAD };
    s.head_start(60.0);
    s.text(20.0, 28.0, &head, "start", &format!(r#" font-size="19" font-weight="600" fill="{color}""#));
    let sub = format!(
        "{} {} · {} {} · {} {} ({:.0}%)",
        lang.pick("needed", "需要"),
        bytes(r.total_need_bytes),
        lang.pick("in slices of", "切片合计"),
        bytes(r.total_slice_bytes),
        lang.pick("wasted", "浪费"),
        bytes(r.total_waste_bytes),
        r.total_waste_bytes as f64 / r.total_slice_bytes.max(1) as f64 * 100.0
    );
    s.text(20.0, 50.0, &sub, "start", &format!(r#" fill="{MUTED}""#));
    s.head_end();
}

/// One instance at (x, y0), w wide: the slice hatched, the part the
/// service uses solid, and its name, profile and bytes.
fn instance_block(s: &mut Svg, inst: &InstanceInfo, (x, y0, w): (f64, f64, f64), fill: &str, lang: Lang) {
    let used = inst.need_bytes.min(inst.slice_bytes) as f64 / inst.slice_bytes.max(1) as f64;
    let tip = format!(
        "{} — {} ({} / {}, {} {}; {} {})",
        inst.service,
        inst.profile,
        bytes(inst.need_bytes),
        bytes(inst.slice_bytes),
        lang.pick("waste", "浪费"),
        bytes(inst.waste_bytes),
        inst.compute_slices,
        lang.pick("compute slices", "个计算切片")
    );
    s.rect(x, y0, w, BOX_H, "url(#vf-waste)", &format!(r#" rx="6" stroke="{fill}" stroke-width="2""#), &tip);
    s.rect(x, y0, w * used, BOX_H, fill, r#" rx="6""#, &tip);
    let cx = x + 10.0;
    let name = fit_text(&inst.service, w - 20.0, 14.0);
    let both = format!("{} / {}", bytes(inst.need_bytes), bytes(inst.slice_bytes));
    let fig =
        if text_width(&both, 11.5) <= w - 20.0 { both } else { fit_text(&bytes(inst.need_bytes), w - 20.0, 11.5) };
    // white on the solid part; dark with a white outline where it runs onto the hatching
    let widest = [text_width(&name, 14.0), text_width(&inst.profile, 12.0), text_width(&fig, 11.5)]
        .into_iter()
        .fold(0.0, f64::max);
    let ink =
        if w * used - 10.0 >= widest { r##" fill="#ffffff""##.to_string() } else { format!(r#" fill="{INK}"{HALO}"#) };
    s.text(cx, y0 + 22.0, &name, "start", &format!(r#" font-size="14" font-weight="600"{ink}"#));
    s.text(cx, y0 + 40.0, &fit_text(&inst.profile, w - 20.0, 12.0), "start", &format!(r#" font-size="12"{ink}"#));
    s.text(cx, y0 + 58.0, &fig, "start", &format!(r#" font-size="11.5"{ink}"#));
}
