//! Verdicts for llama.cpp / ggml buffer failures ([`crate::ggml`]): which
//! buffer failed, what the launch had already placed on that device, the
//! free memory llama.cpp saw at load when the log prints it, and the `-ngl`
//! / `-c` / `-ub` that the log's own figures say would fit.
//!
//! The arithmetic uses only what the log printed: a model buffer of `B`
//! bytes for `n` offloaded layers is `B / n` per layer (the output layer
//! counts as one, as llama.cpp's `-ngl` does); a KV buffer of `K` bytes
//! for `n_ctx` cells is `K / n_ctx` per token (llama.cpp sizes the cache
//! by cells, `llama_kv_cache` in src/llama-kv-cache.cpp). `vramfit
//! estimate model.gguf` (or `diagnose --model model.gguf`) computes them
//! from the model itself.

use super::{
    b, fig, fix, verdict, Cause, FixCost, Missing, OomClass, RunnerUp, Verdict, CONTEXT_ALLOWANCE, DRIVER_PAGE,
};
use crate::ggml::{GgmlBuffer, GgmlOom};
use crate::nvidia_smi::NvidiaSmi;
use vramfit_core::units::MIB;

/// Room left beside the buffers when a fit is suggested: llama.cpp's own
/// CUDA context and cuBLAS workspaces live outside its buffers
/// (`vramfit_core::runtime::DEFAULT_CUDA_CONTEXT` is 500 MiB; the
/// compute buffer of a small launch is a few hundred MiB more).
const FIT_RESERVE: u64 = 1024 * MIB;

fn runner(class: OomClass, what: &str, bytes: Option<u64>, total: Option<u64>, why: &str) -> Option<RunnerUp> {
    let c = Cause::new(class, what, bytes, total);
    Some(RunnerUp { class, what: c.what, bytes: c.bytes, share: c.share, why: why.to_string() })
}

/// Verdict for one ggml buffer failure.
pub(crate) fn classify(g: &GgmlOom, smi: Option<&NvidiaSmi>) -> Verdict {
    let l = &g.launch;
    let r = g.requested.bytes;
    let dev = g.device.map(|d| format!("device {d}")).unwrap_or_else(|| g.buffer_type.clone());
    let name = l.device_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let total = l.total.or_else(|| smi.and_then(|s| s.gpu(g.device?)).map(|x| x.total));
    let mut figures = vec![fig("requested", r)];
    let mut reasoning = vec![format!(
        "llama.cpp could not allocate its {} of {} on {}{} ({}).",
        g.buffer.words(),
        b(r),
        dev,
        name,
        g.consequence.as_deref().unwrap_or("the log does not say what it gave up on")
    )];
    if g.retried {
        reasoning.push("llama.cpp then retried without pipeline parallelism: if the log continues with the server listening, the retry fitted and this is not what stopped the run.".to_string());
    }
    if g.is_host() {
        return host(g, figures, reasoning);
    }
    // what this launch had already put on the device before this buffer
    let before = match g.buffer {
        GgmlBuffer::Weights | GgmlBuffer::Unknown => 0,
        GgmlBuffer::KvCache => l.model_buffer.unwrap_or(0),
        GgmlBuffer::Compute => l.model_buffer.unwrap_or(0).saturating_add(l.kv_buffer.unwrap_or(0)),
    };
    if let Some(m) = l.model_buffer.filter(|_| g.buffer != GgmlBuffer::Weights) {
        figures.push(fig("model_buffer", m));
    }
    if let Some(k) = l.kv_buffer.filter(|_| g.buffer == GgmlBuffer::Compute) {
        figures.push(fig("kv_buffer", k));
    }
    let need = before.saturating_add(r);
    if before > 0 {
        reasoning.push(format!("With the buffers already placed there, this launch needs {} on {}.", b(need), dev));
    }
    if let Some(t) = total {
        figures.push(fig("total", t));
    }
    if let Some(f0) = l.free_at_load {
        figures.push(fig("free_at_load", f0));
    }
    let fits = fits(g);
    let fixes = fit_fixes(g, &fits);
    let mut v = if let Some(t) = total.filter(|&t| r > t) {
        reasoning.push(format!("{} > {}: one buffer larger than the card.", b(r), b(t)));
        if let (Some(c), GgmlBuffer::Compute) = (l.pipeline_copies.filter(|&c| c > 1), g.buffer) {
            reasoning.push(format!("Pipeline parallelism is on (n_copies={c}): the compute buffers are reserved for that many micro-batches in flight."));
        }
        let mut v = verdict(
            OomClass::RequestExceedsCard,
            Cause::new(OomClass::RequestExceedsCard, "the request", Some(r), Some(t)),
            format!("one {} of {} is larger than the {} card", g.buffer.words(), b(r), b(t)),
            figures,
            reasoning,
            Some(r - t),
            fixes,
        );
        v.decided_by = vec!["requested".into(), "total".into()];
        v
    } else if let Some(f0) = l.free_at_load {
        with_free_at_load(f0, total, need, Draft { figures, reasoning, fixes })
    } else {
        without_free_at_load(g, need, total, &dev, Draft { figures, reasoning, fixes })
    };
    for f in &fits.notes {
        v.reasoning.push(f.clone());
    }
    v
}

/// What a ggml verdict has gathered before its branch decides the class.
struct Draft {
    figures: Vec<super::Figure>,
    reasoning: Vec<String>,
    fixes: Vec<super::Fix>,
}

/// The log printed the free memory llama.cpp saw at load (`f0`): the launch
/// should have fitted, another process held the card, or a plain shortage.
fn with_free_at_load(f0: u64, total: Option<u64>, need: u64, d: Draft) -> Verdict {
    let Draft { mut figures, mut reasoning, mut fixes } = d;
    let margin = DRIVER_PAGE.max(total.map(|t| t / 100).unwrap_or(0));
    let used_before = total.map(|t| t.saturating_sub(f0));
    let other = used_before.map(|u| u.saturating_sub(CONTEXT_ALLOWANCE)).unwrap_or(0);
    if need.saturating_add(margin) <= f0 {
        reasoning.push(format!("{} free at load ≥ the {} this launch needs there: it should have fitted; something took memory after the load started (another process), or the driver refused the allocation (low host RAM can fail CUDA allocations, ggml-org/llama.cpp#7366).", b(f0), b(need)));
        let mut v = verdict(
            OomClass::Unexplained,
            Cause::new(OomClass::Unexplained, "no cause these figures can show", None, total),
            format!("{} was free at load, enough for the {} this launch needs", b(f0), b(need)),
            figures,
            reasoning,
            None,
            fixes,
        );
        v.runner_up = runner(
            OomClass::OtherProcess,
            "memory taken after the load started",
            None,
            total,
            "another process starting during the load would do this",
        );
        v.decided_by = vec!["free_at_load".into(), "requested".into()];
        v
    } else if let (Some(t), Some(u), true) =
        (total, used_before, other as f64 >= 0.05 * total.unwrap_or(0) as f64 && other >= 256 * MIB)
    {
        if need <= t.saturating_sub(CONTEXT_ALLOWANCE) {
            reasoning.push(format!("{} of the card was in use before llama.cpp loaded — more than a context: with it free the launch's {} would fit on the {} card.", b(u), b(need), b(t)));
            figures.push(fig("used_before_load", u));
            fixes.insert(0, fix(FixCost::Housekeeping, "stop what holds the card (nvidia-smi): another llama.cpp / Ollama runner, a desktop app, a training job", "its memory is what is missing"));
            let mut v = verdict(
                OomClass::OtherProcess,
                Cause::new(OomClass::OtherProcess, "memory in use before the load", Some(u), Some(t)),
                format!("{} of the card was in use before llama.cpp loaded", b(u)),
                figures,
                reasoning,
                Some(need.saturating_sub(f0)),
                fixes,
            );
            v.runner_up = runner(
                OomClass::GenuineShortage,
                "this launch's buffers",
                Some(need),
                Some(t),
                "a smaller launch fits beside the other process",
            );
            v.decided_by = vec!["free_at_load".into(), "used_before_load".into(), "requested".into()];
            v
        } else {
            shortage(need, f0, total, figures, reasoning, fixes)
        }
    } else {
        shortage(need, f0, total, figures, reasoning, fixes)
    }
}

/// No free-memory figure in the log: the launch's own buffers, another
/// process not ruled out.
fn without_free_at_load(g: &GgmlOom, need: u64, total: Option<u64>, dev: &str, d: Draft) -> Verdict {
    let Draft { figures, mut reasoning, fixes } = d;
    let r = g.requested.bytes;
    reasoning.push(format!("The log does not print the free memory llama.cpp saw at load (newer builds print `using device {} (…) - N MiB free`), so another process cannot be ruled out; the launch's buffers alone are {}.", g.buffer_type, b(need)));
    let mut v = verdict(
        OomClass::GenuineShortage,
        Cause::new(OomClass::GenuineShortage, "this launch's buffers on the device", Some(need), total),
        format!("the {} of {} does not fit on {}", g.buffer.words(), b(r), dev),
        figures,
        reasoning,
        None,
        fixes,
    );
    v.runner_up = runner(
        OomClass::OtherProcess,
        "memory held by other processes",
        None,
        total,
        "the free memory at load is not in the log",
    );
    v.missing = vec![Missing {
        figure: "free_at_load".into(),
        assumed_bytes: None,
        matters: true,
        otherwise: Some((OomClass::OtherProcess, 0)),
    }];
    v.decided_by = vec!["requested".into()];
    v
}

fn shortage(
    need: u64,
    f0: u64,
    total: Option<u64>,
    figures: Vec<super::Figure>,
    mut reasoning: Vec<String>,
    fixes: Vec<super::Fix>,
) -> Verdict {
    let gap = need.saturating_sub(f0);
    reasoning.push(format!(
        "{} free at load < the {} this launch needs on the device: {} short.",
        b(f0),
        b(need),
        b(gap)
    ));
    let mut v = verdict(
        OomClass::GenuineShortage,
        Cause::new(OomClass::GenuineShortage, "this launch's buffers on the device", Some(need), total),
        format!("{} more than the device had free at load", b(gap)),
        figures,
        reasoning,
        Some(gap),
        fixes,
    );
    v.decided_by = vec!["free_at_load".into(), "requested".into()];
    if let (Some(t), true) = (total, total.is_some_and(|t| t.saturating_sub(f0) > CONTEXT_ALLOWANCE)) {
        v.runner_up = runner(
            OomClass::OtherProcess,
            "memory in use before the load",
            Some(t.saturating_sub(f0)),
            Some(t),
            "memory in use before the load, too small to make the difference alone",
        );
    }
    v
}

/// A host (CPU or pinned) buffer: system RAM, not the GPU.
fn host(g: &GgmlOom, figures: Vec<super::Figure>, mut reasoning: Vec<String>) -> Verdict {
    reasoning.push(format!("{} is host memory: the layers kept on the CPU (or llama.cpp's pinned staging buffer) did not fit in system RAM — not a GPU shortage.", g.buffer_type));
    let mut v = verdict(
        OomClass::GenuineShortage,
        Cause::new(OomClass::GenuineShortage, "host RAM for the layers kept on the CPU", Some(g.requested.bytes), None),
        format!("llama.cpp could not get {} of host memory ({})", b(g.requested.bytes), g.buffer_type),
        figures,
        reasoning,
        None,
        vec![
            fix(
                FixCost::Setting,
                "keep mmap on (drop --no-mmap / Ollama use_mmap=false)",
                "mapped weights are paged from the file instead of copied into RAM",
            ),
            fix(
                FixCost::Setting,
                "raise -ngl (num_gpu in Ollama) if the GPU has room",
                "layers on the GPU need no host buffer",
            ),
            fix(FixCost::Workload, "a smaller quantization of the model", "fewer bytes per weight everywhere"),
            fix(FixCost::Hardware, "more system RAM or swap", "the CPU layers must fit in memory"),
        ],
    );
    v.decided_by = vec!["requested".into()];
    v
}

/// What the log's figures say would fit.
#[derive(Default)]
struct Fits {
    ngl: Option<u64>,
    ctx: Option<u64>,
    notes: Vec<String>,
}

fn fits(g: &GgmlOom) -> Fits {
    let l = &g.launch;
    let mut out = Fits::default();
    let single = l.gpus.is_none_or(|n| n <= 1);
    match g.buffer {
        GgmlBuffer::Weights => {
            if let (Some((n, m)), true) = (l.layers_offloaded, single) {
                if n > 0 {
                    let per = g.requested.bytes / u64::from(n);
                    let mut s = format!(
                        "The {n} offloaded layers (of {m}) take {} on this device: about {} per layer.",
                        b(g.requested.bytes),
                        b(per)
                    );
                    if let Some(f0) = l.free_at_load {
                        let k = f0.saturating_sub(FIT_RESERVE) / per.max(1);
                        out.ngl = Some(k.min(u64::from(n).saturating_sub(1)));
                        s.push_str(&format!(" {} free at load holds at most {} of them with {} left for the KV cache, the compute buffer and the context: -ngl {} or lower.", b(f0), k, b(FIT_RESERVE), out.ngl.unwrap_or(0)));
                    }
                    out.notes.push(s);
                }
            }
        }
        GgmlBuffer::KvCache => {
            if let Some(nc) = l.n_ctx.filter(|&c| c > 0) {
                let per = g.requested.bytes / nc;
                let mut s = format!(
                    "The KV cache for n_ctx = {nc} is {} on this device: {} per token.",
                    b(g.requested.bytes),
                    b(per)
                );
                if let Some(f0) = l.free_at_load {
                    let room = f0.saturating_sub(l.model_buffer.unwrap_or(0)).saturating_sub(FIT_RESERVE);
                    let c = (room / per.max(1)) / 256 * 256;
                    out.ctx = Some(c);
                    s.push_str(&format!(
                        " With the model's {} placed, {} free at load leaves room for about {} tokens: -c {} or lower.",
                        b(l.model_buffer.unwrap_or(0)),
                        b(f0),
                        c,
                        c
                    ));
                }
                out.notes.push(s);
            }
        }
        GgmlBuffer::Compute => {
            let mut s = String::from("The compute buffer grows with the micro-batch (-ub");
            s.push_str(&match l.n_ubatch {
                Some(u) => format!(" = {u})"),
                None => ")".to_string(),
            });
            s.push_str(" and, without flash attention, with the context (-c");
            s.push_str(&match l.n_ctx {
                Some(c) => format!(" = {c})."),
                None => ").".to_string(),
            });
            if let Some(c) = l.pipeline_copies.filter(|&c| c > 1) {
                s.push_str(&format!(" Pipeline parallelism is on (n_copies={c})."));
            }
            out.notes.push(s);
        }
        GgmlBuffer::Unknown => {}
    }
    out
}

fn fit_fixes(g: &GgmlOom, fits: &Fits) -> Vec<super::Fix> {
    let l = &g.launch;
    let mut f = Vec::new();
    match g.buffer {
        GgmlBuffer::Weights | GgmlBuffer::Unknown => {
            f.push(fix(
                FixCost::Setting,
                match fits.ngl {
                    Some(n) => format!("-ngl {n} (Ollama: num_gpu {n})"),
                    None => "lower -ngl (Ollama: num_gpu) until the model buffer fits".to_string(),
                },
                "fewer layers on the GPU; the rest run on the CPU",
            ));
            if l.gpus.is_some_and(|n| n > 1) {
                f.push(fix(
                    FixCost::Setting,
                    "-ts to split layers by each card's free memory",
                    "the failing device got more than it had free",
                ));
            }
        }
        GgmlBuffer::KvCache => {
            f.push(fix(
                FixCost::Setting,
                match fits.ctx {
                    Some(c) => format!("-c {c}"),
                    None => "lower -c (context)".to_string(),
                },
                "the KV cache grows with every context cell",
            ));
            f.push(fix(FixCost::Setting, "-ctk q8_0 -ctv q8_0 (with -fa on)", "halves the KV cache"));
        }
        GgmlBuffer::Compute => {
            let ub = l.n_ubatch.map(|u| (u / 2).max(64)).unwrap_or(256);
            f.push(fix(
                FixCost::Setting,
                format!("-ub {ub} (and -b no larger than needed)"),
                "the compute buffer scales with the micro-batch",
            ));
            if l.flash_attn != Some(true) {
                f.push(fix(
                    FixCost::Setting,
                    "-fa on",
                    "flash attention does not materialise the attention matrix, whose size grows with the context",
                ));
            }
            f.push(fix(FixCost::Setting, "lower -c", "attention scratch grows with the context"));
        }
    }
    f.push(fix(
        FixCost::Setting,
        "vramfit estimate MODEL.gguf --gpu YOUR-GPU -c N (or vramfit diagnose LOG --model MODEL.gguf)",
        "computes every buffer from the model and searches the largest -ngl and -c that fit",
    ));
    f.push(fix(FixCost::Workload, "a smaller quantization (e.g. Q4_K_M instead of Q8_0)", "fewer bytes per weight"));
    f
}
