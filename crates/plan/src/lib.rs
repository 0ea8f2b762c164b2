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
//! Submodules: [`search`] (the candidate space and the memoized scoring
//! loop), [`time`] (the time model and its constants), [`pricing`]
//! (offers, discounts, upgrades, price ranges), [`ladder`] (path 1),
//! `paths` ([`plan()`]: the paths out and the recommendation), `rank`
//! (ordering, [`PRICE_TIE`]), `row` (a scored candidate as a [`PlanRow`]),
//! `summary` ([`SetupSummary`], [`Switch`]), `request` and `report` (what
//! goes in and comes out).

pub mod calibrate;
pub mod emit;
pub mod ladder;
mod paths;
pub mod pricing;
mod rank;
mod report;
mod request;
mod row;
pub mod search;
mod summary;
pub mod sweep;
#[cfg(test)]
mod tests;
pub mod time;

pub use ladder::{Ladder, LadderStep, StepStatus};
pub use paths::{plan, price_words};
pub use pricing::{Discount, DiscountKind, Offer, PriceBook, PriceRange, Slice, Term, Upgrade, HOURS_PER_MONTH};
pub use rank::{costs_more, PRICE_TIE};
pub use report::{
    model_states, BiggerCard, BreakEven, CardsPoint, JobKind, JobSize, MoreCards, PlanReport, PlanRow, SearchStats,
};
pub use request::{Allow, Job, PlanRequest};
pub use search::{default_job, Billing, Complexity, MemKey, Scored, Search, DEFAULT_TRAIN_TOKENS};
pub use summary::{summarize, switches, Method, SetupSummary, Switch};
pub use time::{StepTime, TimeModel};
