//! How an estimate compares with a measurement, and the accuracy bar a set
//! of measured cases must clear (`vramfit calibrate`, tests).

/// Median |error| above this fails a calibration set (percent).
pub const MEDIAN_LIMIT_PCT: f64 = 3.0;
/// Any single case above this fails a calibration set (percent).
pub const MAX_LIMIT_PCT: f64 = 10.0;

/// Signed error of an estimate against a measurement, in percent of the
/// measurement: negative is an under-prediction (the dangerous direction).
/// `None` when nothing was measured (0 bytes).
pub fn error_pct(estimated: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (estimated as f64 - measured as f64) / measured as f64 * 100.0)
}

/// The accuracy of a set of cases.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accuracy {
    pub cases: usize,
    pub median_abs_error_pct: f64,
    pub max_abs_error_pct: f64,
    pub median_limit_pct: f64,
    pub max_limit_pct: f64,
    /// at least one case, median and max |error| within their limits
    pub pass: bool,
}

impl Accuracy {
    /// The accuracy of cases with these signed errors (percent).
    pub fn of(errors_pct: &[f64]) -> Accuracy {
        let mut abs: Vec<f64> = errors_pct.iter().map(|e| e.abs()).collect();
        abs.sort_by(|a, b| a.total_cmp(b));
        let n = abs.len();
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => abs[n / 2],
            _ => (abs[n / 2 - 1] + abs[n / 2]) / 2.0,
        };
        let max = abs.last().copied().unwrap_or(0.0);
        Accuracy {
            cases: n,
            median_abs_error_pct: median,
            max_abs_error_pct: max,
            median_limit_pct: MEDIAN_LIMIT_PCT,
            max_limit_pct: MAX_LIMIT_PCT,
            pass: n > 0 && median <= MEDIAN_LIMIT_PCT && max <= MAX_LIMIT_PCT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_max_and_the_bar() {
        assert_eq!(error_pct(97, 100), Some(-3.0));
        assert_eq!(error_pct(1, 0), None);
        let a = Accuracy::of(&[-1.0, 2.0, -4.0, 3.0]);
        assert_eq!((a.cases, a.median_abs_error_pct, a.max_abs_error_pct), (4, 2.5, 4.0));
        assert!(a.pass);
        assert!(!Accuracy::of(&[0.5, 11.0, 0.1]).pass);
        assert!(!Accuracy::of(&[3.5, 3.5, 0.0]).pass);
        assert!(!Accuracy::of(&[]).pass);
    }
}
