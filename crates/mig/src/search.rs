//! Exact search: which MIG instances to create, on how many cards, for a set
//! of services.
//!
//! Objective, lexicographic: (1) fewest GPUs; (2) least wasted memory, where
//! the waste of an instance is its memory minus what its service needs;
//! (3) fewest compute slices used (leaves the most room for later
//! services: a 12 GiB service on A100-40GB takes 3g.20gb, not 4g.20gb,
//! which has the same memory).
//!
//! Method: iterative deepening on the GPU count from a lower bound, and for
//! each count a depth-first branch and bound over (card, profile) for every
//! service, largest need first. Every card's profile multiset is checked
//! with [`find_placement`], so every layout returned satisfies
//! [`check_layout`]. The bounds are admissible (the least waste, compute and
//! memory slices each remaining service could take), and the only symmetry
//! cuts are "a new card is the lowest unused one" and "identical services
//! take their (card, profile) in non-decreasing order", so the result is the
//! optimum, not a greedy guess. A transposition table skips a search state
//! (depth, ordering constraint, every card's profile counts) reached again
//! at no lower cost: the rest of the search depends on nothing else. A node budget turns a pathological input
//! into an error instead of a hang.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::MigError;
use crate::model::{find_placement, MigGpu, Placed};

/// At most this many services per plan (eight full 7-way cards and then some).
pub const MAX_SERVICES: usize = 64;
/// Node budget of the branch and bound.
pub const MAX_NODES: u64 = 20_000_000;
/// Entries kept in the transposition table (beyond it, states are simply not remembered).
pub const MAX_SEEN: usize = 2_000_000;
/// Training a model of this many parameters or more is refused on MIG: it
/// wants whole cards (and NVLink between them), not a slice. (Issue 6:
/// "13B+ training".)
pub const LARGE_TRAINING_PARAMS: u64 = 13_000_000_000;
/// When a profile's SM count is unknown: fraction of the card's SMs that MIG
/// mode exposes in its 7 compute slices. Measured on A100: the 7g profile has
/// 98 SMs, the whole card 108 (MIG user guide / `-lgip`), so seven 1g slices
/// together give ~91 % of the card, not 100 %.
pub const ASSUMED_MIG_SM_NUMERATOR: u32 = 98;
pub const ASSUMED_MIG_SM_DENOMINATOR: u32 = 108;

/// What a service does on its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ServiceKind {
    #[default]
    Inference,
    Training,
}

/// One service to place: a name and the bytes it needs on its GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    pub name: String,
    pub need_bytes: u64,
    pub kind: ServiceKind,
    /// parameter count, when the service is a known model (for the 13B+ training rule)
    pub params: Option<u64>,
}

/// Expected share of the whole card's compute throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// SM share of the whole card (0..1)
    pub compute_share: f64,
    /// memory-slice share (memory bandwidth and L2 come with memory slices): what bounds decode
    pub memory_bandwidth_share: f64,
    /// how `compute_share` was obtained (`throughput_basis` in an instance's JSON)
    #[serde(rename = "throughput_basis")]
    pub basis: String,
}

/// One instance in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub service: String,
    pub profile: String,
    pub profile_id: Option<u32>,
    /// placement start on the memory-slice axis
    pub start: u8,
    /// memory slices taken
    pub size: u8,
    pub compute_slices: u8,
    pub need_bytes: u64,
    pub slice_bytes: u64,
    pub waste_bytes: u64,
    /// written as the instance's own fields (docs/mig.md)
    #[serde(flatten)]
    pub throughput: Throughput,
    pub confirmed: bool,
}

/// One card of a plan. `instances` is in a safe creation order (largest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuLayout {
    /// the card's index in the plan (0-based; mig-parted `devices`)
    #[serde(rename = "gpu")]
    pub index: usize,
    pub memory_slices_used: u8,
    pub compute_slices_used: u8,
    pub waste_bytes: u64,
    pub instances: Vec<Instance>,
}

/// A service the plan will not put on MIG, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// An inference service larger than the largest instance.
    TooLarge { service: String, need_bytes: u64, largest_profile: String, largest_bytes: u64 },
    /// A training job larger than the largest instance would have to span
    /// instances, and MIG instances have no NVLink/P2P between them.
    TrainingAcrossInstances { service: String, need_bytes: u64, largest_profile: String, largest_bytes: u64 },
    /// Training a 13B+ model: a whole card (or several with NVLink) is the better buy.
    LargeTraining { service: String, params: u64 },
}

impl Refusal {
    pub fn service(&self) -> &str {
        match self {
            Refusal::TooLarge { service, .. }
            | Refusal::TrainingAcrossInstances { service, .. }
            | Refusal::LargeTraining { service, .. } => service,
        }
    }

    /// One sentence: why.
    pub fn reason(&self) -> String {
        match self {
            Refusal::TooLarge { need_bytes, largest_profile, largest_bytes, .. } => format!(
                "needs {} but the largest instance ({largest_profile}) has {}; a service cannot span MIG instances \
                 (no NVLink/P2P between instances): use whole cards",
                gib(*need_bytes),
                gib(*largest_bytes)
            ),
            Refusal::TrainingAcrossInstances { need_bytes, largest_profile, largest_bytes, .. } => format!(
                "training needs {} but the largest instance ({largest_profile}) has {}; training across MIG \
                 instances is impossible: there is no NVLink/P2P between instances, so NCCL cannot join them. \
                 Use whole cards",
                gib(*need_bytes),
                gib(*largest_bytes)
            ),
            Refusal::LargeTraining { params, .. } => format!(
                "training a {:.1}B-parameter model: a whole card (or several joined by NVLink) is the better buy; \
                 MIG slices suit inference and small jobs",
                *params as f64 / 1e9
            ),
        }
    }
}

/// Advice attached to a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Advice {
    /// Only one service: MIG buys nothing, and the full card has more SMs than its largest instance.
    OneUser { service: String, full_profile: String, full_profile_share: f64 },
    /// Some instances use profiles whose figures are not confirmed by a source.
    UnconfirmedProfiles { profiles: Vec<String> },
    /// A card holds a 4g and a 3g instance: needs driver R510 or later.
    FourPlusThreeNeedsR510 { gpu: usize },
    /// Training inside one instance is possible, but it cannot grow across instances.
    TrainingInOneInstance { service: String },
}

impl Advice {
    pub fn text(&self) -> String {
        match self {
            Advice::OneUser { service, full_profile, full_profile_share } => format!(
                "only one service ({service}): a whole card is the better buy; MIG isolates users, and with one user \
                 it only costs capacity (even {full_profile} gives {:.0}% of the card's SMs)",
                full_profile_share * 100.0
            ),
            Advice::UnconfirmedProfiles { profiles } => format!(
                "unconfirmed profile figures used ({}): check them with `nvidia-smi mig -lgip` and pass --lgip",
                profiles.join(", ")
            ),
            Advice::FourPlusThreeNeedsR510 { gpu } => {
                format!("GPU {gpu}: a 4g and a 3g instance together need driver R510 or later")
            }
            Advice::TrainingInOneInstance { service } => format!(
                "{service}: training fits one instance; it cannot use a second one later (no NVLink/P2P between \
                 MIG instances)"
            ),
        }
    }
}

/// Search statistics, for `--explain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchStats {
    pub nodes: u64,
    pub lower_bound_gpus: usize,
}

/// The result of [`plan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub gpu_id: String,
    pub gpu_name: String,
    pub gpus: usize,
    pub layouts: Vec<GpuLayout>,
    pub total_need_bytes: u64,
    /// memory of the instances created (Σ their profiles' memory)
    pub total_slice_bytes: u64,
    pub total_waste_bytes: u64,
    pub refused: Vec<Refusal>,
    pub advice: Vec<Advice>,
    pub search: SearchStats,
}

impl Plan {
    /// Every service got an instance, on no more than `max_gpus` cards when
    /// that many are available.
    pub fn fits(&self, max_gpus: Option<usize>) -> bool {
        self.refused.is_empty() && max_gpus.is_none_or(|m| self.gpus <= m)
    }
}

/// How the throughput share of an instance is computed (printed with every plan).
pub const THROUGHPUT_ASSUMPTION: &str = "compute share = the instance's SMs / the whole card's SMs (from the profile \
table; where unknown, compute slices / 7 x 98/108, the A100 ratio). Seven 1g slices together are well under the whole \
card (A100: 7 x 14 = 98 of 108 SMs = 91%; H100 SXM: 7 x 16 = 112 of 132 = 85%). Memory-bandwidth share = memory \
slices / 8: LLM decode is usually bound by it. Instances share nothing else, so one service cannot slow another, \
except through the shared PCIe link and power budget.";

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Throughput share of one instance (see [`Throughput`]).
pub fn throughput(gpu: &MigGpu, profile: usize) -> Throughput {
    let p = &gpu.profiles[profile];
    let memory_bandwidth_share = p.memory_slices as f64 / gpu.memory_slices as f64;
    match (p.sm_count, gpu.full_card_sms) {
        (Some(sm), Some(full)) if full > 0 => Throughput {
            compute_share: sm as f64 / full as f64,
            memory_bandwidth_share,
            basis: format!("{sm} of the card's {full} SMs"),
        },
        _ => Throughput {
            compute_share: p.compute_slices as f64 / gpu.compute_slices as f64 * ASSUMED_MIG_SM_NUMERATOR as f64
                / ASSUMED_MIG_SM_DENOMINATOR as f64,
            memory_bandwidth_share,
            basis: format!(
                "assumed: {}/{} of the SMs MIG exposes, which are {ASSUMED_MIG_SM_NUMERATOR}/{ASSUMED_MIG_SM_DENOMINATOR} \
                 of the card (the A100 ratio); SM count not known for this profile",
                p.compute_slices, gpu.compute_slices
            ),
        },
    }
}

/// Best complete assignment so far: (waste, compute slices, (card, profile) per item).
type Best = (u64, u32, Vec<(usize, usize)>);

struct Item {
    orig: usize,
    /// candidate profiles, least waste first
    cands: Vec<usize>,
    same_as_prev: bool,
}

struct Search<'a> {
    gpu: &'a MigGpu,
    items: Vec<Item>,
    need: Vec<u64>,
    suffix_waste: Vec<u64>,
    suffix_compute: Vec<u32>,
    suffix_mem: Vec<u32>,
    memo: HashMap<Vec<u8>, bool>,
    /// transposition table: (depth, ordering constraint, card states) → best (waste, compute) reached there
    seen: HashMap<Vec<u8>, (u64, u32)>,
    nodes: u64,
    k: usize,
    best: Option<Best>,
    overflow: bool,
}

impl Search<'_> {
    fn feasible(&mut self, counts: &[u8]) -> bool {
        if let Some(&v) = self.memo.get(counts) {
            return v;
        }
        let list: Vec<usize> =
            counts.iter().enumerate().flat_map(|(p, &c)| std::iter::repeat_n(p, c as usize)).collect();
        let v = find_placement(self.gpu, &list).is_some();
        self.memo.insert(counts.to_vec(), v);
        v
    }

    fn waste(&self, item: usize, profile: usize) -> u64 {
        self.gpu.profiles[profile].memory_bytes - self.need[item]
    }

    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &mut self,
        i: usize,
        state: &mut Vec<Vec<u8>>,
        used_mem: &mut Vec<u32>,
        used_gpus: usize,
        waste: u64,
        compute: u32,
        assign: &mut Vec<(usize, usize)>,
    ) {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.overflow = true;
        }
        if self.overflow {
            return;
        }
        if i == self.items.len() {
            let better = match &self.best {
                None => true,
                Some((bw, bc, _)) => (waste, compute) < (*bw, *bc),
            };
            if better {
                self.best = Some((waste, compute, assign.clone()));
            }
            return;
        }
        let lb = (waste.saturating_add(self.suffix_waste[i]), compute + self.suffix_compute[i]);
        if let Some((bw, bc, _)) = &self.best {
            if lb >= (*bw, *bc) {
                return;
            }
        }
        let free_mem: u32 =
            (0..self.k).map(|g| self.gpu.memory_slices as u32 - used_mem.get(g).copied().unwrap_or(0)).sum();
        if self.suffix_mem[i] > free_mem {
            return;
        }
        let used_compute: u32 = state
            .iter()
            .map(|c| {
                c.iter().enumerate().map(|(p, &n)| n as u32 * self.gpu.profiles[p].compute_slices as u32).sum::<u32>()
            })
            .sum();
        if self.suffix_compute[i] > self.k as u32 * self.gpu.compute_slices as u32 - used_compute {
            return;
        }
        let (min_g, min_c) = if self.items[i].same_as_prev {
            let (g, p) = assign[i - 1];
            let c = self.items[i].cands.iter().position(|&q| q == p).unwrap_or(0);
            (g, c)
        } else {
            (0, 0)
        };
        // The rest of the search depends only on (i, the ordering constraint, the
        // card states): if this point was reached before at no higher cost, its
        // subtree has been explored already.
        let mut key = Vec::with_capacity(6 + state.len() * self.gpu.profiles.len());
        key.extend_from_slice(&(i as u16).to_le_bytes());
        key.extend_from_slice(&(min_g as u16).to_le_bytes());
        key.extend_from_slice(&(min_c as u16).to_le_bytes());
        for c in state.iter() {
            key.extend_from_slice(c);
        }
        let room = self.seen.len() < MAX_SEEN;
        match self.seen.get_mut(&key) {
            Some(prev) if *prev <= (waste, compute) => return,
            Some(prev) => *prev = (waste, compute),
            None if room => {
                self.seen.insert(key, (waste, compute));
            }
            None => {}
        }
        let max_g = (used_gpus + 1).min(self.k);
        for g in min_g..max_g {
            let cands = self.items[i].cands.clone();
            for (ci, &p) in cands.iter().enumerate() {
                if g == min_g && ci < min_c {
                    continue;
                }
                state[g][p] += 1;
                if self.feasible(&state[g]) {
                    let ms = self.gpu.profiles[p].memory_slices as u32;
                    used_mem[g] += ms;
                    assign.push((g, p));
                    let w = waste + self.waste(i, p);
                    let c = compute + self.gpu.profiles[p].compute_slices as u32;
                    self.dfs(i + 1, state, used_mem, used_gpus.max(g + 1), w, c, assign);
                    assign.pop();
                    used_mem[g] -= ms;
                }
                state[g][p] -= 1;
            }
        }
    }
}

/// Services must have a name, a need, and distinct names.
fn validate_services(services: &[Service]) -> Result<(), MigError> {
    if services.len() > MAX_SERVICES {
        return Err(MigError::TooManyServices { count: services.len(), max: MAX_SERVICES });
    }
    for (i, s) in services.iter().enumerate() {
        if s.name.trim().is_empty() {
            return Err(MigError::BadService { service: format!("#{}", i + 1), reason: "empty name".into() });
        }
        if s.need_bytes == 0 {
            return Err(MigError::BadService { service: s.name.clone(), reason: "needs 0 bytes".into() });
        }
        if services[..i].iter().any(|o| o.name == s.name) {
            return Err(MigError::BadService { service: s.name.clone(), reason: "name given twice".into() });
        }
    }
    Ok(())
}

/// Each service's candidate profiles (large enough and placeable, least
/// waste first), or the reason it is refused.
fn candidates(gpu: &MigGpu, services: &[Service], usable: &[usize]) -> (Vec<Item>, Vec<Refusal>) {
    // Largest automatically usable profile (for refusal messages).
    let largest =
        usable.iter().copied().max_by_key(|&p| (gpu.profiles[p].memory_bytes, gpu.profiles[p].compute_slices));
    let mut refused = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    for (i, s) in services.iter().enumerate() {
        if s.kind == ServiceKind::Training {
            if let Some(params) = s.params.filter(|&p| p >= LARGE_TRAINING_PARAMS) {
                refused.push(Refusal::LargeTraining { service: s.name.clone(), params });
                continue;
            }
        }
        let mut cands: Vec<usize> = usable
            .iter()
            .copied()
            .filter(|&p| gpu.profiles[p].memory_bytes >= s.need_bytes && find_placement(gpu, &[p]).is_some())
            .collect();
        cands.sort_by_key(|&p| (gpu.profiles[p].memory_bytes, gpu.profiles[p].compute_slices, p));
        if cands.is_empty() {
            let (lp, lb) = largest
                .map(|p| (gpu.profiles[p].name.clone(), gpu.profiles[p].memory_bytes))
                .unwrap_or_else(|| ("none".into(), 0));
            let (service, need_bytes) = (s.name.clone(), s.need_bytes);
            refused.push(match s.kind {
                ServiceKind::Training => {
                    Refusal::TrainingAcrossInstances { service, need_bytes, largest_profile: lp, largest_bytes: lb }
                }
                ServiceKind::Inference => {
                    Refusal::TooLarge { service, need_bytes, largest_profile: lp, largest_bytes: lb }
                }
            });
            continue;
        }
        items.push(Item { orig: i, cands, same_as_prev: false });
    }
    // Largest need first; identical services adjacent.
    items.sort_by(|a, b| {
        let (sa, sb) = (&services[a.orig], &services[b.orig]);
        sb.need_bytes.cmp(&sa.need_bytes).then(a.cands.cmp(&b.cands)).then(a.orig.cmp(&b.orig))
    });
    for j in 1..items.len() {
        let same = items[j].cands == items[j - 1].cands
            && services[items[j].orig].need_bytes == services[items[j - 1].orig].need_bytes;
        items[j].same_as_prev = same;
    }
    (items, refused)
}

/// The search state with its admissible bounds: per item from the end, the
/// least waste, compute and memory slices the remaining services can take.
fn search_for<'a>(gpu: &'a MigGpu, services: &[Service], items: Vec<Item>) -> (Search<'a>, usize) {
    let need: Vec<u64> = items.iter().map(|it| services[it.orig].need_bytes).collect();
    let n = items.len();
    let mut suffix_waste = vec![0u64; n + 1];
    let mut suffix_compute = vec![0u32; n + 1];
    let mut suffix_mem = vec![0u32; n + 1];
    for j in (0..n).rev() {
        let it = &items[j];
        let mw = it.cands.iter().map(|&p| gpu.profiles[p].memory_bytes - need[j]).min().unwrap_or(0);
        let mc = it.cands.iter().map(|&p| gpu.profiles[p].compute_slices as u32).min().unwrap_or(0);
        let mm = it.cands.iter().map(|&p| gpu.profiles[p].memory_slices as u32).min().unwrap_or(0);
        suffix_waste[j] = suffix_waste[j + 1].saturating_add(mw);
        suffix_compute[j] = suffix_compute[j + 1] + mc;
        suffix_mem[j] = suffix_mem[j + 1] + mm;
    }
    let lb_mem = (suffix_mem[0] as usize).div_ceil(gpu.memory_slices as usize);
    let lb_compute = (suffix_compute[0] as usize).div_ceil(gpu.compute_slices as usize);
    let lower_bound = if n == 0 { 0 } else { lb_mem.max(lb_compute).max(1) };
    let search = Search {
        gpu,
        items,
        need,
        suffix_waste,
        suffix_compute,
        suffix_mem,
        memo: HashMap::new(),
        seen: HashMap::new(),
        nodes: 0,
        k: 0,
        best: None,
        overflow: false,
    };
    (search, lower_bound)
}

/// Iterative deepening on the card count from the lower bound: the first
/// count with a complete assignment is the fewest GPUs.
fn assign(search: &mut Search, lower_bound: usize) -> Result<Vec<(usize, usize)>, MigError> {
    let n = search.items.len();
    let profiles = search.gpu.profiles.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    for k in lower_bound..=n {
        search.k = k;
        search.seen.clear();
        let mut state = vec![vec![0u8; profiles]; k];
        let mut used_mem = vec![0u32; k];
        let mut chosen = Vec::with_capacity(n);
        search.dfs(0, &mut state, &mut used_mem, 0, 0, 0, &mut chosen);
        if search.overflow {
            return Err(MigError::SearchTooLarge { nodes: search.nodes });
        }
        if let Some((_, _, a)) = search.best.take() {
            return Ok(a);
        }
    }
    Ok(Vec::new())
}

/// One card's instances from the assignment, in a safe creation order.
fn layout_of(gpu: &MigGpu, services: &[Service], items: &[Item], assignment: &[(usize, usize)], g: usize) -> GpuLayout {
    let members: Vec<usize> = (0..assignment.len()).filter(|&j| assignment[j].0 == g).collect();
    let profiles: Vec<usize> = members.iter().map(|&j| assignment[j].1).collect();
    let placed: Vec<Placed> = find_placement(gpu, &profiles).unwrap_or_default();
    let mut pool: Vec<usize> = members;
    let mut instances = Vec::with_capacity(placed.len());
    let (mut mem_used, mut comp_used, mut waste_g) = (0u8, 0u8, 0u64);
    for pl in &placed {
        // The service with the largest need among those on this profile goes first.
        let Some(pos) = pool.iter().position(|&j| assignment[j].1 == pl.profile) else { continue };
        let j = pool.remove(pos);
        let s = &services[items[j].orig];
        let p = &gpu.profiles[pl.profile];
        let waste = p.memory_bytes - s.need_bytes;
        mem_used += p.memory_slices;
        comp_used += p.compute_slices;
        waste_g += waste;
        instances.push(Instance {
            service: s.name.clone(),
            profile: p.name.clone(),
            profile_id: p.id,
            start: pl.start,
            size: p.memory_slices,
            compute_slices: p.compute_slices,
            need_bytes: s.need_bytes,
            slice_bytes: p.memory_bytes,
            waste_bytes: waste,
            throughput: throughput(gpu, pl.profile),
            confirmed: p.confirmed,
        });
    }
    GpuLayout {
        index: g,
        instances,
        memory_slices_used: mem_used,
        compute_slices_used: comp_used,
        waste_bytes: waste_g,
    }
}

/// Advice on a plan: one user, 4g + 3g on one card, training, unconfirmed figures.
fn advice(
    gpu: &MigGpu,
    services: &[Service],
    items: &[Item],
    layouts: &[GpuLayout],
    usable: &[usize],
    one_user: bool,
) -> Vec<Advice> {
    let mut advice = Vec::new();
    if one_user {
        let full =
            usable.iter().copied().max_by_key(|&p| (gpu.profiles[p].compute_slices, gpu.profiles[p].memory_bytes));
        if let Some(fp) = full {
            advice.push(Advice::OneUser {
                service: services[items[0].orig].name.clone(),
                full_profile: gpu.profiles[fp].name.clone(),
                full_profile_share: throughput(gpu, fp).compute_share,
            });
        }
    }
    for l in layouts {
        let has = |c: u8| l.instances.iter().any(|i| i.compute_slices == c && i.size * 2 == gpu.memory_slices);
        if gpu.memory_slices == 8 && has(4) && has(3) {
            advice.push(Advice::FourPlusThreeNeedsR510 { gpu: l.index });
        }
    }
    for it in items {
        let s = &services[it.orig];
        if s.kind == ServiceKind::Training {
            advice.push(Advice::TrainingInOneInstance { service: s.name.clone() });
        }
    }
    let mut unconfirmed: Vec<String> = Vec::new();
    for i in layouts.iter().flat_map(|l| &l.instances) {
        if !i.confirmed && !unconfirmed.contains(&i.profile) {
            unconfirmed.push(i.profile.clone());
        }
    }
    if !unconfirmed.is_empty() {
        advice.push(Advice::UnconfirmedProfiles { profiles: unconfirmed });
    }
    advice
}

/// Plan MIG instances for `services` on cards of type `gpu` (see module doc).
pub fn plan(gpu: &MigGpu, services: &[Service]) -> Result<Plan, MigError> {
    gpu.validate()?;
    validate_services(services)?;
    let usable: Vec<usize> = (0..gpu.profiles.len()).filter(|&p| !gpu.profiles[p].special).collect();
    let (items, refused) = candidates(gpu, services, &usable);
    let (mut search, lower_bound) = search_for(gpu, services, items);
    let assignment = assign(&mut search, lower_bound)?;
    let gpus = assignment.iter().map(|&(g, _)| g + 1).max().unwrap_or(0);
    let layouts: Vec<GpuLayout> = (0..gpus).map(|g| layout_of(gpu, services, &search.items, &assignment, g)).collect();
    let total_waste = layouts.iter().fold(0u64, |a, l| a.saturating_add(l.waste_bytes));
    let instances = || layouts.iter().flat_map(|l| &l.instances);
    let total_need = instances().fold(0u64, |a, i| a.saturating_add(i.need_bytes));
    let total_slice = instances().fold(0u64, |a, i| a.saturating_add(i.slice_bytes));
    let one_user = search.items.len() == 1 && refused.is_empty();
    let advice = advice(gpu, services, &search.items, &layouts, &usable, one_user);
    Ok(Plan {
        gpu_id: gpu.id.clone(),
        gpu_name: gpu.name.clone(),
        gpus,
        layouts,
        total_need_bytes: total_need,
        total_slice_bytes: total_slice,
        total_waste_bytes: total_waste,
        refused,
        advice,
        search: SearchStats { nodes: search.nodes, lower_bound_gpus: lower_bound },
    })
}
