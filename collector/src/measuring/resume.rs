//! `run --resume FILE`: whether FILE may be continued ([`resume`]) — the same served model and
//! plan (contexts, concurrency, prefill contexts, window, max tokens, repeats), and the server
//! the header describes: a header difference is refused unless `--accept-change` names it, and
//! a `--url` that moved is recorded. The accepted differences go on every row and cell measured
//! now; a failed run's error rows and cells are measured again. (Which flags take the file's
//! values is the spec's job: `FromFile` in spec.rs.)

use crate::measuring::discovery::ServerInfo;
use crate::measuring::error::RunError;
use crate::measuring::plan::Plan;
use crate::measuring::spec::{same_file, RunSpec};
use speedmatrix_schema::repeats;
use speedmatrix_schema::{AcceptedDifference, CellStatus, Config, Results, RunStatus};
use std::path::Path;
use std::time::Duration;

/// The matrix flags that made a results file's plan, to repeat with `--resume`.
fn plan_flags(c: &Config) -> String {
    let join = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(",") };
    // Whole seconds as `30s`, anything finer in ms: both read back by humantime.
    let window =
        c.window_s.map(|w| if w.fract() == 0.0 { format!("{w}s") } else { format!("{}ms", (w * 1000.0).round()) });
    format!(
        "--contexts {} --concurrency {} --prefill-contexts {}{}{}{}{}{}{}",
        join(c.contexts.iter().map(|x| x.tokens.to_string()).collect()),
        join(c.concurrency.iter().map(u32::to_string).collect()),
        join(c.prefill_contexts.iter().map(|x| x.tokens.to_string()).collect()),
        match c.prefix_shares.is_empty() {
            true => String::new(),
            false => format!(
                " --prefix-share {}",
                c.prefix_shares
                    .iter()
                    .map(|s| speedmatrix_schema::prefix::share_label(*s))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        },
        match (c.rate_search, c.rates.is_empty()) {
            (true, _) => " --rates auto".to_string(),
            (false, false) => format!(" --rates {}", join(c.rates.iter().map(f64::to_string).collect())),
            (false, true) => String::new(),
        },
        window.map(|w| format!(" --duration {w}")).unwrap_or_default(),
        c.max_tokens.map(|m| format!(" --max-tokens {m}")).unwrap_or_default(),
        c.repeats.filter(|&n| n > 1).map(|n| format!(" --repeat {n}")).unwrap_or_default(),
        c.trace
            .as_ref()
            .map(|t| format!(
                " --trace {} --trace-speed {}{}{}",
                t.file,
                t.speed,
                t.from_s.map(|f| format!(" --trace-from {f}")).unwrap_or_default(),
                t.to_s.map(|f| format!(" --trace-to {f}")).unwrap_or_default()
            ))
            .unwrap_or_default()
    )
}

/// Load a results file to continue: same model, same plan; unmeasured cells run again. The
/// server must be the one the header describes (`now` is the header made from the server
/// reached now); a difference is refused unless `--accept-change` names it, and accepted ones
/// are returned to be recorded on every row and cell measured now. `file` is the file as the
/// spec read it; read from `path` when the spec did not.
pub(crate) fn resume(
    path: &Path,
    file: Option<Results>,
    info: &ServerInfo,
    plan: &Plan,
    spec: &RunSpec,
    now: &Results,
) -> Result<(Results, Vec<AcceptedDifference>), RunError> {
    let mut r = match file {
        Some(r) => r,
        None => crate::files::read_results(path)?,
    };
    let differs =
        |what: &'static str| RunError::ResumeMismatch { path: path.to_path_buf(), what, flags: plan_flags(&r.config) };
    if r.engine.served_model_name.as_deref() != Some(info.model.as_str()) {
        return Err(differs("the served model differs"));
    }
    if r.config.contexts != plan.contexts
        || r.config.concurrency != plan.concurrency
        || r.config.prefill_contexts != plan.prefill
    {
        return Err(differs("the plan (contexts, concurrency or prefill contexts) differs"));
    }
    if r.config.prefix_shares != plan.prefix_shares {
        return Err(differs("the plan's prefix shares (--prefix-share) differ"));
    }
    if r.config.rates != plan.rates || r.config.rate_search != spec.rate_search {
        return Err(differs("the plan's request rates (--rates) differ"));
    }
    // A rate flag given again must match the file's (the cells keep theirs).
    if let Some(c) = r.rates.first() {
        if c.arrival != spec.arrival {
            return Err(differs("--arrival or --seed differs"));
        }
        if c.max_in_flight != spec.max_in_flight {
            return Err(differs("--max-in-flight differs"));
        }
    }
    if r.config.rate_slo != spec.slo && (r.config.rate_slo.is_some() || !r.rates.is_empty()) {
        return Err(differs("--slo differs"));
    }
    let same = |a: &speedmatrix_schema::TraceSource, b: &speedmatrix_schema::TraceSource| {
        (&a.sha256, a.from_s, a.to_s, a.speed) == (&b.sha256, b.from_s, b.to_s, b.speed)
    };
    match (&r.config.trace, spec.trace.as_ref().map(|t| &t.source)) {
        (None, None) => {}
        (Some(a), Some(b)) if same(a, b) => {}
        _ => {
            return Err(differs(
                "the trace (--trace and its file's content, --trace-speed, --trace-from or --trace-to) differs",
            ))
        }
    }
    if let Some(t) = r.traces.first() {
        if t.cell.max_in_flight != spec.max_in_flight {
            return Err(differs("--max-in-flight differs"));
        }
    }
    let file = (r.config.max_tokens, r.config.window_s);
    if let Some(what) = tokens_or_window_differ(file, spec.max_tokens, spec.window) {
        return Err(differs(what));
    }
    if repeats::planned(&r) != spec.repeat {
        return Err(differs("--repeat differs"));
    }
    // `--keep-going` given to the resumed run measures the rates skipped after a saturated one.
    r.config.rate_keep_going = spec.keep_going;
    let mut accepted = resume_differences(path, &r, now, &spec.accept_change)?;
    accepted.extend(moved_url(&r, spec));
    let out = &spec.out;
    if !same_file(out, path) {
        say!("note: resuming {} and writing to {}", path.display(), out.display());
    }
    // A failed run stopped because the server died: its error cells are measured again.
    if r.run.status == RunStatus::Failed {
        let mut again = 0;
        for c in r.decode.iter_mut().filter(|c| c.status == CellStatus::Error) {
            // Its measured repeats are kept; only what failed is measured again.
            *c = repeats::without_failed(c).unwrap_or_else(|| {
                let mut blank = crate::measuring::measure::blank_cell(&c.context, c.concurrency);
                blank.prefix_share = c.prefix_share;
                blank
            });
            again += 1;
        }
        for p in r.prefill.iter_mut().filter(|p| p.status == CellStatus::Error) {
            p.status = CellStatus::NotRun;
            p.reason = Some("pending".into());
            (p.prompt_tokens, p.prompt_tps, p.ttft_ms, p.requests) = (None, None, None, vec![]);
            (p.completed_requests, p.cached_tokens, p.cached_tokens_source) = (None, None, None);
            (p.prefix_cache, p.missing) = (None, vec![]);
            again += 1;
        }
        for c in r.rates.iter_mut().filter(|c| c.status == CellStatus::Error) {
            let mut blank =
                speedmatrix_schema::RateCell::new(c.context.clone(), c.rate_rps, c.arrival, c.max_in_flight);
            blank.prefix_share = c.prefix_share;
            *c = blank;
            again += 1;
        }
        for t in r.traces.iter_mut().filter(|t| t.cell.status == CellStatus::Error) {
            if let Some(trace) = &spec.trace {
                *t = crate::measuring::trace::planned_row(trace, t.cell.max_in_flight);
                again += 1;
            }
        }
        if again > 0 {
            say!("note: the run had failed; its {again} error row(s)/cell(s) are measured again");
        }
    }
    Ok((r, accepted))
}

/// Which of `--max-tokens` and `--duration` differ from the file's (`max_tokens`, `window_s`),
/// named with the verb; `None` when both match.
fn tokens_or_window_differ(
    file: (Option<u32>, Option<f64>),
    max_tokens: u32,
    window: Duration,
) -> Option<&'static str> {
    let tokens = file.0 != Some(max_tokens);
    let window = !file.1.is_some_and(|w| (w - window.as_secs_f64()).abs() <= 1e-9);
    match (tokens, window) {
        (false, false) => None,
        (true, false) => Some("--max-tokens differs"),
        (false, true) => Some("--duration differs"),
        (true, true) => Some("--max-tokens and --duration differ"),
    }
}

/// The header differences between the file being resumed and the server now: an error naming
/// each one not accepted (and the flag that accepts it), else the accepted ones.
fn resume_differences(
    path: &Path,
    file: &Results,
    now: &Results,
    accept: &[String],
) -> Result<Vec<AcceptedDifference>, RunError> {
    use speedmatrix_schema::resume::{differences, refused};
    let diffs = differences(file, now);
    let refused = refused(&diffs, accept);
    if !refused.is_empty() {
        return Err(RunError::ServerChanged {
            path: path.to_path_buf(),
            what: refused.iter().map(|d| d.describe()).collect(),
            keys: refused.iter().map(|d| d.key).collect(),
        });
    }
    for d in &diffs {
        say!("note: --resume: accepted: {}", d.describe());
    }
    Ok(diffs.into_iter().map(|d| d.recorded).collect())
}

/// The server URL, when `--url` moved it away from the file's (the server restarted on another
/// port, a tunnel changed): the file keeps the URL it started with, and every row and cell
/// measured now records where it was measured. Giving `--url` is the acceptance.
fn moved_url(file: &Results, spec: &RunSpec) -> Option<AcceptedDifference> {
    let stored = file.config.server_url.as_deref()?;
    if spec.redact_host || stored == spec.url.as_str() {
        return None;
    }
    let moved = AcceptedDifference {
        field: "config.server_url".into(),
        header: Some(stored.into()),
        measured: Some(spec.url.as_str().to_string()),
    };
    say!(
        "note: --resume: the file's server was {stored}; rows and cells measured now record {} (config.server_url)",
        spec.url
    );
    Some(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_names_which_of_max_tokens_and_duration_differs() {
        let file = (Some(256), Some(30.0));
        let secs = Duration::from_secs;
        assert_eq!(tokens_or_window_differ(file, 256, secs(30)), None);
        assert_eq!(tokens_or_window_differ(file, 256, secs(10)), Some("--duration differs"));
        assert_eq!(tokens_or_window_differ(file, 512, secs(30)), Some("--max-tokens differs"));
        assert_eq!(tokens_or_window_differ(file, 512, secs(10)), Some("--max-tokens and --duration differ"));
        // A file that does not record one (an import) cannot match it.
        assert_eq!(tokens_or_window_differ((Some(256), None), 256, secs(30)), Some("--duration differs"));
    }
}
