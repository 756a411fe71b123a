//! Server shapes as rows of a table (`server_shapes.rs`): a [`Shape`] is a scripted server
//! ([`super::scripted::Script`]), the flags `speedmatrix run` gets against it, the rule the shape
//! guards (one line) and the verdict expected — the exit code, each prefill row's and decode
//! cell's status and reason, and whatever else a row checks in a small closure ([`Shape::check`]).
//! [`run`] does the same for every row: start the server, run the collector, load the results
//! file, check every part of the verdict, and fail with the shape's name, its rule and every
//! mismatch found (not only the first).

use super::collect::collect;
use super::scripted::{self, Script};
use serde_json::Value;
use speedmatrix_schema::{load_results, CellStatus, DecodeCell, Results, RunStatus};
use std::fmt::Debug;
use std::path::PathBuf;

/// One server shape and the verdict expected of `speedmatrix run` against it.
pub struct Shape {
    /// The rule the shape guards, in one line: printed when the shape fails.
    pub rule: &'static str,
    /// The server.
    pub script: Script,
    /// The flags after `speedmatrix run --url URL --quiet -o OUT`, separated by spaces.
    pub args: &'static str,
    /// The exit code (docs/CLI.md, "Exit codes"). With 0 or 3 the run must be complete.
    pub exit: i32,
    /// Every prefill row of the results file, in its order.
    pub prefill: Vec<Cell>,
    /// Every decode cell of the results file, in its order.
    pub decode: Vec<Cell>,
    /// What else the row checks, given what the run left; `None` when the table says it all.
    pub check: Option<fn(&Outcome, &mut Checks)>,
}

/// The verdict on one prefill row or decode cell.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// Its status.
    pub status: Status,
    /// Its reason.
    pub reason: Reason,
}

/// A status expected of a row or cell.
#[derive(Debug, Clone, Copy)]
pub enum Status {
    /// Exactly this one.
    Is(CellStatus),
    /// Valid or requests queued: the figures were measured, whatever the queue rule said.
    Measured,
}

/// A reason expected of a row or cell.
#[derive(Debug, Clone, Copy)]
pub enum Reason {
    /// Not checked.
    Any,
    /// None at all.
    Null,
    /// One that contains each of these.
    Has(&'static [&'static str]),
    /// One that starts with this.
    StartsWith(&'static str),
}

/// A cell of this status, its reason not checked.
pub fn is(status: CellStatus) -> Cell {
    Cell { status: Status::Is(status), reason: Reason::Any }
}

/// A cell of this status whose reason contains each of `fragments`.
pub fn with(status: CellStatus, fragments: &'static [&'static str]) -> Cell {
    Cell { status: Status::Is(status), reason: Reason::Has(fragments) }
}

/// A valid cell without a reason.
pub fn valid_without_reason() -> Cell {
    Cell { status: Status::Is(CellStatus::Valid), reason: Reason::Null }
}

/// A measured cell (valid or requests queued), its reason not checked.
pub fn measured() -> Cell {
    Cell { status: Status::Measured, reason: Reason::Any }
}

/// What one run left behind, for a row's own checks.
pub struct Outcome {
    /// The collector's exit code.
    pub code: Option<i32>,
    /// Its stderr.
    pub stderr: String,
    /// The results file.
    pub out: PathBuf,
    /// The results file through the real loader.
    pub results: Results,
    /// The results file as plain JSON (for fields the model does not keep).
    pub raw: Value,
    /// The JSON bodies of every completion request the server received.
    pub bodies: Vec<Value>,
    /// The prefix-cache resets the server was asked for.
    pub resets: usize,
    /// How long the collector's process ran, start to exit.
    pub wall: std::time::Duration,
    /// Every `/v1/models` and completion request the server received, with its connection.
    pub seen: Vec<scripted::Seen>,
    /// The most `/v1/models` requests the server answered at once.
    pub models_most_at_once: i64,
    /// What the script's [`scripted::Front`] saw and did (empty without one).
    pub front: scripted::FrontLog,
}

/// The mismatches found so far.
#[derive(Debug, Default)]
pub struct Checks(Vec<String>);

impl Checks {
    /// Record `what` unless `ok`.
    pub fn that(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    /// Record a mismatch between `got` and `want`.
    pub fn eq<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T) {
        self.that(got == want, || format!("{what}: expected {want:?}, got {got:?}"));
    }
}

/// Run `shape` (named `name`): start its server, run the collector against it, load the results
/// file and check the whole verdict; panic with the name, the rule, every mismatch and the
/// collector's stderr when anything differs.
pub async fn run(name: &str, shape: Shape) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let server = scripted::start(shape.script).await;
    let out = dir.path().join("run.json");
    let args: Vec<&str> = shape.args.split_whitespace().collect();
    let started = std::time::Instant::now();
    let (code, stderr) = collect(&server.url, &out, &args).await;
    let wall = started.elapsed();
    let (bodies, seen, models_most_at_once) = (server.bodies(), server.seen(), server.models_most_at_once());
    let resets = server.resets();
    let front = server.front_log();
    drop(server);
    let mut c = Checks::default();
    c.eq("exit code", code, Some(shape.exit));
    match load(&out) {
        Err(why) => c.0.push(why),
        Ok((results, raw)) => {
            let o = Outcome {
                code,
                stderr: stderr.clone(),
                out,
                results,
                raw,
                bodies,
                resets,
                wall,
                seen,
                models_most_at_once,
                front,
            };
            verdict(&o, &shape.prefill, &shape.decode, &mut c);
            c.eq("what the front could not do as scripted", o.front.problems.clone(), vec![]);
            if let Some(check) = shape.check {
                let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&o, &mut c)));
                if let Err(panic) = checked {
                    let why =
                        panic.downcast_ref::<String>().cloned().or(panic.downcast_ref::<&str>().map(|s| s.to_string()));
                    c.0.push(format!("the row's check panicked: {}", why.unwrap_or_default()));
                }
            }
        }
    }
    if !c.0.is_empty() {
        let found: Vec<String> = c.0.iter().map(|m| format!("  - {m}")).collect();
        panic!("shape `{name}` failed\n  rule: {}\n{}\ncollector's stderr:\n{stderr}", shape.rule, found.join("\n"));
    }
}

/// The results file at `out`, loaded and as JSON, or why not.
fn load(out: &std::path::Path) -> Result<(Results, Value), String> {
    let bytes = std::fs::read(out).map_err(|e| format!("no results file at {}: {e}", out.display()))?;
    let results = load_results(&bytes).map_err(|e| format!("the results file does not load: {e}"))?;
    let raw = serde_json::from_slice(&bytes).map_err(|e| format!("the results file is not JSON: {e}"))?;
    Ok((results, raw))
}

/// The table's part of the verdict: a complete run (exit 0 or 3), and every row and cell with
/// its expected status and reason.
fn verdict(o: &Outcome, prefill: &[Cell], decode: &[Cell], c: &mut Checks) {
    let r = &o.results;
    if matches!(o.code, Some(0 | 3)) {
        c.eq("run status", r.run.status, RunStatus::Complete);
    }
    c.eq("prefill rows", r.prefill.len(), prefill.len());
    for (row, want) in r.prefill.iter().zip(prefill) {
        let at = format!("prefill {}", row.context.label);
        cell(c, &at, row.status, row.reason.as_deref(), want);
    }
    c.eq("decode cells", r.decode.len(), decode.len());
    for (cell_, want) in r.decode.iter().zip(decode) {
        let at = format!("decode {} × {}", cell_.context.label, cell_.concurrency);
        let before = c.0.len();
        cell(c, &at, cell_.status, cell_.reason.as_deref(), want);
        if c.0.len() > before {
            c.0.push(format!("{at}: {}", timeline(cell_)));
        }
    }
}

/// What a decode cell's requests say about time, for a cell whose status was not the one
/// expected: how long they waited for a first token, and how long the collector took from a
/// stream's end to its replacement's send (the client view counts neither as running).
fn timeline(cell: &DecodeCell) -> String {
    let (w0, w1) = (cell.window_start_ms.unwrap_or(f64::NAN), cell.window_end_ms.unwrap_or(f64::NAN));
    let q = &cell.requests;
    let ends: Vec<f64> = q.iter().filter_map(|q| q.e2e_ms.map(|e| q.start_ms + e)).collect();
    let (mut longest, mut in_window) = (0.0_f64, 0.0);
    for r in q.iter().filter(|r| r.opening == Some(false)) {
        let Some(end) = ends.iter().copied().filter(|e| *e <= r.start_ms).reduce(f64::max) else { continue };
        longest = longest.max(r.start_ms - end);
        if r.start_ms > w0 && r.start_ms <= w1 {
            in_window += r.start_ms - end.max(w0);
        }
    }
    let ttft = q.iter().filter_map(|r| r.ttft_ms).fold(0.0, f64::max);
    format!(
        "window {w0:.0}–{w1:.0} ms, {} requests, longest TTFT {ttft:.0} ms, longest end → next send {longest:.1} ms ({in_window:.1} ms in sum inside the window)",
        q.len()
    )
}

/// One row's or cell's status and reason against `want`.
fn cell(c: &mut Checks, at: &str, status: CellStatus, reason: Option<&str>, want: &Cell) {
    let status_ok = match want.status {
        Status::Is(s) => status == s,
        Status::Measured => status.is_measured(),
    };
    c.that(status_ok, || format!("{at}: expected {:?}, got {} (reason: {reason:?})", want.status, status.id()));
    let reason_ok = match want.reason {
        Reason::Any => true,
        Reason::Null => reason.is_none(),
        Reason::Has(fragments) => fragments.iter().all(|f| reason.is_some_and(|r| r.contains(f))),
        Reason::StartsWith(start) => reason.is_some_and(|r| r.starts_with(start)),
    };
    c.that(reason_ok, || format!("{at}: expected a reason {:?}, got {reason:?}", want.reason));
}
