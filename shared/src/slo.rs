//! Capacity at a service-level objective (SLO): given a limit on time to first token and a floor
//! on the speed each user sees, the largest concurrency of each context whose cell meets both,
//! and its total tok/s — the run's *goodput* at that context. The page's capacity table and
//! chart markers and `speedmatrix show --slo` print the same numbers from here. The rule is
//! written down in `docs/METHODOLOGY.md` ("Capacity at an SLO").
//!
//! A cell meets the SLO when it is valid (a queued cell did not serve its N streams at once; an
//! over-capacity, error or not-run cell has no figures), its median TTFT of the streams that
//! opened the cell is at most the limit and its median per-request tok/s is at least the floor.
//! Medians, because every source gives them (the seed-page format has no p90 or p99).

use crate::derived::{gpu_count, per_gpu};
use crate::model::{CellStatus, ContextSize, DecodeCell, Results};
use crate::registry::{format_number, Style};

/// The objective: each bound may be absent (not limited).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// Highest acceptable median TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// Lowest acceptable median per-request tok/s (per-user speed, "interactivity").
    pub per_user_tps: Option<f64>,
}

/// The page's starting point: TTFT ≤ 2 s, per-user ≥ 20 tok/s.
pub const DEFAULT_SLO: Slo = Slo { ttft_ms: Some(2000.0), per_user_tps: Some(20.0) };

/// Why a cell does not meet an SLO.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Miss {
    /// The cell is not valid (its status).
    Status(CellStatus),
    /// The cell has no median TTFT.
    NoTtft,
    /// Its median TTFT (ms) is over the limit.
    TtftOver(f64),
    /// The cell has no median per-request tok/s.
    NoPerUser,
    /// Its median per-request tok/s is under the floor.
    PerUserUnder(f64),
}

/// A duration limit in words: `2 s`, `1.5 s`, `800 ms`.
pub fn limit_text(ms: f64) -> String {
    if ms >= 1000.0 {
        let s = ms / 1000.0;
        let text = format!("{s:.3}");
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{} ms", format_number(ms, Style::Fixed(0)))
    }
}

impl Slo {
    /// The cell meets the objective, or why not (the first failing check: status, TTFT, speed).
    ///
    /// # Errors
    /// The [`Miss`].
    pub fn check(&self, c: &DecodeCell) -> Result<(), Miss> {
        if c.status != CellStatus::Valid {
            return Err(Miss::Status(c.status));
        }
        if let Some(limit) = self.ttft_ms {
            let ttft = c.ttft_ms.as_ref().and_then(|d| d.p50).ok_or(Miss::NoTtft)?;
            if ttft > limit {
                return Err(Miss::TtftOver(ttft));
            }
        }
        if let Some(floor) = self.per_user_tps {
            let tps = c.per_request_tps.as_ref().and_then(|d| d.p50).ok_or(Miss::NoPerUser)?;
            if tps < floor {
                return Err(Miss::PerUserUnder(tps));
            }
        }
        Ok(())
    }

    /// The objective in words: `TTFT ≤ 2 s, per-user ≥ 20 tok/s (medians)`.
    pub fn describe(&self) -> String {
        let ttft = self.ttft_ms.map(|t| format!("TTFT ≤ {}", limit_text(t)));
        let tps = self.per_user_tps.map(|t| format!("per-user ≥ {} tok/s", trim_number(t)));
        let parts: Vec<String> = ttft.into_iter().chain(tps).collect();
        if parts.is_empty() {
            "no limit".into()
        } else {
            format!("{} (medians)", parts.join(", "))
        }
    }

    /// Why a cell misses, in words (`TTFT 2,007 ms > 2 s`).
    pub fn miss_text(&self, m: Miss) -> String {
        let ttft = |v: f64| format_number(v, Style::Fixed(0));
        match m {
            Miss::Status(s) => s.label().to_lowercase(),
            Miss::NoTtft => "no median TTFT".into(),
            Miss::TtftOver(v) => format!("TTFT {} ms > {}", ttft(v), limit_text(self.ttft_ms.unwrap_or(0.0))),
            Miss::NoPerUser => "no median per-request tok/s".into(),
            Miss::PerUserUnder(v) => {
                format!(
                    "{} tok/s per user < {}",
                    format_number(v, Style::Fixed(1)),
                    trim_number(self.per_user_tps.unwrap_or(0.0))
                )
            }
        }
    }
}

/// A number without trailing zeros: `20`, `12.5`.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The best cell of one context under an SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct Goodput {
    /// The largest concurrency whose cell meets the SLO.
    pub concurrency: u32,
    /// That cell's total tok/s: the goodput.
    pub total_tps: f64,
    /// The same per GPU, when the run has a GPU count.
    pub total_tps_per_gpu: Option<f64>,
    /// That cell's median TTFT, ms.
    pub ttft_ms: Option<f64>,
    /// That cell's median per-request tok/s.
    pub per_user_tps: Option<f64>,
}

/// One context of a run under an SLO: its best cell, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextCapacity {
    /// The context (a row of the plan).
    pub context: ContextSize,
    /// The largest concurrency meeting the SLO, with its figures; `None` when no cell does.
    pub best: Option<Goodput>,
    /// Why there is none: "no valid cell", or the lowest concurrency's miss
    /// (`1 at once: TTFT 2,345 ms > 2 s`).
    pub note: Option<String>,
}

/// Each planned context of `r` (plan order) under `slo`: the largest concurrency whose cell
/// meets it (the largest, even if a smaller one misses: cells are measured, not interpolated).
pub fn capacity(r: &Results, slo: &Slo) -> Vec<ContextCapacity> {
    let gpus = gpu_count(r).ok();
    r.config
        .contexts
        .iter()
        .map(|ctx| {
            let mut cells: Vec<&DecodeCell> = r.decode.iter().filter(|c| c.context.tokens == ctx.tokens).collect();
            cells.sort_by_key(|c| c.concurrency);
            let best = cells.iter().rev().find(|c| slo.check(c).is_ok()).map(|c| {
                let total = c.total_tps.unwrap_or(0.0);
                Goodput {
                    concurrency: c.concurrency,
                    total_tps: total,
                    total_tps_per_gpu: gpus.map(|g| per_gpu(total, g)),
                    ttft_ms: c.ttft_ms.as_ref().and_then(|d| d.p50),
                    per_user_tps: c.per_request_tps.as_ref().and_then(|d| d.p50),
                }
            });
            let note = match (&best, cells.iter().find(|c| c.status == CellStatus::Valid)) {
                (Some(_), _) => None,
                (None, None) => Some("no valid cell".to_string()),
                (None, Some(c)) => {
                    let why = slo.check(c).err().map(|m| slo.miss_text(m)).unwrap_or_default();
                    Some(format!("{} at once: {why}", c.concurrency))
                }
            };
            ContextCapacity { context: ctx.clone(), best, note }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).expect("the seed loads")
    }

    /// Per context: label, capacity concurrency, its total tok/s and per GPU.
    type Best<'a> = (&'a str, Option<u32>, Option<f64>, Option<f64>);

    fn best(caps: &[ContextCapacity]) -> Vec<Best<'_>> {
        caps.iter()
            .map(|c| {
                let b = c.best.as_ref();
                (
                    c.context.label.as_str(),
                    b.map(|b| b.concurrency),
                    b.map(|b| b.total_tps),
                    b.and_then(|b| b.total_tps_per_gpu),
                )
            })
            .collect()
    }

    #[test]
    fn the_seed_at_two_seconds_and_twenty_tokens_per_second() {
        // By hand from the file (median TTFT of the opening streams, median per-request tok/s):
        // 8K: 16 streams 532 ms / 125.1, 32 streams 2,716 ms > 2 s → 16.
        // 16K: 16 → 595 ms, 32 → 2,674 ms → 16. 32K: 16 → 726 ms, 32 → 2,552 ms → 16.
        // 64K: 8 is requests queued (not counted), 16 → 1,824 ms / 117.4, 32 → 3,556 ms → 16.
        // 128K: 8 → 1,299 ms, 16 → 3,375 ms → 8. 251K: 4 → 1,310 ms, 8 → 2,007 ms (just over) → 4.
        let caps = capacity(&seed(), &DEFAULT_SLO);
        assert_eq!(
            best(&caps),
            [
                ("8K", Some(16), Some(2023.2), Some(1011.6)),
                ("16K", Some(16), Some(1995.5), Some(997.75)),
                ("32K", Some(16), Some(1966.8), Some(983.4)),
                ("64K", Some(16), Some(1923.6), Some(961.8)),
                ("128K", Some(8), Some(1066.2), Some(533.1)),
                ("251K", Some(4), Some(596.0), Some(298.0)),
            ]
        );
        assert!(caps.iter().all(|c| c.note.is_none()));
        let g = caps[5].best.as_ref().unwrap();
        assert_eq!((g.ttft_ms, g.per_user_tps), (Some(1310.0), Some(153.2)));
    }

    #[test]
    fn tighter_objectives_and_the_reason_when_nothing_meets_them() {
        let r = seed();
        // Per-user ≥ 150 tok/s only: 8K at 8 gives 163.1, at 16 125.1 → 8.
        let speed = Slo { ttft_ms: None, per_user_tps: Some(150.0) };
        assert_eq!(capacity(&r, &speed)[0].best.as_ref().map(|b| b.concurrency), Some(8));
        // TTFT ≤ 300 ms: 251K's single stream takes 976 ms, so nothing there.
        let fast = Slo { ttft_ms: Some(300.0), per_user_tps: None };
        let caps = capacity(&r, &fast);
        assert_eq!(caps[0].best.as_ref().map(|b| b.concurrency), Some(4), "8K: 222 ms at 4, 380 ms at 8");
        assert_eq!(caps[5].best, None);
        assert_eq!(caps[5].note.as_deref(), Some("1 at once: TTFT 976 ms > 300 ms"));
        let slow = Slo { ttft_ms: None, per_user_tps: Some(500.0) };
        assert_eq!(capacity(&r, &slow)[0].note.as_deref(), Some("1 at once: 239.8 tok/s per user < 500"));
        // A context without any valid cell.
        let mut x = r.clone();
        for c in x.decode.iter_mut().filter(|c| c.context.tokens == 8192) {
            c.status = CellStatus::Error;
        }
        assert_eq!(capacity(&x, &DEFAULT_SLO)[0].note.as_deref(), Some("no valid cell"));
        // Without a GPU count the goodput has no per-GPU figure.
        x.hardware.gpu_count = None;
        x.hardware.gpus.clear();
        assert_eq!(capacity(&x, &DEFAULT_SLO)[1].best.as_ref().unwrap().total_tps_per_gpu, None);
    }

    #[test]
    fn words() {
        assert_eq!(DEFAULT_SLO.describe(), "TTFT ≤ 2 s, per-user ≥ 20 tok/s (medians)");
        assert_eq!(Slo { ttft_ms: Some(1500.0), per_user_tps: None }.describe(), "TTFT ≤ 1.5 s (medians)");
        assert_eq!(Slo { ttft_ms: None, per_user_tps: Some(12.5) }.describe(), "per-user ≥ 12.5 tok/s (medians)");
        assert_eq!(Slo { ttft_ms: None, per_user_tps: None }.describe(), "no limit");
        assert_eq!(limit_text(800.0), "800 ms");
        assert_eq!(DEFAULT_SLO.miss_text(Miss::Status(CellStatus::OverCapacity)), "over capacity");
    }
}
