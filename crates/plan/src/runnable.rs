//! The plan a launcher can run (`plan --emit`): the recommended plan when the
//! launcher can express it; otherwise the planner is asked again with the
//! launcher in the request ([`PlanRequest::launcher`]), so only setups it can
//! express are searched, and that answer's recommendation is written instead
//! (the caller says which plan it replaced and why).

use crate::emit::{check, EmitError, Launcher};
use crate::paths::plan;
use crate::report::{PlanReport, PlanRow};
use crate::request::PlanRequest;
use vramfit_core::error::CoreError;

/// The plan to write for a launcher.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnablePlan {
    pub row: PlanRow,
    /// the recommended plan, when the launcher cannot express it, and why
    pub replaces: Option<Replaced>,
}

/// A recommended plan the launcher cannot express.
#[derive(Debug, Clone, PartialEq)]
pub struct Replaced {
    pub row: PlanRow,
    pub why: String,
}

/// Why there is no plan to write.
#[derive(Debug, Clone, PartialEq)]
pub enum NotRunnable {
    /// nothing fits the job at all (the report's reason says why)
    NothingFits { reason: String },
    /// the launcher writes no config for this kind of plan (inference)
    Emit(EmitError),
    /// the recommended plan is not expressible (`why`) and no plan the
    /// launcher can express fits the job
    NoneExpressible { launcher: Launcher, why: String },
    /// the planner refused the job when asked again
    Core(CoreError),
}

/// The plan of `report` (the answer to `req`) that `launcher` can run.
pub fn runnable_plan(req: &PlanRequest, report: &PlanReport, launcher: Launcher) -> Result<RunnablePlan, NotRunnable> {
    let Some(rec) = report.recommended.as_ref() else {
        return Err(NotRunnable::NothingFits { reason: report.reason.clone() });
    };
    match check(launcher, &rec.setup) {
        Ok(()) => Ok(RunnablePlan { row: rec.clone(), replaces: None }),
        Err(EmitError::Unsupported(why)) => {
            let again = plan(&PlanRequest { launcher: Some(launcher), ..req.clone() }).map_err(NotRunnable::Core)?;
            match again.recommended {
                Some(row) => Ok(RunnablePlan { row, replaces: Some(Replaced { row: rec.clone(), why }) }),
                None => Err(NotRunnable::NoneExpressible { launcher, why }),
            }
        }
        Err(e) => Err(NotRunnable::Emit(e)),
    }
}
