//! An open-loop rate cell replayed in simulated time: requests of unique prompts handed to the
//! pure [`Engine`] at the instants of the cell's arrival schedule (the collector's,
//! `speedmatrix_schema::arrivals`), every figure from the scheduled instants as the collector
//! computes it. How a profile fitted from rate cells is checked against the run, without
//! sockets or real time.

use crate::engine::{synthetic_hashes, Engine, Submit};
use crate::profile::Profile;
use speedmatrix_schema::arrivals::{cell_key, Schedule};
use speedmatrix_schema::stats::percentile_sorted;
use speedmatrix_schema::Arrival;

/// One rate cell to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatePlan {
    /// The context's nominal tokens (with the rate, the key of the cell's schedule).
    pub context_tokens: u64,
    /// Prompt length, tokens.
    pub prompt_len: u32,
    /// Offered rate, requests/s.
    pub rate_rps: f64,
    /// The arrival process and seed.
    pub arrival: Arrival,
    /// How long requests are scheduled, ms (warm-up and window together).
    pub span_ms: f64,
    /// `max_tokens` of every request.
    pub max_tokens: u32,
}

/// The figures of a replayed rate cell, over every request scheduled in its span.
#[derive(Debug, Clone, PartialEq)]
pub struct RateReplay {
    /// Requests scheduled.
    pub requests: usize,
    /// TTFT p50 from the scheduled instants, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TPOT p50, ms.
    pub tpot_p50_ms: Option<f64>,
    /// E2E latency p50 from the scheduled instants, ms.
    pub e2e_p50_ms: Option<f64>,
}

#[derive(Debug, Clone, Default)]
struct Req {
    arrival: f64,
    first: Option<f64>,
    last: f64,
    tokens: u32,
    end: Option<f64>,
}

fn p50(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, 50.0)
}

/// Replay `plan` on a fresh engine of `profile` (`seed` drives speculative acceptance): each
/// request reaches the front end at its scheduled instant, with a prompt of its own (no
/// shared prefix), until every request has finished.
pub fn replay_rate(profile: &Profile, plan: RatePlan, seed: u64) -> RateReplay {
    let arrivals: Vec<f64> = Schedule::new(&plan.arrival, plan.rate_rps, cell_key(plan.context_tokens, plan.rate_rps))
        .map(|s| s.map(|x| x * 1000.0).take_while(|t| *t < plan.span_ms).collect())
        .unwrap_or_default();
    let mut engine = Engine::new(profile, seed);
    let mut reqs: Vec<Req> = arrivals.iter().map(|&a| Req { arrival: a, ..Req::default() }).collect();
    let hand_out = profile.output_ms_per_request.max(0.0);
    let (mut t, mut next) = (0.0, 0usize);
    loop {
        while next < arrivals.len() && arrivals[next] <= t {
            let id = next as u64;
            engine.submit(Submit {
                id,
                arrival_ms: arrivals[next],
                prompt_len: plan.prompt_len,
                block_hashes: synthetic_hashes(
                    seed.wrapping_mul(1_000_003).wrapping_add(id + 1),
                    plan.prompt_len,
                    profile.block_size,
                ),
                output_len: plan.max_tokens,
                spec: None,
            });
            next += 1;
        }
        // With nothing running or queued the engine would wait for its front end: an arrival
        // due before that goes in first.
        if engine.num_running() == 0 && engine.num_waiting() == 0 {
            match (engine.next_arrival_ms(), arrivals.get(next)) {
                (None, None) => break,
                (None, Some(&a)) => {
                    t = a;
                    continue;
                }
                (Some(f), Some(&a)) if a < f => {
                    t = a;
                    continue;
                }
                _ => {}
            }
        }
        let Some(step) = engine.step_from(t) else {
            match arrivals.get(next) {
                Some(&a) => {
                    t = a.max(t);
                    continue;
                }
                None => break,
            }
        };
        for (i, o) in step.outputs.iter().enumerate() {
            let at = step.end_ms + i as f64 * hand_out;
            let Some(r) = reqs.get_mut(o.id as usize) else { continue };
            if o.first {
                r.first = Some(at);
            }
            r.tokens += o.tokens;
            r.last = at;
            if o.finished {
                r.end = Some(at);
            }
        }
        t = step.end_ms;
    }
    let ttft = reqs.iter().filter_map(|r| Some(r.first? - r.arrival)).collect();
    let tpot = reqs
        .iter()
        .filter(|r| r.tokens > 1)
        .filter_map(|r| Some((r.end? - r.first?) / f64::from(r.tokens - 1)))
        .collect();
    let e2e = reqs.iter().filter_map(|r| Some(r.end? - r.arrival)).collect();
    RateReplay { requests: reqs.len(), ttft_p50_ms: p50(ttft), tpot_p50_ms: p50(tpot), e2e_p50_ms: p50(e2e) }
}

/// How long each rate cell is replayed for the residual table, ms of simulated time: long
/// enough for a stable median at the lowest rates a run measures (60 requests at 0.5 req/s).
pub const RESIDUAL_SPAN_MS: f64 = 120_000.0;

/// One valid rate cell of a run against its replay on a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct RateResidual {
    /// "8K at 1 req/s".
    pub cell: String,
    /// (twin, run) TTFT p50, ms.
    pub ttft_p50_ms: (Option<f64>, Option<f64>),
    /// (twin, run) TPOT p50, ms.
    pub tpot_p50_ms: (Option<f64>, Option<f64>),
}

/// Every valid rate cell of `run` replayed on `profile` for [`RESIDUAL_SPAN_MS`] (seed 1).
pub fn rate_residuals(profile: &Profile, run: &speedmatrix_schema::Results) -> Vec<RateResidual> {
    let max_tokens = run.config.max_tokens.unwrap_or(1);
    run.rates
        .iter()
        .filter(|c| c.status == speedmatrix_schema::CellStatus::Valid)
        .map(|c| {
            let plan = RatePlan {
                context_tokens: c.context.tokens,
                prompt_len: u32::try_from(c.prompt_tokens.unwrap_or(c.context.tokens)).unwrap_or(u32::MAX),
                rate_rps: c.rate_rps,
                arrival: c.arrival,
                span_ms: RESIDUAL_SPAN_MS,
                max_tokens,
            };
            let got = replay_rate(profile, plan, 1);
            RateResidual {
                cell: format!("{} at {}", c.context.label, c.rate_label()),
                ttft_p50_ms: (got.ttft_p50_ms, c.ttft_ms.and_then(|d| d.p50)),
                tpot_p50_ms: (got.tpot_p50_ms, c.tpot_ms.and_then(|d| d.p50)),
            }
        })
        .collect()
}

/// The rate cells' part of the residual table: one line per valid rate cell, "twin / run
/// (twin − run) ÷ run" for TTFT and TPOT p50; empty without one.
pub fn rate_residual_table(rows: &[RateResidual]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let pair = |(twin, run): (Option<f64>, Option<f64>)| match (twin, run) {
        (Some(t), Some(r)) if r > 0.0 => format!("{t:.1} / {r:.1} ms ({:+.1} %)", (t - r) / r * 100.0),
        (t, r) => format!(
            "{} / {} ms",
            t.map_or("—".to_string(), |v| format!("{v:.1}")),
            r.map_or("—".to_string(), |v| format!("{v:.1}"))
        ),
    };
    let mut out = format!(
        "rate cells (valid; each replayed for {:.0} s of simulated time on its arrival schedule): TTFT p50 and TPOT p50, twin / run\n",
        RESIDUAL_SPAN_MS / 1000.0
    );
    for r in rows {
        out.push_str(&format!("  {}: TTFT {} · TPOT {}\n", r.cell, pair(r.ttft_p50_ms), pair(r.tpot_p50_ms)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::CellStatus;

    /// A real run of the default twin (the h200 profile) with rate cells only: 8K and 32K at
    /// 0.5, 1, 8 and 16 req/s, one prefill row, no decode cell.
    fn twin_run() -> speedmatrix_schema::Results {
        speedmatrix_schema::load_results(include_bytes!("../../tests/fixtures/rates-twin.json")).expect("valid fixture")
    }

    /// Fit the run (rate cells, one prefill row, no decode cell), replay its 8K × 1 req/s cell
    /// for 120 s of simulated time with the fitted profile and with the profile the run
    /// measured (h200), and compare. Simulated time: no clock, no load can move it. The run's
    /// own 5 s window holds 8 requests, so its TPOT median is one noisy draw (5.3 ms); the
    /// true profile's replay is the reference for it.
    #[test]
    fn a_profile_fitted_from_rate_cells_replays_them() {
        let mut r = twin_run();
        let c = r.rates.iter().find(|c| c.context.tokens == 8192 && c.rate_rps == 1.0).unwrap().clone();
        assert_eq!(c.status, CellStatus::Valid);
        let plan = RatePlan {
            context_tokens: 8192,
            prompt_len: c.prompt_tokens.unwrap() as u32,
            rate_rps: 1.0,
            arrival: c.arrival,
            span_ms: 120_000.0,
            max_tokens: r.config.max_tokens.unwrap(),
        };
        let truth = replay_rate(&crate::profile::Profile::h200_qwen(), plan, 1);
        let rel = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() / b;
        // With the prefill row, and without it (rate cells alone).
        for with_prefill in [true, false] {
            if !with_prefill {
                r.prefill.clear();
            }
            let fit = crate::fit::fit(&r).expect("rate cells give a profile");
            assert!(fit.notes.iter().any(|n| n.contains("from rate cells")), "{:?}", fit.notes);
            let got = replay_rate(&fit.profile, plan, 1);
            assert!(got.requests > 100, "{got:?}");
            let run_ttft = c.ttft_ms.unwrap().p50.unwrap();
            assert!(rel(got.ttft_p50_ms, run_ttft) < 0.05, "TTFT p50 {got:?} against the run's {run_ttft}");
            assert!(rel(got.ttft_p50_ms, truth.ttft_p50_ms.unwrap()) < 0.05, "{got:?} against {truth:?}");
            assert!(rel(got.tpot_p50_ms, truth.tpot_p50_ms.unwrap()) < 0.15, "{got:?} against {truth:?}");
            let table = rate_residual_table(&rate_residuals(&fit.profile, &r));
            assert_eq!(table.lines().filter(|l| l.starts_with("  ")).count(), 4, "the run's valid rate cells: {table}");
            assert!(table.contains("  8K at 1 req/s: TTFT 364.9 / 371.7 ms (-1.8 %)"), "{table}");
        }
    }
}
