//! Rate cells judged against an SLO given after the run (`speedmatrix show --slo`): each
//! cell's goodput and whether it meets the SLO, by the same rules `run --slo` applies while
//! measuring ([`crate::rate::goodput_rps`], [`crate::rate::meets`]), and per context the
//! highest measured rate that meets it. Pure.

use crate::model::{CellStatus, ContextSize, Distribution, RateCell, RateSlo, Results};

/// One rate cell judged against an SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedRate<'r> {
    /// The cell.
    pub cell: &'r RateCell,
    /// Its place in the order the run measured its context's rates (1 = first): with
    /// `--rates auto` the search's order, which is not the rate order.
    pub measured: usize,
    /// TTFT at the SLO's percentile, ms (from the scheduled instants).
    pub ttft_ms: Option<f64>,
    /// TPOT at the SLO's percentile, ms.
    pub tpot_ms: Option<f64>,
    /// Requests of the window that finished within the SLO's limits ÷ the window, req/s;
    /// `None` for a cell without a window.
    pub goodput_rps: Option<f64>,
    /// Valid and its TTFT and TPOT at the percentile within the limits.
    pub meets: bool,
}

/// What the SLO allows at one context: the highest measured rate whose cell meets it.
#[derive(Debug, Clone, PartialEq)]
pub struct RateCapacity {
    /// The context.
    pub context: ContextSize,
    /// The highest measured rate that meets the SLO, req/s; `None` when none does.
    pub rate_rps: Option<f64>,
    /// The lowest measured rate above it that does not; `None` when none does not.
    pub failed_at_rps: Option<f64>,
}

/// A distribution's figure at the SLO's percentile.
pub fn at_percentile(d: Option<Distribution>, percentile: u8) -> Option<f64> {
    d.and_then(|d| match percentile {
        99 => d.p99,
        90 => d.p90,
        _ => d.p50,
    })
}

/// Every measured rate cell of `r` judged against `slo`, contexts by tokens and rates
/// ascending within a context (cells not run are left out).
pub fn judge<'r>(r: &'r Results, slo: &RateSlo) -> Vec<JudgedRate<'r>> {
    let mut out: Vec<JudgedRate<'r>> = Vec::new();
    for (i, c) in r.rates.iter().enumerate() {
        if c.status == CellStatus::NotRun {
            continue;
        }
        let measured = 1 + r.rates[..i]
            .iter()
            .filter(|x| x.context.tokens == c.context.tokens && x.status != CellStatus::NotRun)
            .count();
        let goodput_rps = match (c.window_start_ms, c.window_s) {
            (Some(w0), Some(len)) if len > 0.0 => {
                Some(crate::rate::goodput_rps(&c.requests, w0, w0 + len * 1000.0, slo))
            }
            _ => None,
        };
        out.push(JudgedRate {
            cell: c,
            measured,
            ttft_ms: at_percentile(c.ttft_ms, slo.percentile),
            tpot_ms: at_percentile(c.tpot_ms, slo.percentile),
            goodput_rps,
            meets: crate::rate::meets(c, slo),
        });
    }
    out.sort_by(|a, b| {
        a.cell.context.tokens.cmp(&b.cell.context.tokens).then(a.cell.rate_rps.total_cmp(&b.cell.rate_rps))
    });
    out
}

/// Per context of `judged` (in its order): the highest rate that meets the SLO and the lowest
/// above it that does not — the bracket `--rates auto` reports as `rate_at_slo`.
pub fn capacity(judged: &[JudgedRate<'_>]) -> Vec<RateCapacity> {
    let mut out: Vec<RateCapacity> = Vec::new();
    for j in judged {
        if out.last().is_none_or(|c| c.context.tokens != j.cell.context.tokens) {
            out.push(RateCapacity { context: j.cell.context.clone(), rate_rps: None, failed_at_rps: None });
        }
    }
    for cap in &mut out {
        let here: Vec<&JudgedRate<'_>> =
            judged.iter().filter(|j| j.cell.context.tokens == cap.context.tokens).collect();
        cap.rate_rps = here.iter().filter(|j| j.meets).map(|j| j.cell.rate_rps).reduce(f64::max);
        cap.failed_at_rps = here
            .iter()
            .filter(|j| !j.meets && cap.rate_rps.is_none_or(|m| j.cell.rate_rps > m))
            .map(|j| j.cell.rate_rps)
            .reduce(f64::min);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twin() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/rates-twin.json")).expect("valid rates fixture")
    }

    #[test]
    fn rate_cells_are_judged_as_at_run_time_in_rate_order_with_the_measuring_order() {
        let mut r = twin();
        // As `--rates auto` would have measured 8K: 1, then 8, then 0.5 req/s.
        let order = |c: &RateCell| match (c.context.tokens, c.rate_rps) {
            (8192, 1.0) => 0,
            (8192, 8.0) => 1,
            (8192, 0.5) => 2,
            _ => 3,
        };
        r.rates.sort_by_key(order);
        let slo = RateSlo { ttft_ms: Some(700.0), tpot_ms: None, percentile: 90 };
        let judged = judge(&r, &slo);
        let keys: Vec<(u64, f64, usize, bool)> =
            judged.iter().map(|j| (j.cell.context.tokens, j.cell.rate_rps, j.measured, j.meets)).collect();
        assert_eq!(
            keys,
            [
                (8192, 0.5, 3, true),
                (8192, 1.0, 1, true),
                (8192, 8.0, 2, false),
                (32768, 0.5, 1, false),
                (32768, 1.0, 2, false),
                (32768, 8.0, 3, false)
            ]
        );
        // Each verdict is the run-time rule's, and goodput counts as the run counted.
        for j in &judged {
            assert_eq!(j.meets, crate::rate::meets(j.cell, &slo));
            let w0 = j.cell.window_start_ms.unwrap();
            let w1 = w0 + j.cell.window_s.unwrap() * 1000.0;
            assert_eq!(j.goodput_rps, Some(crate::rate::goodput_rps(&j.cell.requests, w0, w1, &slo)));
            assert!(j.goodput_rps.unwrap() <= j.cell.achieved_rps.unwrap() + 1e-9);
        }
        let cap = capacity(&judged);
        assert_eq!((cap[0].rate_rps, cap[0].failed_at_rps), (Some(1.0), Some(8.0)));
        assert_eq!((cap[1].rate_rps, cap[1].failed_at_rps), (None, Some(0.5)));
    }
}
