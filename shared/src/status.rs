//! Cell status rules (docs/METHODOLOGY.md, "Statuses"). Precedence, top-down: over capacity
//! (planned, never run) → error (any stream failed, or no token to measure) → requests queued
//! (the server could not run all N at once) → valid.

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

/// Share of N that must be running on average (server gauge) for a cell not to count as queued.
pub const RUNNING_SHARE: f64 = 0.95;

/// What was observed while measuring a decode cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence<'a> {
    /// Streams N.
    pub concurrency: u32,
    /// Error texts of failed streams (in-band error, truncated stream, HTTP status, stall, a
    /// stream that finished without a token).
    pub failures: &'a [String],
    /// Server `waiting` gauge samples during the window, in time order (Prometheus).
    pub waiting_samples: &'a [f64],
    /// Mean `running` during the window (Prometheus gauge).
    pub avg_running: Option<f64>,
    /// Mean streams running during the window as the client sees them (for servers without a
    /// running gauge): a stream runs from its send to its end, except while it waits for its
    /// first token longer than [`start_allowance_ms`] — that wait is a queue.
    pub client_running: Option<f64>,
    /// The start allowance `client_running` used, ms.
    pub start_allowance_ms: Option<f64>,
    /// Output tokens that arrived inside the window; `None` when no window was measured.
    pub window_tokens: Option<u64>,
    /// Why readiness ended without every stream decoding and an empty queue, when it did.
    pub readiness_timeout: Option<&'a str>,
    /// Some stream of the cell was answered HTTP 429 and waited out its `Retry-After` before
    /// sending again: that wait is not running either, and the client's count says so.
    pub rate_limited: bool,
}

/// How long a stream may wait for its first token and still count as starting, not queued
/// (client evidence): three times the context's cold TTFT (a whole uncached prefill, measured
/// alone), and at least a second. A replacement stream's ordinary start — a cached prefill and
/// a step or two of the running batch — stays well inside it; a request queued behind others
/// waits for one of them to end, which under sustained decode takes far longer.
pub fn start_allowance_ms(cold_ttft_ms: Option<f64>) -> f64 {
    (3.0 * cold_ttft_ms.unwrap_or(0.0)).max(1000.0)
}

/// The status of a measured decode cell and its reason (docs/METHODOLOGY.md, "Statuses", defines
/// the rules). Over capacity is decided at plan time with [`over_capacity`] and never reaches
/// here.
///
/// Precedence: a failed stream → error; no token in the window → error; the server's queue
/// gauge above 0 in two consecutive samples, its running gauge below [`RUNNING_SHARE`] × N
/// (unless its queue gauge read 0 in every sample: then the requests it does not count are in
/// transit, not queued in it), the client's count of running streams below
/// [`RUNNING_SHARE`] × N, or a readiness timeout →
/// requests queued (a readiness timeout is added to the reason of the others); else valid.
pub fn decode_status(e: &Evidence<'_>) -> (CellStatus, Option<String>) {
    if let Some(first) = e.failures.first() {
        let more = match e.failures.len() {
            1 => String::new(),
            n => format!(" (and {} more failed streams)", n - 1),
        };
        return (CellStatus::Error, Some(format!("{first}{more}")));
    }
    if e.window_tokens == Some(0) {
        return (CellStatus::Error, Some("no token arrived during the window: nothing to measure".into()));
    }
    // A readiness timeout is said too when other evidence already makes the cell queued: it
    // tells that the window opened before every stream was decoding.
    let queued = |why: String| {
        let why = match e.readiness_timeout {
            Some(r) => format!("{why}; {r}"),
            None => why,
        };
        (CellStatus::RequestsQueued, Some(why))
    };
    if e.waiting_samples.windows(2).any(|w| w[0] > 0.0 && w[1] > 0.0) {
        return queued("the server queue held waiting requests in consecutive samples during the window".into());
    }
    let n = e.concurrency;
    // A running gauge below N while the server's own queue gauge read 0 throughout is requests
    // not yet admitted (front end, network, client turnaround), not a queue in the server; a
    // queue in front of it (a gateway) shows in the client's view below.
    let queue_gauge_clear = !e.waiting_samples.is_empty() && e.waiting_samples.iter().all(|w| *w <= 0.0);
    if let Some(avg) = e.avg_running.filter(|avg| !queue_gauge_clear && *avg < RUNNING_SHARE * f64::from(n)) {
        return queued(format!(
            "on average {avg:.1} of {n} streams were running on the server (< {:.0} %)",
            RUNNING_SHARE * 100.0
        ));
    }
    if let Some(avg) = e.client_running.filter(|avg| *avg < RUNNING_SHARE * f64::from(n)) {
        let allowance = e.start_allowance_ms.map_or(String::new(), |a| format!(" longer than {:.1} s", a / 1000.0));
        let limited =
            if e.rate_limited { ", and one waiting out an HTTP 429's Retry-After was not running" } else { "" };
        return queued(format!(
            "on average {avg:.1} of {n} streams were running (client view: a stream waiting{allowance} for its first token was queued{limited})"
        ));
    }
    if let Some(why) = e.readiness_timeout {
        return (CellStatus::RequestsQueued, Some(why.to_string()));
    }
    (CellStatus::Valid, None)
}

/// Share of a prefill row's prompt above which the prompt tokens the server served from its
/// prefix cache make the row no cold measurement (a chat template's shared first block stays
/// far below it).
pub const CACHED_PREFILL_SHARE: f64 = 0.05;

/// The warning a prefill row carries when the server served more than
/// [`CACHED_PREFILL_SHARE`] of its `prompt_tokens` (or, unknown, any) from its prefix cache.
pub fn cached_prefill_warning(cached_tokens: u64, prompt_tokens: Option<u64>) -> Option<String> {
    let share = prompt_tokens.filter(|&p| p > 0).map(|p| cached_tokens as f64 / p as f64);
    let warm = match share {
        Some(s) => s > CACHED_PREFILL_SHARE,
        None => cached_tokens > 0,
    };
    warm.then(|| {
        let of = prompt_tokens.map(|p| format!(" of {}", crate::registry::format_int(p))).unwrap_or_default();
        format!(
            "served from cache: {}{of} prompt tokens came from the server's prefix cache, so this is no cold prefill",
            crate::registry::format_int(cached_tokens)
        )
    })
}

/// The words a prefill row shows next to its figures when the server served it from its
/// prefix cache ([`cached_prefill_warning`]).
pub fn prefill_cache_note(row: &crate::PrefillRow) -> Option<&'static str> {
    // A warm row (`prefix_share`) is served from cache by design: its hit rate says how much.
    let warm = row.cached_tokens.and_then(|c| cached_prefill_warning(c, row.prompt_tokens)).is_some();
    (warm && row.status.is_measured() && row.prefix_share.is_none()).then_some("⚠ served from cache")
}

/// The note a decode cell carries next to its figures when its tokens could only be counted
/// as one per chunk ([`crate::TokenCountSource::ChunkCount`]): approximate, a lower bound
/// under speculative decoding.
pub fn approximate_note(cell: &crate::DecodeCell) -> Option<&'static str> {
    approximate(cell.status, cell.token_count_source)
}

/// [`approximate_note`] for a rate cell: its tokens (total tok/s, TPOT) counted one per chunk.
pub fn approximate_rate_note(cell: &crate::RateCell) -> Option<&'static str> {
    approximate(cell.status, cell.token_count_source)
}

fn approximate(status: crate::CellStatus, source: Option<crate::TokenCountSource>) -> Option<&'static str> {
    (status.is_measured() && source == Some(crate::TokenCountSource::ChunkCount))
        .then_some("≈ approximate: tokens counted from chunks")
}

/// Why a figure a measured cell shows is empty: a few words for a table cell and the whole
/// reason for its title, tooltip and screen reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyFigure {
    /// "none finished", "not recorded".
    pub short: &'static str,
    /// The sentence: "no request finished in the 30.0 s window: …".
    pub reason: String,
}

/// Why a measured decode cell has no E2E latency; `None` when it has one or was not measured
/// (its status says why). E2E is the latency of requests that finished inside the window, so
/// under sustained decode a window shorter than one request's whole output has none: each
/// request runs to `max_tokens` (when the file records it), which at the cell's median per-request rate takes longer than
/// the window. A reason the file itself records (its `missing` list names `e2e_ms`) comes first.
pub fn e2e_empty(
    cell: &crate::DecodeCell,
    max_tokens: Option<u32>,
    missing: &[crate::MissingFigure],
) -> Option<EmptyFigure> {
    use crate::registry::{format_number, metric, Style};
    let shown = |id: &str, v: f64| metric(id).map_or_else(|| format_number(v, Style::Fixed(1)), |m| m.display(v));
    if !cell.status.is_measured() || cell.e2e_ms.is_some() {
        return None;
    }
    if let Some(m) = missing.iter().find(|m| m.figure == "e2e_ms") {
        return Some(EmptyFigure { short: "not recorded", reason: m.reason.clone() });
    }
    if cell.completed_requests != Some(0) {
        let reason = "this file records no E2E latency for the cell".to_string();
        return Some(EmptyFigure { short: "not recorded", reason });
    }
    let window = cell.window_s.map(|w| format!(" in the {} window", shown("window_s", w)));
    let rate = cell.per_request_tps.as_ref().and_then(|d| d.p50).filter(|r| r.is_finite() && *r > 0.0);
    let takes = rate.zip(max_tokens).map(|(r, max_tokens)| {
        format!(
            ": {} output tokens at {} tok/s per request take about {} s",
            format_number(f64::from(max_tokens), Style::Fixed(0)),
            format_number(r, Style::Fixed(1)),
            format_number(f64::from(max_tokens) / r, Style::Fixed(0)),
        )
    });
    let reason = format!(
        "no request finished{}{} (E2E counts finished requests only)",
        window.unwrap_or_default(),
        takes.unwrap_or_default()
    );
    Some(EmptyFigure { short: "none finished", reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_e2e_says_why() {
        use crate::{CellStatus, ContextSize, DecodeCell, Distribution, MissingFigure};
        let ctx = ContextSize { label: "8K".into(), tokens: 8192 };
        let mut cell = DecodeCell::new(ctx, 32, CellStatus::Valid, None);
        cell.window_s = Some(30.0);
        cell.completed_requests = Some(0);
        cell.per_request_tps = Some(Distribution { p50: Some(25.0), ..Distribution::default() });
        let e = e2e_empty(&cell, Some(4096), &[]).expect("empty E2E");
        assert_eq!(e.short, "none finished");
        assert_eq!(
            e.reason,
            "no request finished in the 30.0 s window: 4,096 output tokens at 25.0 tok/s per request take about 164 s \
             (E2E counts finished requests only)"
        );
        // Without a rate the window alone; with a finished request the file simply lacks it.
        cell.per_request_tps = None;
        assert_eq!(
            e2e_empty(&cell, Some(4096), &[]).map(|e| e.reason),
            Some("no request finished in the 30.0 s window (E2E counts finished requests only)".into())
        );
        cell.completed_requests = Some(3);
        assert_eq!(e2e_empty(&cell, Some(4096), &[]).map(|e| e.short), Some("not recorded"));
        let missing = [MissingFigure { figure: "e2e_ms".into(), reason: "the source has no E2E".into() }];
        assert_eq!(e2e_empty(&cell, Some(4096), &missing).map(|e| e.reason), Some("the source has no E2E".into()));
        // A cell with E2E, or one not measured, has nothing to explain.
        cell.e2e_ms = Some(Distribution { p50: Some(900.0), ..Distribution::default() });
        assert_eq!(e2e_empty(&cell, Some(4096), &[]), None);
        let not_run = DecodeCell::new(cell.context.clone(), 64, CellStatus::NotRun, Some("interrupted".into()));
        assert_eq!(e2e_empty(&not_run, Some(4096), &[]), None);
    }

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
            window_tokens: Some(0),
            ..Default::default()
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

    #[test]
    fn a_running_gauge_below_n_counts_only_when_the_queue_gauge_is_not_clear() {
        // vLLM with short outputs: requests in the front end are neither running nor waiting.
        let clear = Evidence {
            concurrency: 1,
            waiting_samples: &[0.0, 0.0, 0.0],
            avg_running: Some(0.6),
            client_running: Some(0.99),
            ..Default::default()
        };
        assert_eq!(decode_status(&clear), (CellStatus::Valid, None));
        // No queue gauge, or one that read above 0 now and then: the running gauge decides.
        for waiting in [&[][..], &[0.0, 1.0, 0.0][..]] {
            let (s, r) = decode_status(&Evidence { waiting_samples: waiting, ..clear.clone() });
            assert_eq!(s, CellStatus::RequestsQueued, "{waiting:?}");
            assert!(r.unwrap().contains("on average 0.6 of 1 streams were running on the server"));
        }
        // A queue in front of the server (a gateway): its gauges read clear, the client sees it.
        let gateway = Evidence { concurrency: 4, avg_running: Some(2.0), client_running: Some(2.1), ..clear };
        let (s, r) = decode_status(&gateway);
        assert_eq!(s, CellStatus::RequestsQueued);
        assert!(r.unwrap().contains("on average 2.1 of 4 streams were running (client view"));
    }

    #[test]
    fn a_prefill_row_served_from_cache_says_so() {
        assert_eq!(cached_prefill_warning(0, Some(8192)), None);
        assert_eq!(cached_prefill_warning(16, Some(8192)), None, "a shared template block is still cold");
        let w = cached_prefill_warning(8176, Some(8192)).unwrap();
        assert!(w.starts_with("served from cache: 8,176 of 8,192 prompt tokens"), "{w}");
        assert!(cached_prefill_warning(3, None).is_some());
    }

    #[test]
    fn client_evidence_tells_a_queue_from_an_ordinary_start() {
        assert_eq!(start_allowance_ms(None), 1000.0);
        assert_eq!(start_allowance_ms(Some(2000.0)), 6000.0);
        // Every stream running but for ordinary starts: valid.
        let ok = Evidence {
            concurrency: 4,
            client_running: Some(3.99),
            start_allowance_ms: Some(1000.0),
            window_tokens: Some(900),
            ..Default::default()
        };
        assert_eq!(decode_status(&ok), (CellStatus::Valid, None));
        // Two of four waited for others to end: queued.
        let (s, r) = decode_status(&Evidence { client_running: Some(2.4), ..ok.clone() });
        assert_eq!(s, CellStatus::RequestsQueued);
        assert!(r
            .unwrap()
            .contains("on average 2.4 of 4 streams were running (client view: a stream waiting longer than 1.0 s"));
        // Streams that carry no token are no measurement at all.
        let (s, r) = decode_status(&Evidence { window_tokens: Some(0), ..ok.clone() });
        assert_eq!(s, CellStatus::Error);
        assert!(r.unwrap().contains("no token arrived"));
        // Streams waiting out a 429's Retry-After: the reason says that wait was not running.
        let (s, r) = decode_status(&Evidence { client_running: Some(2.4), rate_limited: true, ..ok.clone() });
        assert_eq!(s, CellStatus::RequestsQueued);
        assert!(r.unwrap().ends_with("and one waiting out an HTTP 429's Retry-After was not running)"));
        let (_, r) = decode_status(&Evidence { client_running: Some(2.4), ..ok.clone() });
        assert!(!r.unwrap().contains("429"));
        // A readiness timeout is a reason on the cell.
        let why = "readiness timed out: 3 of 4 streams had produced a token after 120 s";
        let (s, r) = decode_status(&Evidence { readiness_timeout: Some(why), ..ok.clone() });
        assert_eq!((s, r.as_deref()), (CellStatus::RequestsQueued, Some(why)));
        // With other queue evidence, both are said.
        let (s, r) = decode_status(&Evidence { readiness_timeout: Some(why), client_running: Some(1.0), ..ok });
        assert_eq!(s, CellStatus::RequestsQueued);
        let r = r.unwrap();
        assert!(r.starts_with("on average 1.0 of 4 streams were running") && r.ends_with(why), "{r}");
    }
}
