//! The planner: the cheapest setup that fits a job, and what each of the
//! three ways out costs — (1) software switches on the card the user has,
//! (2) more cards with sharding that really lowers per-GPU memory, (3) a
//! bigger single card — with job time and cost from a documented time model.
//!
//! Pure: it takes the model, the user's workload, the GPU catalogue and the
//! price book as values and returns a [`PlanReport`]. Memory comes only from
//! [`vramfit_core::estimate()`]; this module holds no memory formulas. Money stays
//! in the offer's currency (no exchange rates): plans in different
//! currencies are ranked separately.
//!
//! Files, each depending only on those listed before it (no import circle:
//! `crates/cli/tests/code_shape.rs` checks it): [`pricing`] (offers, discounts,
//! upgrades, price ranges), [`gemm`] (compute efficiency from GEMM shapes) and
//! [`time`] (the time model and its constants);
//! [`types`] (the shared data types: what is allowed, the job's size, a
//! setup's identity and estimate, a scored candidate); [`work`] (a setup's
//! hardware-independent work); [`calibrate`] (the time model against
//! published throughputs); [`ladder`] (path 1); `summary` ([`SetupSummary`],
//! [`Switch`]); [`megatron`] (Megatron-LM's launch script); [`emit`] (launch
//! configs, the [`Launcher`] rules); `report`
//! (the answer: [`PlanReport`], [`PlanRow`]); `rank` (ordering,
//! [`PRICE_TIE`]); `request` ([`PlanRequest`]); [`search`] (the candidate
//! space and the memoized scoring loop); `row` (a scored candidate as a
//! [`PlanRow`]); `paths` ([`plan()`]: the paths out and the recommendation);
//! `runnable` ([`runnable_plan()`]: the plan a launcher can run, `--emit`).
//! [`sweep`] (the largest context, concurrency or micro-batch that fits a
//! card) stands apart: it uses only the estimator.

pub mod calibrate;
pub mod emit;
pub mod gemm;
pub mod ladder;
pub mod megatron;
mod paths;
pub mod pricing;
mod rank;
mod report;
mod request;
mod row;
mod runnable;
pub mod search;
mod summary;
pub mod sweep;
#[cfg(test)]
mod tests;
pub mod time;
pub mod types;
pub mod work;

pub use emit::Launcher;
pub use ladder::{Ladder, LadderStep, StepStatus};
pub use paths::{plan, price_words};
pub use pricing::{
    Discount, DiscountKind, Fabric, FabricKind, Offer, OfferFlag, PriceBook, PriceRange, Slice, Term, Upgrade,
    FABRIC_EFFICIENCY, HOURS_PER_MONTH,
};
pub use rank::{costs_more, PRICE_TIE};
pub use report::{BiggerCard, BreakEven, CardsPoint, JobKind, JobSize, MoreCards, PlanReport, PlanRow, SearchStats};
pub use request::{assumed_serving_engine, PlanRequest};
pub use runnable::{runnable_plan, NotRunnable, Replaced, RunnablePlan};
pub use search::Search;
pub use summary::{summarize, switches, Method, SetupSummary, Switch};
pub use time::{Requests, StepTime, TimeModel};
pub use types::{default_job, Allow, Billing, Complexity, Job, MemKey, Scored, DEFAULT_TRAIN_TOKENS};
