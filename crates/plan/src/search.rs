//! The search: every offer × card count × software setup, scored for fit,
//! time and money.
//!
//! Memory depends only on the software setup and its split over GPUs
//! (method, precision, optimizer, checkpointing, micro-batch, GPU count,
//! TP/PP/ZeRO/offload, serving replicas), never on the offer or its price.
//! So each distinct setup ([`MemKey`]) is estimated once and its
//! hardware-independent work ([`crate::time::TrainWork`]/[`crate::time::InferWork`]) derived once;
//! each candidate (setup × offer × count) then costs a few multiplications.
//!
//! Training setups take the estimator's allocation-free fast path: one
//! [`TrainModel`] per (method, precision, optimizer), then
//! [`TrainModel::evaluate`] per setup — the same breakdown the ledger is
//! built from (`estimate()` = validate + `TrainModel::new` + `evaluate` +
//! ledger lines), so the figures are identical (property-tested in
//! `plan::tests`). Inference setups are few and go through [`estimate()`].

use crate::emit::{key_expressible, Launcher};
use crate::pricing::{Offer, PriceBook, PriceRange, Term, HOURS_PER_MONTH};
use crate::rank::{better, is_unchanged, offloads, same_method};
use crate::time::{Device, InferTime, Requests, StepTime, TimeModel};
use crate::types::{
    global_batch, pipeline_min_micro_batches, Allow, Billing, Complexity, InferKey, Job, MemEntry, MemKey, MemSummary,
    Scored, TrainKey, Work,
};
use crate::work::{train_work, work_of};
use std::collections::HashMap;
use vramfit_core::dtype::DType;
use vramfit_core::error::CoreError;
use vramfit_core::estimate::estimate;
use vramfit_core::hardware::{GpuSpec, Link};
use vramfit_core::ledger::Ledger;
use vramfit_core::model::ModelSpec;
use vramfit_core::nccl::NcclHardware;
use vramfit_core::quant::QuantSpec;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind, TrainModel, TrainSetup};
use vramfit_core::units::div_ceil;
use vramfit_core::workload::{
    defaults, validate, Engine, InferenceSetup, Offload, Parallelism, Sharding, Task, Workload,
};

/// Largest power of two tried for a micro-batch (sequences per GPU).
pub const MAX_MICRO_BATCH: u64 = 64;

/// Largest pipeline depth proposed: Megatron-LM's published 3D layouts for
/// 175B–1T models use 8–64 stages with interleaving (Narayanan et al. 2021,
/// Table 1); without interleaving the bubble of more than 16 stages needs
/// more micro-batches than a fine-tune's global batch has.
pub const MAX_SEARCH_PP: u64 = 16;

/// Tokens per sample from which the search tries context parallelism for
/// training. Below it a micro-batch of one sequence keeps its activations
/// within reach of TP with sequence parallelism and checkpointing; Llama 3
/// 405B ran its 8K-token stages with CP 1 and only the 128K stage with CP 16
/// (Dubey et al. 2024, Table 4), and Megatron-LM recommends CP for long
/// sequences (docs/source/api-guide/context_parallel.rst). A pinned `--cp`
/// is estimated at any length.
pub const CP_MIN_SEQ: u64 = 32_768;

/// Tokens of each sequence a CP rank keeps at least: ring attention hides
/// the K/V exchange behind the attention of a block only when the block is
/// long enough (Liu et al. 2023, §3: block size ≥ the card's FLOPs /
/// bandwidth, about 1–2K tokens over NVLink on A100/H100, more across
/// machines), so the search leaves margin.
pub const CP_MIN_LOCAL_SEQ: u64 = 4_096;

/// On a multi-machine offer, machine counts past the smallest that fits the
/// job unchanged are searched up to this factor (bigger clusters only buy
/// speed at a higher bill; a deadline asks for them by itself).
pub const MACHINE_SEARCH_SPAN: u64 = 4;

/// Machine counts tried on a multi-machine offer: every count up to 8, then
/// two per doubling (12, 16, 24, 32, 48, 64, …) up to `max` — a grid, so a
/// 100,000-machine catalogue costs 34 counts, not 100,000 (the report says
/// the grid was used when `max` is above 8).
pub fn machine_grid(max: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (1..=max.min(8)).collect();
    let mut p = 8u64;
    while let Some(next) = p.checked_mul(2) {
        for m in [p + p / 2, next] {
            if m <= max {
                v.push(m);
            }
        }
        if next > max {
            break;
        }
        p = next;
    }
    v
}

/// A training model prepared for the fast path, per (method, precision, optimizer).
struct Prepared {
    kind: TrainKind,
    precision: Precision,
    optimizer: Optimizer,
    /// None: the estimator refuses this combination
    model: Option<TrainModel>,
}

/// Premium of running on several GPUs at all (DDP over one card; the seed's
/// "a gap smaller than a card is not worth sharding"), of each switch that
/// changes what is computed (8-bit optimizer, precision), and of a global
/// batch other than the one asked (the learning rate was tuned for it).
pub const MULTI_GPU_PREMIUM: f64 = 0.10;
pub const MULTI_MACHINE_PREMIUM: f64 = 0.25;
pub const INEXACT_PREMIUM: f64 = 0.05;
pub const GLOBAL_BATCH_PREMIUM: f64 = 0.10;

/// What an offload setup needs of an offer's host (see `Search::host_ram_on`).
struct HostRam {
    /// bytes one machine needs (DeepSpeed's estimator; 0 without offload)
    need: u64,
    /// the price book's RAM upgrade that covers it
    upgrade: Option<u32>,
    /// the offer lists no RAM (or the machine is the user's): the need is reported, not checked
    unchecked: bool,
    /// the upgrade's monthly price per unit
    extra_monthly: f64,
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
    /// the user fixed the parallel layout (`--gpus`, `--zero`, `--tp`, `--pp`,
    /// `--offload`): only that layout is searched
    pub pinned: Option<Parallelism>,
    /// check host RAM against the offers (false for the user's own machine:
    /// its RAM is not known, the need is reported instead)
    pub check_ram: bool,
    /// only setups this launcher can express are searched (`--emit`)
    pub launcher: Option<Launcher>,
    /// the pin names one GPU (`--gpus 1`): only one-GPU setups are searched
    pub pinned_one_gpu: bool,
    /// training: only this checkpointing is searched (the user's, on a pinned layout)
    pub keep_checkpointing: Option<Checkpointing>,
    /// serving: the requests the throughput counts (prefill then decode);
    /// None: decode steps only
    pub requests: Option<Requests>,
    pub entries: Vec<MemEntry>,
    index: HashMap<MemKey, u32>,
    /// GPU spec of each offer (None: the offer names an unknown GPU)
    offer_gpu: Vec<Option<usize>>,
    prepared: Vec<Prepared>,
    /// the user's training setup with the method forced to full (validation
    /// of a layout never depends on the method; LoRA rules are checked once
    /// per prepared model) and batch/accum/checkpointing set per key
    scratch: Option<TrainSetup>,
    /// the best fitting candidate of each class (see `keep`)
    pub scored: Vec<Scored>,
    best: HashMap<(u32, u64, Complexity, bool, bool), usize>,
    /// fitting candidates seen (kept or not)
    pub fitting: u64,
    /// (offer, GPUs) whose only fitting setups were refused for host RAM:
    /// the smallest host RAM one of them needs per machine, bytes
    pub ram_refused: HashMap<(u32, u64), u64>,
    /// candidates evaluated (fitting or not)
    pub evaluated: u64,
    /// distinct memory configurations estimated
    pub estimated: u64,
    /// multi-machine offers whose larger clusters were not searched (more than
    /// [`MACHINE_SEARCH_SPAN`] × the fewest machines that held the job): the
    /// fewest machines that held the job and the smallest count left out
    pub machines_skipped: HashMap<u32, (u64, u64)>,
    /// with a deadline: the fastest fitting candidate that misses it
    pub fastest_late: Option<Scored>,
    /// the NCCL interconnect the memo's entries were estimated with (the
    /// base workload's: not known unless the user named a card)
    nccl_now: NcclHardware,
    /// entries re-estimated for an offer's card whose NCCL figure differs
    /// (channels and NVLS follow the card's link and generation,
    /// vramfit_core::nccl): (entry, card's interconnect) → its memory
    mem_by_card: HashMap<(u32, NcclHardware), Option<MemSummary>>,
}

fn powers_of_two_upto(n: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut p = 1u64;
    while p <= n {
        v.push(p);
        match p.checked_mul(2) {
            Some(q) => p = q,
            None => break,
        }
    }
    v
}

/// Micro-batches to try on `dp` ranks for the asked global batch `gb`
/// (largest first is not needed: groups go smallest first), with the
/// accumulation each needs. The global batch is kept exactly: micro ×
/// accum × dp = gb, the micro-batch at most the user's. When `dp` does not
/// divide `gb` the smallest global batch above it that divides is used
/// (a listed change, never silent).
pub fn micro_batches(gb: u64, dp: u64, user_micro: u64) -> Vec<(u64, u64)> {
    let dp = dp.max(1);
    let per_rank = gb.div_ceil(dp).max(1);
    let cap = user_micro.max(1).min(per_rank).min(MAX_MICRO_BATCH);
    let mut v: Vec<u64> = powers_of_two_upto(cap).into_iter().filter(|m| per_rank.is_multiple_of(*m)).collect();
    if per_rank.is_multiple_of(cap) && !v.contains(&cap) {
        v.push(cap);
    }
    v.into_iter().map(|m| (m, per_rank / m)).collect()
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
        let scratch = match &base.task {
            Task::Train(t) => Some(TrainSetup { kind: TrainKind::Full, ..t.clone() }),
            Task::Inference(_) => None,
        };
        Search {
            model,
            base,
            gpus,
            book,
            time,
            job,
            allow,
            pinned: None,
            check_ram: true,
            launcher: None,
            pinned_one_gpu: false,
            keep_checkpointing: None,
            requests: None,
            entries: Vec::new(),
            index: HashMap::new(),
            offer_gpu,
            prepared: Vec::new(),
            scratch,
            scored: Vec::new(),
            best: HashMap::new(),
            fitting: 0,
            ram_refused: HashMap::new(),
            evaluated: 0,
            estimated: 0,
            machines_skipped: HashMap::new(),
            fastest_late: None,
            nccl_now: base.runtime.nccl,
            mem_by_card: HashMap::new(),
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
        w.runtime.nccl = self.nccl_now;
        let replicas = key.replicas.max(1);
        w.parallelism = Parallelism {
            gpus: key.gpus / replicas,
            tp: key.tp,
            pp: key.pp,
            ep: key.ep,
            etp: key.etp,
            dp_attention: key.dp_attention,
            virtual_stages: key.virtual_stages.max(1),
            sharding: key.sharding,
            fsdp: false,
            sequence_parallel: self.sequence_parallel(key.tp),
            offload_optimizer: key.offload_optimizer,
            offload_params: key.offload_params,
            cp: key.cp.max(1),
            dp_replicate: key.dp_replicate,
            hpz: key.hpz.max(1),
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
                // each replica holds its share of the sequences
                s.concurrency = s.concurrency.div_ceil(replicas).max(1);
                s.batch = s.batch.min(s.concurrency).max(1);
            }
            _ => {}
        }
        w
    }

    /// The workload of an entry.
    pub fn workload_of(&self, mem: u32) -> Workload {
        self.workload_for(&self.entries[mem as usize].key)
    }

    /// The workload of an entry on an offer's card: its NCCL communicators
    /// sized for that card's interconnect, as `estimate --gpu` sizes them.
    pub fn workload_on(&self, mem: u32, offer_i: u32) -> Workload {
        let mut w = self.workload_of(mem);
        if let Some(hw) = self.offer_nccl(offer_i) {
            w.runtime.nccl = hw;
        }
        w
    }

    /// The interconnect an offer's card gives NCCL (None: the offer names an
    /// unknown GPU, or the user named the card: the base's figure stands).
    fn offer_nccl(&self, offer_i: u32) -> Option<NcclHardware> {
        if self.base.runtime.nccl.link.is_some() {
            return None;
        }
        self.offer_gpu(offer_i).map(|g| g.nccl_hardware())
    }

    /// [`Search::mem_on`] of a scored candidate (its card's figure was
    /// estimated when it was scored).
    pub fn mem_of(&self, c: &Scored) -> Option<MemSummary> {
        let base = self.entries[c.mem as usize].mem?;
        match self.offer_nccl(c.offer) {
            Some(hw) if c.gpus > 1 && hw != self.nccl_now => {
                self.mem_by_card.get(&(c.mem, hw)).copied().unwrap_or(Some(base))
            }
            _ => Some(base),
        }
    }

    /// An entry's memory on an offer's card. The memo estimates every setup
    /// once, with the NCCL interconnect not known; a multi-GPU setup on a
    /// card whose NCCL figure differs (channels by link and generation, NVLS
    /// on Hopper and later, vramfit_core::nccl) is re-estimated once per such
    /// card, so `plan` counts what `estimate --gpu` counts for that card.
    pub fn mem_on(&mut self, mem: u32, offer_i: u32) -> Option<MemSummary> {
        let e = &self.entries[mem as usize];
        let base = e.mem?;
        let Some(hw) = self.offer_nccl(offer_i) else { return Some(base) };
        if e.key.gpus <= 1 || hw == self.nccl_now {
            return Some(base);
        }
        if let Some(m) = self.mem_by_card.get(&(mem, hw)) {
            return *m;
        }
        let key = e.key.clone();
        let saved = std::mem::replace(&mut self.nccl_now, hw);
        let m = match key.train.clone() {
            Some(k) => self.train_memory(&key, &k).map(|(m, _)| m),
            None => {
                let w = self.workload_for(&key);
                estimate(self.model, &w).and_then(|l| MemSummary::of_job(self.model, &w, &l)).ok()
            }
        };
        self.nccl_now = saved;
        self.mem_by_card.insert((mem, hw), m);
        m
    }

    /// The estimated setup a candidate runs.
    pub fn entry_of(&self, c: &Scored) -> &MemEntry {
        &self.entries[c.mem as usize]
    }

    /// The candidate runs the user's job as given (`rank::is_unchanged`).
    pub fn is_unchanged(&self, c: &Scored) -> bool {
        is_unchanged(&self.base.task, self.entry_of(c))
    }

    /// The candidate keeps the user's method (`rank::same_method`).
    pub fn same_method(&self, c: &Scored) -> bool {
        same_method(&self.base.task, &self.entry_of(c).key)
    }

    /// The candidate offloads to the host (`rank::offloads`).
    pub fn offloads(&self, c: &Scored) -> bool {
        offloads(&self.entry_of(c).key)
    }

    /// The prepared training model for a (method, precision, optimizer).
    fn prepared(&mut self, kind: TrainKind, precision: Precision, optimizer: Optimizer) -> usize {
        if let Some(i) =
            self.prepared.iter().position(|p| p.kind == kind && p.precision == precision && p.optimizer == optimizer)
        {
            return i;
        }
        let model = match &self.base.task {
            Task::Train(t) => {
                let setup = TrainSetup { kind, precision, optimizer, ..t.clone() };
                let one = Parallelism::default();
                validate::training(self.model, &setup, &one, &self.base.runtime)
                    .map_err(CoreError::from)
                    .and_then(|_| TrainModel::new(self.model, &setup))
                    .ok()
            }
            Task::Inference(_) => None,
        };
        self.prepared.push(Prepared { kind, precision, optimizer, model });
        self.prepared.len() - 1
    }

    /// Memory of a training key on the fast path (None: refused).
    fn train_memory(&mut self, key: &MemKey, k: &TrainKey) -> Option<(MemSummary, Work)> {
        let pi = self.prepared(k.kind, k.precision, k.optimizer);
        let par = Parallelism {
            gpus: key.gpus,
            tp: key.tp,
            pp: key.pp,
            // expert parallelism in training: Megatron's (`train_expert_variants`)
            ep: key.ep,
            etp: key.etp,
            dp_attention: 1,
            virtual_stages: key.virtual_stages.max(1),
            sharding: key.sharding,
            fsdp: false,
            sequence_parallel: self.sequence_parallel(key.tp),
            offload_optimizer: key.offload_optimizer,
            offload_params: key.offload_params,
            cp: key.cp.max(1),
            dp_replicate: key.dp_replicate,
            hpz: key.hpz.max(1),
        };
        let scratch = self.scratch.as_mut()?;
        scratch.batch = k.micro_batch;
        scratch.grad_accum = k.grad_accum;
        scratch.checkpointing = k.checkpointing;
        scratch.precision = k.precision;
        scratch.optimizer = k.optimizer;
        let model = self.prepared[pi].model.as_ref()?;
        let rt = vramfit_core::runtime::RuntimeSetup { nccl: self.nccl_now, ..self.base.runtime.clone() };
        validate::training(self.model, scratch, &par, &rt).ok()?;
        let b = model.evaluate(scratch, &par).ok()?;
        // the figures the estimate's ledger of this breakdown has (ledger_of checks
        // its lines against the same function), without building the lines
        let t = vramfit_core::train::ledger::totals_of(&b, scratch, &par, &rt).ok()?;
        let prof = &model.profile;
        let m = MemSummary {
            total: t.total,
            tensor_peak: t.tensor_peak,
            weights: t.weights,
            kv: 0,
            model_states: t.model_states,
            cpu: t.cpu_bytes,
            params_total: prof.params_total,
            params_active: prof.params_active,
            params_trainable: prof.params_trainable,
        };
        let w = train_work(self.model, scratch, k.kind, &par, &m);
        Some((m, Work::Train(w)))
    }

    /// Estimate a key once (memoized); returns its entry index.
    pub fn entry(&mut self, key: MemKey) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.estimated += 1;
        let (mem, work) = match key.train.clone() {
            Some(k) => match self.train_memory(&key, &k) {
                Some((m, w)) => (Some(m), Some(w)),
                None => (None, None),
            },
            None => {
                let workload = self.workload_for(&key);
                match estimate(self.model, &workload).and_then(|l| MemSummary::of_job(self.model, &workload, &l)) {
                    Ok(m) => (Some(m), Some(work_of(self.model, &workload, &m, key.replicas))),
                    Err(_) => (None, None),
                }
            }
        };
        let (inexact, global_batch) = self.inexact_count(&key);
        let complexity = Complexity::of(&key);
        let i = self.entries.len() as u32;
        self.entries.push(MemEntry { key: key.clone(), mem, work, inexact, complexity, global_batch });
        self.index.insert(key, i);
        i
    }

    /// Switches that change what is computed, not counting the method
    /// changes the user allowed with `--allow` (they accepted those); and
    /// the global batch the key runs.
    fn inexact_count(&self, key: &MemKey) -> (u8, u64) {
        match (&self.base.task, &key.train, &key.infer) {
            (Task::Train(t), Some(k), _) => {
                let method = t.kind != k.kind
                    && !(k.kind == TrainKind::Lora && self.allow.lora)
                    && !(k.kind == TrainKind::Qlora && self.allow.qlora);
                // the batch replicas: a CP group shares its sequences
                let dp = (key.gpus / (key.tp.max(1) * key.pp.max(1) * key.cp.max(1))).max(1);
                let gb = k.micro_batch * k.grad_accum * dp;
                let asked = global_batch(t, &self.base.parallelism);
                // fp32 → AMP is the seed's first switch (autocast keeps fp32 weights and
                // optimizer states): listed as a change, not counted as one that alters the run
                let precision =
                    t.precision != k.precision && !(t.precision == Precision::Fp32 && k.precision.is_autocast());
                let n = method as u8 + (t.optimizer != k.optimizer) as u8 + precision as u8 + (gb != asked) as u8;
                (n, gb)
            }
            (Task::Inference(s), _, Some(k)) if !self.allow.quant => {
                (k.quant_bits.is_some() as u8 + (s.kv_dtype != k.kv_dtype) as u8, s.concurrency)
            }
            (Task::Inference(s), _, _) => (0, s.concurrency),
            _ => (0, 0),
        }
    }

    /// The ledger of an entry (re-estimated: used for the few plans shown).
    pub fn ledger(&self, i: u32) -> Result<Ledger, CoreError> {
        estimate(self.model, &self.workload_of(i))
    }

    /// GPU counts worth trying with `offer`, with the machines each needs
    /// (a pinned count, `--gpus N`, is tried as it is whatever the grid).
    pub fn counts_for(offer: &Offer, pinned: Option<u64>) -> Vec<(u64, u64)> {
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
            for m in machine_grid(offer.max_machines).into_iter().filter(|&m| m > 1) {
                if let Some(n) = per_node.checked_mul(m) {
                    v.push((n, m));
                }
            }
            // a pinned count over several machines: as many full machines as it needs
            if let Some(n) = pinned.filter(|&n| n > per_node) {
                let m = n.div_ceil(per_node);
                if n.is_multiple_of(m) && m <= offer.max_machines && !v.iter().any(|&(c, _)| c == n) {
                    v.push((n, m));
                }
            }
        }
        // a cluster offer is not rented below its size (its single machine is its own offer)
        v.retain(|&(_, m)| m >= offer.min_machines);
        if let Some(n) = pinned {
            if n <= per_node && offer.min_machines <= 1 && n.is_multiple_of(unit) && !v.iter().any(|&(c, _)| c == n) {
                v.push((n, 1));
            }
            v.retain(|&(c, _)| c == n);
        }
        v
    }

    /// The GPU count the user pinned (`--gpus N`), if any.
    fn pinned_gpus(&self) -> Option<u64> {
        self.pinned.as_ref().map(|p| p.gpus).filter(|&g| g > 1)
    }

    /// GPUs one tensor-parallel group may span on `offer`: its NVLink domain.
    fn nvlink_domain(offer: &Offer) -> u64 {
        offer.fabric.map(|f| f.nvlink_domain).unwrap_or(offer.gpus_per_node()).min(offer.gpus_per_node())
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
        if key.train.as_ref().is_some_and(|t| !vramfit_core::workload::validate::trains_in(gpu, t.precision)) {
            // FP8 training needs FP8 tensor cores: no A100, no V100
            return false;
        }
        if key.tp > 1 {
            let nvlink = offer.link == Link::Nvlink && gpu.nvlink_gbs.is_some();
            // a serving engine runs TP over PCIe inside one machine too (vLLM
            // and SGLang all-reduce through NCCL, or vLLM's custom all-reduce
            // over P2P on 2 PCIe cards: `CustomAllreduce.__init__`), its
            // all-reduces timed at the PCIe rate (`InferWork::tp_allreduce_bytes`);
            // training TP stays inside NVLink, where its per-layer all-reduces
            // of every micro-batch are affordable
            let domain = if nvlink || !self.serving() { Self::nvlink_domain(offer) } else { offer.gpus_per_node() };
            if !(nvlink || self.serving()) || key.tp > domain {
                return false;
            }
        }
        if machines > 1 {
            // a TP group never crosses a machine, and the GPUs split evenly
            if key.tp > Self::nvlink_domain(offer) || !key.gpus.is_multiple_of(machines) {
                return false;
            }
        }
        if key.dp_replicate > 1 && key.dp_replicate != machines {
            // hybrid sharding: one shard group per machine (`hybrid_replicas`)
            return false;
        }
        if key.hpz > 1 && (machines < 2 || key.hpz != key.gpus / machines) {
            // ZeRO++ hpZ: one secondary-partition group per machine (`hpz_groups`)
            return false;
        }
        true
    }

    /// Is the job served by a serving engine (vLLM, SGLang)?
    fn serving(&self) -> bool {
        matches!(&self.base.task, Task::Inference(s) if s.engine.serving().is_some())
    }

    /// Does the key compute in bf16?
    fn needs_bf16(&self, key: &MemKey) -> bool {
        match (&key.train, &self.base.task) {
            (Some(t), _) => t.precision.compute_dtype() == DType::BF16,
            (None, Task::Inference(s)) => s.weight_dtype_compute() == DType::BF16,
            _ => false,
        }
    }

    /// Host RAM one machine needs for an offload setup, after DeepSpeed's own
    /// estimator (`estimate_zero2_model_states_mem_needs` in
    /// deepspeed/runtime/zero/stage_1_and_2.py, `estimate_zero3_…` in
    /// stage3.py; docs: deepspeed.readthedocs.io/en/latest/memory.html): the
    /// offloaded states (fp32 master, Adam moments, fp32 gradient partition,
    /// and the 16-bit parameters with parameter offload: 16/18 B per parameter)
    /// times `additional_buffer_factor` 1.5 (pinned staging buffers), or — without
    /// ZeRO-3's `zero.Init` — every rank's fp32 copy of the model at load
    /// time (4 B × parameters × ranks on the machine), whichever is larger.
    pub fn host_ram_need(&self, e: &MemEntry, m: &MemSummary, gpus: u64, machines: u64) -> u64 {
        if m.cpu == 0 {
            return 0;
        }
        let machines = machines.max(1);
        let states = div_ceil(m.cpu, machines) as f64;
        let full = e.key.train.as_ref().is_some_and(|k| k.kind == TrainKind::Full);
        let load = if full && e.key.sharding != Sharding::Zero3 {
            4.0 * m.params_total as f64 * (gpus / machines).max(1) as f64
        } else {
            0.0
        };
        (states.max(load) * DEEPSPEED_BUFFER_FACTOR).min(u64::MAX as f64) as u64
    }

    /// Host RAM for an offload setup on `offer`: DeepSpeed's estimate per
    /// machine against one machine's RAM, with the cheapest upgrade that
    /// covers a shortfall (None: refused, recorded for the report's note).
    fn host_ram_on(&mut self, mem: u32, offer_i: u32, gpus: u64, machines: u64) -> Option<HostRam> {
        let e = &self.entries[mem as usize];
        let need = self.host_ram_need(e, &e.mem?, gpus, machines);
        let mut ram = HostRam { need, upgrade: None, unchecked: false, extra_monthly: 0.0 };
        if need == 0 {
            return Some(ram);
        }
        let book = self.book;
        let offer = &book.offers[offer_i as usize];
        let need_gb = need as f64 / 1e9;
        let per_node = (gpus / machines.max(1)).max(1) as f64;
        match offer.ram_gb {
            _ if !self.check_ram => ram.unchecked = true,
            None if need_gb <= ASSUMED_RAM_GB_PER_GPU * per_node => ram.unchecked = true,
            // an unlisted machine is not assumed to hold more than that
            None => {
                self.refuse_ram(offer_i, gpus, need);
                return None;
            }
            Some(have) if have >= need_gb => {}
            Some(_) => {
                let up = book
                    .upgrades
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| u.provider == offer.provider && u.currency == offer.currency)
                    .filter(|(_, u)| u.offers.is_empty() || u.offers.iter().any(|o| o == &offer.id))
                    .filter(|(_, u)| u.ram_gb_to.is_some_and(|r| r >= need_gb))
                    .min_by(|a, b| a.1.monthly.total_cmp(&b.1.monthly));
                let Some((i, u)) = up else {
                    self.refuse_ram(offer_i, gpus, need);
                    return None;
                };
                ram.upgrade = Some(i as u32);
                ram.extra_monthly = u.monthly;
            }
        }
        Some(ram)
    }

    /// The share a setup's moving parts add to its bill in the ranking (see
    /// [`Complexity::premium`] and the premiums above).
    fn premium(&self, e: &MemEntry, gpus: u64, machines: u64) -> f64 {
        e.complexity.ranked_across(machines).premium()
            + if gpus > 1 { MULTI_GPU_PREMIUM } else { 0.0 }
            + if machines > 1 { MULTI_MACHINE_PREMIUM } else { 0.0 }
            + INEXACT_PREMIUM * e.inexact as f64
            + if e.inexact > 0 && self.global_batch_changed(e) { GLOBAL_BATCH_PREMIUM } else { 0.0 }
    }

    /// Score one candidate (the hot loop: arithmetic only).
    #[inline]
    pub fn score(&mut self, mem: u32, offer_i: u32, gpus: u64, machines: u64) -> Option<Scored> {
        self.evaluated += 1;
        let m = self.mem_on(mem, offer_i)?;
        let work = self.entries[mem as usize].work?;
        let book = self.book;
        let offer = &book.offers[offer_i as usize];
        let gpu = &self.gpus[self.offer_gpu[offer_i as usize]?];
        let capacity = match &offer.slice {
            Some(s) => s.memory_bytes(),
            None => gpu.usable_bytes(),
        };
        if m.total > capacity {
            return None;
        }
        let fraction = offer.slice.as_ref().map(|s| s.fraction).unwrap_or(1.0);
        let units = offer.units_for(gpus).max(machines);
        let HostRam { need: host_ram, upgrade, unchecked: ram_unchecked, extra_monthly } =
            self.host_ram_on(mem, offer_i, gpus, machines)?;
        let e = &self.entries[mem as usize];
        let peak = match work {
            Work::Train(w) => w.peak,
            Work::Infer(w) => w.peak,
        };
        let dev: Device = self.time.device(gpu, offer.link, fraction, offer.inter_node_gbs, peak);
        let (step, infer, tps, slowdown) = match work {
            Work::Train(mut w) => {
                w.multi_node = machines > 1;
                w.machines = machines.max(1) as f64;
                w.cpu_params_per_step /= machines.max(1) as f64;
                let st = self.time.train_step(&w, &dev, offer.cpu_cores);
                let tps = if st.total_s > 0.0 { w.tokens_per_step / st.total_s } else { 0.0 };
                (st, InferTime::default(), tps, st.slowdown())
            }
            Work::Infer(mut w) => {
                // replicas fill machines whole: a replica spans machines only
                // when there are fewer replicas than machines
                w.machines = (machines.max(1) as f64 / w.replicas.max(1.0)).ceil().max(1.0);
                let it = self.time.infer(&w, &dev);
                let tps = match self.requests {
                    Some(r) => self.time.served_tokens_per_s(&w, &it, &dev, r),
                    None => it.decode_tokens_per_s,
                };
                (StepTime::default(), it, tps, 1.0)
            }
        };
        let u = units as f64;
        let monthly = offer.monthly.map(|p| p.offset(extra_monthly).scale(u));
        let (hourly, prorated) = match offer.hourly_rate() {
            Some((h, pr)) => (Some(h.offset(extra_monthly / HOURS_PER_MONTH).scale(u)), pr),
            None => (None, false),
        };
        let (job_hours, job_tokens) = match self.job {
            Job::None => (None, None),
            Job::Tokens(t) | Job::Deadline { tokens: t, .. } => {
                (if tps > 0.0 { Some(t as f64 / tps / 3600.0) } else { None }, Some(t as f64))
            }
            Job::Hours(hh) => (Some(hh), Some(tps * hh * 3600.0)),
        };
        let job_cost = match (job_hours, hourly) {
            (Some(jh), Some(h)) => Some(h.scale(jh)),
            _ => None,
        };
        let (billed, billing, billed_months) = bill(offer, monthly, hourly, prorated, job_hours);
        let premium = self.premium(e, gpus, machines);
        let base_cost = match billed {
            Some(b) => b.mid(),
            None => f64::INFINITY,
        };
        Some(Scored {
            mem,
            complexity: e.complexity,
            inexact: e.inexact,
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
            billed,
            billing,
            billed_months,
            rank_cost: base_cost * (1.0 + premium),
            slowdown,
            ram_unchecked,
            host_ram,
            peak: dev.peak,
            peak_tflops: dev.flops / 1e12,
        })
    }

    /// Keep a fitting candidate if it is the best of its class: per offer,
    /// GPU count, complexity, and whether it keeps the method and runs the
    /// job unchanged — every question the paths ask filters on no more than
    /// these, so the answers are those of keeping all (and a catalogue of
    /// thousands of offers does not hold millions of candidates).
    fn keep(&mut self, s: Scored) {
        self.fitting += 1;
        if let Some(limit) = self.job.deadline() {
            if !s.job_hours.is_some_and(|h| h <= limit) {
                // too slow for the deadline: only the fastest such plan is kept, to report
                let faster = match (&self.fastest_late, s.job_hours) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(f), Some(h)) => f.job_hours.is_none_or(|fh| h < fh),
                };
                if faster {
                    self.fastest_late = Some(s);
                }
                return;
            }
        }
        let e = &self.entries[s.mem as usize];
        let class =
            (s.offer, s.gpus, s.complexity, same_method(&self.base.task, &e.key), is_unchanged(&self.base.task, e));
        match self.best.get(&class) {
            Some(&i) => {
                if better(&s, &self.scored[i]) {
                    self.scored[i] = s;
                }
            }
            None => {
                self.best.insert(class, self.scored.len());
                self.scored.push(s);
            }
        }
    }

    /// Record that a setup fitting the GPUs of (offer, count) was refused for
    /// host RAM (the smallest need is kept, for the report's note).
    fn refuse_ram(&mut self, offer: u32, gpus: u64, need: u64) {
        let slot = self.ram_refused.entry((offer, gpus)).or_insert(u64::MAX);
        *slot = (*slot).min(need);
    }

    /// The entry runs another global batch than the one asked.
    pub fn global_batch_changed(&self, e: &MemEntry) -> bool {
        match &self.base.task {
            Task::Train(t) => e.global_batch != global_batch(t, &self.base.parallelism),
            Task::Inference(_) => false,
        }
    }

    /// Layouts to search for `gpus`: all of them, or the user's when pinned. A
    /// pin without a GPU count (`--zero 2 --offload cpu`, or a DeepSpeed config,
    /// which never names one) keeps the layout and searches the count.
    fn layouts_for(&self, gpus: u64) -> Vec<Layout> {
        let all = layouts(self.model, gpus, self.base);
        match &self.pinned {
            None => all,
            Some(p) => {
                let given = Layout {
                    tp: p.tp.max(1),
                    pp: p.pp.max(1),
                    sharding: p.sharding,
                    offload_optimizer: p.offload_optimizer,
                    offload_params: p.offload_params,
                };
                let count_ok = (p.gpus <= 1 && !self.pinned_one_gpu) || gpus == p.gpus.max(1);
                let v: Vec<Layout> = all.into_iter().filter(|l| count_ok && *l == given).collect();
                // a layout the search would not propose (PP 32, ZeRO-3 with PP) is still
                // the user's to ask for: it is estimated as given (the estimator refuses
                // what cannot run)
                if v.is_empty() && count_ok && gpus.is_multiple_of(given.tp * given.pp) {
                    vec![given]
                } else {
                    v
                }
            }
        }
    }

    /// Memory keys to try for `gpus` GPUs, grouped: within a group, keys go
    /// from the smallest footprint up, so a group is abandoned once its
    /// smallest member does not fit.
    pub fn key_groups(&self, gpus: u64) -> Vec<Vec<MemKey>> {
        let mut groups = Vec::new();
        let layouts = self.layouts_for(gpus);
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
                let all = [Checkpointing::Full, Checkpointing::Selective, Checkpointing::None];
                let ckpts: &[Checkpointing] = match &self.keep_checkpointing {
                    Some(c) => std::slice::from_ref(c),
                    None => &all,
                };
                for (l, cp) in
                    layouts.iter().flat_map(|l| self.cp_variants(t, gpus, l).into_iter().map(move |c| (l, c)))
                {
                    let dp = (gpus / (l.tp * l.pp * cp)).max(1);
                    let micros = micro_batches(gb.max(dp * pipeline_min_micro_batches(l.pp)), dp, t.batch);
                    for &kind in &kinds {
                        if cp > 1 && kind != TrainKind::Full {
                            continue; // the CP engines (Megatron-LM, torchtitan) train full models
                        }
                        for &precision in &precisions {
                            for &optimizer in &optimizers {
                                if l.offload_optimizer != Offload::None && optimizer.is_8bit() {
                                    continue; // DeepSpeed CPU-Adam replaces the optimizer
                                }
                                if kind != TrainKind::Full && kind != t.kind {
                                    // adapters' optimizer states are a few MiB: swapping the
                                    // optimizer or offloading only them cannot change a fit
                                    if optimizer != t.optimizer {
                                        continue;
                                    }
                                    if l.offload_optimizer != Offload::None && l.offload_params == Offload::None {
                                        continue;
                                    }
                                }
                                // the launchers with an interleaved schedule (Megatron-LM, torchtitan)
                                // train full models: adapters keep plain 1F1B
                                let layers = if kind == TrainKind::Full { self.model.num_layers } else { 0 };
                                for v in pipeline_schedules(layers, l.pp) {
                                    // hybrid sharding is searched without context parallelism
                                    for ((ep, etp), dp_replicate, hpz) in self
                                        .train_variants(gpus, l)
                                        .into_iter()
                                        .filter(|&(_, r, h)| cp == 1 || (r == 1 && h == 1))
                                    {
                                        let mut g = Vec::new();
                                        for &(micro, accum) in &micros {
                                            if v > 1 && !accum.is_multiple_of(l.pp) {
                                                continue; // Megatron's interleaved schedule: m a multiple of pp
                                            }
                                            for &ck in ckpts {
                                                g.push(MemKey {
                                                    gpus,
                                                    tp: l.tp,
                                                    pp: l.pp,
                                                    virtual_stages: v,
                                                    replicas: 1,
                                                    ep,
                                                    dp_attention: 1,
                                                    sharding: l.sharding,
                                                    offload_optimizer: l.offload_optimizer,
                                                    offload_params: l.offload_params,
                                                    dp_replicate,
                                                    hpz,
                                                    etp,
                                                    train: Some(TrainKey {
                                                        kind,
                                                        precision,
                                                        optimizer,
                                                        checkpointing: ck,
                                                        micro_batch: micro,
                                                        grad_accum: accum,
                                                    }),
                                                    infer: None,
                                                    cp,
                                                });
                                            }
                                        }
                                        if !g.is_empty() {
                                            groups.push(g);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            Task::Inference(s) => groups = self.infer_key_groups(s, gpus, &layouts),
        }
        groups
    }

    /// The inference keys of [`Self::key_groups`]: per layout, the weight
    /// and KV formats to try, and for a MoE model served by vLLM or SGLang
    /// the expert-parallel variants of the layout ([`Self::expert_variants`]).
    fn infer_key_groups(&self, s: &InferenceSetup, gpus: u64, layouts: &[Layout]) -> Vec<Vec<MemKey>> {
        let mut groups = Vec::new();
        let mut quants = vec![None];
        let mut kvs = vec![s.kv_dtype];
        if self.allow.quant && s.quant.is_none() {
            quants.push(Some(8));
            quants.push(Some(4));
            if s.kv_dtype.bits() > 8 {
                kvs.push(DType::F8);
            }
        }
        for l in layouts {
            let replicas = (gpus / (l.tp * l.pp)).max(1);
            if replicas > s.concurrency.max(1) {
                continue; // a replica without a sequence serves nothing
            }
            for (ep, dp_attention) in self.expert_variants(s, l, replicas) {
                let mut g = Vec::new();
                for &q in quants.iter().rev() {
                    for &kv in kvs.iter().rev() {
                        g.push(MemKey {
                            gpus,
                            tp: l.tp,
                            pp: l.pp,
                            virtual_stages: 1,
                            replicas,
                            ep,
                            dp_attention,
                            sharding: Sharding::None,
                            offload_optimizer: Offload::None,
                            offload_params: Offload::None,
                            dp_replicate: 1,
                            hpz: 1,
                            etp: 0,
                            train: None,
                            infer: Some(InferKey { quant_bits: q, kv_dtype: kv }),
                            cp: 1,
                        });
                    }
                }
                groups.push(g);
            }
        }
        groups
    }

    /// The training job runs under Megatron (`--engine megatron`, `--launcher megatron`).
    fn megatron(&self) -> bool {
        matches!(&self.base.task, Task::Train(t) if t.engine == vramfit_core::workload::Engine::Megatron)
    }

    /// Megatron plans with TP run sequence parallelism (`--sequence-parallel`):
    /// required for a MoE model (`MoELayer.forward` raises without it in training)
    /// and what Megatron's recipes set with TP for a dense one (Korthikanti et al.
    /// 2022: the norm and dropout activations split over the TP ranks too).
    fn sequence_parallel(&self, tp: u64) -> bool {
        tp > 1 && self.megatron()
    }

    /// Context-parallel degrees tried for a training layout `l` on `gpus`: 1,
    /// and — when the engine runs CP (Megatron-LM, torchtitan: the rule of
    /// `validate::context_parallel`) and a sequence is long, at least
    /// [`CP_MIN_SEQ`] tokens — the powers of two that divide the data-parallel
    /// ranks and leave each rank at least [`CP_MIN_LOCAL_SEQ`] tokens of each
    /// sequence, the largest within the NVLink domain beside TP (TP × CP ≤ 8:
    /// Megatron-LM orders its ranks `tp-cp-ep-dp-pp`, so a CP group sits next to
    /// the TP ranks and its ring stays on NVLink) and the largest at all. A
    /// pinned `--cp` keeps only itself.
    pub fn cp_variants(&self, t: &TrainSetup, gpus: u64, l: &Layout) -> Vec<u64> {
        let pinned = self.pinned.as_ref().map(|p| p.cp.max(1));
        if let Some(cp) = pinned.filter(|&c| c > 1) {
            let ok = gpus.is_multiple_of(l.tp * l.pp * cp);
            return if ok { vec![cp] } else { Vec::new() };
        }
        let mut v = vec![1];
        let runs_cp = matches!(t.engine, Engine::Megatron | Engine::Torchtitan)
            && t.attention != vramfit_core::workload::AttentionImpl::Eager;
        if pinned.is_some() || !runs_cp || t.seq < CP_MIN_SEQ {
            return v;
        }
        let dp = gpus / (l.tp * l.pp);
        let fits = |c: &u64| dp.is_multiple_of(*c) && t.seq / c >= CP_MIN_LOCAL_SEQ && t.seq.is_multiple_of(2 * c);
        let domain = (8 / l.tp).max(1);
        for cap in [domain, dp] {
            let best = powers_of_two_upto(cap.min(dp)).into_iter().filter(|&c| c > 1).rev().find(fits);
            if let Some(c) = best.filter(|c| !v.contains(c)) {
                v.push(c);
            }
        }
        v
    }

    /// ((EP, ETP), HSDP replicas, hpZ group) variants of a training layout `l`
    /// on `gpus`: the expert grids ([`Self::train_expert_variants`]) with plain
    /// sharding, then the hybrid-sharded variants ([`Self::hybrid_replicas`])
    /// and DeepSpeed ZeRO++ hpZ ([`Self::hpz_groups`]).
    fn train_variants(&self, gpus: u64, l: &Layout) -> Vec<((u64, u64), u64, u64)> {
        let grids = self.train_expert_variants(gpus, l);
        let plain = grids.iter().find(|&&(ep, _)| ep == 1).copied();
        let mut v: Vec<((u64, u64), u64, u64)> = grids.into_iter().map(|g| (g, 1, 1)).collect();
        if let Some(g) = plain {
            v.extend(self.hybrid_replicas(gpus, l).into_iter().map(|r| (g, r, 1)));
            v.extend(self.hpz_groups(gpus, l).into_iter().map(|h| (g, 1, h)));
        }
        if let Some(p) = &self.pinned {
            v.retain(|&(_, r, h)| r == p.dp_replicate.max(1) && h == p.hpz.max(1));
            if v.is_empty() && (p.dp_replicate > 1 || p.hpz > 1) {
                // the user's hybrid or hpZ layout, estimated as given (`allowed` places it)
                v.push(((1, 0), p.dp_replicate.max(1), p.hpz.max(1)));
            }
        }
        v
    }

    /// DeepSpeed ZeRO++ hpZ groups tried for a ZeRO-3 layout `l` on `gpus`:
    /// the GPUs of one machine, on each multi-machine offer with a fabric that
    /// `gpus` fills with 2 or more whole machines. hpZ keeps ZeRO-3's shards over
    /// every rank and adds a secondary 16-bit partition of the parameters over
    /// the machine (`zero_hpz_partition_size`, the setting the ZeRO++ paper and
    /// DeepSpeed's tutorial use: the GPUs per node, Wang et al. 2023 §3.2,
    /// docs/_tutorials/zeropp.md), so backward's all-gathers stay on NVLink
    /// for 2 B × parameters ÷ GPUs-per-machine more memory. DeepSpeed ZeRO-3
    /// only: a layout without TP, PP or offload (`validate::hpz`), under an
    /// engine whose ZeRO-3 is DeepSpeed's (the Hugging Face Trainer with a
    /// ds_config, `--engine deepspeed`), not FSDP, not Megatron.
    fn hpz_groups(&self, gpus: u64, l: &Layout) -> Vec<u64> {
        let mut v = Vec::new();
        let plain_zero3 = l.sharding == Sharding::Zero3 && l.tp <= 1 && l.pp <= 1;
        if !plain_zero3 || l.offload_optimizer.is_some() || l.offload_params.is_some() {
            return v;
        }
        let deepspeed = matches!(&self.base.task, Task::Train(t)
            if t.framework().sharder != vramfit_core::workload::Sharder::Fsdp && !self.megatron());
        if !deepspeed || self.launcher.is_some_and(|k| k != Launcher::Deepspeed) {
            return v;
        }
        for o in self.book.offers.iter().filter(|o| o.max_machines > 1 && o.inter_node_gbs.is_some()) {
            let per_node = o.gpus_per_node();
            if per_node >= 2 && gpus.is_multiple_of(per_node) && gpus / per_node >= 2 && !v.contains(&per_node) {
                v.push(per_node);
            }
        }
        v
    }

    /// Hybrid sharding (HSDP) replicas tried for a ZeRO-3 layout `l` without
    /// pipeline stages or offload on `gpus`: one replica per machine of each
    /// multi-machine offer whose machines hold a shard group of 2 or more
    /// data-parallel ranks (PyTorch FSDP `HYBRID_SHARD` shards within the
    /// node, `_init_intra_and_inter_node_groups`; torchtitan's
    /// `data_parallel_shard_degree` × `data_parallel_replicate_degree`; Zhao et
    /// al. 2023 §3.2.2): the shards' all-gathers and reduce-scatters stay on
    /// NVLink and only the gradient shard's all-reduce crosses the fabric, for
    /// the memory of ZeRO-3 over one machine. `allowed` keeps a key to the
    /// offer whose machine count is its replica count. Not under Megatron (no
    /// HSDP in its distributed optimizer).
    fn hybrid_replicas(&self, gpus: u64, l: &Layout) -> Vec<u64> {
        let mut v = Vec::new();
        if l.sharding != Sharding::Zero3 || l.pp > 1 || l.offload_optimizer.is_some() || l.offload_params.is_some() {
            return v;
        }
        if self.megatron() {
            return v;
        }
        let dp = gpus / (l.tp.max(1) * l.pp.max(1));
        for o in self.book.offers.iter().filter(|o| o.max_machines > 1 && o.inter_node_gbs.is_some()) {
            let per_node = o.gpus_per_node();
            if !per_node.is_multiple_of(l.tp.max(1)) || !gpus.is_multiple_of(per_node) {
                continue;
            }
            let group = per_node / l.tp.max(1);
            let r = gpus / per_node;
            if group >= 2 && r >= 2 && dp == group * r && !v.contains(&r) {
                v.push(r);
            }
        }
        v
    }

    /// (EP, ETP) grids tried for a training layout `l` on `gpus`: (1, 0) — the
    /// experts split by TP, Megatron's default — and under Megatron for a MoE
    /// model, for expert-tensor-parallel 1 and TP (Megatron's two common
    /// choices: experts whole on each EP rank, or split like the dense
    /// linears), the largest EP that divides the routed experts and the
    /// stage's ranks ÷ ETP (`--num-experts` a multiple of
    /// `--expert-model-parallel-size`; ETP × EP × expert-DP = the stage's ranks,
    /// parallel_state.py `initialize_model_parallel`), and the largest such EP
    /// with EP × ETP within 8 ranks (one NVLink machine: the all-to-alls stay
    /// on NVLink; `validate::megatron_expert_grid` checks the rest). A pinned
    /// layout keeps its own EP and ETP.
    fn train_expert_variants(&self, gpus: u64, l: &Layout) -> Vec<(u64, u64)> {
        let experts = self.model.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
        let stage = gpus / l.pp.max(1);
        let tp = l.tp.max(1);
        let mut v = vec![(1, 0)];
        if self.megatron() && experts > 1 {
            for etp in [1, tp] {
                // the EP ranks of one expert-TP slot: the stage's ranks ÷ ETP
                let ranks = stage / etp;
                let fits = |e: &u64| experts.is_multiple_of(*e) && ranks.is_multiple_of(*e);
                for cap in [ranks, (8 / etp).max(1)] {
                    let Some(e) = (2..=cap.min(experts)).rev().find(fits) else { continue };
                    if !v.contains(&(e, etp)) {
                        v.push((e, etp));
                    }
                }
            }
        }
        // DeepSpeed AutoEP keeps each expert whole on its EP rank: ETP unset (1 with EP)
        for e in self.autoep_variants(gpus, l) {
            if !v.contains(&(e, 0)) {
                v.push((e, 0));
            }
        }
        match &self.pinned {
            Some(p) => {
                let want = (p.ep.max(1), p.expert_tp());
                let resolved = |&(e, t): &(u64, u64)| {
                    (
                        e,
                        if t == 0 {
                            if e > 1 {
                                1
                            } else {
                                tp
                            }
                        } else {
                            t
                        },
                    )
                };
                let mut kept: Vec<(u64, u64)> = v.iter().filter(|g| resolved(g) == want).copied().collect();
                if kept.is_empty() {
                    // the user's expert grid, estimated as given (validate refuses a bad one)
                    kept.push((p.ep.max(1), p.etp));
                }
                kept
            }
            None => v,
        }
    }

    /// DeepSpeed AutoEP degrees (`expert_parallel.autoep_size`, DeepSpeed PR
    /// #7938) tried for a training layout `l` on `gpus` when the job runs under
    /// DeepSpeed (`--engine deepspeed`, or the Trainer's ZeRO path:
    /// [`vramfit_core::workload::autoep::runs_autoep`]) on a model of an AutoEP
    /// preset: as under Megatron, the largest EP dividing both the routed
    /// experts and the GPUs, and the largest within 8 ranks (one NVLink
    /// machine); only without TP/PP, ZeRO-3 or offload (the rules of
    /// [`vramfit_core::workload::autoep::autoep_rules`], which the estimate
    /// applies to each key).
    fn autoep_variants(&self, gpus: u64, l: &Layout) -> Vec<u64> {
        let Task::Train(t) = &self.base.task else { return Vec::new() };
        let plain = l.tp <= 1
            && l.pp <= 1
            && l.sharding != Sharding::Zero3
            && !l.offload_optimizer.is_some()
            && !l.offload_params.is_some();
        let deepspeed = vramfit_core::workload::autoep::runs_autoep(t, &self.base.parallelism);
        if !plain || !deepspeed || vramfit_core::workload::autoep::autoep_preset(self.model).is_err() {
            return Vec::new();
        }
        let experts = self.model.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
        let fits = |e: &u64| experts.is_multiple_of(*e) && gpus.is_multiple_of(*e);
        let mut v = Vec::new();
        for cap in [gpus, 8] {
            if let Some(e) = (2..=cap.min(experts)).rev().find(fits).filter(|e| !v.contains(e)) {
                v.push(e);
            }
        }
        v
    }

    /// (EP, data-parallel attention) variants of a serving layout `l`:
    /// (1, 1) always; for a MoE model served by vLLM or SGLang with at least
    /// TP routed experts, on one model instance (vLLM spans EP over every
    /// data-parallel rank, `ep_size = dp_size × tp_size`, so replicas would
    /// not keep EP = TP), also the experts split whole over the TP ranks
    /// (EP = TP: vLLM `--enable-expert-parallel`, SGLang `--ep-size`) and,
    /// without pipeline stages and with a sequence for each of TP attention
    /// groups, attention data-parallel over all of them (SGLang
    /// `--enable-dp-attention --dp tp`, vLLM `--data-parallel-size tp`): the
    /// layout DeepSeek serves V3 with (DeepSeek-V3 technical report §3.4.2:
    /// attention TP4 + DP8 with EP32 at decode). A pinned `--ep` or
    /// `--dp-attention` keeps only the layouts that match it.
    fn expert_variants(&self, s: &InferenceSetup, l: &Layout, replicas: u64) -> Vec<(u64, u64)> {
        let mut v = vec![(1, 1)];
        let tp = l.tp;
        let experts = self.model.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
        if s.engine.serving().is_some() && tp > 1 && experts >= tp && replicas == 1 {
            v.push((tp, 1));
            if l.pp == 1 && s.concurrency >= tp {
                v.push((tp, tp));
            }
        }
        match &self.pinned {
            Some(p) => v.into_iter().filter(|&(e, d)| e == p.ep.max(1) && d == p.dp_attention.max(1)).collect(),
            None => v,
        }
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
            .map(|oi| (oi, Self::counts_for(&self.book.offers[oi as usize], self.pinned_gpus())))
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
            for (n, machines) in Self::counts_for(o, self.pinned_gpus()) {
                match by_count.iter_mut().find(|(c, _)| *c == n) {
                    Some((_, v)) => v.push((oi as u32, machines)),
                    None => by_count.push((n, vec![(oi as u32, machines)])),
                }
            }
        }
        by_count.sort_by_key(|(n, _)| *n);
        // per multi-machine offer: the fewest machines that held the job without offload
        let mut first_fit: HashMap<u32, u64> = HashMap::new();
        for (n, mut offers) in by_count {
            offers.retain(|&(oi, machines)| match first_fit.get(&oi) {
                Some(&f) if machines > f.saturating_mul(MACHINE_SEARCH_SPAN) => {
                    let slot = self.machines_skipped.entry(oi).or_insert((f, u64::MAX));
                    slot.1 = slot.1.min(machines);
                    false
                }
                _ => true,
            });
            if offers.is_empty() {
                continue;
            }
            let max_cap = offers
                .iter()
                .filter_map(|&(oi, _)| {
                    let o = &self.book.offers[oi as usize];
                    match &o.slice {
                        Some(s) => Some(s.memory_bytes()),
                        None => self.offer_gpu(oi).map(|g| g.usable_bytes()),
                    }
                })
                .max()
                .unwrap_or(0);
            for mut group in self.key_groups(n) {
                if let Some(l) = self.launcher {
                    group.retain(|k| key_expressible(l, k));
                }
                // memory never falls as checkpointing relaxes (full → selective → none)
                // or the micro-batch grows: once a member is too big for every card,
                // skip what can only be bigger
                let mut skip_micro: Option<u64> = None;
                let mut usable: Vec<(u32, u64)> = Vec::new();
                for key in group {
                    let micro = key.train.as_ref().map(|t| (t.micro_batch, t.checkpointing));
                    if let (Some(m), Some((km, _))) = (skip_micro, micro) {
                        if km == m {
                            continue;
                        }
                    }
                    usable.clear();
                    usable.extend(offers.iter().copied().filter(|&(oi, machines)| {
                        let o = &self.book.offers[oi as usize];
                        self.offer_gpu(oi).is_some_and(|g| self.allowed(&key, o, g, machines))
                    }));
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
                    for &(oi, machines) in &usable {
                        if let Some(s) = self.score(i, oi, n, machines) {
                            // with a deadline, the cluster grows until a plan meets it
                            let on_time = match self.job.deadline() {
                                Some(limit) => s.job_hours.is_some_and(|h| h <= limit),
                                None => true,
                            };
                            if o_multi(self.book, oi) && !self.offloads(&s) && on_time {
                                first_fit.entry(oi).or_insert(machines);
                            }
                            self.keep(s);
                        }
                    }
                }
            }
        }
    }
}

/// The offer can join machines into one job.
fn o_multi(book: &PriceBook, oi: u32) -> bool {
    let o = &book.offers[oi as usize];
    o.max_machines > 1 && o.inter_node_gbs.is_some()
}

/// Host RAM assumed per GPU when an offer does not list its machine's RAM:
/// 64 GB, as the seed's one listed single-card machine (A100 40G, 64 GB).
/// An offload plan needing more is refused; one needing less says the
/// figure was assumed.
pub const ASSUMED_RAM_GB_PER_GPU: f64 = 64.0;

/// DeepSpeed's `additional_buffer_factor` in its host-RAM estimators (1.5).
pub const DEEPSPEED_BUFFER_FACTOR: f64 = 1.5;

/// What the job bills on `offer`: whole months of a monthly-only offer,
/// hours (at least the minimum term) where an hourly rate is listed —
/// whichever is cheaper when both are. Without a job length, a month.
fn bill(
    offer: &Offer,
    monthly: Option<PriceRange>,
    hourly: Option<PriceRange>,
    prorated: bool,
    job_hours: Option<f64>,
) -> (Option<PriceRange>, Billing, Option<u64>) {
    let hours = job_hours.unwrap_or(HOURS_PER_MONTH);
    let months = if hours.is_finite() { (hours / HOURS_PER_MONTH).ceil().max(1.0) } else { f64::INFINITY };
    let by_month = monthly.map(|m| m.scale(months));
    let by_hour = match (hourly, prorated) {
        (Some(h), false) => Some(h.scale(hours.max(offer.min_hours.unwrap_or(1.0)))),
        _ => None,
    };
    let as_months = |m: PriceRange| (Some(m), Billing::Monthly, Some(months.min(u64::MAX as f64) as u64));
    match (by_month, by_hour) {
        (Some(m), Some(h)) if m.low < h.low => as_months(m),
        (_, Some(h)) => (Some(h), Billing::Hourly, None),
        (Some(m), None) => as_months(m),
        (None, None) => (None, Billing::Monthly, None),
    }
}

/// One parallel layout of a GPU count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub tp: u64,
    pub pp: u64,
    pub sharding: Sharding,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
}

/// Most virtual pipeline stages per rank the search tries (Megatron-LM's
/// published runs interleave 2–8 chunks per rank; Narayanan et al. 2021
/// §5.3.2 compare interleaved and plain 1F1B on 175B with 8 stages).
pub const MAX_VIRTUAL_STAGES: u64 = 8;

/// Pipeline schedules to try for `pp` stages of a `layers`-layer model
/// (0: plain 1F1B only): plain 1F1B (1) and, with 2+ stages, the
/// interleaved schedule with the most virtual stages per rank v in
/// 2..=[`MAX_VIRTUAL_STAGES`] that split the layers into pp × v equal chunks
/// (Megatron-LM's `--num-layers-per-virtual-pipeline-stage`, torchtitan's
/// `pipeline_parallel_layers_per_stage`): it idles least ((p − 1)/(v·m)) and
/// holds the fewest extra micro-batches (pp + ⌈(pp − 1)/v⌉) for v times
/// 1F1B's stage traffic; the time model weighs that against plain 1F1B. One
/// interleaved variant keeps the search's estimates at most doubled per
/// pipeline layout.
pub fn pipeline_schedules(layers: u64, pp: u64) -> Vec<u64> {
    let mut v = vec![1];
    if pp < 2 || layers == 0 {
        return v;
    }
    v.extend((2..=MAX_VIRTUAL_STAGES).rev().find(|&c| layers.is_multiple_of(pp.saturating_mul(c))));
    v
}

/// Layouts for `gpus`. Inference: every tp × pp whose product divides the
/// count, the rest as replicas (each serves its share of the sequences).
pub fn layouts(spec: &ModelSpec, gpus: u64, base: &Workload) -> Vec<Layout> {
    let mut v = Vec::new();
    let train = matches!(base.task, Task::Train(_));
    let plain =
        |tp, pp, sharding| Layout { tp, pp, sharding, offload_optimizer: Offload::None, offload_params: Offload::None };
    for tp in powers_of_two_upto(gpus.min(8)) {
        if !spec.num_heads.is_multiple_of(tp) {
            continue;
        }
        // every stage count that divides the GPUs left after TP, not only powers of
        // two: 12 machines of 8 run TP 8 × PP 12 (stages need not divide the layers:
        // DeepSpeed's `PipelineModule` partitions by parameters, Megatron-LM by
        // `--decoder-first-pipeline-num-layers`, torchtitan by its split points; the
        // estimate sizes the fullest stage, ⌈L / pp⌉ layers)
        for pp in (1..=(gpus / tp).min(MAX_SEARCH_PP)).filter(|pp| (gpus / tp).is_multiple_of(*pp)) {
            if !gpus.is_multiple_of(tp * pp) || pp > spec.num_layers {
                continue;
            }
            let dp = gpus / (tp * pp);
            if !train {
                v.push(plain(tp, pp, Sharding::None));
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
                    v.push(plain(tp, pp, z));
                }
            } else {
                v.push(plain(tp, pp, Sharding::None));
            }
            if tp == 1 && pp == 1 {
                for (z, o, p) in [
                    (Sharding::Zero2, Offload::Cpu, Offload::None),
                    (Sharding::Zero3, Offload::Cpu, Offload::None),
                    (Sharding::Zero3, Offload::Cpu, Offload::Cpu),
                ] {
                    v.push(Layout { tp, pp, sharding: z, offload_optimizer: o, offload_params: p });
                }
            }
        }
    }
    v
}

/// Best price of an offer on a yearly term, if any discounts exist.
pub fn yearly(book: &PriceBook, offer: &Offer) -> Option<(PriceRange, Vec<String>)> {
    book.best_monthly(offer, Term::Yearly)
}
