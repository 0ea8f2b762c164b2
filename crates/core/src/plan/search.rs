//! The search: every offer × card count × software setup, scored for fit,
//! time and money.
//!
//! Memory depends only on the software setup and its split over GPUs
//! (method, precision, optimizer, checkpointing, micro-batch, GPU count,
//! TP/PP/ZeRO/offload), never on the offer or its price. So each distinct
//! setup ([`MemKey`]) is estimated once with [`crate::estimate()`] and its
//! hardware-independent work ([`TrainWork`]/[`InferWork`]) derived once;
//! each candidate (setup × offer × count) then costs a few multiplications.
//! Setups are visited from the smallest footprint up (full checkpointing,
//! smallest micro-batch first) so a group that cannot fit the largest card
//! is abandoned after one estimate.

use super::pricing::{Offer, PriceBook, PriceRange, Term};
use super::report::model_states;
use super::time::{Device, InferTime, InferWork, StepTime, TimeModel, TrainWork};
use super::{Allow, Job};
use crate::dtype::DType;
use crate::error::CoreError;
use crate::estimate::estimate;
use crate::hardware::{GpuSpec, Link};
use crate::ledger::{Category, Ledger};
use crate::model::ModelSpec;
use crate::quant::QuantSpec;
use crate::train::{Checkpointing, Optimizer, Precision, TrainKind, TrainSetup};
use crate::units::div_ceil;
use crate::workload::{defaults, Offload, Parallelism, Sharding, Task, Workload};
use std::collections::HashMap;

/// Largest GPU count searched (covers 8 machines of 8).
pub const MAX_SEARCH_GPUS: u64 = 64;

/// Identity of a memory configuration: everything the estimate depends on
/// besides the model and runtime constants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemKey {
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    pub sharding: Sharding,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    pub train: Option<TrainKey>,
    pub infer: Option<InferKey>,
}

impl std::hash::Hash for MemKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let off = |o: Offload| match o {
            Offload::None => 0u8,
            Offload::Cpu => 1,
            Offload::Nvme => 2,
        };
        (self.gpus, self.tp, self.pp, self.sharding.stage(), off(self.offload_optimizer), off(self.offload_params))
            .hash(h);
        self.train.hash(h);
        self.infer.hash(h);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrainKey {
    pub kind: TrainKind,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub checkpointing: Checkpointing,
    pub micro_batch: u64,
    pub grad_accum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InferKey {
    /// weight quantization bits applied by the planner (None: as the user gave)
    pub quant_bits: Option<u64>,
    pub kv_dtype: DType,
}

/// The part of a ledger the search needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemSummary {
    pub total: u64,
    pub tensor_peak: u64,
    pub weights: u64,
    pub kv: u64,
    pub model_states: u64,
    /// host RAM for offloaded state, the whole job (`Ledger::cpu_bytes`)
    pub cpu: u64,
    pub params_total: u64,
    pub params_active: u64,
    pub params_trainable: u64,
}

impl MemSummary {
    pub fn of(l: &Ledger) -> Result<MemSummary, CoreError> {
        Ok(MemSummary {
            total: l.total_bytes(),
            tensor_peak: l.tensor_peak_bytes(),
            weights: l.bytes(Category::Weights),
            kv: l.bytes(Category::KvCache),
            model_states: model_states(l)?,
            cpu: l.cpu_bytes,
            params_total: l.params_total,
            params_active: l.params_active,
            params_trainable: l.params_trainable,
        })
    }
}

/// Hardware-independent work of a setup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Train(TrainWork),
    Infer(InferWork),
}

/// One estimated setup.
#[derive(Debug, Clone)]
pub struct MemEntry {
    pub key: MemKey,
    pub workload: Workload,
    /// None: the estimator refused this setup (e.g. TP not dividing the heads)
    pub mem: Option<MemSummary>,
    pub work: Option<Work>,
    /// switches that change what is computed (method, optimizer, precision,
    /// quantization) against the user's job: ties prefer fewer
    pub inexact: u8,
}

/// A scored candidate (only fitting ones are kept).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub mem: u32,
    pub offer: u32,
    pub gpus: u64,
    pub machines: u64,
    /// index into the price book's upgrades (RAM for offload)
    pub upgrade: Option<u32>,
    pub step: StepTime,
    pub infer: InferTime,
    /// trained or generated tokens per second
    pub tokens_per_s: f64,
    pub monthly: Option<PriceRange>,
    pub hourly: Option<PriceRange>,
    pub hourly_prorated: bool,
    pub job_hours: Option<f64>,
    pub job_tokens: Option<f64>,
    pub job_cost: Option<PriceRange>,
    pub slowdown: f64,
    /// the offer lists no RAM but the setup needs host memory
    pub ram_unchecked: bool,
}

impl Scored {
    /// Ranking key inside a currency: job cost when there is a job, else monthly price.
    pub fn cost_key(&self) -> f64 {
        match (self.job_cost, self.monthly, self.hourly) {
            (Some(c), _, _) => c.low,
            (None, Some(m), _) => m.low,
            (None, None, Some(h)) => h.low * super::pricing::HOURS_PER_MONTH,
            _ => f64::INFINITY,
        }
    }
}

/// The search state: inputs, the memo, the scored candidates.
pub struct Search<'a> {
    pub model: &'a ModelSpec,
    pub base: &'a Workload,
    pub gpus: &'a [GpuSpec],
    pub book: &'a PriceBook,
    pub time: &'a TimeModel,
    pub job: Job,
    pub allow: Allow,
    pub entries: Vec<MemEntry>,
    index: HashMap<MemKey, u32>,
    /// GPU spec of each offer (None: the offer names an unknown GPU)
    offer_gpu: Vec<Option<usize>>,
    pub scored: Vec<Scored>,
    /// candidates evaluated (fitting or not)
    pub evaluated: u64,
    /// distinct memory configurations estimated
    pub estimated: u64,
}

/// Global batch (sequences per optimizer step) of the user's job.
pub fn global_batch(t: &TrainSetup, par: &Parallelism) -> u64 {
    t.batch.max(1).saturating_mul(t.grad_accum.max(1)).saturating_mul(par.dp().max(1))
}

fn powers_of_two_upto(n: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut p = 1;
    while p <= n && p <= MAX_SEARCH_GPUS {
        v.push(p);
        p *= 2;
    }
    v
}

impl<'a> Search<'a> {
    pub fn new(
        model: &'a ModelSpec,
        base: &'a Workload,
        gpus: &'a [GpuSpec],
        book: &'a PriceBook,
        time: &'a TimeModel,
        job: Job,
        allow: Allow,
    ) -> Search<'a> {
        let offer_gpu =
            book.offers.iter().map(|o| gpus.iter().position(|g| g.id.eq_ignore_ascii_case(&o.gpu))).collect();
        Search {
            model,
            base,
            gpus,
            book,
            time,
            job,
            allow,
            entries: Vec::new(),
            index: HashMap::new(),
            offer_gpu,
            scored: Vec::new(),
            evaluated: 0,
            estimated: 0,
        }
    }

    pub fn offer(&self, i: u32) -> &Offer {
        &self.book.offers[i as usize]
    }

    pub fn offer_gpu(&self, i: u32) -> Option<&GpuSpec> {
        self.offer_gpu.get(i as usize).copied().flatten().map(|g| &self.gpus[g])
    }

    /// Build the workload of a key from the user's job.
    pub fn workload_for(&self, key: &MemKey) -> Workload {
        let mut w = self.base.clone();
        w.parallelism = Parallelism {
            gpus: key.gpus,
            tp: key.tp,
            pp: key.pp,
            sharding: key.sharding,
            fsdp: false,
            sequence_parallel: false,
            offload_optimizer: key.offload_optimizer,
            offload_params: key.offload_params,
        };
        match (&mut w.task, &key.train, &key.infer) {
            (Task::Train(t), Some(k), _) => {
                t.kind = k.kind;
                t.precision = k.precision;
                t.optimizer = k.optimizer;
                t.checkpointing = k.checkpointing;
                t.batch = k.micro_batch;
                t.grad_accum = k.grad_accum;
            }
            (Task::Inference(s), _, Some(k)) => {
                if let Some(bits) = k.quant_bits {
                    s.quant = Some(QuantSpec::int(bits, defaults::GROUP_SIZE, s.weight_dtype_compute()));
                }
                s.kv_dtype = k.kv_dtype;
            }
            _ => {}
        }
        w
    }

    /// Estimate a key once (memoized); returns its entry index.
    pub fn entry(&mut self, key: MemKey) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let workload = self.workload_for(&key);
        let ledger = estimate(self.model, &workload);
        self.estimated += 1;
        let (mem, work) = match ledger.and_then(|l| MemSummary::of(&l)) {
            Ok(m) => (Some(m), Some(work_of(self.model, &workload, &m))),
            Err(_) => (None, None),
        };
        let inexact = inexact_count(self.base, &key, self.allow);
        let i = self.entries.len() as u32;
        self.entries.push(MemEntry { key: key.clone(), workload, mem, work, inexact });
        self.index.insert(key, i);
        i
    }

    /// The ledger of an entry (re-estimated: used for the few plans shown).
    pub fn ledger(&self, i: u32) -> Result<Ledger, CoreError> {
        estimate(self.model, &self.entries[i as usize].workload)
    }

    /// GPU counts worth trying with `offer`, with the machines each needs.
    pub fn counts_for(offer: &Offer) -> Vec<(u64, u64)> {
        let per_node = offer.gpus_per_node();
        if offer.slice.is_some() {
            return vec![(1, 1)];
        }
        let mut v = Vec::new();
        let unit = offer.gpus_per_machine.max(1);
        for n in powers_of_two_upto(per_node) {
            if n.is_multiple_of(unit) {
                v.push((n, 1));
            }
        }
        if unit > 1 && !v.iter().any(|&(n, _)| n == unit) {
            v.push((unit, 1));
        }
        if offer.inter_node_gbs.is_some() {
            let mut m = 2;
            while m <= offer.max_machines && per_node * m <= MAX_SEARCH_GPUS {
                v.push((per_node * m, m));
                m *= 2;
            }
        }
        v
    }

    /// Is a key runnable on `offer` with `gpus` over `machines`?
    fn allowed(&self, key: &MemKey, offer: &Offer, gpu: &GpuSpec, machines: u64) -> bool {
        if offer.slice.is_some() {
            // a vGPU/MIG slice has no NVLink or P2P to another instance and
            // shares the host: never multi-instance, never offload
            if key.gpus > 1 || key.offload_optimizer != Offload::None || key.offload_params != Offload::None {
                return false;
            }
        }
        if !gpu.bf16 && self.needs_bf16(key) {
            // bf16 on a card without it would silently change the numerics
            return false;
        }
        if key.tp > 1 {
            let nvlink = offer.link == Link::Nvlink && gpu.nvlink_gbs.is_some();
            if !nvlink || key.tp > offer.gpus_per_node() {
                return false;
            }
        }
        if machines > 1 && key.tp > offer.gpus_per_node() {
            return false;
        }
        true
    }

    /// Does the key compute in bf16?
    fn needs_bf16(&self, key: &MemKey) -> bool {
        match (&key.train, &self.base.task) {
            (Some(t), _) => t.precision.compute_dtype() == DType::BF16,
            (None, Task::Inference(s)) => s.weight_dtype_compute() == DType::BF16,
            _ => false,
        }
    }

    /// Score one candidate (the hot loop: arithmetic only).
    #[inline]
    pub fn score(&mut self, mem: u32, offer_i: u32, gpus: u64, machines: u64) -> Option<Scored> {
        self.evaluated += 1;
        let e = &self.entries[mem as usize];
        let m = e.mem?;
        let work = e.work?;
        let offer = &self.book.offers[offer_i as usize];
        let gpu = &self.gpus[self.offer_gpu[offer_i as usize]?];
        let capacity = match &offer.slice {
            Some(s) => s.memory_bytes(),
            None => gpu.memory_bytes(),
        };
        if m.total > capacity {
            return None;
        }
        let fraction = offer.slice.as_ref().map(|s| s.fraction).unwrap_or(1.0);
        let units = offer.units_for(gpus).max(machines);
        // host RAM for offload: the job's total over its machines, against one machine's RAM
        let mut upgrade = None;
        let mut ram_unchecked = false;
        let mut extra_monthly = 0.0;
        if m.cpu > 0 {
            let need_gb = div_ceil(m.cpu, machines.max(1)) as f64 / 1e9;
            match offer.ram_gb {
                None => ram_unchecked = true,
                Some(have) if have * RAM_USABLE >= need_gb => {}
                Some(_) => {
                    let up = self
                        .book
                        .upgrades
                        .iter()
                        .enumerate()
                        .filter(|(_, u)| u.provider == offer.provider && u.currency == offer.currency)
                        .filter(|(_, u)| u.offers.is_empty() || u.offers.iter().any(|o| o == &offer.id))
                        .filter(|(_, u)| u.ram_gb_to.is_some_and(|r| r * RAM_USABLE >= need_gb))
                        .min_by(|a, b| a.1.monthly.total_cmp(&b.1.monthly))?;
                    upgrade = Some(up.0 as u32);
                    extra_monthly = up.1.monthly;
                }
            }
        }
        let dev: Device = self.time.device(gpu, offer.link, fraction, offer.inter_node_gbs);
        let (step, infer, tps, slowdown) = match work {
            Work::Train(mut w) => {
                w.multi_node = machines > 1;
                w.cpu_params_per_step /= machines.max(1) as f64;
                let st = self.time.train_step(&w, &dev, offer.cpu_cores);
                let tps = if st.total_s > 0.0 { w.tokens_per_step / st.total_s } else { 0.0 };
                (st, InferTime::default(), tps, st.slowdown())
            }
            Work::Infer(w) => {
                let it = self.time.infer(&w, &dev);
                (StepTime::default(), it, it.decode_tokens_per_s, 1.0)
            }
        };
        let u = units as f64;
        let monthly = offer.monthly.map(|p| p.offset(extra_monthly).scale(u));
        let (hourly, prorated) = match offer.hourly_rate() {
            Some((h, pr)) => (Some(h.offset(extra_monthly / super::pricing::HOURS_PER_MONTH).scale(u)), pr),
            None => (None, false),
        };
        let (job_hours, job_tokens) = match self.job {
            Job::None => (None, None),
            Job::Tokens(t) => (if tps > 0.0 { Some(t as f64 / tps / 3600.0) } else { None }, Some(t as f64)),
            Job::Hours(hh) => (Some(hh), Some(tps * hh * 3600.0)),
        };
        let job_cost = match (job_hours, hourly) {
            (Some(jh), Some(h)) => Some(h.scale(jh)),
            _ => None,
        };
        Some(Scored {
            mem,
            offer: offer_i,
            gpus,
            machines,
            upgrade,
            step,
            infer,
            tokens_per_s: tps,
            monthly,
            hourly,
            hourly_prorated: prorated,
            job_hours,
            job_tokens,
            job_cost,
            slowdown,
            ram_unchecked,
        })
    }

    /// Memory keys to try for `gpus` GPUs, grouped: within a group, keys go
    /// from the smallest footprint up, so a group is abandoned once its
    /// smallest member does not fit.
    pub fn key_groups(&self, gpus: u64) -> Vec<Vec<MemKey>> {
        let mut groups = Vec::new();
        let spec = self.model;
        let layouts = layouts(spec, gpus, self.base);
        match &self.base.task {
            Task::Train(t) => {
                let gb = global_batch(t, &self.base.parallelism);
                let mut kinds = vec![t.kind];
                if t.kind == TrainKind::Full && self.allow.lora {
                    kinds.push(TrainKind::Lora);
                }
                if t.kind != TrainKind::Qlora && self.allow.qlora {
                    kinds.push(TrainKind::Qlora);
                }
                let mut precisions = vec![t.precision];
                if t.precision == Precision::Fp32 {
                    precisions.push(Precision::AmpBf16);
                }
                let mut optimizers = vec![t.optimizer];
                if matches!(t.optimizer, Optimizer::AdamW) {
                    optimizers.push(Optimizer::AdamW8bit);
                }
                let mut micros = powers_of_two_upto(t.batch.max(1));
                if !micros.contains(&t.batch.max(1)) {
                    micros.push(t.batch.max(1));
                }
                let ckpts = [Checkpointing::Full, Checkpointing::Selective, Checkpointing::None];
                for &(tp, pp, sharding, off_opt, off_par) in &layouts {
                    let dp = (gpus / (tp * pp)).max(1);
                    for &kind in &kinds {
                        for &precision in &precisions {
                            for &optimizer in &optimizers {
                                if off_opt != Offload::None && optimizer.is_8bit() {
                                    continue; // DeepSpeed CPU-Adam replaces the optimizer
                                }
                                if kind != TrainKind::Full && kind != t.kind {
                                    // adapters' optimizer states are a few MiB: swapping the
                                    // optimizer or offloading only them cannot change a fit
                                    if optimizer != t.optimizer {
                                        continue;
                                    }
                                    if off_opt != Offload::None && off_par == Offload::None {
                                        continue;
                                    }
                                }
                                let mut g = Vec::new();
                                for &micro in &micros {
                                    for &ck in &ckpts {
                                        let accum = gb.div_ceil(micro * dp).max(1);
                                        g.push(MemKey {
                                            gpus,
                                            tp,
                                            pp,
                                            sharding,
                                            offload_optimizer: off_opt,
                                            offload_params: off_par,
                                            train: Some(TrainKey {
                                                kind,
                                                precision,
                                                optimizer,
                                                checkpointing: ck,
                                                micro_batch: micro,
                                                grad_accum: accum,
                                            }),
                                            infer: None,
                                        });
                                    }
                                }
                                groups.push(g);
                            }
                        }
                    }
                }
            }
            Task::Inference(s) => {
                let mut quants = vec![None];
                let mut kvs = vec![s.kv_dtype];
                if self.allow.quant && s.quant.is_none() {
                    quants.push(Some(8));
                    quants.push(Some(4));
                    if s.kv_dtype.bits() > 8 {
                        kvs.push(DType::F8);
                    }
                }
                for &(tp, pp, _, _, _) in &layouts {
                    let mut g = Vec::new();
                    for &q in quants.iter().rev() {
                        for &kv in kvs.iter().rev() {
                            g.push(MemKey {
                                gpus,
                                tp,
                                pp,
                                sharding: Sharding::None,
                                offload_optimizer: Offload::None,
                                offload_params: Offload::None,
                                train: None,
                                infer: Some(InferKey { quant_bits: q, kv_dtype: kv }),
                            });
                        }
                    }
                    groups.push(g);
                }
            }
        }
        groups
    }

    /// Re-score every estimated setup against every offer and count it can
    /// run on, with the memo warm: the per-candidate arithmetic alone (what
    /// the benchmark's candidates/s figure measures). Returns the number of
    /// candidates evaluated; fitting ones are counted, not stored.
    pub fn score_all(&mut self) -> (u64, u64) {
        let mut evaluated = 0u64;
        let mut fitting = 0u64;
        let offers: Vec<(u32, Vec<(u64, u64)>)> = (0..self.book.offers.len() as u32)
            .filter(|&oi| self.offer_gpu[oi as usize].is_some())
            .map(|oi| (oi, Self::counts_for(&self.book.offers[oi as usize])))
            .collect();
        for mi in 0..self.entries.len() as u32 {
            let gpus = self.entries[mi as usize].key.gpus;
            for (oi, counts) in &offers {
                for &(n, machines) in counts {
                    if n != gpus {
                        continue;
                    }
                    let offer = &self.book.offers[*oi as usize];
                    let Some(gpu) = self.offer_gpu(*oi) else { continue };
                    if !self.allowed(&self.entries[mi as usize].key, offer, gpu, machines) {
                        continue;
                    }
                    evaluated += 1;
                    if self.score(mi, *oi, n, machines).is_some() {
                        fitting += 1;
                    }
                }
            }
        }
        (evaluated, fitting)
    }

    /// Run the whole search.
    pub fn run(&mut self) {
        // (offer, gpus, machines) triples grouped by GPU count
        let mut by_count: Vec<(u64, Vec<(u32, u64)>)> = Vec::new();
        for (oi, o) in self.book.offers.iter().enumerate() {
            if self.offer_gpu[oi].is_none() {
                continue;
            }
            for (n, machines) in Self::counts_for(o) {
                match by_count.iter_mut().find(|(c, _)| *c == n) {
                    Some((_, v)) => v.push((oi as u32, machines)),
                    None => by_count.push((n, vec![(oi as u32, machines)])),
                }
            }
        }
        by_count.sort_by_key(|(n, _)| *n);
        for (n, offers) in by_count {
            let max_cap = offers
                .iter()
                .filter_map(|&(oi, _)| {
                    let o = &self.book.offers[oi as usize];
                    match &o.slice {
                        Some(s) => Some(s.memory_bytes()),
                        None => self.offer_gpu(oi).map(|g| g.memory_bytes()),
                    }
                })
                .max()
                .unwrap_or(0);
            for group in self.key_groups(n) {
                // memory never falls as checkpointing relaxes (full → selective → none)
                // or the micro-batch grows: once a member is too big for every card,
                // skip what can only be bigger
                let mut skip_micro: Option<u64> = None;
                for key in group {
                    let micro = key.train.as_ref().map(|t| (t.micro_batch, t.checkpointing));
                    if let (Some(m), Some((km, _))) = (skip_micro, micro) {
                        if km == m {
                            continue;
                        }
                    }
                    let usable: Vec<(u32, u64)> = offers
                        .iter()
                        .copied()
                        .filter(|&(oi, machines)| {
                            let o = &self.book.offers[oi as usize];
                            self.offer_gpu(oi).is_some_and(|g| self.allowed(&key, o, g, machines))
                        })
                        .collect();
                    if usable.is_empty() {
                        continue;
                    }
                    let i = self.entry(key);
                    let total = match self.entries[i as usize].mem {
                        Some(m) => m.total,
                        None => continue,
                    };
                    if total > max_cap {
                        match micro {
                            // the smallest footprint at this micro-batch: larger ones cannot fit
                            Some((_, Checkpointing::Full)) | None => break,
                            Some((m, _)) => {
                                skip_micro = Some(m);
                                continue;
                            }
                        }
                    }
                    for (oi, machines) in usable {
                        if let Some(s) = self.score(i, oi, n, machines) {
                            self.scored.push(s);
                        }
                    }
                }
            }
        }
    }
}

/// Hardware-independent work of a setup (FLOPs, bytes to communicate and
/// to offload per optimizer step): see [`super::time`] for the sources.
pub fn work_of(spec: &ModelSpec, w: &Workload, m: &MemSummary) -> Work {
    let l = spec.num_layers as f64;
    let h = spec.hidden_size as f64;
    let n_act = m.params_active as f64;
    match &w.task {
        Task::Train(t) => {
            let s = t.seq as f64;
            let attn = 12.0 * l * h * s;
            let lora = t.kind != TrainKind::Full;
            let model_flops = if lora { 4.0 * n_act } else { 6.0 * n_act } + attn;
            let recompute = match t.checkpointing {
                Checkpointing::None => 0.0,
                Checkpointing::Selective => 4.0 * l * h * s,
                Checkpointing::Full => 2.0 * n_act + 4.0 * l * h * s,
            };
            let par = &w.parallelism;
            let dp = par.dp() as f64;
            let mp = (par.tp.max(1) * par.pp.max(1)) as f64;
            let psi_t = m.params_trainable as f64 / mp;
            let psi = m.params_total as f64 / mp;
            let gb = if lora {
                if t.lora.adapter_fp32 {
                    4.0
                } else {
                    2.0
                }
            } else {
                t.precision.weight_dtype().bytes_f64()
            };
            let wb = match t.kind {
                TrainKind::Full => t.precision.weight_dtype().bytes_f64(),
                TrainKind::Lora => t.lora_base_dtype().bytes_f64(),
                TrainKind::Qlora => 0.5,
            };
            let k = t.grad_accum.max(1) as f64;
            let frac = if dp > 1.0 { (dp - 1.0) / dp } else { 0.0 };
            let dp_bytes = match par.sharding {
                Sharding::None | Sharding::Zero1 => 2.0 * psi_t * gb * frac,
                Sharding::Zero2 => k * psi_t * gb * frac + psi_t * wb * frac,
                Sharding::Zero3 => k * (2.0 * psi * wb + psi_t * gb) * frac,
            };
            let tp = par.tp.max(1) as f64;
            let act_b = t.precision.compute_dtype().bytes_f64();
            let tp_bytes = if tp > 1.0 {
                let per_micro = 4.0 * (l / par.pp.max(1) as f64) * t.batch as f64 * s * h * act_b;
                let recompute_factor = if t.checkpointing == Checkpointing::Full { 1.5 } else { 1.0 };
                k * per_micro * 2.0 * (tp - 1.0) / tp * recompute_factor
            } else {
                0.0
            };
            let mut offload_bytes = 0.0;
            let mut cpu_params = 0.0;
            if par.offload_optimizer != Offload::None {
                offload_bytes += psi_t * (gb + 2.0) / dp;
                cpu_params = m.params_trainable as f64;
            }
            if par.offload_params != Offload::None {
                offload_bytes += k * 2.0 * psi * wb / dp;
            }
            Work::Train(TrainWork {
                flops_per_token: model_flops + recompute,
                model_flops_per_token: model_flops,
                tokens_per_step: t.batch as f64 * k * dp * s,
                tokens_per_micro: t.batch as f64 * s,
                micro_steps: k,
                dp_bytes_per_step: dp_bytes,
                zero3: par.sharding == Sharding::Zero3,
                tp_bytes_per_step: tp_bytes,
                offload_bytes_per_step: offload_bytes,
                cpu_params_per_step: cpu_params,
                pp: par.pp.max(1) as f64,
                qlora: t.kind == TrainKind::Qlora,
                multi_node: false,
                gpus: par.gpus.max(1) as f64,
            })
        }
        Task::Inference(s) => {
            let ctx = s.context as f64;
            let prefill = (2.0 * n_act + 4.0 * l * h * ctx) * s.batch as f64 * ctx;
            Work::Infer(InferWork {
                bytes_per_step: (m.weights + m.kv) as f64,
                concurrency: s.concurrency as f64,
                prefill_flops: prefill,
                tp: w.parallelism.tp.max(1) as f64,
                pp: w.parallelism.pp.max(1) as f64,
                layers: l,
            })
        }
    }
}

/// Switches that change what is computed, not counting the method changes
/// the user allowed with `--allow` (they accepted those).
fn inexact_count(base: &Workload, key: &MemKey, allow: Allow) -> u8 {
    match (&base.task, &key.train, &key.infer) {
        (Task::Train(t), Some(k), _) => {
            let method = t.kind != k.kind
                && !(k.kind == TrainKind::Lora && allow.lora)
                && !(k.kind == TrainKind::Qlora && allow.qlora);
            method as u8 + (t.optimizer != k.optimizer) as u8 + (t.precision != k.precision) as u8
        }
        (Task::Inference(s), _, Some(k)) if !allow.quant => {
            k.quant_bits.is_some() as u8 + (s.kv_dtype != k.kv_dtype) as u8
        }
        _ => 0,
    }
}

/// Share of a machine's RAM usable for offloaded state (the OS, data
/// loaders and pinned buffers take the rest).
pub const RAM_USABLE: f64 = 0.85;

/// (tp, pp, sharding, offload optimizer, offload params) layouts for `gpus`.
pub fn layouts(spec: &ModelSpec, gpus: u64, base: &Workload) -> Vec<(u64, u64, Sharding, Offload, Offload)> {
    let mut v = Vec::new();
    let train = matches!(base.task, Task::Train(_));
    for tp in powers_of_two_upto(gpus.min(8)) {
        if !spec.num_heads.is_multiple_of(tp) {
            continue;
        }
        for pp in powers_of_two_upto((gpus / tp).min(8)) {
            if !gpus.is_multiple_of(tp * pp) || pp > spec.num_layers {
                continue;
            }
            let dp = gpus / (tp * pp);
            if !train {
                // inference: replicas do not lower per-GPU memory; the split is tp × pp
                if dp == 1 {
                    v.push((tp, pp, Sharding::None, Offload::None, Offload::None));
                }
                continue;
            }
            if dp > 1 {
                // DeepSpeed's pipeline engine refuses ZeRO-2/3 (gradient/parameter partitioning
                // conflicts with per-micro-batch pipeline gradients); ZeRO-1 + PP is supported.
                // FSDP + PP is not proposed either: the planner sizes DeepSpeed layouts.
                let stages: &[Sharding] = if pp > 1 {
                    &[Sharding::None, Sharding::Zero1]
                } else {
                    &[Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3]
                };
                for &z in stages {
                    v.push((tp, pp, z, Offload::None, Offload::None));
                }
            } else {
                v.push((tp, pp, Sharding::None, Offload::None, Offload::None));
            }
            if tp == 1 && pp == 1 {
                v.push((tp, pp, Sharding::Zero2, Offload::Cpu, Offload::None));
                v.push((tp, pp, Sharding::Zero3, Offload::Cpu, Offload::None));
                v.push((tp, pp, Sharding::Zero3, Offload::Cpu, Offload::Cpu));
            }
        }
    }
    v
}

/// Best price of an offer on a yearly term, if any discounts exist.
pub fn yearly(book: &PriceBook, offer: &Offer) -> Option<(PriceRange, Vec<String>)> {
    book.best_monthly(offer, Term::Yearly)
}
