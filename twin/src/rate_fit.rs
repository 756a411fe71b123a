//! What a results file's open-loop rate cells give the fit ([`crate::fit`]) when it has no
//! decode cells or prefill rows for it (docs/METHODOLOGY.md, "The twin's fit from rate
//! cells"). Pure.
//!
//! - **Front end and prefill** from each context's lowest-rate valid cell (little else in
//!   flight, every request a cold prefill of a unique prompt): its TTFT p50 is the front end
//!   plus that prompt's prefill. Over two or more contexts the least-squares line
//!   `TTFT = f + len × s` separates them: the intercept `f` (at least 0) is the front end's
//!   lone latency, and each context's prefill speed is `len ÷ (TTFT − f)`. With one context
//!   the front end cannot be told apart and counts as prefill (a note says so).
//! - **Decode steps** from each valid cell whose prefill load is light: `ρ = rate × (TTFT − f)`
//!   of its context's lowest-rate cell (the share of the engine's time spent prefilling
//!   arrivals) at most [`MAX_PREFILL_LOAD`]. A prefill chunk stalls the requests decoding
//!   beside it, but at a light load most requests decode without one, so the TPOT median is
//!   the decode step (÷ `m` tokens per step): the step is `TPOT p50 × m` at a batch of
//!   `1 + in flight × (E2E − TTFT) ÷ E2E` (the request itself and the others decoding: the
//!   mean in flight over the window times the share of a request's life spent decoding).

use speedmatrix_schema::{CellStatus, RateCell, Results};

/// The most prefill load (share of the engine's time prefilling arrivals) at which a rate
/// cell's TPOT is read as a decode step. Above it the median request already meets a prefill
/// stall: the twin run of tests/fixtures/rates-twin.json has TPOT p50 4.0 ms at 8K × 0.5 req/s
/// (load 0.18) and 5.3 ms at 1 req/s (0.37) with about one request more in flight, which a
/// step model read as 3.8 ms per sequence (its replay gave 7.5 ms; the profile's own decode
/// step barely grows at that batch).
pub const MAX_PREFILL_LOAD: f64 = 0.2;

fn prompt_len(c: &RateCell) -> u32 {
    u32::try_from(c.prompt_tokens.unwrap_or(c.context.tokens)).unwrap_or(u32::MAX)
}

fn p50(d: Option<speedmatrix_schema::Distribution>) -> Option<f64> {
    d.and_then(|d| d.p50).filter(|v| v.is_finite() && *v > 0.0)
}

/// Per context (prompt length, ascending): the TTFT p50 of its lowest-rate valid cell, ms.
pub fn low_load_ttft(r: &Results) -> Vec<(u32, f64)> {
    let mut out: Vec<(u32, f64, f64)> = Vec::new();
    for c in r.rates.iter().filter(|c| c.status == CellStatus::Valid) {
        let Some(t) = p50(c.ttft_ms) else { continue };
        let len = prompt_len(c);
        match out.iter_mut().find(|x| x.0 == len) {
            Some(x) if c.rate_rps < x.2 => *x = (len, t, c.rate_rps),
            Some(_) => {}
            None => out.push((len, t, c.rate_rps)),
        }
    }
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|(l, t, _)| (l, t)).collect()
}

/// The front end's lone latency, ms: the intercept of the least-squares line through
/// [`low_load_ttft`], at least 0; `None` with fewer than two contexts.
pub fn frontend_ms(low: &[(u32, f64)]) -> Option<f64> {
    if low.len() < 2 {
        return None;
    }
    let n = low.len() as f64;
    let mx = low.iter().map(|x| f64::from(x.0)).sum::<f64>() / n;
    let my = low.iter().map(|x| x.1).sum::<f64>() / n;
    let sxx: f64 = low.iter().map(|x| (f64::from(x.0) - mx).powi(2)).sum();
    let sxy: f64 = low.iter().map(|x| (f64::from(x.0) - mx) * (x.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    Some((my - slope * mx).max(0.0))
}

/// Prefill knots (prompt tokens, prompt tok/s) from [`low_load_ttft`] less the front end `f`.
pub fn prefill_knots(low: &[(u32, f64)], f: f64) -> Vec<(u32, f64)> {
    low.iter().map(|&(len, t)| (len, f64::from(len) / ((t - f).max(0.05 * t) / 1000.0))).collect()
}

/// Decode-step rows `([1, n, √n, context sum ÷ 10⁶], step ms)` of the step model's fit from
/// the valid rate cells with little prefill load (see the module docs); `m` is the tokens a
/// request emits per step, `f` the front end's lone latency.
pub fn decode_rows(r: &Results, m: f64, max_tokens: u32, f: f64) -> Vec<([f64; 4], f64)> {
    let low = low_load_ttft(r);
    r.rates
        .iter()
        .filter(|c| c.status == CellStatus::Valid)
        .filter_map(|c| {
            let len = prompt_len(c);
            let prefill_s = (low.iter().find(|x| x.0 == len)?.1 - f).max(0.0) / 1000.0;
            let load = c.rate_rps * prefill_s;
            if load > MAX_PREFILL_LOAD {
                return None;
            }
            let (tpot, ttft, e2e) = (p50(c.tpot_ms)?, p50(c.ttft_ms)?, p50(c.e2e_ms)?);
            let decoding = ((e2e - ttft) / e2e).clamp(0.0, 1.0);
            let n = 1.0 + c.avg_in_flight.unwrap_or(0.0).max(0.0) * decoding;
            let ctx = n * (f64::from(len) + f64::from(max_tokens) / 2.0) / 1e6;
            Some(([1.0, n, n.sqrt(), ctx], tpot * m))
        })
        .collect()
}

/// The longest request a valid rate cell's server held: context + `max_tokens` (for the KV
/// budget's floor).
pub fn longest_request(r: &Results, max_tokens: u32) -> Option<u64> {
    r.rates.iter().filter(|c| c.status.is_measured()).map(|c| c.context.tokens + u64::from(max_tokens)).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_end_is_the_intercept_and_prefill_the_rest() {
        // 10 ms front end, 20,000 prompt tok/s: 8K → 419.6 ms, 32K → 1,648.4 ms.
        let low = [(8192, 10.0 + 409.6), (32768, 10.0 + 1638.4)];
        let f = frontend_ms(&low).unwrap();
        assert!((f - 10.0).abs() < 1e-9, "{f}");
        let knots = prefill_knots(&low, f);
        assert!(knots.iter().all(|k| (k.1 - 20_000.0).abs() < 1e-6), "{knots:?}");
        assert_eq!(frontend_ms(&low[..1]), None, "one context cannot separate them");
        // A line through the origin or below: no negative front end.
        assert_eq!(frontend_ms(&[(1000, 10.0), (2000, 30.0)]), Some(0.0));
    }
}
