use super::*;

#[test]
fn the_embedded_catalogue_reads_without_error() {
    assert_eq!(catalogue_errors(), Vec::new());
}

#[test]
fn a_broken_entry_names_its_line() {
    let e = parse("en: a {b}{n}\nzh: x {1} {2}\n").err().unwrap_or_default();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].line, 1);
    let e = parse("en: needs {b}\nzh: 需要\n").err().unwrap_or_default();
    assert!(e[0].message.contains("not placed"), "{e:?}");
    let e = parse("en: needs {b}\nzh: 需要 {2}\n").err().unwrap_or_default();
    assert!(e[0].message.contains("numbered from 1"), "{e:?}");
    let e = parse("zh: 需要\n").err().unwrap_or_default();
    assert_eq!(e[0].line, 1);
}

#[test]
fn holes_take_only_their_type() {
    let t = Template::new("needs {b} on {w}", "{2} 上需要 {1}").unwrap_or_else(|e| panic!("{e}"));
    let yes = |_: &str| true;
    assert!(t.captures("needs 14.96 GiB on rtx-4090", &yes).is_some());
    assert!(t.captures("needs 24GB on rtx-4090", &yes).is_some());
    // a number without its unit, a unit that is not one, two words for one
    assert!(t.captures("needs 14.96 on rtx-4090", &yes).is_none());
    assert!(t.captures("needs 14.96 parsecs on rtx-4090", &yes).is_none());
    assert!(t.captures("needs 1 GiB on rtx 4090", &yes).is_none());
    let n = Template::new("batch {n}", "批大小 {1}").unwrap_or_else(|e| panic!("{e}"));
    assert!(n.captures("batch 4,096", &yes).is_some());
    assert!(n.captures("batch many", &yes).is_none());
}

#[test]
fn holes_are_placed_by_number() {
    assert_eq!(
        translate(Lang::Zh, "trainable: 20.0M (0.250% of 8.03B)").as_deref(),
        Ok("可训练参数：20.0M（占 8.03B 的 0.250%）")
    );
    assert_eq!(
        translate(
            Lang::Zh,
            "RTX 4090: DOES NOT FIT — needs 26.1 GiB of 23.55 GiB usable of 23.99 GiB (short by 2.55 GiB)"
        )
        .as_deref(),
        Ok("RTX 4090：放不下——需要 26.1 GiB，可用 23.55 GiB（整卡 23.99 GiB）（缺 2.55 GiB）")
    );
}

#[test]
fn nested_sentences_and_lists_translate_part_by_part() {
    assert_eq!(
        translate(
            Lang::Zh,
            "task infer, weights bf16, kv fp16, batch 1, seq 4096, concurrency 1; 1 GPU (TP 1 × PP 1 × DP 1)"
        )
        .as_deref(),
        Ok("任务 infer，权重 bf16，KV fp16，批大小 1，序列长度 4096，并发 1；1 GPU (TP 1 × PP 1 × DP 1)")
    );
    // one part without Chinese: the whole line is untranslated, never half
    assert!(translate(Lang::Zh, "task infer, weights bf16, flux capacitor 3").is_err());
}

#[test]
fn english_is_untouched_and_names_need_no_translation() {
    assert_eq!(translate(Lang::En, "peak phase: prefill").as_deref(), Ok("peak phase: prefill"));
    assert!(!needs_translation("llama-3.1-8b"));
    assert!(!needs_translation("16,060,522,496"));
    assert!(!needs_translation("vramfit plan llama-2-7b --have rtx-3090"));
    assert!(needs_translation("peak phase: prefill"));
    assert_eq!(translate(Lang::Zh, "kv_cache").as_deref(), Ok("KV 缓存"));
    assert_eq!(Lang::from_locale("zh_CN.UTF-8"), Lang::Zh);
    assert_eq!(Lang::from_locale("en_US.UTF-8"), Lang::En);
    assert_eq!(Lang::from_locale("C"), Lang::En);
}

#[test]
fn a_table_is_redrawn_to_the_chinese_widths() {
    let t = "┌──────────┬─────────┐\n│ category ┆ per GPU │\n╞══════════╪═════════╡\n│ weights  ┆ 1.0 GiB │\n└──────────┴─────────┘\npeak phase: prefill";
    let l = localize_text(t, Lang::Zh);
    assert_eq!(l.missing, Vec::<String>::new());
    let lines: Vec<&str> = l.text.lines().collect();
    assert_eq!(lines[1], "│ 类别 ┆ 每卡    │");
    assert_eq!(lines[3], "│ 权重 ┆ 1.0 GiB │");
    assert_eq!(lines[5], "峰值阶段：prefill");
    let w = crate::format::display_width(lines[0]);
    assert!(lines[..5].iter().all(|x| crate::format::display_width(x) == w), "{}", l.text);
}

#[test]
fn untranslated_lines_are_returned_and_kept() {
    let l = localize_text("peak phase: prefill\nthe flux capacitor is warm", Lang::Zh);
    assert_eq!(l.missing, vec!["the flux capacitor is warm".to_string()]);
    assert!(l.text.ends_with("the flux capacitor is warm"));
}

#[test]
fn json_sentences_translate_and_values_do_not() {
    let mut v = serde_json::json!({"verdict": "fits", "notes": ["split over 2 GPUs (TP 2 × PP 1); figures are for the worst GPU"], "model": "llama-2-7b"});
    let missing = localize_json(&mut v, Lang::Zh);
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(v["verdict"], "fits");
    assert_eq!(v["model"], "llama-2-7b");
    assert_eq!(v["notes"][0], "切分到 2 张 GPU（TP 2 × PP 1）；数字按占用最多的那张卡");
}

#[test]
fn aligned_cells_keep_their_columns_and_identifier_rows_translate() {
    use crate::format::display_width;
    // diagnose's "estimate beside the failure" rows: a category id, a size, a share.
    // `optimizer_states` alone is no prose, yet zh.txt names it 优化器状态.
    let en = "  weights              25.10 GiB    15%\n  optimizer_states     50.21 GiB    30%";
    let zh = localize_text(en, Lang::Zh);
    assert!(zh.missing.is_empty(), "{:?}", zh.missing);
    let (e, z): (Vec<&str>, Vec<&str>) = (en.lines().collect(), zh.text.lines().collect());
    assert!(z[0].starts_with("  权重 ") && z[1].starts_with("  优化器状态 "), "{z:?}");
    // the size column starts at the same display column as in English (权重 is 4 columns
    // wide against weights' 7, so 3 more spaces; 优化器状态 10 against 16: 6 more)
    let col = |l: &str| display_width(&l[..l.find(" GiB").unwrap_or(0)]);
    assert_eq!((col(z[0]), col(z[1])), (col(e[0]), col(e[1])), "{z:?}");
    // a translation wider than its cell (全部: 4 columns, all: 3) keeps two spaces before the next
    let zh = localize_text("all  53 cases", Lang::Zh);
    assert!(zh.text.starts_with("全部  53"), "{}", zh.text);
}

/// A redrawn table fits the width it is given: the widest columns narrowed
/// first, cells wrapped at spaces, after Chinese characters and after a
/// dash or slash, nothing lost.
#[test]
fn a_redrawn_table_fits_its_width() {
    use crate::format::display_width;
    let en = "┌────┬──────────────────────────────────────────┬──────────────────────┐\n\
              │ #  ┆ setup                                    ┆ price                │\n\
              ╞════╪══════════════════════════════════════════╪══════════════════════╡\n\
              │ 1  ┆ full, ZeRO-3, ckpt full, mb 1×8, offload ┆ CNY 50,000–80,000/mo │\n\
              └────┴──────────────────────────────────────────┴──────────────────────┘";
    let natural = localize_text(en, Lang::Zh);
    assert!(natural.text.lines().any(|l| display_width(l) > 40), "{}", natural.text);
    let fitted = localize_text_within(en, Lang::Zh, Some(40));
    for l in fitted.text.lines() {
        assert!(display_width(l) <= 40, "{l:?}\n{}", fitted.text);
    }
    // every character of the cells is still there, in order
    let cells = |t: &str| -> String {
        t.lines()
            .filter(|l| l.starts_with('│'))
            .flat_map(|l| {
                l.split(['│', '┆']).map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect::<Vec<_>>()
            })
            .collect::<String>()
            .replace(' ', "")
    };
    let (n, f) = (cells(&natural.text), cells(&fitted.text));
    assert_eq!(
        n.chars().filter(|c| !c.is_ascii_digit() && *c != '#').count(),
        f.chars().filter(|c| !c.is_ascii_digit() && *c != '#').count()
    );
    // the price breaks after its dash, not inside a number
    assert!(fitted.text.contains("50,000–") && fitted.text.contains("80,000/mo"), "{}", fitted.text);
}

#[test]
fn a_cell_wraps_at_its_width() {
    assert_eq!(wrap_cell("TP 8，PP 2，fp8", 8), vec!["TP 8，PP", "2，fp8"]);
    assert_eq!(wrap_cell("cn-guide/8x-a100-80g-ib", 14), vec!["cn-guide/", "8x-a100-80g-ib"]);
    // a word wider than the line is cut where the line ends
    assert_eq!(wrap_cell("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
    assert_eq!(wrap_cell("short", 10), vec!["short"]);
}
