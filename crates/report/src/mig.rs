//! `vramfit mig plan` / `vramfit mig profiles`: JSON schema and renderers
//! (table, mig-parted YAML). Every field is documented in docs/mig.md. The
//! schema types are built from `vramfit_mig`'s values by the `From` impls
//! and constructors here; the kind keys of refusals and advice are the
//! schema's.

use crate::format::{bytes, fit_lines, shown, Width};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_mig::{Advice, GpuLayout, Instance, MigGpu, Plan, Profile, Refusal, Service, ServiceKind};

/// The card type a plan or listing is for.
#[derive(Debug, Clone, Serialize)]
pub struct MigGpuInfo {
    pub id: String,
    pub name: String,
    /// where the profile table comes from
    pub source: String,
    pub memory_slices: u8,
    pub compute_slices: u8,
    pub whole_card_bytes: u64,
    pub full_card_sms: Option<u32>,
    /// PCI device ids (mig-parted `device-filter` form)
    pub pci_device_ids: Vec<String>,
}

/// One profile of `mig profiles`: `vramfit_mig`'s own [`Profile`] (its serde
/// form is the schema, so a field is written once).
pub type ProfileInfo = Profile;

impl MigGpuInfo {
    /// The card of `gpu`, with the PCI device ids its catalogue entry lists.
    pub fn new(gpu: &MigGpu, pci_device_ids: Vec<String>) -> Self {
        MigGpuInfo {
            id: gpu.id.clone(),
            name: gpu.name.clone(),
            source: gpu.source.clone(),
            memory_slices: gpu.memory_slices,
            compute_slices: gpu.compute_slices,
            whole_card_bytes: gpu.whole_card_bytes,
            full_card_sms: gpu.full_card_sms,
            pci_device_ids,
        }
    }
}

/// The profiles of a card, in its table's order.
pub fn profile_infos(gpu: &MigGpu) -> Vec<ProfileInfo> {
    gpu.profiles.clone()
}

/// `mig profiles --json`.
#[derive(Debug, Clone, Serialize)]
pub struct MigProfilesReport {
    pub schema: u32,
    pub command: &'static str,
    pub gpu: MigGpuInfo,
    pub profiles: Vec<ProfileInfo>,
}

impl MigProfilesReport {
    pub fn new(gpu: MigGpuInfo, profiles: Vec<ProfileInfo>) -> Self {
        MigProfilesReport { schema: SCHEMA_VERSION, command: "mig profiles", gpu, profiles }
    }
}

/// A service as given.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceInfo {
    pub name: String,
    pub need_bytes: u64,
    /// `inference` or `training`
    pub kind: String,
    /// how `need_bytes` was obtained (a raw size, or the estimator on a model)
    pub sized_by: String,
    pub params: Option<u64>,
}

impl ServiceInfo {
    /// A service as given, with how its need was obtained.
    pub fn new(s: &Service, sized_by: String) -> Self {
        ServiceInfo {
            name: s.name.clone(),
            need_bytes: s.need_bytes,
            kind: match s.kind {
                ServiceKind::Inference => "inference".into(),
                ServiceKind::Training => "training".into(),
            },
            sized_by,
            params: s.params,
        }
    }
}

/// One instance of a plan: `vramfit_mig`'s [`Instance`] (its throughput
/// flattened into `compute_share`, `memory_bandwidth_share`, `throughput_basis`).
pub type InstanceInfo = Instance;

/// One card of a plan: `vramfit_mig`'s [`GpuLayout`] (`gpu` is its index in
/// the plan, mig-parted's `devices`; instances in a safe creation order).
pub type LayoutInfo = GpuLayout;

#[derive(Debug, Clone, Serialize)]
pub struct RefusalInfo {
    pub service: String,
    /// `too_large`, `training_across_instances`, `large_training`
    pub kind: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct AdviceInfo {
    /// `one_user`, `unconfirmed_profiles`, `four_plus_three_needs_r510`, `training_in_one_instance`
    pub kind: String,
    pub text: String,
}

impl From<&Refusal> for RefusalInfo {
    fn from(r: &Refusal) -> Self {
        let kind = match r {
            Refusal::TooLarge { .. } => "too_large",
            Refusal::TrainingAcrossInstances { .. } => "training_across_instances",
            Refusal::LargeTraining { .. } => "large_training",
        };
        RefusalInfo { service: r.service().to_string(), kind: kind.into(), reason: r.reason() }
    }
}

impl From<&Advice> for AdviceInfo {
    fn from(a: &Advice) -> Self {
        let kind = match a {
            Advice::OneUser { .. } => "one_user",
            Advice::UnconfirmedProfiles { .. } => "unconfirmed_profiles",
            Advice::FourPlusThreeNeedsR510 { .. } => "four_plus_three_needs_r510",
            Advice::TrainingInOneInstance { .. } => "training_in_one_instance",
        };
        AdviceInfo { kind: kind.into(), text: a.text() }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchInfo {
    /// always `exact`: iterative deepening on the card count + branch and bound
    pub method: &'static str,
    pub nodes: u64,
    pub lower_bound_gpus: usize,
    /// the objective, in order
    pub objective: Vec<&'static str>,
}

/// `mig plan --json`.
#[derive(Debug, Clone, Serialize)]
pub struct MigPlanReport {
    pub schema: u32,
    pub command: &'static str,
    pub gpu: MigGpuInfo,
    pub services: Vec<ServiceInfo>,
    /// no service was refused and the plan needs no more than `max_gpus` cards
    pub fits: bool,
    pub gpus_needed: usize,
    /// cards available (`--max-gpus`); null when not given
    pub max_gpus: Option<usize>,
    pub total_need_bytes: u64,
    pub total_slice_bytes: u64,
    pub total_waste_bytes: u64,
    pub layouts: Vec<LayoutInfo>,
    pub refused: Vec<RefusalInfo>,
    pub advice: Vec<AdviceInfo>,
    pub throughput_assumption: String,
    pub search: SearchInfo,
}

impl MigPlanReport {
    /// The report of `plan` for `services` on `gpu`; `extra_advice` comes
    /// after the plan's own (e.g. a catalogue note); `max_gpus`: cards
    /// available (`--max-gpus`), which decides `fits` with the plan.
    pub fn from_plan(
        gpu: MigGpuInfo,
        services: Vec<ServiceInfo>,
        plan: &Plan,
        extra_advice: Vec<AdviceInfo>,
        max_gpus: Option<usize>,
    ) -> Self {
        let mut advice: Vec<AdviceInfo> = plan.advice.iter().map(Into::into).collect();
        advice.extend(extra_advice);
        MigPlanReport {
            schema: SCHEMA_VERSION,
            command: "mig plan",
            gpu,
            services,
            fits: plan.fits(max_gpus),
            gpus_needed: plan.gpus,
            max_gpus,
            total_need_bytes: plan.total_need_bytes,
            total_slice_bytes: plan.total_slice_bytes,
            total_waste_bytes: plan.total_waste_bytes,
            layouts: plan.layouts.clone(),
            refused: plan.refused.iter().map(Into::into).collect(),
            advice,
            throughput_assumption: vramfit_mig::THROUGHPUT_ASSUMPTION.to_string(),
            search: SearchInfo {
                method: "exact",
                nodes: plan.search.nodes,
                lower_bound_gpus: plan.search.lower_bound_gpus,
                objective: vec!["fewest GPUs", "least wasted memory", "fewest compute slices"],
            },
        }
    }
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// Human table of a plan, its long lines wrapped to `width`.
pub fn render_plan(r: &MigPlanReport, width: Width) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "MIG plan on {} ({}): {} service(s) on {} GPU(s)",
        r.gpu.name,
        r.gpu.id,
        r.layouts.iter().map(|l| l.instances.len()).sum::<usize>(),
        r.gpus_needed
    );
    let _ = writeln!(out, "profiles: {}", shown(&r.gpu.source));
    let _ = writeln!(
        out,
        "search: exact (fewest GPUs, then least waste, then fewest compute slices); lower bound {} GPU(s), {} nodes",
        r.search.lower_bound_gpus, r.search.nodes
    );
    for l in &r.layouts {
        let _ = writeln!(
            out,
            "\nGPU {}: {}/{} memory slices, {}/{} compute slices, waste {}",
            l.index,
            l.memory_slices_used,
            r.gpu.memory_slices,
            l.compute_slices_used,
            r.gpu.compute_slices,
            bytes(l.waste_bytes)
        );
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        t.set_header(vec!["service", "profile", "start:size", "need", "slice", "waste", "SM share", "mem-BW share"]);
        for i in &l.instances {
            let profile = shown(&i.profile);
            let name = if i.confirmed { profile.into_owned() } else { format!("{profile} (unconfirmed)") };
            t.add_row(vec![
                Cell::new(&i.service),
                Cell::new(name),
                Cell::new(format!("{}:{}", i.start, i.size)),
                Cell::new(bytes(i.need_bytes)).set_alignment(CellAlignment::Right),
                Cell::new(bytes(i.slice_bytes)).set_alignment(CellAlignment::Right),
                Cell::new(bytes(i.waste_bytes)).set_alignment(CellAlignment::Right),
                Cell::new(pct(i.throughput.compute_share)).set_alignment(CellAlignment::Right),
                Cell::new(pct(i.throughput.memory_bandwidth_share)).set_alignment(CellAlignment::Right),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    if !r.layouts.is_empty() {
        let _ = writeln!(
            out,
            "\ntotal: need {}, slices {}, waste {}",
            bytes(r.total_need_bytes),
            bytes(r.total_slice_bytes),
            bytes(r.total_waste_bytes)
        );
    }
    if let Some(m) = r.max_gpus.filter(|&m| r.gpus_needed > m) {
        let _ = writeln!(out, "\ndoes not fit: the plan needs {} GPU(s), {m} available (--max-gpus)", r.gpus_needed);
    }
    if !r.refused.is_empty() {
        let _ = writeln!(out, "\nrefused:");
        for f in &r.refused {
            let _ = writeln!(out, "  {}: {}", shown(&f.service), shown(&f.reason));
        }
    }
    if !r.advice.is_empty() {
        let _ = writeln!(out, "\nadvice:");
        for a in &r.advice {
            let _ = writeln!(out, "  - {}", shown(&a.text));
        }
    }
    let _ = writeln!(out, "\nthroughput: {}", r.throughput_assumption);
    fit_lines(&out, width)
}

/// Human table of a profile list.
pub fn render_profiles(r: &MigProfilesReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "MIG profiles of {} ({}): {} memory slices, {} compute slices; whole card {}",
        r.gpu.name,
        r.gpu.id,
        r.gpu.memory_slices,
        r.gpu.compute_slices,
        bytes(r.gpu.whole_card_bytes)
    );
    let _ = writeln!(out, "source: {}", shown(&r.gpu.source));
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(vec!["profile", "ID", "compute", "memory slices", "max", "starts", "memory", "SMs", "confirmed"]);
    for p in &r.profiles {
        let starts: Vec<String> = p.starts.iter().map(|s| s.to_string()).collect();
        t.add_row(vec![
            Cell::new(shown(&p.name)),
            Cell::new(p.id.map(|i| i.to_string()).unwrap_or_else(|| "-".into())),
            Cell::new(p.compute_slices),
            Cell::new(p.memory_slices),
            Cell::new(p.max_instances),
            Cell::new(format!("{{{}}}", starts.join(","))),
            Cell::new(bytes(p.memory_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(p.sm_count.map(|s| s.to_string()).unwrap_or_else(|| "?".into())),
            Cell::new(if p.confirmed { "yes" } else { "no" }),
        ]);
    }
    let _ = writeln!(out, "{t}");
    let notes: Vec<&ProfileInfo> = r.profiles.iter().filter(|p| !p.confirmed && p.note.is_some()).collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "unconfirmed:");
        for p in notes {
            let _ = writeln!(out, "  {}: {}", shown(&p.name), shown(p.note.as_deref().unwrap_or("")));
        }
    }
    out
}

fn yaml_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// An NVIDIA mig-parted config (`version: v1`, `mig-configs`) for a plan:
/// one device selector per planned card, `mig-devices` as profile counts,
/// and the host's other cards (`--max-gpus`: the cards the host has) with
/// MIG disabled — mig-parted's `assert` fails on a GPU no entry selects.
/// Apply with `nvidia-mig-parted apply -f <file> -c <config_name>`.
pub fn render_mig_parted(r: &MigPlanReport, config_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# generated by vramfit mig plan for {} ({})", r.gpu.name, r.gpu.id);
    let _ = writeln!(out, "# mig-parted chooses the placements itself; the counts below are the plan's");
    let _ = writeln!(out, "version: v1");
    let _ = writeln!(out, "mig-configs:");
    let _ = writeln!(out, "  {}:", yaml_quote(config_name));
    if r.layouts.is_empty() {
        let _ = writeln!(out, "    - devices: all");
        let _ = writeln!(out, "      mig-enabled: false");
    }
    for l in &r.layouts {
        let _ = writeln!(out, "    - devices: [{}]", l.index);
        if !r.gpu.pci_device_ids.is_empty() {
            let ids: Vec<String> = r.gpu.pci_device_ids.iter().map(|d| yaml_quote(d)).collect();
            let _ = writeln!(out, "      device-filter: [{}]", ids.join(", "));
        }
        let _ = writeln!(out, "      mig-enabled: true");
        let mut counts: Vec<(String, usize)> = Vec::new();
        for i in &l.instances {
            match counts.iter_mut().find(|(n, _)| *n == i.profile) {
                Some((_, c)) => *c += 1,
                None => counts.push((i.profile.clone(), 1)),
            }
        }
        if counts.is_empty() {
            let _ = writeln!(out, "      mig-devices: {{}}");
        } else {
            let _ = writeln!(out, "      mig-devices:");
            for (n, c) in counts {
                let _ = writeln!(out, "        {}: {c}", yaml_quote(&n));
            }
        }
    }
    let planned: Vec<usize> = r.layouts.iter().map(|l| l.index).collect();
    match r.max_gpus {
        Some(host) if !r.layouts.is_empty() => {
            let rest: Vec<String> = (0..host).filter(|g| !planned.contains(g)).map(|g| g.to_string()).collect();
            if !rest.is_empty() {
                let _ = writeln!(out, "    - devices: [{}]", rest.join(", "));
                let _ = writeln!(out, "      mig-enabled: false");
            }
        }
        None if !r.layouts.is_empty() => {
            out.insert_str(
                0,
                "# every GPU of the host must be selected (mig-parted assert fails otherwise): give --max-gpus N,\n# the host's GPU count, to disable MIG on the cards the plan does not use\n",
            );
        }
        _ => {}
    }
    out
}

/// `--explain`: for every service, where its need comes from, which
/// profiles were large enough, what was chosen and the arithmetic of waste
/// and throughput share.
pub fn render_explain(r: &MigPlanReport, profiles: &[ProfileInfo], width: Width) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\nexplain:");
    let _ = writeln!(
        out,
        "  objective: fewest GPUs, then least waste (sum of slice - need), then fewest compute slices; \
         exact search, {} nodes",
        r.search.nodes
    );
    for s in &r.services {
        let _ = writeln!(
            out,
            "  {}: need {} ({} bytes): {}",
            shown(&s.name),
            bytes(s.need_bytes),
            s.need_bytes,
            shown(&s.sized_by)
        );
        let big: Vec<String> = profiles
            .iter()
            .filter(|p| !p.special && p.memory_bytes >= s.need_bytes)
            .map(|p| format!("{} {}", shown(&p.name), bytes(p.memory_bytes)))
            .collect();
        let small: Vec<&str> =
            profiles.iter().filter(|p| !p.special && p.memory_bytes < s.need_bytes).map(|p| p.name.as_str()).collect();
        let _ = writeln!(
            out,
            "    large enough: {}{}",
            if big.is_empty() { "none".to_string() } else { big.join(", ") },
            if small.is_empty() { String::new() } else { format!("; too small: {}", small.join(", ")) }
        );
        let inst = r
            .layouts
            .iter()
            .flat_map(|l| l.instances.iter().map(move |i| (l.index, i)))
            .find(|(_, i)| i.service == s.name);
        match inst {
            Some((g, i)) => {
                let _ = writeln!(
                    out,
                    "    chosen: GPU {g} {} at {}:{}; waste = {} - {} = {} ({} - {} = {} bytes)",
                    shown(&i.profile),
                    i.start,
                    i.size,
                    bytes(i.slice_bytes),
                    bytes(i.need_bytes),
                    bytes(i.waste_bytes),
                    i.slice_bytes,
                    i.need_bytes,
                    i.waste_bytes
                );
                let _ = writeln!(
                    out,
                    "    compute share {:.4} ({}); memory-bandwidth share {}/{} = {:.4}",
                    i.throughput.compute_share,
                    i.throughput.basis,
                    i.size,
                    r.gpu.memory_slices,
                    i.throughput.memory_bandwidth_share
                );
            }
            None => {
                let why = r.refused.iter().find(|f| f.service == s.name).map(|f| f.reason.as_str()).unwrap_or("");
                let _ = writeln!(out, "    refused: {}", shown(why));
            }
        }
    }
    fit_lines(&out, width)
}
