//! The status of an open-loop rate cell from its evidence (docs/METHODOLOGY.md, "Open-loop rate
//! cells"). Pure: the collector gathers the evidence, this decides.
//!
//! In order: a failed request makes the cell **Error**; requests held back by `--max-in-flight`
//! make it **Client-limited** (the queue that grew was the client's); a server that did not
//! keep up makes it **Saturated** — even when the client sent late, since a late client offers
//! less than planned, and a server saturated by less is saturated by the plan too; a client
//! that sent late (send lag p99 over [`lag_limit_ms`]) to a server that kept up makes it
//! **Client-limited** (the server kept up with less than planned); else **Valid**.
//!
//! Saturation: requests that arrive and finish at the same mean rate leave the number in
//! flight where it was, up to noise; a server that keeps up with fewer than arrive lets it grow
//! by the difference (arrivals in the window − completions in it = in flight at the close − in
//! flight at the open). The noise of the in-flight count of a stable system is about Poisson
//! (variance ≈ its mean, Little's law gives the mean), so the rule allows a growth of
//! 3 × √(2 × mean in flight) + 2, and at least 5 % of the window's requests; a request of the
//! window still unanswered when the drain ended is saturation too. The server's waiting gauge,
//! where it has one, is kept beside as evidence.

use crate::model::{CellStatus, Saturation};

/// Send lag that never counts as the client's limit, ms: a timer that wakes up to a
/// millisecond late on a loaded machine (measured: BENCHMARKS.md, "Send lag").
pub const LAG_FLOOR_MS: f64 = 5.0;

/// The share of the median TTFT a send lag may reach before it counts (1 %).
pub const LAG_SHARE_OF_TTFT: f64 = 0.01;

/// The share of the window's requests the in-flight count may grow by as noise (5 %).
pub const GROWTH_SHARE: f64 = 0.05;

/// The send lag p99 (ms) above which a cell is client-limited: [`LAG_FLOOR_MS`], or 1 % of
/// the cell's TTFT p50 when that is larger.
pub fn lag_limit_ms(ttft_p50_ms: Option<f64>) -> f64 {
    LAG_FLOOR_MS.max(ttft_p50_ms.unwrap_or(0.0) * LAG_SHARE_OF_TTFT)
}

/// The in-flight growth a stable cell may show as noise (see the module docs).
pub fn growth_allowed(avg_in_flight: f64, scheduled: u64) -> f64 {
    let noise = 3.0 * (2.0 * avg_in_flight.max(0.0)).sqrt() + 2.0;
    noise.max(GROWTH_SHARE * scheduled as f64)
}

/// What a rate cell showed, for [`rate_status`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateEvidence {
    /// Failed requests' errors, first first.
    pub failures: Vec<String>,
    /// Requests scheduled inside the window.
    pub scheduled: u64,
    /// Requests that finished inside the window.
    pub completed: u64,
    /// Requests of the window not finished when the drain ended.
    pub unfinished: u64,
    /// In flight at the window's open and close (client).
    pub in_flight: (u64, u64),
    /// Time-weighted mean in flight over the window (client).
    pub avg_in_flight: f64,
    /// The waiting gauge's first and last reading inside the window (Prometheus).
    pub waiting: Option<(f64, f64)>,
    /// Send lag p99 of the window's requests, ms.
    pub send_lag_p99_ms: Option<f64>,
    /// TTFT p50 of the window's requests, ms (from their scheduled instants).
    pub ttft_p50_ms: Option<f64>,
    /// Requests of the window held back by `--max-in-flight`.
    pub held_back: u64,
}

/// The cell's status, its reason and the saturation evidence.
pub fn rate_status(e: &RateEvidence) -> (CellStatus, Option<String>, Saturation) {
    let allowed = growth_allowed(e.avg_in_flight, e.scheduled);
    let saturation = Saturation {
        in_flight_start: e.in_flight.0,
        in_flight_end: e.in_flight.1,
        growth_allowed: (allowed * 1000.0).round() / 1000.0,
        waiting: e.waiting,
        achieved_share: (e.scheduled > 0)
            .then(|| ((e.completed as f64 / e.scheduled as f64) * 1000.0).round() / 1000.0),
        unfinished: e.unfinished,
    };
    if let Some(first) = e.failures.first() {
        let more = match e.failures.len() {
            1 => String::new(),
            n => format!(" (and {} more failed)", n - 1),
        };
        return (CellStatus::Error, Some(format!("{first}{more}")), saturation);
    }
    let limit = lag_limit_ms(e.ttft_p50_ms);
    let late = e.send_lag_p99_ms.filter(|p| *p > limit).map(|p99| {
        format!(
            "send lag p99 {p99:.1} ms is over {limit:.1} ms (the larger of {LAG_FLOOR_MS} ms and 1 % of TTFT p50): the client did not send on schedule, so the server saw less than the planned load"
        )
    });
    // Requests the client held back queue in the client: the growth is the client's.
    if e.held_back > 0 {
        let held = format!(
            "--max-in-flight held back {} of {} requests of the window (their latencies count from their scheduled instants)",
            e.held_back, e.scheduled
        );
        let reason = late.map_or(held.clone(), |l| format!("{held}; {l}"));
        return (CellStatus::ClientLimited, Some(reason), saturation);
    }
    let growth = e.in_flight.1 as f64 - e.in_flight.0 as f64;
    let mut evidence = vec![];
    if growth > allowed {
        evidence.push(format!(
            "requests in flight grew from {} to {} through the window (noise allows {allowed:.0}): {} of {} requests of the window finished in it",
            e.in_flight.0, e.in_flight.1, e.completed, e.scheduled
        ));
    }
    if e.unfinished > 0 {
        evidence.push(format!("{} request(s) of the window were unanswered when the drain ended", e.unfinished));
    }
    if evidence.is_empty() {
        // A late client offered less than planned: the server kept up with less.
        return match late {
            Some(l) => (CellStatus::ClientLimited, Some(l), saturation),
            None => (CellStatus::Valid, None, saturation),
        };
    }
    if let Some((a, b)) = e.waiting.filter(|(a, b)| b > a) {
        evidence.push(format!("the server's waiting queue grew from {a:.0} to {b:.0}"));
    }
    // A late client offered less than planned: a server saturated by less is saturated by the
    // plan too, so saturation wins and the lag is a note.
    evidence.extend(late);
    (CellStatus::Saturated, Some(format!("saturated: {}", evidence.join("; "))), saturation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stable() -> RateEvidence {
        RateEvidence {
            scheduled: 200,
            completed: 198,
            in_flight: (10, 12),
            avg_in_flight: 10.0,
            send_lag_p99_ms: Some(0.8),
            ttft_p50_ms: Some(200.0),
            ..RateEvidence::default()
        }
    }

    #[test]
    fn a_server_that_keeps_up_is_valid_within_noise() {
        let (status, reason, s) = rate_status(&stable());
        assert_eq!((status, reason), (CellStatus::Valid, None));
        assert_eq!(s.achieved_share, Some(0.99));
        // 3 × √20 + 2 = 15.4 (5 % of 200 is 10)
        assert!((s.growth_allowed - 15.416).abs() < 1e-3, "{}", s.growth_allowed);
    }

    #[test]
    fn growth_beyond_noise_or_an_unanswered_request_is_saturated_with_the_evidence() {
        let e = RateEvidence { completed: 120, in_flight: (10, 90), waiting: Some((0.0, 70.0)), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::Saturated);
        let reason = reason.unwrap();
        assert!(
            reason.contains("from 10 to 90") && reason.contains("120 of 200") && reason.contains("0 to 70"),
            "{reason}"
        );
        let e = RateEvidence { unfinished: 3, ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::Saturated);
    }

    #[test]
    fn a_late_client_to_a_server_that_kept_up_is_client_limited_and_a_held_one_always() {
        let e = RateEvidence { send_lag_p99_ms: Some(9.0), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::ClientLimited);
        assert!(reason.unwrap().contains("send lag p99 9.0 ms is over 5.0 ms"));
        // Saturated by less load than planned: saturated, the lag noted.
        let e = RateEvidence { send_lag_p99_ms: Some(9.0), in_flight: (10, 90), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::Saturated);
        assert!(reason.unwrap().contains("send lag p99 9.0 ms"));
        let e = RateEvidence { held_back: 4, in_flight: (2, 60), ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::ClientLimited);
        // 1 % of a long TTFT allows more lag.
        let e = RateEvidence { send_lag_p99_ms: Some(9.0), ttft_p50_ms: Some(2000.0), ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::Valid);
        let e = RateEvidence { held_back: 4, ..stable() };
        assert!(rate_status(&e).1.unwrap().contains("held back 4 of 200"));
        let e = RateEvidence { held_back: 4, failures: vec!["stream 3: HTTP 500".into()], ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::Error);
    }
}
