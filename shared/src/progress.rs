//! Where a run stands, as a person reads it (pure): from the results so far and the live state
//! of the row or cell being measured → rows and cells done of those planned, the one being
//! measured and its phase, and the time left from [`crate::estimate`]. The terminal's progress
//! bar and the live page both render a [`Progress`], so they say the same things.
//!
//! The live state ([`Live`]) is what the collector publishes while it measures (and serves as
//! `/live.json` with `run --serve`, docs/ARCHITECTURE.md "The live path"); a page following a
//! file written by another process (`serve --watch`) has the results alone.

use crate::estimate::{duration_text, remaining};
use crate::registry::format_int;
use crate::{CellStatus, ContextSize, Results, RunStatus};
use serde::{Deserialize, Serialize};

/// The stage of the row or cell being measured (docs/METHODOLOGY.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A prefill row's cold request.
    Prefill,
    /// A decode cell's warm-up: its prompts into the prefix cache, its connections opened.
    WarmUp,
    /// A decode cell's streams opened, waiting until every one decodes.
    Readiness,
    /// A decode cell's measurement window.
    Window,
    /// The window closed: cancelling and collecting the streams.
    Drain,
}

impl Phase {
    /// Words for people: "prefill", "warm-up", "waiting for readiness", "window", "drain".
    pub fn label(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::WarmUp => "warm-up",
            Phase::Readiness => "waiting for readiness",
            Phase::Window => "window",
            Phase::Drain => "drain",
        }
    }
}

/// What is being measured now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Measuring {
    /// A prefill row.
    Prefill {
        /// Its context.
        context: ContextSize,
    },
    /// A decode cell.
    Decode {
        /// Its context.
        context: ContextSize,
        /// Its streams N.
        concurrency: u32,
    },
    /// An open-loop rate cell.
    Rate {
        /// Its context.
        context: ContextSize,
        /// Its offered rate in words, e.g. "2 req/s".
        rate: String,
    },
    /// A trace replay (`run --trace`).
    Trace {
        /// The trace and its speed in words, e.g. "mooncake.jsonl at 2×".
        trace: String,
    },
}

impl Measuring {
    /// "prefill 8K", "decode 8K × 16".
    pub fn label(&self) -> String {
        match self {
            Measuring::Prefill { context } => format!("prefill {}", context.label),
            Measuring::Decode { context, concurrency } => format!("decode {} × {concurrency}", context.label),
            Measuring::Rate { context, rate } => format!("rate {} at {rate}", context.label),
            Measuring::Trace { trace } => format!("trace {trace}"),
        }
    }
}

/// The live state of the row or cell being measured, as the measuring code publishes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Current {
    /// The row or cell.
    pub measuring: Measuring,
    /// Its stage now.
    pub phase: Phase,
    /// Seconds since the window opened (window and drain only).
    #[serde(default)]
    pub window_elapsed_s: Option<f64>,
    /// Output tok/s of the streams since the window opened, counted by the client (window only).
    #[serde(default)]
    pub live_tps: Option<f64>,
    /// Streams running now (readiness, window and drain).
    #[serde(default)]
    pub streams_running: Option<u32>,
}

/// What the collector knows besides the results file while it measures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Live {
    /// The row or cell being measured; `None` between them and once the run is over.
    #[serde(default)]
    pub current: Option<Current>,
    /// Contexts (tokens) whose prompts the server already holds from this run (the estimate
    /// spares their warm-ups).
    #[serde(default)]
    pub warm: Vec<u64>,
}

/// Where a run stands, for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Rows and cells with a final status, of those planned to be measured.
    pub done: usize,
    /// Rows and cells planned to be measured: every prefill row and decode cell except the
    /// cells the plan put over capacity.
    pub planned: usize,
    /// The repeats planned per decode cell (`config.repeats`, 1 without): with more than one,
    /// `done` and `planned` count each repeat of a cell.
    pub repeats: u32,
    /// The row or cell being measured, e.g. "decode 8K × 16".
    pub current: Option<String>,
    /// Its phase with what goes with it, e.g. "window 12 s of 30 s · 3,120 tok/s · 16 streams".
    pub phase: Option<String>,
    /// Seconds left by the plan's estimate corrected by what has been measured; `None` once
    /// the run's status is final.
    pub left_s: Option<f64>,
    /// The run's status.
    pub status: RunStatus,
}

/// A decode cell the plan put over capacity (never measured): not counted as planned work.
fn planned_over_capacity(c: &crate::DecodeCell) -> bool {
    c.status == CellStatus::OverCapacity && c.readiness.is_none()
}

/// Where `r` stands with `live` the collector's live state (`None` when only the file is known).
pub fn progress(r: &Results, live: Option<&Live>) -> Progress {
    // Each repeat of a cell is a measurement of its own; a cell whose repeats stopped (an
    // error) has none left.
    let n = crate::repeats::planned(r);
    let measured_cells = r.decode.iter().filter(|c| !planned_over_capacity(c));
    let planned = r.prefill.len() + measured_cells.clone().count() * n as usize;
    let done = r.prefill.iter().filter(|p| p.status != CellStatus::NotRun).count()
        + measured_cells.map(|c| (n - crate::repeats::left(c, n).min(n)) as usize).sum::<usize>();
    let running = r.run.status == RunStatus::Running;
    let current = live.and_then(|l| l.current.as_ref()).filter(|_| running);
    // The window of what is measured now: a trace's is its replay.
    let window_s = match current.map(|c| &c.measuring) {
        Some(Measuring::Trace { .. }) => r.config.trace.as_ref().map(|t| t.span_s / t.speed.max(1e-3)),
        _ => r.config.window_s,
    };
    let left_s = running.then(|| {
        let warm = live.map_or(&[][..], |l| l.warm.as_slice());
        let mut left = remaining(r, warm).total_s;
        // The window under way is counted whole by the estimate: take off what has passed.
        if let Some(e) = current.and_then(|c| c.window_elapsed_s) {
            left -= e.min(window_s.unwrap_or(0.0));
        }
        left.max(0.0)
    });
    Progress {
        done,
        planned,
        repeats: n,
        current: current.map(|c| c.measuring.label()),
        phase: current.map(|c| phase_text(c, window_s)),
        left_s,
        status: r.run.status,
    }
}

/// "window 12 s of 30 s · 3,120 tok/s · 16 streams", "waiting for readiness · 16 streams".
fn phase_text(c: &Current, window_s: Option<f64>) -> String {
    let mut parts = vec![c.phase.label().to_string()];
    if c.phase == Phase::Window {
        if let Some(e) = c.window_elapsed_s {
            let of = window_s.map(|w| format!(" of {}", seconds(w))).unwrap_or_default();
            parts[0] = format!("window {}{of}", seconds(e));
        }
        if let Some(t) = c.live_tps.filter(|t| t.is_finite()) {
            parts.push(format!("{} tok/s", format_int(t.max(0.0).round() as u64)));
        }
    }
    if let Some(n) = c.streams_running.filter(|_| c.phase != Phase::Prefill && c.phase != Phase::WarmUp) {
        parts.push(format!("{n} stream{}", if n == 1 { "" } else { "s" }));
    }
    parts.join(" · ")
}

/// Whole seconds, as the window is counted: "12 s".
fn seconds(s: f64) -> String {
    format!("{} s", if s.is_finite() { s.max(0.0).floor() as u64 } else { 0 })
}

impl Progress {
    /// "about 3 min left", "complete", "interrupted", "failed".
    pub fn time_text(&self) -> String {
        match (self.status, self.left_s) {
            (RunStatus::Running, Some(s)) => format!("about {} left", duration_text(s)),
            (RunStatus::Running, None) => "running".into(),
            (RunStatus::Complete, _) => "complete".into(),
            (RunStatus::Interrupted, _) => "interrupted".into(),
            (RunStatus::Failed, _) => "failed".into(),
        }
    }

    /// "3/12 rows and cells"; with repeats "7/38 rows and cell repeats (3 per cell)".
    pub fn count_text(&self) -> String {
        match self.repeats {
            0 | 1 => format!("{}/{} rows and cells", self.done, self.planned),
            n => format!("{}/{} rows and cell repeats ({n} per cell)", self.done, self.planned),
        }
    }

    /// The one line of the terminal bar and the page's progress banner: "3/12 rows and cells ·
    /// decode 8K × 16 · window 12 s of 30 s · 3,120 tok/s · 16 streams · about 3 min left".
    pub fn line(&self) -> String {
        let mut parts = vec![self.count_text()];
        parts.extend(self.current.clone());
        parts.extend(self.phase.clone());
        parts.push(self.time_text());
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Capacity, DecodeCell, PrefillRow, PromptSharing, Readiness, ReadinessOutcome};

    /// A fresh plan: prefill 8K, decode 8K × 1, 8, and 8K × 64 over capacity, 5 s windows.
    fn plan() -> Results {
        let mut r = crate::load_results(include_bytes!("../../tests/fixtures/round1/twin-tiny.json"))
            .expect("the tiny twin fixture");
        let ctx = ContextSize { label: "8K".into(), tokens: 8192 };
        r.run.status = RunStatus::Running;
        r.config.contexts = vec![ctx.clone()];
        r.config.concurrency = vec![1, 8, 64];
        r.config.window_s = Some(5.0);
        r.config.prompt_sharing = Some(PromptSharing::Shared);
        r.prefill = vec![PrefillRow::new(ctx.clone(), CellStatus::NotRun, None)];
        r.decode = [1, 8, 64].map(|n| DecodeCell::new(ctx.clone(), n, CellStatus::NotRun, None)).to_vec();
        r.decode[2].status = CellStatus::OverCapacity;
        r.decode[2].capacity = Some(Capacity { required_tokens: 800_000, budget_tokens: 100_000 });
        r
    }

    fn window(elapsed: f64, tps: f64, streams: u32) -> Live {
        Live {
            current: Some(Current {
                measuring: Measuring::Decode {
                    context: ContextSize { label: "8K".into(), tokens: 8192 },
                    concurrency: 8,
                },
                phase: Phase::Window,
                window_elapsed_s: Some(elapsed),
                live_tps: Some(tps),
                streams_running: Some(streams),
            }),
            warm: vec![8192],
        }
    }

    #[test]
    fn a_fresh_plan_counts_what_will_be_measured_and_estimates_all_of_it() {
        let p = progress(&plan(), None);
        assert_eq!((p.done, p.planned), (0, 3), "the over-capacity cell is not planned work");
        // 8K prefill (0.8192 s + 0.1) + 2 cells (readiness 0.2 + 0.16 n, window 5, drain 0.1):
        // 0.92 + 5.46 + 6.58 = 12.96 s.
        assert_eq!(p.line(), "0/3 rows and cells · about 13 s left");
    }

    #[test]
    fn the_cell_in_its_window_reads_with_its_phase_rate_streams_and_time_left() {
        let mut r = plan();
        r.prefill[0].status = CellStatus::Valid;
        r.prefill[0].prompt_tokens = Some(8192);
        r.prefill[0].ttft_ms = Some(409.6);
        r.decode[0].status = CellStatus::Valid;
        r.decode[0].readiness = Some(Readiness {
            outcome: ReadinessOutcome::Ready,
            after_ms: 360.0,
            limit_ms: 60_000.0,
            streams_producing: 1,
        });
        let p = progress(&r, Some(&window(3.4, 3120.4, 8)));
        assert_eq!((p.done, p.planned), (2, 3));
        // Left: 8K × 8 (readiness 0.36 s at 1 is the assumed line: 1.48 s at 8; window 5, drain
        // 0.1) − the 3.4 s of its window passed = 3.18 s.
        assert_eq!(
            p.line(),
            "2/3 rows and cells · decode 8K × 8 · window 3 s of 5 s · 3,120 tok/s · 8 streams · about 3 s left"
        );
    }

    #[test]
    fn every_phase_has_its_words() {
        let r = plan();
        let at = |phase: Phase, streams: Option<u32>| {
            let mut l = window(0.0, 0.0, 0);
            let c = l.current.as_mut().unwrap();
            (c.phase, c.window_elapsed_s, c.live_tps, c.streams_running) = (phase, None, None, streams);
            progress(&r, Some(&l)).phase.unwrap()
        };
        assert_eq!(at(Phase::WarmUp, None), "warm-up");
        assert_eq!(at(Phase::Readiness, Some(1)), "waiting for readiness · 1 stream");
        assert_eq!(at(Phase::Drain, Some(8)), "drain · 8 streams");
        let prefill = Live {
            current: Some(Current {
                measuring: Measuring::Prefill { context: ContextSize { label: "8K".into(), tokens: 8192 } },
                phase: Phase::Prefill,
                window_elapsed_s: None,
                live_tps: None,
                streams_running: Some(1),
            }),
            warm: vec![],
        };
        assert_eq!(progress(&r, Some(&prefill)).line(), "0/3 rows and cells · prefill 8K · prefill · about 13 s left");
    }

    #[test]
    fn a_final_run_says_how_it_ended_and_no_current_cell() {
        let mut r = plan();
        r.run.status = RunStatus::Interrupted;
        r.prefill[0].status = CellStatus::Valid;
        let p = progress(&r, Some(&window(1.0, 10.0, 8)));
        assert_eq!(p.line(), "1/3 rows and cells · interrupted");
        assert_eq!(p.left_s, None);
        r.run.status = RunStatus::Complete;
        assert_eq!(progress(&r, None).time_text(), "complete");
    }

    #[test]
    fn the_live_state_round_trips_as_json() {
        let l = window(1.5, 99.0, 8);
        let text = serde_json::to_string(&l).unwrap();
        assert!(text.contains(r#""kind":"decode""#) && text.contains(r#""phase":"window""#), "{text}");
        assert_eq!(serde_json::from_str::<Live>(&text).unwrap(), l);
    }
}
