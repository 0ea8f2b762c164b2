//! The planner's answer ([`PlanReport`]): typed values, and the body of the
//! `plan --json` schema (docs/plan.md). Each type here is serialized as it
//! is — `vramfit-report` puts the document's header around it and renders
//! the text — so a field is declared once. Fields that are not part of the
//! schema (a row's workload) are `#[serde(skip)]`; enums use their serde
//! names, equal to their `name()`.

use crate::emit::Launcher;
use crate::ladder::Ladder;
use crate::pricing::{Fabric, OfferFlag, PriceRange};
use crate::summary::{SetupSummary, Switch};
use crate::time::{Requests, StepTime};
use crate::types::{Billing, Complexity};
use serde::Serialize;
use vramfit_core::hardware::Link;
use vramfit_core::hardware::PeakKind;
use vramfit_core::workload::Workload;

/// One priced, scored plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRow {
    pub offer_id: String,
    pub provider: String,
    pub offer_name: String,
    pub gpu_id: String,
    pub gpu_name: String,
    pub gpus: u64,
    pub machines: u64,
    pub link: Link,
    /// the network between the machines (multi-machine plans on an offer that names it)
    pub fabric: Option<Fabric>,
    pub currency: String,
    pub flags: Vec<OfferFlag>,
    pub setup: SetupSummary,
    /// what differs from the user's job
    pub switches: Vec<Switch>,
    pub per_gpu_bytes: u64,
    pub gpu_memory_bytes: u64,
    pub headroom_bytes: i128,
    /// weights + master weights + gradients + optimizer states, per GPU
    pub model_states_bytes: u64,
    /// host RAM for offloaded state, the whole job (all ranks, all machines;
    /// the same meaning as `Ledger::cpu_bytes`)
    pub cpu_bytes: u64,
    /// host RAM one machine needs for offload (DeepSpeed's estimator; 0 without offload)
    pub host_ram_bytes: u64,
    /// the offer's host: CPU cores and RAM (GB) as listed (None: not listed)
    pub host_cpu_cores: Option<u64>,
    pub host_ram_gb: Option<f64>,
    pub fits: bool,
    /// time per token against the ideal on this hardware (recompute, comm, offload, bubbles)
    pub slowdown: f64,
    pub step: StepTime,
    pub tokens_per_s: f64,
    pub monthly: Option<PriceRange>,
    /// best monthly price on a yearly term, with the discounts used
    pub monthly_yearly: Option<PriceRange>,
    pub yearly_discounts: Vec<String>,
    pub hourly: Option<PriceRange>,
    /// the hourly figure is the monthly one / 730
    pub hourly_prorated: bool,
    pub job_hours: Option<f64>,
    pub job_tokens: Option<f64>,
    pub job_cost: Option<PriceRange>,
    /// whole months billed when only monthly prices exist
    pub months_billed: Option<u64>,
    /// what the rental bills for the job (months of a monthly-only offer,
    /// hours — at least the minimum term — of an hourly one)
    pub billed: Option<PriceRange>,
    pub billing: Billing,
    /// the ranking key: `billed × (1 + premiums)` for moving parts
    pub rank_cost: f64,
    pub complexity: Complexity,
    /// the peak rate the time model used, and its dense TFLOP/s per GPU
    pub peak: PeakKind,
    pub peak_tflops: f64,
    pub upgrades: Vec<String>,
    pub notes: Vec<String>,
    /// the workload this row plans (for launch configs and the ladder's rungs; not in the JSON)
    #[serde(skip)]
    pub workload: Option<Workload>,
}

/// Path (2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoreCards {
    /// per-GPU bytes of the unchanged job on one GPU
    pub single_bytes: Option<u64>,
    /// per-GPU bytes of the unchanged job with plain data parallelism over `dp_gpus`
    pub dp_only_bytes: Option<u64>,
    pub dp_gpus: u64,
    pub best: Option<PlanRow>,
    /// the fewest of the user's own cards that would hold it (PCIe, unpriced)
    pub on_have: Option<PlanRow>,
}

/// Path (3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiggerCard {
    /// per-GPU bytes of the unchanged job on one GPU
    pub need_bytes: Option<u64>,
    pub best: Option<PlanRow>,
    /// catalogue GPUs big enough, offered or not
    pub gpus_that_fit: Vec<String>,
}

/// Single cards against a whole 8-GPU machine for this job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEven {
    pub single: PlanRow,
    pub machine: PlanRow,
    pub currency: String,
    /// machine monthly price / single-card monthly price
    pub price_ratio: Option<PriceRange>,
    /// machine tokens/s / single-card tokens/s
    pub speed_ratio: f64,
    /// the machine is cheaper per token (speed ratio above the price ratio)
    pub machine_cheaper_per_token: Option<bool>,
    /// the per-card offer stacked in `cards`
    pub cards_offer: Option<String>,
    /// the single card's offer at each GPU count that holds the job
    pub cards: Vec<CardsPoint>,
    /// the fewest single cards that hold the job
    pub fewest_cards: Option<u64>,
    /// from how many single cards the machine is the better buy: the first
    /// count at which those cards cost more per trained token than the
    /// machine (list prices, middle of each range); None: single cards stay cheaper per
    /// token at every count offered
    pub machine_better_from: Option<u64>,
}

/// Renting `gpus` of the single-card offer for this job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardsPoint {
    pub gpus: u64,
    pub tokens_per_s: f64,
    pub monthly: Option<PriceRange>,
    pub billed: Option<PriceRange>,
    pub job_hours: Option<f64>,
    /// monthly price (low) per million tokens/s-months: cost per token, comparable across counts
    pub cost_per_mtok: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchStats {
    pub candidates: u64,
    pub fitting: u64,
    pub estimates: u64,
}

/// What the planned job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Train,
    Inference,
}

impl JobKind {
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Train => "train",
            JobKind::Inference => "inference",
        }
    }
}

/// The job size the plan is costed for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobSize {
    pub tokens: Option<u64>,
    pub hours: Option<f64>,
    /// the user gave none: this is the planner's default (stated in the output)
    pub assumed: bool,
    /// serving: the requests the throughput counts (prompt prefilled, then output decoded)
    pub requests: Option<Requests>,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanReport {
    pub task: JobKind,
    /// the document's header carries it (`job.tokens`, `job.hours`, `job.assumed`)
    #[serde(skip)]
    pub job: JobSize,
    /// the user fixed the layout (`--gpus`/`--zero`/`--tp`/`--pp`/`--offload`): only it was searched
    pub pinned: Option<String>,
    pub params_total: u64,
    /// the unchanged job on one GPU, per-GPU bytes
    pub baseline_bytes: Option<u64>,
    pub have: Option<String>,
    pub have_memory_bytes: Option<u64>,
    /// bytes the unchanged job lacks on the user's card (negative: spare)
    pub have_gap_bytes: Option<i128>,
    pub ranked: Vec<PlanRow>,
    pub software: Option<Ladder>,
    pub more_cards: MoreCards,
    pub bigger_card: BiggerCard,
    pub break_even: Option<BreakEven>,
    pub recommended: Option<PlanRow>,
    pub reason: String,
    /// with `--have`: the user's own card(s) running the job (no offload), when they hold it
    pub own_card: Option<PlanRow>,
    /// the best rental (the recommendation when the own card does not hold the job)
    pub best_rental: Option<PlanRow>,
    /// with a token count: ranked plans that rent for less than the recommended
    /// one but cost more over the job (beyond a price tie, [`crate::PRICE_TIE`])
    pub cheaper_to_rent: Vec<PlanRow>,
    /// with a deadline (`--tokens N --hours H`) that no plan meets: the
    /// fastest plan found, and how long it takes (`job_hours`)
    pub fastest_late: Option<PlanRow>,
    /// the launcher the plans must be runnable by (`--launcher`, `--emit`):
    /// every row, the recommendation included, is one it can launch
    pub launcher: Option<Launcher>,
    /// with a launcher: the best plan overall when the launcher cannot run
    /// it (the notes say what it needs and what it saves)
    pub best_overall: Option<PlanRow>,
    pub stats: SearchStats,
    pub notes: Vec<String>,
}
