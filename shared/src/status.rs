//! Cell status rules (`docs/METHODOLOGY.md`, "Statuses"). Precedence, top-down: over capacity
//! (planned, never run) → error (any stream failed) → requests queued (the server could not run
//! all N at once) → valid.

use crate::model::{Capacity, CellStatus};

/// The seed's conservative over-capacity rule: a cell of `concurrency` streams at
/// `context_tokens` with `max_tokens` of output needs N × (C + max_tokens) KV tokens; when that
/// exceeds `kv_budget_tokens` the cell is over capacity and this returns the shortfall.
pub fn over_capacity(
    concurrency: u32,
    context_tokens: u64,
    max_tokens: u64,
    kv_budget_tokens: u64,
) -> Option<Capacity> {
    let required = u64::from(concurrency).saturating_mul(context_tokens.saturating_add(max_tokens));
    (required > kv_budget_tokens).then_some(Capacity { required_tokens: required, budget_tokens: kv_budget_tokens })
}

/// The reason text written for an over-capacity cell.
pub fn over_capacity_reason(c: &Capacity) -> String {
    format!(
        "needs {} KV-cache tokens (streams × (context + max output)), the server holds {}; not run",
        crate::registry::format_number(c.required_tokens as f64, crate::registry::Style::Fixed(0)),
        crate::registry::format_number(c.budget_tokens as f64, crate::registry::Style::Fixed(0)),
    )
}

/// Share of N that must be running on average for a cell not to count as queued.
pub const RUNNING_SHARE: f64 = 0.95;

/// What was observed while measuring a decode cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence<'a> {
    /// Streams N.
    pub concurrency: u32,
    /// Error texts of failed streams (in-band error, truncated stream, HTTP status, stall).
    pub failures: &'a [String],
    /// Server `waiting` gauge samples during the window, in time order (Prometheus).
    pub waiting_samples: &'a [f64],
    /// Mean `running` during the window (Prometheus, else client count).
    pub avg_running: Option<f64>,
}

/// The status of a measured decode cell and its reason. Over capacity is decided
/// at plan time with [`over_capacity`] and never reaches here.
pub fn decode_status(e: &Evidence<'_>) -> (CellStatus, Option<String>) {
    if let Some(first) = e.failures.first() {
        let more = match e.failures.len() {
            1 => String::new(),
            n => format!(" (and {} more failed streams)", n - 1),
        };
        return (CellStatus::Error, Some(format!("{first}{more}")));
    }
    let queued_twice = e.waiting_samples.windows(2).any(|w| w[0] > 0.0 && w[1] > 0.0);
    if queued_twice {
        return (
            CellStatus::RequestsQueued,
            Some("the server queue held waiting requests in consecutive samples during the window".into()),
        );
    }
    if let Some(avg) = e.avg_running {
        let floor = RUNNING_SHARE * f64::from(e.concurrency);
        if avg < floor {
            return (
                CellStatus::RequestsQueued,
                Some(format!(
                    "on average {avg:.1} of {} streams were running (< {:.0} %)",
                    e.concurrency,
                    RUNNING_SHARE * 100.0
                )),
            );
        }
    }
    (CellStatus::Valid, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_capacity_is_strictly_greater() {
        assert!(over_capacity(2, 1000, 24, 2048).is_none());
        let c = over_capacity(2, 1000, 25, 2048).unwrap();
        assert_eq!(c.required_tokens, 2050);
        assert!(over_capacity_reason(&c).contains("2,050"));
    }

    #[test]
    fn precedence_error_then_queued_then_valid() {
        let fails = vec!["stream 3: HTTP 500".to_string(), "x".to_string()];
        let (s, r) = decode_status(&Evidence {
            concurrency: 4,
            failures: &fails,
            waiting_samples: &[1.0, 1.0],
            avg_running: Some(1.0),
        });
        assert_eq!(s, CellStatus::Error);
        assert_eq!(r.unwrap(), "stream 3: HTTP 500 (and 1 more failed streams)");

        let (s, _) = decode_status(&Evidence {
            concurrency: 4,
            waiting_samples: &[0.0, 2.0, 0.0, 2.0],
            avg_running: Some(4.0),
            ..Default::default()
        });
        assert_eq!(s, CellStatus::Valid, "isolated waiting samples are not a queue");
        let (s, _) = decode_status(&Evidence {
            concurrency: 4,
            waiting_samples: &[0.0, 2.0, 1.0],
            avg_running: Some(4.0),
            ..Default::default()
        });
        assert_eq!(s, CellStatus::RequestsQueued);
        let (s, r) = decode_status(&Evidence { concurrency: 8, avg_running: Some(7.5), ..Default::default() });
        assert_eq!(s, CellStatus::RequestsQueued);
        assert!(r.unwrap().contains("7.5 of 8"));
        let (s, r) = decode_status(&Evidence { concurrency: 8, avg_running: Some(7.9), ..Default::default() });
        assert_eq!((s, r), (CellStatus::Valid, None));
    }
}
