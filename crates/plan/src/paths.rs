//! [`plan()`]: the search, then each path out and the recommendation, each
//! a small function over the scored candidates.

use crate::ladder;
use crate::pricing::{Offer, OfferFlag, PriceBook, PriceRange};
use crate::rank::{best_where, better, cheaper_to_rent, order, simpler_then_faster};
use crate::report::{BiggerCard, BreakEven, CardsPoint, JobKind, JobSize, MoreCards, PlanReport, PlanRow, SearchStats};
use crate::request::PlanRequest;
use crate::row::row;
use crate::search::{self, Search};
use crate::types::{default_job, global_batch, Allow, Complexity, Job, MemSummary, Scored};
use std::cmp::Ordering;
use vramfit_core::error::CoreError;
use vramfit_core::estimate::estimate;
use vramfit_core::hardware::{GpuSpec, Link};
use vramfit_core::model::ModelSpec;
use vramfit_core::workload::{Offload, Parallelism, Sharding, Task, TrainKind, Workload};

/// The user's job on one GPU, as given (global batch kept).
fn single_gpu(base: &Workload) -> Workload {
    let mut w = base.clone();
    if let Task::Train(t) = &mut w.task {
        let gb = global_batch(t, &base.parallelism);
        t.grad_accum = gb.div_ceil(t.batch.max(1)).max(1);
    }
    w.parallelism = Parallelism { gpus: 1, tp: 1, pp: 1, ..Parallelism::default() };
    w
}

/// The layout the user fixed on the command line (`--gpus N`, `--zero S`,
/// `--tp`, `--pp`, `--offload`), if any: the plan honours it.
fn pinned_layout(w: &Workload, one_gpu: bool) -> Option<Parallelism> {
    let p = &w.parallelism;
    let fixed = one_gpu
        || p.gpus > 1
        || p.tp > 1
        || p.pp > 1
        || p.ep > 1
        || p.etp > 0
        || p.dp_attention > 1
        || p.sharding != Sharding::None
        || p.offload_optimizer != Offload::None
        || p.offload_params != Offload::None;
    fixed.then(|| p.clone())
}

fn layout_words(p: &Parallelism, one_gpu: bool) -> String {
    let mut parts = vec![match p.gpus {
        0 | 1 if one_gpu => "1 GPU".to_string(),
        0 | 1 => "any GPU count".to_string(),
        n => format!("{n} GPUs"),
    }];
    if p.sharding != Sharding::None {
        parts.push(p.sharding.label().to_string());
    }
    if p.hpz > 1 {
        parts.push(format!("ZeRO++ hpZ {}", p.hpz));
    }
    if p.tp > 1 {
        parts.push(format!("TP {}", p.tp));
    }
    if p.pp > 1 {
        parts.push(format!("PP {}", p.pp));
    }
    if p.ep > 1 {
        parts.push(format!("EP {}", p.ep));
    }
    if p.etp > 1 {
        parts.push(format!("ETP {}", p.etp));
    }
    if p.dp_attention > 1 {
        parts.push(format!("DP-attention {}", p.dp_attention));
    }
    if p.offload_optimizer.is_some() {
        parts.push(format!("optimizer offload → {}", p.offload_optimizer.key()));
    }
    if p.offload_params.is_some() {
        parts.push(format!("parameter offload → {}", p.offload_params.key()));
    }
    parts.join(", ")
}

/// The search of the catalogue for `base`, run: the user's pin, launcher
/// and served requests applied.
fn searched<'a>(req: &'a PlanRequest, base: &'a Workload, job: Job, pinned: Option<Parallelism>) -> Search<'a> {
    let mut search = Search::new(req.model, base, req.gpus, req.book, &req.time, job, req.allow);
    // a pinned layout with the user's checkpointing keeps it (a published run's recompute)
    search.keep_checkpointing = match &base.task {
        Task::Train(t) if pinned.is_some() && req.checkpointing_given => Some(t.checkpointing),
        _ => None,
    };
    search.pinned = pinned;
    search.pinned_one_gpu = req.one_gpu;
    search.launcher = req.launcher;
    search.requests = req.requests();
    search.run();
    search
}

/// Why the plan serves with an engine the user did not name
/// ([`crate::assumed_serving_engine`]).
fn engine_assumed_note(base: &Workload) -> String {
    let engine = match &base.task {
        Task::Inference(s) => s.engine.name(),
        Task::Train(_) => "transformers",
    };
    format!(
        "served with {engine} (assumed: no --engine given): a mixture-of-experts model is served with expert parallelism, which transformers' generate lacks; --engine sglang or transformers plans for another"
    )
}

/// What the plan says of expert parallelism for a MoE model served: where
/// its layouts are searched (vLLM/SGLang only), and why the recommendation
/// is or is not one. EP = TP holds and reads the same expert bytes per rank
/// as TP (⌈E / EP⌉ whole experts against 1/TP of each, `push_weights_ep`),
/// so it wins only on price ties it cannot break; data-parallel attention
/// trades replicated attention weights for 1/N of the KV cache per rank.
fn expert_note(model: &ModelSpec, base: &Workload, rec: Option<&PlanRow>, search: &Search) -> Option<String> {
    // training: DeepSpeed AutoEP's sentence
    let Task::Inference(s) = &base.task else { return autoep_note(model, base, rec) };
    let experts = model.moe.as_ref().map(|m| m.num_experts).filter(|&e| e > 0)?;
    if s.engine.serving().is_none() {
        return Some(format!(
            "{} routes each token to {} of {experts} experts: expert-parallel layouts (EP, data-parallel attention) are searched for vLLM and SGLang: add --engine vllm or sglang",
            model.name,
            model.moe.as_ref().map(|m| m.experts_per_token).unwrap_or(0)
        ));
    }
    let rec = rec?;
    Some(if rec.setup.dp_attention > 1 {
        format!(
            "recommended with data-parallel attention {}: each rank keeps the KV cache of its own sequences and whole attention weights, the experts split over all {} ranks; the cheapest TP-only layout of these cards does not fit or costs more",
            rec.setup.dp_attention, rec.setup.tp
        )
    } else if rec.setup.ep > 1 {
        format!(
            "recommended with the experts split whole over EP {}: cheaper or faster by the model than the TP-only layouts",
            rec.setup.ep
        )
    } else if !search.scored.iter().any(|c| c.complexity == Complexity::ExpertParallel) {
        return None;
    } else {
        "expert-parallel layouts are listed beside the TP-only ones: at EP = TP a rank holds and reads the same expert bytes (whole experts instead of a 1/TP slice of each), so at the same bill the TP-only layout ranks first; data-parallel attention keeps 1/N of the KV cache per rank but whole attention weights on every rank".to_string()
    })
}

/// A training plan with EP outside Megatron is DeepSpeed AutoEP (DeepSpeed PR
/// #7938, docs/training.md): the sentence naming it, its preset and the
/// launcher that writes it.
fn autoep_note(model: &ModelSpec, base: &Workload, rec: Option<&PlanRow>) -> Option<String> {
    let Task::Train(t) = &base.task else { return None };
    let rec = rec.filter(|r| r.setup.ep > 1 && t.engine != vramfit_core::workload::Engine::Megatron)?;
    let preset = vramfit_core::workload::autoep::autoep_preset(model).ok()?;
    Some(format!(
        "recommended with DeepSpeed AutoEP: the experts split whole over EP {} (expert_parallel.autoep_size {}, preset_model {preset}; DeepSpeed ≥ 0.19.2, transformers ≥ 5.0.0); --emit deepspeed writes it",
        rec.setup.ep, rec.setup.ep
    ))
}

/// FP8 training asked with `--have` a card without FP8 tensor cores: the
/// sentence saying it cannot run there (the search leaves such offers out).
fn fp8_card_note(req: &PlanRequest) -> Option<String> {
    let (Task::Train(t), Some(g)) = (&req.workload.task, req.have) else { return None };
    // TransformerEngine: "Device compute capability 8.9 or higher required for FP8
    // execution"; torchao float8 needs SM89+ too
    (!vramfit_core::workload::validate::trains_in(g, t.precision)).then(|| {
        format!(
            "your {} has no FP8 tensor cores: FP8 training (mixed-fp8) cannot run on it (TransformerEngine and torchao float8 need compute capability 8.9 or higher, Ada/Hopper/Blackwell); offers without FP8 are left out — use --precision mixed-bf16 on it",
            g.name
        )
    })
}

/// Plan. Errors only when the user's job itself is refused by the estimator.
pub fn plan(req: &PlanRequest) -> Result<PlanReport, CoreError> {
    let pinned = pinned_layout(req.workload, req.one_gpu);
    let base = match pinned {
        Some(_) => req.workload.clone(),
        None => single_gpu(req.workload),
    };
    let base_ledger = estimate(req.model, &base)?;
    let baseline = MemSummary::of_job(req.model, &base, &base_ledger)?.total;
    let (job, assumed) = match req.job {
        Job::None => (default_job(&base.task), true),
        j => (j, false),
    };
    let search = searched(req, &base, job, pinned.clone());
    let currencies = currencies(req.book);
    let ranked = ranked(&search, &currencies, req.top);
    let bigger_card = bigger_card(&search, req.gpus, baseline);
    let more_cards = more_cards(req, &search, &base, baseline, job);
    let software = req.have.map(|g| ladder::ladder(req.model, &base, g, req.allow, &req.time));
    // the first currency of the catalogue in which something fits
    let primary = currencies
        .iter()
        .find(|cur| search.scored.iter().any(|c| &search.offer(c.offer).currency == *cur))
        .or(currencies.first())
        .cloned();
    // single cards against a whole machine: a training question (serving scales by replicas)
    let break_even = match base.task {
        Task::Train(_) => primary.as_ref().and_then(|cur| break_even(&search, cur)),
        Task::Inference(_) => None,
    };
    let (best_rental, rental_reason) = recommend(&search, primary.as_deref());
    let rental_offloads =
        best_rental.as_ref().is_some_and(|r| r.setup.offload_optimizer.is_some() || r.setup.offload_params.is_some());
    let own_card = req.have.and_then(|g| own_card(req, &base, g, pinned.as_ref(), job, rental_offloads));
    let have_gap = req.have.map(|g| baseline as i128 - g.usable_bytes() as i128);
    let (recommended, reason) = match (&own_card, req.have) {
        (Some(own), Some(g)) => (Some(own.clone()), own_reason(own, g, &best_rental)),
        _ => {
            let mut reason = rental_reason;
            if let (Some(rec), Some(h), Some(g)) = (&best_rental, &more_cards.on_have, req.have) {
                if rec.gpus == 1 {
                    reason.push_str(&format!(
                        "; {} of your {} would also hold it ({}), but a gap smaller than one card is not worth sharding: the next card up needs no split and no PCIe hops",
                        h.gpus,
                        g.name,
                        setup_layout_words(h)
                    ));
                }
            }
            (best_rental.clone(), reason)
        }
    };
    let cheaper_to_rent = match (job, &best_rental) {
        (Job::Tokens(_) | Job::Deadline { .. }, Some(rec)) => cheaper_to_rent(&ranked, rec),
        _ => Vec::new(),
    };
    let mut notes = Vec::new();
    if let Some(p) = &pinned {
        notes.push(format!(
            "the layout you gave ({}) is kept: only it is searched (drop --gpus/--zero/--tp/--pp/--offload to search every layout)",
            layout_words(p, req.one_gpu)
        ));
    }
    if req.engine_assumed {
        notes.push(engine_assumed_note(&base));
    }
    notes.extend(ram_notes(&search));
    notes.extend(cluster_notes(&search));
    notes.extend(engine_cap_note(req, &base)?);
    notes.extend(expert_note(req.model, &base, recommended.as_ref(), &search).into_iter().chain(fp8_card_note(req)));
    if currencies.len() > 1 {
        notes.push(format!(
            "prices in {} are ranked separately: vramfit does not convert currencies",
            currencies.join(", ")
        ));
    }
    if matches!(req.workload.task, Task::Train(_)) {
        notes.push("data parallelism alone (ZeRO-0 / plain DDP) keeps a full copy of the model states on every GPU: it does not lower per-GPU memory; ZeRO-1/2/3, FSDP, TP and PP do".into());
    }
    let (tokens, hours) = (job.tokens(), job.hours());
    // a deadline no plan meets: say so, with the fastest plan found
    let fastest_late = match job {
        Job::Deadline { .. } if recommended.is_none() => search.fastest_late.as_ref().and_then(|c| row(&search, c)),
        _ => None,
    };
    // with a launcher: the best plan overall when the launcher cannot run it
    let best_overall = match (req.launcher, req.have.is_none() || own_card.is_none()) {
        (Some(l), true) => best_overall(req, l, recommended.as_ref(), &mut notes)?,
        _ => None,
    };
    let late = deadline_reason(job, fastest_late.as_ref(), recommended.is_none() && search.fitting > 0);
    let reason = with_faster_clause(late.unwrap_or(reason), job, recommended.as_ref(), best_rental.as_ref(), &ranked);
    Ok(PlanReport {
        task: match req.workload.task {
            Task::Train(_) => JobKind::Train,
            Task::Inference(_) => JobKind::Inference,
        },
        job: JobSize { tokens, hours, assumed, requests: req.requests() },
        pinned: pinned.as_ref().map(|p| layout_words(p, req.one_gpu)),
        params_total: base_ledger.params_total,
        baseline_bytes: Some(baseline),
        have: req.have.map(|g| g.id.clone()),
        have_memory_bytes: req.have.map(|g| g.usable_bytes()),
        have_gap_bytes: have_gap,
        ranked,
        software,
        more_cards,
        bigger_card,
        break_even,
        recommended,
        reason,
        own_card,
        best_rental,
        cheaper_to_rent,
        fastest_late,
        launcher: req.launcher,
        best_overall,
        stats: SearchStats { candidates: search.evaluated, fitting: search.fitting, estimates: search.estimated },
        notes,
    })
}

/// A serving engine that takes a share of each card: what the per-GPU
/// figures mean (the card the engine needs, as estimate --gpu decides).
fn engine_cap_note(req: &PlanRequest, base: &Workload) -> Result<Option<String>, CoreError> {
    let Task::Inference(s) = &base.task else { return Ok(None) };
    let Some(n) = vramfit_core::infer::engine_need_of(req.model, s, &base.parallelism, &base.runtime, None)? else {
        return Ok(None);
    };
    Ok(Some(format!(
        "--engine {} takes {} of each card at start-up: per-GPU figures are the card it needs, its need ÷ {} ({} on one GPU: weights, start-up profile, non-torch memory and the KV blocks), as estimate --gpu decides",
        s.engine.name(),
        n.gpu_util,
        n.gpu_util,
        vramfit_core::units::fmt_bytes(n.need_bytes)
    )))
}

/// Where the cluster search stopped, for jobs that need several machines
/// (a job that fits one machine is not worth a note per cluster offer).
fn cluster_notes(search: &Search) -> Vec<String> {
    let mut notes = Vec::new();
    let mut skipped: Vec<(&u32, &(u64, u64))> =
        search.machines_skipped.iter().filter(|(o, (f, _))| *f > search.offer(**o).min_machines).collect();
    skipped.sort();
    for (&oi, &(first, m)) in skipped {
        notes.push(format!(
            "{}: clusters of {m} machines or more were not searched (more than {}× the {first} machines that hold the job; they buy speed at a higher bill)",
            search.offer(oi).name,
            crate::search::MACHINE_SEARCH_SPAN
        ));
    }
    notes
}

/// With a deadline no plan meets: the reason, naming the fastest plan found.
fn deadline_reason(job: Job, fastest: Option<&PlanRow>, none_meets: bool) -> Option<String> {
    let Job::Deadline { tokens, hours } = job else { return None };
    match fastest {
        Some(f) => Some(format!(
            "no plan finishes {} tokens within {hours} h; the fastest found takes {:.1} h: {} × {} ({})",
            thousands(tokens),
            f.job_hours.unwrap_or(f64::INFINITY),
            f.gpus,
            f.gpu_name,
            f.offer_name
        )),
        None if none_meets => Some(format!("no plan finishes {} tokens within {hours} h", thousands(tokens))),
        None => None,
    }
}

/// A plan at the same bill is named as the better one overall when it
/// finishes the job at least this much sooner.
const FASTER_BY: f64 = 0.1;

/// With a launcher: the best plan overall when the launcher cannot run it,
/// and a first note saying what it needs and what it bills.
fn best_overall(
    req: &PlanRequest,
    l: crate::emit::Launcher,
    rec: Option<&PlanRow>,
    notes: &mut Vec<String>,
) -> Result<Option<PlanRow>, CoreError> {
    let free = plan(&PlanRequest { launcher: None, ..req.clone() })?;
    let Some(b) = free.recommended else { return Ok(None) };
    let why = crate::emit::check(l, &b.setup).err().map(|e| e.to_string()).unwrap_or_default();
    // named when it is cheaper, or as cheap and clearly faster (a monthly bill
    // is the same for a job of 3.7 or 4.7 days: the days are what it saves)
    let ranks_ahead = |r: &PlanRow| {
        b.rank_cost < r.rank_cost * (1.0 - crate::rank::PRICE_TIE)
            || (!crate::rank::costs_more(b.rank_cost, r.rank_cost)
                && matches!((b.job_hours, r.job_hours), (Some(bh), Some(rh)) if bh < rh * (1.0 - FASTER_BY)))
    };
    match rec {
        Some(r) if ranks_ahead(r) => {
            let hours = |h: Option<f64>| match h {
                Some(h) if h < 48.0 => format!(" in {h:.1} h"),
                Some(h) => format!(" in {:.1} days", h / 24.0),
                None => String::new(),
            };
            let saves = match (b.billed, r.billed) {
                (Some(bb), Some(rb)) if b.currency == r.currency => format!(
                    "; it bills {}{} for the job, this plan {}{}",
                    price_words(bb, &b.currency),
                    hours(b.job_hours),
                    price_words(rb, &r.currency),
                    hours(r.job_hours)
                ),
                _ => String::new(),
            };
            notes.insert(
                0,
                format!(
                    "{} cannot launch the best plan overall ({} × {}, {}): {why}{saves}",
                    l.name(),
                    b.gpus,
                    b.gpu_name,
                    b.offer_name
                ),
            );
            Ok(Some(b))
        }
        Some(_) => Ok(None),
        None => {
            notes.insert(
                0,
                format!(
                    "{} can launch no plan that fits; the best plan overall ({} × {}, {}) needs what it cannot: {why}",
                    l.name(),
                    b.gpus,
                    b.gpu_name,
                    b.offer_name
                ),
            );
            Ok(Some(b))
        }
    }
}

/// Offers (at some GPU counts) left out only because their host RAM cannot
/// hold the offload every setup fitting their GPUs needs: one note per
/// offer, with the range of those counts and the smallest need (at the
/// largest count).
fn ram_notes(search: &Search) -> Vec<String> {
    let mut by_offer: Vec<(u32, u64, u64, u64)> = Vec::new(); // offer, fewest GPUs, most GPUs, smallest need
    let mut refused: Vec<(&(u32, u64), &u64)> = search.ram_refused.iter().collect();
    refused.sort();
    for (&(o, n), &need) in refused {
        if search.scored.iter().any(|c| c.offer == o && c.gpus == n) {
            continue;
        }
        match by_offer.iter_mut().find(|e| e.0 == o) {
            Some(e) => {
                e.1 = e.1.min(n);
                e.2 = e.2.max(n);
                e.3 = e.3.min(need);
            }
            None => by_offer.push((o, n, n, need)),
        }
    }
    by_offer
        .into_iter()
        .map(|(o, low, high, need)| {
            let offer = search.offer(o);
            let have = match offer.ram_gb {
                Some(r) => format!("it has {} GB", thousands(r.round() as u64)),
                None => format!("it lists none (assumed {:.0} GB per GPU)", search::ASSUMED_RAM_GB_PER_GPU),
            };
            let per = offer.gpus_per_machine.max(1);
            let what = match (low == high, per > 1 && high > per && low % per == 0) {
                (true, _) if low == per => offer.name.clone(),
                (true, _) => format!("{} on {low} GPUs", offer.name),
                (false, true) => format!("{} on {}–{} machines", offer.name, low / per, high / per),
                (false, false) => format!("{} on {low}–{high} GPUs", offer.name),
            };
            format!(
                "{what}: left out — every setup that fits its GPUs needs CPU offload with at least {} GB of host RAM per machine (DeepSpeed's estimate); {have}",
                thousands((need as f64 / 1e9).round() as u64)
            )
        })
        .collect()
}

fn setup_layout_words(r: &PlanRow) -> String {
    let s = &r.setup;
    if s.pp > 1 {
        format!("a PP {} split over PCIe", s.pp)
    } else if s.tp > 1 {
        format!("TP {}", s.tp)
    } else if s.sharding != Sharding::None {
        s.sharding.label().to_string()
    } else {
        format!("plain DDP over {}", s.gpus)
    }
}

/// The reason, with the faster plan for a little more when a rental is
/// recommended for a job of tokens ([`faster_for_a_little_more`]).
fn with_faster_clause(
    reason: String,
    job: Job,
    rec: Option<&PlanRow>,
    rental: Option<&PlanRow>,
    ranked: &[PlanRow],
) -> String {
    match (job, rec, rental) {
        (Job::Tokens(_), Some(rec), Some(rental)) if rec.offer_id == rental.offer_id && rec.gpus == rental.gpus => {
            match faster_for_a_little_more(ranked, rec) {
                Some(faster) => format!("{reason}; {faster}"),
                None => reason,
            }
        }
        _ => reason,
    }
}

/// `TP 4 × EP 8 × PP 16, ZeRO-1`: the layout of a row in a few words.
fn layout_brief(r: &PlanRow) -> String {
    let s = &r.setup;
    let mut parts: Vec<String> = Vec::new();
    for (name, n) in [("TP", s.tp), ("EP", s.ep), ("PP", s.pp)] {
        if n > 1 {
            parts.push(format!("{name} {n}"));
        }
    }
    let mut words = parts.join(" × ");
    if s.sharding != Sharding::None {
        if !words.is_empty() {
            words.push_str(", ");
        }
        words.push_str(s.sharding.label());
    }
    if words.is_empty() {
        words = if r.gpus > 1 { format!("DP {}", s.dp.max(1)) } else { "one card".to_string() };
    }
    words
}

/// `13.0 h` or `17.0 days`.
fn job_time_words(hours: f64) -> String {
    if hours < 48.0 {
        format!("{hours:.1} h")
    } else {
        format!("{:.1} days", hours / 24.0)
    }
}

/// The ranked plan in the recommendation's currency that finishes the job
/// soonest for at most a quarter more than the recommended bill, when it
/// takes at most half the time: a bill of whole months is the same for a
/// job of 13 hours or 17 days, and the days are what a practitioner weighs
/// against a slightly higher bill ([`crate::rank::FASTER_FOR_MORE_BILL`],
/// [`crate::rank::FASTER_FOR_MORE_TIME`]); a job of less than
/// [`crate::rank::FASTER_FOR_MORE_MIN_HOURS`] saves hours, not days.
fn faster_for_a_little_more(ranked: &[PlanRow], rec: &PlanRow) -> Option<String> {
    let (rb, rh) = (rec.billed?.mid(), rec.job_hours?);
    if rh < crate::rank::FASTER_FOR_MORE_MIN_HOURS {
        return None;
    }
    let alt = ranked
        .iter()
        .filter(|x| x.currency == rec.currency && !(x.offer_id == rec.offer_id && x.gpus == rec.gpus))
        .filter(|x| {
            matches!((x.billed, x.job_hours), (Some(b), Some(h))
                if b.mid() <= rb * (1.0 + crate::rank::FASTER_FOR_MORE_BILL) && h <= rh * crate::rank::FASTER_FOR_MORE_TIME)
        })
        .min_by(|a, b| a.job_hours.unwrap_or(f64::INFINITY).total_cmp(&b.job_hours.unwrap_or(f64::INFINITY)))?;
    let (ab, ah) = (alt.billed?, alt.job_hours?);
    let more = if ab.mid() > rb {
        format!("for {:.0}% more", (ab.mid() / rb - 1.0) * 100.0)
    } else {
        "for as much".to_string()
    };
    Some(format!(
        "{more} ({} against {}), {} × {} ({}) finishes the job in {} instead of {}",
        price_words(ab, &alt.currency),
        price_words(rec.billed?, &rec.currency),
        alt.gpus,
        alt.gpu_name,
        layout_brief(alt),
        job_time_words(ah),
        job_time_words(rh)
    ))
}

/// Currencies in the catalogue's order (each is ranked on its own).
fn currencies(book: &PriceBook) -> Vec<String> {
    let mut currencies: Vec<String> = Vec::new();
    for o in &book.offers {
        if !currencies.contains(&o.currency) {
            currencies.push(o.currency.clone());
        }
    }
    currencies
}

/// The best setup per (offer, GPU count), then per currency by cost, `top`
/// each. A MoE model's expert-parallel layouts keep their own slot, so they
/// are listed beside the TP-only layout of the same cards.
fn ranked(search: &Search, currencies: &[String], top: usize) -> Vec<PlanRow> {
    let mut best_per: Vec<Scored> = Vec::new();
    let mut slot: std::collections::HashMap<(u32, u64, bool), usize> = std::collections::HashMap::new();
    for c in &search.scored {
        let key = (c.offer, c.gpus, c.complexity == Complexity::ExpertParallel);
        match slot.get(&key) {
            Some(&i) => {
                if better(c, &best_per[i]) {
                    best_per[i] = *c;
                }
            }
            None => {
                slot.insert(key, best_per.len());
                best_per.push(*c);
            }
        }
    }
    let currency = |c: &Scored| currencies.iter().position(|cur| *cur == search.offer(c.offer).currency);
    best_per.sort_by(|a, b| currency(a).cmp(&currency(b)).then(order(a, b)));
    let mut ranked = Vec::new();
    for cur in currencies {
        ranked.extend(
            best_per
                .iter()
                .filter(|c| &search.offer(c.offer).currency == cur)
                .take(top.max(1))
                .filter_map(|c| row(search, c)),
        );
    }
    ranked
}

/// Path (3): the unchanged job on one bigger card.
fn bigger_card(search: &Search, gpus: &[GpuSpec], baseline: u64) -> BiggerCard {
    let best = best_where(&search.scored, |c| c.gpus == 1 && search.is_unchanged(c)).and_then(|c| row(search, c));
    let gpus_that_fit = gpus.iter().filter(|g| g.usable_bytes() >= baseline).map(|g| g.id.clone()).collect();
    BiggerCard { need_bytes: Some(baseline), best, gpus_that_fit }
}

/// Path (2): more cards with the same method and no offload, beside plain
/// data parallelism on as many GPUs and the fewest of the user's own cards.
/// A training plan here must split what holds the memory: plain data
/// parallelism keeps everything on every card (a DP-only plan that fits owes it
/// to the switches of path 1, not to the cards), and with LoRA or QLoRA ZeRO-1/2
/// shard only the adapter's gradients and optimizer states, megabytes beside a
/// frozen base; so ZeRO-3/FSDP full sharding, TP or PP for those, any sharding
/// for a full fine-tune. Serving replicas split the sequences' KV cache, so they
/// count.
fn more_cards(req: &PlanRequest, search: &Search, single: &Workload, baseline: u64, job: Job) -> MoreCards {
    let splits = |c: &Scored| {
        let k = &search.entry_of(c).key;
        let shards = match &k.train {
            None => true,
            Some(t) if t.kind == TrainKind::Full => k.sharding != Sharding::None,
            Some(_) => k.sharding == Sharding::Zero3,
        };
        c.gpus >= 2 && (shards || k.tp > 1 || k.pp > 1)
    };
    let best = best_where(&search.scored, |c| splits(c) && search.same_method(c) && !search.offloads(c))
        .and_then(|c| row(search, c));
    let dp_gpus = best.as_ref().map(|r| r.gpus).unwrap_or(8).max(2);
    let dp_only = match &single.task {
        Task::Train(_) => {
            let mut w = single.clone();
            w.parallelism = Parallelism { gpus: dp_gpus, ..Parallelism::default() };
            if let Task::Train(t) = &mut w.task {
                t.grad_accum = t.grad_accum.div_ceil(dp_gpus).max(1);
            }
            estimate(req.model, &w).ok().map(|l| l.total_bytes())
        }
        // serving: each replica holds its share of the sequences' KV cache
        Task::Inference(s) => {
            let mut w = single.clone();
            w.parallelism = Parallelism::default();
            if let Task::Inference(i) = &mut w.task {
                i.concurrency = s.concurrency.div_ceil(dp_gpus).max(1);
                i.batch = i.batch.min(i.concurrency);
            }
            estimate(req.model, &w).ok().and_then(|l| MemSummary::of_job(req.model, &w, &l).ok()).map(|m| m.total)
        }
    };
    let on_have = req.have.and_then(|g| on_have(req, single, g, job));
    MoreCards { single_bytes: Some(baseline), dp_only_bytes: dp_only, dp_gpus, best, on_have }
}

/// An unpriced offer of the user's own cards (`count` to `max` of them over PCIe).
fn own_book(g: &GpuSpec, per: u64, max: u64) -> PriceBook {
    PriceBook {
        offers: vec![Offer {
            id: format!("yours/{}", g.id),
            provider: "yours".into(),
            name: format!("your {} (unpriced)", g.name),
            gpu: g.id.clone(),
            gpus_per_machine: per,
            max_gpus: max,
            link: Link::Pcie,
            slice: None,
            cpu_cores: None,
            ram_gb: None,
            disk_gb: None,
            network_mbps: None,
            monthly: None,
            hourly: None,
            min_hours: None,
            currency: "-".into(),
            flags: vec![OfferFlag::Note("your own card".into())],
            source: "--have".into(),
            max_machines: 1,
            min_machines: 1,
            inter_node_gbs: None,
            fabric: None,
        }],
        discounts: vec![],
        upgrades: vec![],
    }
}

/// The user's own card(s) running the job with the seed's free switches
/// (AMP, accumulation, checkpointing, 8-bit optimizer; a method change only
/// when allowed): one card, or the count the user gave. No offload — unless
/// the best rental offloads too (`rental_offloads`): then the own card with
/// the same switch a rental would need is preferred to renting (issue 21).
fn own_card(
    req: &PlanRequest,
    base: &Workload,
    g: &GpuSpec,
    pinned: Option<&Parallelism>,
    job: Job,
    rental_offloads: bool,
) -> Option<PlanRow> {
    let n = pinned.map(|p| p.gpus).unwrap_or(1).max(1);
    let book = own_book(g, n, n);
    let one = std::slice::from_ref(g);
    let mut s = Search::new(req.model, base, one, &book, &req.time, job, req.allow);
    s.pinned = pinned.cloned();
    s.check_ram = false;
    s.launcher = req.launcher;
    s.requests = req.requests();
    s.run();
    let mut best: Option<&Scored> = None;
    for c in s.scored.iter().filter(|c| c.gpus == n && (pinned.is_some() || rental_offloads || !s.offloads(c))) {
        if best.is_none_or(|b| simpler_then_faster(c, b) == Ordering::Less) {
            best = Some(c);
        }
    }
    best.and_then(|c| row(&s, c))
}

/// Why the own card is the recommendation.
fn own_reason(own: &PlanRow, g: &GpuSpec, rental: &Option<PlanRow>) -> String {
    let yours = if own.gpus > 1 { format!("your {} × {}", own.gpus, g.name) } else { format!("your {}", g.name) };
    let how = if own.switches.is_empty() {
        "as given".to_string()
    } else {
        format!("with {}", own.switches.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "))
    };
    let mut r = format!("{yours} holds it {how}: no rental needed");
    if let Some(h) = own.job_hours {
        r.push_str(&format!(" (~{:.0} tokens/s: {})", own.tokens_per_s, hours_words(h)));
    }
    if let Some(rent) = rental {
        if rent.tokens_per_s > own.tokens_per_s * 1.5 {
            r.push_str(&format!(
                "; renting {} × {} ({}) would run it {:.1}× faster",
                rent.gpus,
                rent.gpu_name,
                rent.offer_id,
                rent.tokens_per_s / own.tokens_per_s.max(1e-9)
            ));
        }
    }
    r
}

fn hours_words(h: f64) -> String {
    if h < 48.0 {
        format!("{h:.1} h for the job")
    } else {
        format!("{:.1} days for the job", h / 24.0)
    }
}

/// The fewest of the user's own cards (2, 4 or 8 over PCIe, unpriced) that hold the job.
fn on_have(req: &PlanRequest, single: &Workload, g: &GpuSpec, job: Job) -> Option<PlanRow> {
    // counts 2, 4, 8: one card is the ladder's business
    let book = own_book(g, 2, 8);
    let one = std::slice::from_ref(g);
    let mut s2 = Search::new(req.model, single, one, &book, &req.time, job, Allow::default());
    s2.check_ram = false;
    s2.requests = req.requests();
    s2.run();
    let mut best: Option<&Scored> = None;
    for c in s2.scored.iter().filter(|c| c.gpus >= 2 && s2.same_method(c) && !s2.offloads(c)) {
        let take = match best {
            None => true,
            Some(b) => c.gpus < b.gpus || (c.gpus == b.gpus && simpler_then_faster(c, b) == Ordering::Less),
        };
        if take {
            best = Some(c);
        }
    }
    best.and_then(|c| row(&s2, c))
}

/// The best single card against the best whole machine of ≥ 8 GPUs in
/// `cur`, and the single-card offer at each count: how many cards cost as
/// much as the machine, and from how many the machine is the better buy.
fn break_even(search: &Search, cur: &str) -> Option<BreakEven> {
    // the single card: one card of a per-card offer that stacks (so "how many
    // cards" has an answer), else the best single card; when no one card holds
    // the job, the fewest stacked cards of such an offer that do (issue 21:
    // the comparison is still there when a job needs several cards)
    let per_card = |c: &Scored| {
        let o = search.offer(c.offer);
        c.machines == 1 && o.gpus_per_machine == 1 && o.slice.is_none() && o.currency == cur
    };
    let one = |c: &Scored| per_card(c) && c.gpus == 1;
    let fewest_stacked =
        search.scored.iter().filter(|c| per_card(c) && search.offer(c.offer).max_gpus > 1).map(|c| c.gpus).min();
    let single_c = best_where(&search.scored, |c| one(c) && search.offer(c.offer).max_gpus > 1)
        .or_else(|| best_where(&search.scored, one))
        .or_else(|| {
            let n = fewest_stacked?;
            best_where(&search.scored, |c| per_card(c) && search.offer(c.offer).max_gpus > 1 && c.gpus == n)
        })?;
    let machine_c = best_where(&search.scored, |c| {
        let o = search.offer(c.offer);
        o.gpus_per_machine >= 8 && c.gpus >= 8 && o.currency == cur
    })?;
    let single = row(search, single_c)?;
    let machine = row(search, machine_c)?;
    // per card: the single side may be several stacked cards
    let cards_n = single.gpus.max(1) as f64;
    let price_ratio = match (single.monthly.map(|m| m.scale(1.0 / cards_n)), machine.monthly) {
        (Some(a), Some(b)) if a.low > 0.0 && a.high > 0.0 => {
            Some(PriceRange { low: b.low / a.high.max(a.low), high: b.high / a.low })
        }
        _ => None,
    };
    let speed_ratio = if single.tokens_per_s > 0.0 { machine.tokens_per_s / single.tokens_per_s } else { 0.0 };
    // cheaper per token when the speed gain beats the whole price range; dearer below it
    // (against the stacked cards' price: the per-card ratio over their count)
    let machine_cheaper_per_token = match price_ratio {
        Some(p) if speed_ratio > p.high / cards_n => Some(true),
        Some(p) if speed_ratio < p.low / cards_n => Some(false),
        _ => None,
    };
    let stack_offer = single_c.offer;
    let mut cards: Vec<CardsPoint> = Vec::new();
    for (n, machines) in Search::counts_for(search.offer(stack_offer), None) {
        if machines > 1 {
            continue;
        }
        if let Some(c) = best_where(&search.scored, |c| c.offer == stack_offer && c.gpus == n) {
            cards.push(CardsPoint {
                gpus: n,
                tokens_per_s: c.tokens_per_s,
                monthly: c.monthly,
                billed: c.billed,
                job_hours: c.job_hours,
                cost_per_mtok: per_mtok(c.monthly, c.tokens_per_s),
            });
        }
    }
    let fewest_cards = cards.iter().map(|p| p.gpus).min();
    // the machine at the top of its price range: it is the better buy only if it is even then
    let machine_per_tok = per_mtok(machine.monthly.map(|m| PriceRange::point(m.high)), machine.tokens_per_s);
    let machine_better_from = match machine_per_tok {
        Some(m) => cards.iter().find(|p| p.cost_per_mtok.is_some_and(|c| c > m)).map(|p| p.gpus),
        None => None,
    };
    Some(BreakEven {
        single,
        machine,
        currency: cur.to_string(),
        price_ratio,
        speed_ratio,
        machine_cheaper_per_token,
        cards_offer: Some(search.offer(stack_offer).id.clone()),
        cards,
        fewest_cards,
        machine_better_from,
    })
}

/// Monthly price (middle of its range, [`PriceRange::mid`]) per million tokens/s: proportional to the cost of a token.
fn per_mtok(monthly: Option<PriceRange>, tps: f64) -> Option<f64> {
    match monthly {
        Some(m) if tps > 0.0 => Some(m.mid() / tps * 1e6),
        _ => None,
    }
}

/// The cheapest plan in the primary currency by what it bills for the job,
/// with the premium of each moving part (offload wins only when clearly
/// cheaper); the reason says by how much it beats the simplest plan.
fn recommend(search: &Search, primary: Option<&str>) -> (Option<PlanRow>, String) {
    let Some(cur) = primary else { return (None, "the catalogue has no offers".to_string()) };
    let in_cur = |c: &Scored| search.offer(c.offer).currency == cur;
    let Some(best) = best_where(&search.scored, in_cur) else {
        return (None, "no offer in the catalogue fits this job".to_string());
    };
    let Some(rec) = row(search, best) else { return (None, "no offer in the catalogue fits this job".into()) };
    let bill = |r: &PlanRow| r.billed.map(|b| price_words(b, &r.currency)).unwrap_or_default();
    let mut reason = match best.complexity {
        Complexity::Plain if best.gpus == 1 => {
            format!("the cheapest bill for this job ({}), on one card without sharding or offload", bill(&rec))
        }
        Complexity::Plain if rec.setup.replicas > 1 => format!(
            "the cheapest bill for this job ({}): {} replicas, each serving its share of the sequences",
            bill(&rec),
            rec.setup.replicas
        ),
        Complexity::Plain if rec.setup.tp > 1 || rec.setup.pp > 1 => {
            format!(
                "the cheapest bill for this job ({}), the model split TP {} × PP {}",
                bill(&rec),
                rec.setup.tp,
                rec.setup.pp
            )
        }
        Complexity::Plain => format!("the cheapest bill for this job ({}), with plain data parallelism", bill(&rec)),
        c => format!("the cheapest bill for this job ({}) with {}", bill(&rec), c.words()),
    };
    // the best plan with fewer moving parts (without offload, when this one offloads):
    // how much this one saves against it
    let offloaded = best.complexity >= Complexity::OffloadOptimizer;
    let simpler = best_where(&search.scored, |c| {
        in_cur(c) && {
            let ce = c.complexity;
            if offloaded {
                ce < Complexity::OffloadOptimizer
            } else {
                ce < best.complexity
            }
        }
    });
    if let Some(alt) = simpler.and_then(|s| row(search, s)) {
        let (a, b) = (rec.billed.map(|p| p.mid()).unwrap_or(0.0), alt.billed.map(|p| p.mid()).unwrap_or(0.0));
        if b > 0.0 && a < b {
            let speed = if rec.tokens_per_s > 0.0 { alt.tokens_per_s / rec.tokens_per_s } else { 0.0 };
            reason.push_str(&format!(
                ": {:.0}% cheaper than the cheapest plan {} ({} × {}, {}: {}){}",
                (1.0 - a / b) * 100.0,
                if offloaded { "without offload" } else { "with fewer moving parts" },
                alt.gpus,
                alt.gpu_name,
                alt.complexity.words(),
                bill(&alt),
                if speed > 1.05 { format!(", which would run {:.1}× faster", speed) } else { String::new() }
            ));
        }
    } else if best.complexity >= Complexity::OffloadOptimizer {
        reason.push_str(": nothing in the catalogue fits without offload");
    }
    (Some(rec), reason)
}

/// `1,862`.
fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `CNY 2,500` or `CNY 25,000–40,000` (whole units; two decimals under 100).
pub fn price_words(p: PriceRange, currency: &str) -> String {
    fn one(v: f64) -> String {
        if !v.is_finite() {
            return "?".into();
        }
        if v.abs() < 100.0 {
            return format!("{v:.2}");
        }
        thousands(v.round().max(0.0) as u64)
    }
    if p.is_range() {
        format!("{currency} {}–{}", one(p.low), one(p.high))
    } else {
        format!("{currency} {}", one(p.low))
    }
}
