//! The status of an open-loop rate cell from its evidence (docs/METHODOLOGY.md, "Open-loop rate
//! cells"). Pure: the collector gathers the evidence, this decides.
//!
//! In order: a failed request makes the cell **Error**; requests held back by `--max-in-flight`
//! make it **Client-limited** (the queue that grew was the client's); requests in flight that
//! need more KV cache than the server holds make it **Over capacity** ([`rate_capacity`]); a
//! server that did not
//! keep up makes it **Saturated** — even when the client sent late, since a late client offers
//! less than planned, and a server saturated by less is saturated by the plan too; a client
//! that sent late (at least [`LATE_MIN`] requests, and [`LATE_SHARE`] of them, over [`lag_limit_ms`]) to a server that kept up makes it
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

use crate::model::{
    Capacity, CellStatus, ContextSize, Distribution, RateAtSlo, RateCell, RateSlo, RequestSample, Saturation,
};

/// Send lag that never counts as the client's limit, ms: about twice the worst p99 measured on
/// a loaded 2-core machine at rates the client keeps (3.5–5.2 ms up to 500 req/s beside a
/// cargo build or a CPU vLLM; BENCHMARKS.md, "Send lag of rate cells"), so that load alone does
/// not turn a cell client-limited; a client that really falls behind lags by tens of ms.
pub const LAG_FLOOR_MS: f64 = 10.0;

/// The share of the median TTFT a send lag may reach before it counts (1 %).
pub const LAG_SHARE_OF_TTFT: f64 = 0.01;

/// The fewest late requests (send lag over [`lag_limit_ms`]) that make a cell client-limited:
/// one late send is a busy machine's hiccup (a 15–22 ms wake-up of the pacer at load average
/// 21 on 2 cores), not a client that fell behind.
pub const LATE_MIN: u64 = 2;

/// ... and at least this share of the window's sent requests (1 %).
pub const LATE_SHARE: f64 = 0.01;

/// The share of the window's requests the in-flight count may grow by as noise (5 %).
pub const GROWTH_SHARE: f64 = 0.05;

/// The send lag p99 (ms) above which a cell is client-limited: [`LAG_FLOOR_MS`], or 1 % of
/// the cell's TTFT p50 when that is larger.
pub fn lag_limit_ms(ttft_p50_ms: Option<f64>) -> f64 {
    LAG_FLOOR_MS.max(ttft_p50_ms.unwrap_or(0.0) * LAG_SHARE_OF_TTFT)
}

/// The in-flight growth a stable cell may show as noise (see the module docs). Known weakness:
/// the mean in flight includes the growth itself, so a short window past capacity can stay
/// inside it (a user found 15 → 34 in flight with half the requests finished, allowed 22.9, in
/// a 4-s window): longer windows tell more.
pub fn growth_allowed(avg_in_flight: f64, scheduled: u64) -> f64 {
    let noise = 3.0 * (2.0 * avg_in_flight.max(0.0)).sqrt() + 2.0;
    noise.max(GROWTH_SHARE * scheduled as f64)
}

/// The share of the offered rate a server may fall short by, unseen by the growth rule, above
/// which a valid cell says its window was short (25 %).
pub const BLIND_SHARE_NOTE: f64 = 0.25;

/// How far below the offered rate a server could complete requests and still look stable in
/// this window, as a share of the offered rate: a shortfall of `d` req/s grows the in-flight
/// count by `d × window`, which the rule sees only beyond `allowed`; the window's scheduled
/// requests are `rate × window`, so the blind share is `allowed ÷ scheduled`.
pub fn blind_share(allowed: f64, scheduled: u64) -> Option<f64> {
    (scheduled > 0).then(|| allowed / scheduled as f64)
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
    /// Send lag of each request of the window that was sent, ms.
    pub send_lags_ms: Vec<f64>,
    /// TTFT p50 of the window's requests, ms (from their scheduled instants).
    pub ttft_p50_ms: Option<f64>,
    /// Requests of the window held back by `--max-in-flight`.
    pub held_back: u64,
    /// KV-cache tokens one request needs (context + max output) and the server's budget, where
    /// the over-capacity rule applies (a budget the server reports or `--kv-budget`).
    pub kv: Option<(u64, u64)>,
}

/// A token count as the reasons write it: `87,040`.
fn tokens(n: u64) -> String {
    crate::registry::format_number(n as f64, crate::registry::Style::Fixed(0))
}

/// The over-capacity rule for a rate cell: the requests in flight (their time-weighted mean,
/// Little's law's L — the rate × their time in flight) need `avg × per_request` KV-cache
/// tokens; over `budget` the server cannot hold them at once and requests waited for KV cache.
pub fn rate_capacity(avg_in_flight: f64, per_request: u64, budget: u64) -> Option<Capacity> {
    let required = (avg_in_flight.max(0.0) * per_request as f64).round() as u64;
    (required > budget).then_some(Capacity { required_tokens: required, budget_tokens: budget })
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
    if e.scheduled == 0 {
        let why = "no request was scheduled inside the window, so nothing was measured: give a longer --duration (a window should hold at least 10 requests: 10 ÷ the rate, in seconds)";
        return (CellStatus::Error, Some(why.into()), saturation);
    }
    let limit = lag_limit_ms(e.ttft_p50_ms);
    let late_n = e.send_lags_ms.iter().filter(|l| **l > limit).count() as u64;
    let sent = e.send_lags_ms.len() as f64;
    let fell_behind = late_n >= LATE_MIN.max((LATE_SHARE * sent).ceil() as u64);
    let late = e.send_lag_p99_ms.filter(|_| fell_behind).map(|p99| {
        format!(
            "send lag p99 {p99:.1} ms, {late_n} of {} requests sent more than {limit:.1} ms late (the larger of {LAG_FLOOR_MS} ms and 1 % of TTFT p50): the client did not send on schedule, so the server saw less than the planned load",
            e.send_lags_ms.len()
        )
    });
    // Fewer late sends than that: a hiccup of the client's machine, said on the cell.
    let hiccup = (late_n > 0 && !fell_behind).then(|| {
        let worst = e.send_lags_ms.iter().copied().fold(0.0, f64::max);
        format!(
            "{late_n} of {} requests sent more than {limit:.1} ms late (at most {worst:.1} ms): a hiccup of the client's machine, too few to change the load",
            e.send_lags_ms.len()
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
    if let Some(cap) = e.kv.and_then(|(per, budget)| rate_capacity(e.avg_in_flight, per, budget)) {
        let mut reason = format!(
            "over capacity: {:.1} requests in flight on average × {} KV-cache tokens each (context + max output) = {} tokens, the server holds {}: requests waited for KV cache at this rate",
            e.avg_in_flight,
            tokens(e.kv.map_or(0, |k| k.0)),
            tokens(cap.required_tokens),
            tokens(cap.budget_tokens)
        );
        if growth > allowed || e.unfinished > 0 {
            reason.push_str(&format!(
                "; in flight grew from {} to {} (noise allows {allowed:.0})",
                e.in_flight.0, e.in_flight.1
            ));
        }
        return (CellStatus::OverCapacity, Some(reason), saturation);
    }
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
            None => {
                let notes: Vec<String> =
                    hiccup.into_iter().chain(short_window_note(allowed, e.scheduled, e.completed)).collect();
                (CellStatus::Valid, (!notes.is_empty()).then(|| notes.join("; ")), saturation)
            }
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

/// The note of a valid cell whose window was too short to see a server falling well short of
/// the offered rate ([`blind_share`] over [`BLIND_SHARE_NOTE`]), in counts: how many of the
/// window's requests finished in it, and how few could have finished with the cell still
/// looking the same (none, when the noise allowed is as large as the window's requests).
fn short_window_note(allowed: f64, scheduled: u64, completed: u64) -> Option<String> {
    blind_share(allowed, scheduled).filter(|s| *s > BLIND_SHARE_NOTE)?;
    // The growth is a whole count: up to the allowed noise's whole part goes unseen.
    let noise = allowed.floor().max(0.0) as u64;
    let as_few = scheduled.saturating_sub(noise);
    let unseen = match as_few {
        0 => "even a server that finished none of them would look the same".to_string(),
        n => format!("a server that finished as few as {n} of them would look the same"),
    };
    Some(format!(
        "valid within what a short window can tell: {completed} of the {scheduled} requests scheduled in the window finished in it, and an in-flight growth of up to {noise} is noise at this load, so {unseen}; a longer --duration tells more"
    ))
}

/// Whether a rate cell meets `slo`: valid, and its TTFT and TPOT at the SLO's percentile within
/// the limits (a limit the SLO does not set is met; a figure the cell lacks is not).
pub fn meets(cell: &RateCell, slo: &RateSlo) -> bool {
    let at = |d: Option<Distribution>| {
        d.and_then(|d| match slo.percentile {
            99 => d.p99,
            90 => d.p90,
            _ => d.p50,
        })
    };
    let within = |limit: Option<f64>, d: Option<Distribution>| limit.is_none_or(|l| at(d).is_some_and(|v| v <= l));
    cell.status == CellStatus::Valid && within(slo.ttft_ms, cell.ttft_ms) && within(slo.tpot_ms, cell.tpot_ms)
}

/// Goodput: requests that finished inside the window `(w0, w1]` within the SLO's limits (their
/// own TTFT from the scheduled instant, their own TPOT) ÷ the window's length, req/s — counted
/// as the achieved rate is, so goodput never exceeds it.
pub fn goodput_rps(requests: &[RequestSample], w0: f64, w1: f64, slo: &RateSlo) -> f64 {
    let ok = |limit: Option<f64>, v: Option<f64>| limit.is_none_or(|l| v.is_some_and(|v| v <= l));
    let finished_inside = |q: &RequestSample| q.e2e_ms.is_some_and(|e| q.start_ms + e > w0 && q.start_ms + e <= w1);
    let good = requests
        .iter()
        .filter(|q| finished_inside(q))
        .filter(|q| ok(slo.ttft_ms, q.ttft_ms) && ok(slo.tpot_ms, q.tpot_ms))
        .count();
    good as f64 / ((w1 - w0) / 1000.0).max(f64::MIN_POSITIVE)
}

/// An SLO in words: "TTFT p50 ≤ 2 s, TPOT p50 ≤ 50 ms".
pub fn slo_text(slo: &RateSlo) -> String {
    let p = slo.percentile;
    let mut parts = vec![];
    if let Some(t) = slo.ttft_ms {
        parts.push(format!("TTFT p{p} ≤ {}", crate::slo::limit_text(t)));
    }
    if let Some(t) = slo.tpot_ms {
        parts.push(format!("TPOT p{p} ≤ {}", crate::slo::limit_text(t)));
    }
    parts.join(", ")
}

/// The first rate `--rates auto` measures, req/s.
pub const SEARCH_START_RPS: f64 = 1.0;
/// The search stops when the bracket's top is within this factor of its bottom (10 %).
pub const SEARCH_PRECISION: f64 = 1.1;
/// At most this many cells per context.
pub const SEARCH_MAX_CELLS: usize = 12;
/// No rate below this (req/s) is tried.
pub const SEARCH_MIN_RPS: f64 = 1.0 / 64.0;
/// No rate above this (req/s) is tried.
pub const SEARCH_MAX_RPS: f64 = 4096.0;

/// The next step of `--rates auto` at one context, from the rates measured there so far and
/// whether each met the SLO: double from 1 req/s while the SLO is met, halve while it is not,
/// then bisect (geometrically) between the highest rate that met it and the lowest above it
/// that did not, until they are within 10 %.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchStep {
    /// Measure this rate next, req/s.
    Measure(f64),
    /// The search is over.
    Done(RateAtSlo),
}

/// The fewest requests a search cell's window must be expected to hold: below it (rate ×
/// window < 3) a Poisson window is empty one time in twenty and its cell tells nothing.
pub const SEARCH_MIN_REQUESTS: f64 = 3.0;

/// The lowest rate `--rates auto` tries with windows of `window_s`: [`SEARCH_MIN_RPS`], or
/// [`SEARCH_MIN_REQUESTS`] per window when that is more.
pub fn search_min_rps(window_s: f64) -> f64 {
    SEARCH_MIN_RPS.max(SEARCH_MIN_REQUESTS / window_s.max(f64::MIN_POSITIVE))
}

/// See [`SearchStep`]; `min_rps` is [`search_min_rps`] of the run's window.
pub fn search_step(context: &ContextSize, measured: &[(f64, bool)], min_rps: f64) -> SearchStep {
    let lo = measured.iter().filter(|(_, ok)| *ok).map(|(r, _)| *r).reduce(f64::max);
    let hi = measured.iter().filter(|(r, ok)| !*ok && lo.is_none_or(|l| *r > l)).map(|(r, _)| *r).reduce(f64::min);
    let done = |reason: String| {
        SearchStep::Done(RateAtSlo { context: context.clone(), rate_rps: lo, failed_at_rps: hi, reason })
    };
    let round = |r: f64| (r * 1000.0).round() / 1000.0;
    let tried = |r: f64| measured.iter().any(|(m, _)| (m - r).abs() < 1e-9);
    if measured.len() >= SEARCH_MAX_CELLS {
        return done(format!("stopped after {SEARCH_MAX_CELLS} cells"));
    }
    let next = match (lo, hi) {
        (None, None) => SEARCH_START_RPS,
        (None, Some(h)) if h / 2.0 < min_rps => {
            let why = if min_rps > SEARCH_MIN_RPS {
                format!(
                    " (a lower rate would schedule fewer than {SEARCH_MIN_REQUESTS} requests per window: a longer --duration reaches lower rates)"
                )
            } else {
                String::new()
            };
            return done(format!("no rate met the SLO, down to {} req/s{why}", round(h)));
        }
        (None, Some(h)) => round(h / 2.0),
        (Some(l), None) if l * 2.0 > SEARCH_MAX_RPS => {
            return done(format!("every rate met the SLO, up to {} req/s", round(l)));
        }
        (Some(l), None) => round(l * 2.0),
        (Some(l), Some(h)) if h / l <= SEARCH_PRECISION => {
            return done(format!("bracketed within {:.0} %", (SEARCH_PRECISION - 1.0) * 100.0));
        }
        (Some(l), Some(h)) => round((l * h).sqrt()),
    };
    if tried(next) {
        return done("the bracket cannot be narrowed at 0.001 req/s".into());
    }
    SearchStep::Measure(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search against a server that meets the SLO up to `capacity` req/s.
    fn search(capacity: f64) -> (RateAtSlo, usize) {
        let ctx = ContextSize { label: "8K".into(), tokens: 8192 };
        let mut measured = vec![];
        loop {
            match search_step(&ctx, &measured, SEARCH_MIN_RPS) {
                SearchStep::Measure(r) => measured.push((r, r <= capacity)),
                SearchStep::Done(found) => return (found, measured.len()),
            }
        }
    }

    #[test]
    fn the_search_brackets_the_highest_rate_within_ten_percent() {
        for capacity in [0.05, 0.7, 2.7, 9.0, 130.0] {
            let (found, cells) = search(capacity);
            let (lo, hi) = (found.rate_rps.unwrap(), found.failed_at_rps.unwrap());
            assert!(lo <= capacity && capacity < hi && hi / lo <= SEARCH_PRECISION + 1e-3, "{capacity}: {found:?}");
            assert!(cells <= SEARCH_MAX_CELLS, "{capacity}: {cells} cells");
        }
        let (none, _) = search(0.001);
        assert_eq!(none.rate_rps, None);
        assert!(none.reason.contains("no rate met the SLO"), "{none:?}");
        // 3-s windows: nothing below 1 req/s (3 requests per window) is tried.
        let ctx = ContextSize { label: "8K".into(), tokens: 8192 };
        let found = match search_step(&ctx, &[(1.0, false)], search_min_rps(3.0)) {
            SearchStep::Done(found) => found,
            other => panic!("{other:?}"),
        };
        assert!(found.reason.contains("a longer --duration reaches lower rates"), "{found:?}");
        assert_eq!(search_step(&ctx, &[(2.0, false)], search_min_rps(3.0)), SearchStep::Measure(1.0));
    }

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
    fn requests_in_flight_beyond_the_kv_budget_are_over_capacity() {
        // 10 in flight on average × (8,192 + 512) = 87,040 tokens against 65,536.
        let e = RateEvidence { kv: Some((8_704, 65_536)), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::OverCapacity);
        let reason = reason.unwrap();
        assert!(reason.contains("= 87,040 tokens, the server holds 65,536"), "{reason}");
        assert_eq!(rate_capacity(10.0, 8_704, 65_536).map(|c| c.required_tokens), Some(87_040));
        // Within the budget, the rest of the rule decides; errors and held requests come first.
        assert_eq!(rate_status(&RateEvidence { kv: Some((8_704, 100_000)), ..stable() }).0, CellStatus::Valid);
        let held = RateEvidence { held_back: 3, kv: Some((8_704, 65_536)), ..stable() };
        assert_eq!(rate_status(&held).0, CellStatus::ClientLimited);
    }

    #[test]
    fn a_short_window_past_capacity_says_what_it_cannot_tell() {
        // A user's 4-s window: 15 → 34 in flight, half of 38 requests finished, allowed 22.9.
        let e = RateEvidence { scheduled: 38, completed: 19, in_flight: (15, 34), avg_in_flight: 24.3, ..stable() };
        let (status, reason, s) = rate_status(&e);
        assert_eq!(status, CellStatus::Valid);
        assert!(s.growth_allowed > 19.0, "{}", s.growth_allowed);
        let reason = reason.expect("a note");
        assert!(reason.contains("19 of the 38 requests scheduled in the window finished in it"), "{reason}");
        assert!(reason.contains("growth of up to 22 is noise"), "{reason}");
        assert!(reason.contains("as few as 16 of them would look the same"), "{reason}");
        assert!(!reason.contains('%'), "counts, no share: {reason}");
        assert!(reason.contains("a longer --duration"), "{reason}");
        // The same load over a window 8 × as long: the growth is beyond noise.
        let long =
            RateEvidence { scheduled: 304, completed: 152, in_flight: (15, 167), avg_in_flight: 91.0, ..stable() };
        assert_eq!(rate_status(&long).0, CellStatus::Saturated);
        assert_eq!(blind_share(10.0, 0), None);
    }

    #[test]
    fn a_window_of_a_few_requests_says_in_counts_that_it_cannot_tell_even_none_finishing() {
        // Offered 1 req/s over 4 s: 4 requests scheduled, 3 finished in the window, the noise
        // allowed (5) above the 4 requests: a server finishing none would look the same.
        let e = RateEvidence { scheduled: 4, completed: 3, in_flight: (0, 1), avg_in_flight: 0.5, ..stable() };
        let (status, reason, s) = rate_status(&e);
        assert_eq!(status, CellStatus::Valid);
        assert!(s.growth_allowed >= 4.0, "{}", s.growth_allowed);
        let reason = reason.expect("a note");
        assert!(reason.contains("3 of the 4 requests scheduled in the window finished in it"), "{reason}");
        assert!(reason.contains("a server that finished none of them would look the same"), "{reason}");
        assert!(!reason.contains('%'), "no share that reads as nonsense: {reason}");
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
    fn a_window_without_a_request_measured_nothing() {
        let e = RateEvidence { scheduled: 0, completed: 0, in_flight: (0, 0), avg_in_flight: 0.0, ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::Error);
        assert!(reason.unwrap().contains("give a longer --duration"));
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
        let lags = |late: usize| {
            let mut l = vec![0.3; 200 - late];
            l.extend(std::iter::repeat_n(19.0, late));
            l
        };
        let e = RateEvidence { send_lag_p99_ms: Some(19.0), send_lags_ms: lags(3), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::ClientLimited);
        assert!(reason.unwrap().contains("send lag p99 19.0 ms, 3 of 200 requests sent more than 10.0 ms late"));
        // One late send (a busy machine's hiccup) is a note on a valid cell.
        let e = RateEvidence { send_lag_p99_ms: Some(19.0), send_lags_ms: lags(1), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::Valid);
        assert!(reason.unwrap().contains("1 of 200 requests sent more than 10.0 ms late (at most 19.0 ms): a hiccup"));
        // Saturated by less load than planned: saturated, the lag noted.
        let e = RateEvidence { send_lag_p99_ms: Some(19.0), send_lags_ms: lags(3), in_flight: (10, 90), ..stable() };
        let (status, reason, _) = rate_status(&e);
        assert_eq!(status, CellStatus::Saturated);
        assert!(reason.unwrap().contains("send lag p99 19.0 ms"));
        let e = RateEvidence { held_back: 4, in_flight: (2, 60), ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::ClientLimited);
        // 1 % of a long TTFT allows more lag.
        let e =
            RateEvidence { send_lag_p99_ms: Some(19.0), send_lags_ms: lags(3), ttft_p50_ms: Some(2000.0), ..stable() };
        assert_eq!(rate_status(&e), (CellStatus::Valid, None, rate_status(&e).2));
        let e = RateEvidence { held_back: 4, ..stable() };
        assert!(rate_status(&e).1.unwrap().contains("held back 4 of 200"));
        let e = RateEvidence { held_back: 4, failures: vec!["stream 3: HTTP 500".into()], ..stable() };
        assert_eq!(rate_status(&e).0, CellStatus::Error);
    }
}
