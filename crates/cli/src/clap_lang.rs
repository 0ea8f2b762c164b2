//! The command line itself in the text language (issue 24 item 8): `--help`
//! of every command and clap's parse errors read in Chinese under
//! `--lang zh` / `LANG=zh_CN.UTF-8`. English is clap's own output, untouched
//! (the same `Command`, the same formatter).
//!
//! clap has no translations, so the language is decided from argv and the
//! environment *before* parsing ([`argv_lang`]). For Chinese the `Command`
//! is built (which adds `--help`, `--version` and the `help` subcommand),
//! then every about and help text is replaced by its Chinese from the
//! catalogue (crates/report/src/i18n/zh.txt), line by line ([`command`]).
//! The few words clap writes itself ("Usage:", "Options:", "[default: …]",
//! "Possible values:" and a value's help) are replaced in the rendered help
//! ([`localize_help`]). A parse error is written from its `ErrorKind` and
//! context by [`Zh`], with the layout of clap's own `RichFormatter`; a value
//! parser's reason (`unknown precision 'foo': …`) goes through the catalogue
//! too. The `error:` prefix stays, as in `vramfit: error: …` (scripts grep it).
//!
//! A sentence the catalogue lacks stays English (never half-translated);
//! crates/cli/tests/i18n.rs runs `--help` of every command and a set of parse
//! errors in Chinese and fails on any English sentence left.

use crate::Cli;
use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorFormatter, ErrorKind};
use clap::{CommandFactory, FromArgMatches, ValueEnum};
use std::ffi::OsString;
use std::fmt::Write as _;
use vramfit_report::i18n::{translate, Lang};

/// The text language of a command line, before clap parses it: the last
/// `--lang X` / `--lang=X` before a `--` separator (a value clap will
/// refuse is ignored here), else the locale variables as [`crate::text_lang`]
/// reads them.
pub fn argv_lang(args: &[OsString], env: &dyn Fn(&str) -> Option<String>) -> Lang {
    let parse = |v: &str| crate::cmd::svg_args::LangArg::from_str(v, false).ok();
    let mut flag = None;
    let mut it = args.iter().skip(1).filter_map(|a| a.to_str());
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == "--lang" {
            flag = it.next().and_then(parse).or(flag);
        } else if let Some(v) = a.strip_prefix("--lang=") {
            flag = parse(v).or(flag);
        }
    }
    crate::text_lang(flag, env)
}

/// The command-line definition with its help in `lang` (English: clap's as derived).
pub fn command(lang: Lang) -> clap::Command {
    let mut cmd = Cli::command();
    if lang == Lang::En {
        return cmd;
    }
    cmd.build();
    localize_command(cmd, lang)
}

/// `s` in `lang`, line by line (a long help is paragraphs); a line the
/// catalogue lacks stays as it is.
fn tr(lang: Lang, s: &str) -> String {
    s.split('\n').map(|l| translate(lang, l).unwrap_or_else(|_| l.to_string())).collect::<Vec<_>>().join("\n")
}

fn localize_command(cmd: clap::Command, lang: Lang) -> clap::Command {
    let about = cmd.get_about().map(|s| tr(lang, &s.to_string()));
    let long_about = cmd.get_long_about().map(|s| tr(lang, &s.to_string()));
    let mut cmd = cmd;
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    if let Some(a) = long_about {
        cmd = cmd.long_about(a);
    }
    cmd.mut_args(|a| {
        let help = a.get_help().map(|h| tr(lang, &h.to_string()));
        let long = a.get_long_help().map(|h| tr(lang, &h.to_string()));
        let a = match help {
            Some(h) => a.help(h),
            None => a,
        };
        match long {
            Some(h) => a.long_help(h),
            None => a,
        }
    })
    .mut_subcommands(|s| localize_command(s, lang))
}

/// Every sentence of the command line's help in English (abouts, each
/// argument's help and long help line by line, each possible value's help),
/// for the catalogue's completeness test.
pub fn help_sentences() -> Vec<String> {
    fn walk(cmd: &clap::Command, out: &mut Vec<String>) {
        let mut add = |s: String| {
            for l in s.split('\n').filter(|l| !l.trim().is_empty()) {
                if !out.iter().any(|o| o == l) {
                    out.push(l.to_string());
                }
            }
        };
        cmd.get_about().into_iter().chain(cmd.get_long_about()).for_each(|s| add(s.to_string()));
        for a in cmd.get_arguments() {
            a.get_help().into_iter().chain(a.get_long_help()).for_each(|s| add(s.to_string()));
            a.get_possible_values().iter().filter_map(|v| v.get_help()).for_each(|s| add(s.to_string()));
        }
        cmd.get_subcommands().for_each(|s| walk(s, out));
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, &mut out);
    out
}

/// Removes ANSI escape sequences (`ESC [ … letter`).
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `line` with the first `en` replaced by `zh`, and the space that followed
/// it (after any escape sequence) dropped when `zh` ends in a full-width colon.
fn replace_word(line: &str, en: &str, zh: &str) -> String {
    let Some(at) = line.find(en) else { return line.to_string() };
    let mut rest = &line[at + en.len()..];
    let mut escapes = String::new();
    while rest.starts_with('\u{1b}') {
        let end = rest.find(|c: char| c.is_ascii_alphabetic()).map_or(rest.len(), |i| i + 1);
        escapes.push_str(&rest[..end]);
        rest = &rest[end..];
    }
    if zh.ends_with('：') {
        rest = rest.strip_prefix(' ').unwrap_or(rest);
    }
    format!("{}{zh}{escapes}{rest}", &line[..at])
}

/// A help text clap rendered (with its styles) from a [`command`] in
/// `lang`: the words clap writes itself in `lang` too.
pub fn localize_help(rendered: &str, lang: Lang) -> String {
    if lang == Lang::En {
        return rendered.to_string();
    }
    let mut out = Vec::new();
    for line in rendered.split('\n') {
        let p = plain(line);
        let t = p.trim();
        let mut l = match t {
            "Commands:" => replace_word(line, "Commands:", "命令："),
            "Arguments:" => replace_word(line, "Arguments:", "参数："),
            "Options:" => replace_word(line, "Options:", "选项："),
            "Possible values:" => replace_word(line, "Possible values:", "可选值："),
            _ if t.starts_with("Usage:") => replace_word(line, "Usage:", "用法："),
            _ => line.to_string(),
        };
        // a possible value and its help: `- name: help` (the help unstyled, at the end)
        if let Some((_, help)) = t.strip_prefix("- ").and_then(|v| v.split_once(": ")) {
            let help = help.trim_start();
            if let Ok(zh) = translate(lang, help) {
                if let Some(head) = l.strip_suffix(help) {
                    l = format!("{head}{zh}");
                }
            }
        }
        for (en, zh) in [
            ("[default: ", "[默认："),
            ("[possible values: ", "[可选值："),
            ("[aliases: ", "[别名："),
            ("[alias: ", "[别名："),
            ("[env: ", "[环境变量："),
        ] {
            l = l.replace(en, zh);
        }
        out.push(l);
    }
    out.join("\n")
}

/// Parse a command line with clap in `lang` (its help, errors and `--version` exit through [`exit`]).
pub fn parse(args: &[OsString], lang: Lang) -> Result<Cli, clap::Error> {
    let mut cmd = command(lang);
    let m = cmd.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&m).map_err(|e| e.with_cmd(&cmd))
}

/// Print a clap error (or the help or version it carries) in `lang` and exit with its code.
pub fn exit(e: clap::Error, lang: Lang) -> ! {
    if lang == Lang::En {
        e.exit()
    }
    let (use_stderr, code) = (e.use_stderr(), e.exit_code());
    let text = match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::DisplayVersion => {
            localize_help(&e.render().ansi().to_string(), lang)
        }
        _ => e.apply::<Zh>().render().ansi().to_string(),
    };
    use std::io::{IsTerminal, Write};
    // styles reach a terminal only (and not under NO_COLOR), as with clap's own output
    let styled = |terminal: bool| terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = if use_stderr {
        let mut w = std::io::stderr().lock();
        let text = if styled(w.is_terminal()) { text } else { plain(&text) };
        w.write_all(text.as_bytes()).and_then(|_| w.flush())
    } else {
        let mut w = std::io::stdout().lock();
        let text = if styled(w.is_terminal()) { text } else { plain(&text) };
        w.write_all(text.as_bytes()).and_then(|_| w.flush())
    };
    std::process::exit(code)
}

/// clap's parse errors in Chinese: `RichFormatter`'s layout and context, its sentences translated.
pub struct Zh;

/// `'value'` styled as clap styles a valid or an invalid one.
fn quoted(style: clap::builder::styling::Style, v: &str) -> String {
    format!("'{style}{v}{style:#}'")
}

fn context_str(e: &clap::error::Error<Zh>, kind: ContextKind) -> Option<&str> {
    match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    }
}

fn context_num(e: &clap::error::Error<Zh>, kind: ContextKind) -> Option<isize> {
    match e.get(kind) {
        Some(ContextValue::Number(n)) => Some(*n),
        _ => None,
    }
}

/// The first sentence of an error in Chinese, from its kind and context (`None`: context missing).
fn zh_message(e: &clap::error::Error<Zh>, s: &clap::builder::Styles) -> Option<String> {
    let (valid, invalid, literal) = (*s.get_valid(), *s.get_invalid(), *s.get_literal());
    let arg = context_str(e, ContextKind::InvalidArg);
    let value = context_str(e, ContextKind::InvalidValue);
    let list = |v: Option<&ContextValue>, name: &str| match v {
        Some(ContextValue::Strings(vs)) if !vs.is_empty() => {
            let vs: Vec<String> = vs.iter().map(|v| format!("{valid}{v}{valid:#}")).collect();
            format!("\n  [{name}：{}]", vs.join(", "))
        }
        _ => String::new(),
    };
    let msg = match e.kind() {
        ErrorKind::ArgumentConflict => {
            let prior = e.get(ContextKind::PriorArg);
            let sub = context_str(e, ContextKind::InvalidSubcommand);
            let what = match (arg, sub) {
                (Some(a), _) => format!("参数 {}", quoted(invalid, a)),
                (None, Some(c)) => format!("子命令 {}", quoted(invalid, c)),
                (None, None) => return None,
            };
            match prior {
                Some(ContextValue::String(p)) if Some(p.as_str()) == arg => format!("{what} 不能重复使用"),
                Some(ContextValue::String(p)) => format!("{what} 不能与 {} 同时使用", quoted(invalid, p)),
                Some(ContextValue::Strings(ps)) => {
                    let ps: String = ps.iter().map(|p| format!("\n  {invalid}{p}{invalid:#}")).collect();
                    format!("{what} 不能与以下参数同时使用：{ps}")
                }
                _ => format!("{what} 不能与其他已给出的参数同时使用"),
            }
        }
        ErrorKind::NoEquals => format!("给 {} 赋值时需要等号", quoted(invalid, arg?)),
        ErrorKind::InvalidValue if value?.is_empty() => format!("{} 需要一个值，但没有给出", quoted(invalid, arg?)),
        ErrorKind::InvalidValue => format!(
            "{} 的值 {} 无效{}",
            quoted(literal, arg?),
            quoted(invalid, value?),
            list(e.get(ContextKind::ValidValue), "可选值")
        ),
        ErrorKind::InvalidSubcommand => {
            format!("无法识别的子命令 {}", quoted(invalid, context_str(e, ContextKind::InvalidSubcommand)?))
        }
        ErrorKind::MissingRequiredArgument => match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(vs)) => {
                let vs: String = vs.iter().map(|v| format!("\n  {valid}{v}{valid:#}")).collect();
                format!("缺少以下必需的参数：{vs}")
            }
            _ => return None,
        },
        ErrorKind::MissingSubcommand => format!(
            "{} 需要一个子命令，但没有给出{}",
            quoted(invalid, context_str(e, ContextKind::InvalidSubcommand)?),
            list(e.get(ContextKind::ValidSubcommand), "子命令")
        ),
        ErrorKind::TooManyValues => {
            format!("{} 多出了值 {}：不再需要更多的值", quoted(literal, arg?), quoted(invalid, value?))
        }
        ErrorKind::TooFewValues => format!(
            "{} 需要 {valid}{}{valid:#} 个值，只给出了 {invalid}{}{invalid:#} 个",
            quoted(literal, arg?),
            context_num(e, ContextKind::MinValues)?,
            context_num(e, ContextKind::ActualNumValues)?
        ),
        ErrorKind::WrongNumberOfValues => format!(
            "{} 需要 {valid}{}{valid:#} 个值，但给出了 {invalid}{}{invalid:#} 个",
            quoted(literal, arg?),
            context_num(e, ContextKind::ExpectedNumValues)?,
            context_num(e, ContextKind::ActualNumValues)?
        ),
        ErrorKind::ValueValidation => {
            let mut m = format!("{} 的值 {} 无效", quoted(literal, arg?), quoted(invalid, value?));
            if let Some(why) = std::error::Error::source(e) {
                let why = why.to_string();
                let _ = write!(m, "：{}", translate(Lang::Zh, &why).unwrap_or(why));
            }
            m
        }
        ErrorKind::UnknownArgument => format!("意外的参数 {}", quoted(invalid, arg?)),
        _ => return None,
    };
    Some(msg)
}

/// A sentence of its kind when the context is missing.
fn zh_kind(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidValue => "给出的值无效",
        ErrorKind::UnknownArgument => "意外的参数",
        ErrorKind::InvalidSubcommand => "无法识别的子命令",
        ErrorKind::NoEquals => "赋值时需要等号",
        ErrorKind::ValueValidation => "给出的值无效",
        ErrorKind::TooManyValues => "多出了值",
        ErrorKind::TooFewValues => "值太少",
        ErrorKind::WrongNumberOfValues => "值的个数不对",
        ErrorKind::ArgumentConflict => "参数冲突",
        ErrorKind::MissingRequiredArgument => "缺少必需的参数",
        ErrorKind::MissingSubcommand => "需要一个子命令",
        ErrorKind::InvalidUtf8 => "参数不是有效的 UTF-8",
        _ => "命令行有误",
    }
}

/// `tip: a similar argument exists: '--gpu'` in Chinese.
fn did_you_mean(out: &mut String, valid: clap::builder::styling::Style, what: &str, v: &ContextValue) {
    let names: Vec<String> = match v {
        ContextValue::String(s) => vec![quoted(valid, s)],
        ContextValue::Strings(vs) => vs.iter().map(|s| quoted(valid, s)).collect(),
        _ => return,
    };
    let _ = write!(out, "  {valid}提示：{valid:#}存在相似的{what}：{}", names.join(", "));
}

impl ErrorFormatter for Zh {
    fn format_error(e: &clap::error::Error<Self>) -> StyledStr {
        let styles = clap::builder::Styles::default();
        let (error, valid) = (*styles.get_error(), *styles.get_valid());
        let mut out = format!("{error}error:{error:#} ");
        match zh_message(e, &styles) {
            Some(m) => out.push_str(&m),
            None => match std::error::Error::source(e) {
                Some(why) => {
                    let why = why.to_string();
                    out.push_str(&translate(Lang::Zh, &why).unwrap_or(why));
                }
                None => out.push_str(zh_kind(e.kind())),
            },
        }
        let mut suggested = false;
        for (kind, what) in [
            (ContextKind::SuggestedSubcommand, "子命令"),
            (ContextKind::SuggestedArg, "参数"),
            (ContextKind::SuggestedValue, "值"),
        ] {
            if let Some(v) = e.get(kind) {
                out.push_str(if suggested { "\n" } else { "\n\n" });
                suggested = true;
                did_you_mean(&mut out, valid, what, v);
            }
        }
        if let Some(ContextValue::StyledStrs(tips)) = e.get(ContextKind::Suggested) {
            if !suggested {
                out.push('\n');
            }
            for tip in tips {
                let t = tip.to_string();
                let t = translate(Lang::Zh, &t).unwrap_or(t);
                let _ = write!(out, "\n  {valid}提示：{valid:#}{t}");
            }
        }
        if let Some(ContextValue::StyledStr(usage)) = e.get(ContextKind::Usage) {
            out.push_str("\n\n");
            out.push_str(&replace_word(&usage.ansi().to_string(), "Usage:", "用法："));
        }
        let literal = *styles.get_literal();
        let _ = writeln!(out, "\n\n更多信息请运行 '{literal}--help{literal:#}'。");
        StyledStr::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_language_is_read_from_argv_before_parsing() {
        let none = |_: &str| None;
        let zh_env = |k: &str| (k == "LANG").then(|| "zh_CN.UTF-8".to_string());
        assert_eq!(argv_lang(&os(&["vramfit", "estimate", "--lang", "zh"]), &none), Lang::Zh);
        assert_eq!(argv_lang(&os(&["vramfit", "--lang=zh", "plan"]), &none), Lang::Zh);
        assert_eq!(argv_lang(&os(&["vramfit", "estimate", "--help"]), &zh_env), Lang::Zh);
        // the flag outranks the environment; an unknown value leaves it to the environment
        assert_eq!(argv_lang(&os(&["vramfit", "estimate", "--lang", "en"]), &zh_env), Lang::En);
        assert_eq!(argv_lang(&os(&["vramfit", "estimate", "--lang", "fr"]), &zh_env), Lang::Zh);
        // after `--` it is not vramfit's flag
        assert_eq!(argv_lang(&os(&["vramfit", "estimate", "--", "--lang", "zh"]), &none), Lang::En);
    }

    #[test]
    fn clap_words_are_replaced_styles_and_all() {
        let line = "\u{1b}[1m\u{1b}[4mUsage:\u{1b}[0m \u{1b}[1mvramfit\u{1b}[0m estimate";
        assert_eq!(
            localize_help(line, Lang::Zh),
            "\u{1b}[1m\u{1b}[4m用法：\u{1b}[0m\u{1b}[1mvramfit\u{1b}[0m estimate"
        );
        assert_eq!(localize_help("Options:", Lang::Zh), "选项：");
        assert_eq!(localize_help("  --batch <N>  Batch [default: 1]", Lang::En), "  --batch <N>  Batch [default: 1]");
        assert_eq!(plain("\u{1b}[1m-h\u{1b}[0m, \u{1b}[1m--help\u{1b}[0m"), "-h, --help");
    }

    #[test]
    fn every_help_sentence_has_chinese() {
        let all = help_sentences();
        assert!(all.len() > 100, "only {} help sentences found", all.len());
        let missing: Vec<&String> = all.iter().filter(|s| translate(Lang::Zh, s).is_err()).collect();
        assert!(
            missing.is_empty(),
            "{} help sentence(s) have no Chinese; add each to crates/report/src/i18n/zh.txt as an `en:`/`zh:` pair:\n{}",
            missing.len(),
            missing.iter().map(|s| format!("en: {s}")).collect::<Vec<_>>().join("\n")
        );
    }

    #[test]
    fn english_is_clap_as_derived() {
        let en = command(Lang::En).render_long_help().to_string();
        assert_eq!(en, Cli::command().render_long_help().to_string());
    }
}
