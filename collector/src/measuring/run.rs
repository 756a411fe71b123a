//! `speedmatrix run`: flags → [`RunSpec`] → discovery → plan → prefill rows → decode cells,
//! writing the results file after every row and cell (docs/METHODOLOGY.md). This module is
//! the sequencer: it orders the measurements (every prefill row, then the decode cells pass by
//! pass), saves after each, and handles a stop (Ctrl-C, SIGTERM) or a server that died. What a
//! measurement is and does is in [`crate::measuring::measurement`] (its kinds: a prefill row,
//! [`crate::measuring::prefill`]; a decode cell, [`crate::measuring::cell`]); what they share,
//! in [`crate::measuring::session`]; the new file's header in [`crate::measuring::header`];
//! `--resume` in [`crate::measuring::resume`]; failures in [`crate::measuring::recovery`].

use crate::cli::RunArgs;
use crate::files::FileError;
use crate::measuring::cell::DecodeAt;
use crate::measuring::client::Client;
use crate::measuring::discovery::{discover, ServerInfo};
use crate::measuring::header::{self, Host};
use crate::measuring::measurement::{take, Measurement, Row};
use crate::measuring::plan::{plan, Plan, PlanInput};
use crate::measuring::prefill::PrefillAt;
use crate::measuring::rate::RateAt;
use crate::measuring::recovery::after_failure;
use crate::measuring::session::Session;
use crate::measuring::spec::RunSpec;
use crate::measuring::trace::TraceReplay;
use speedmatrix_schema::estimate::{duration_text, remaining, Basis, Estimate};
use speedmatrix_schema::repeats;
use speedmatrix_schema::{CellStatus, ContextSize, RateCell, RunStatus};

pub use crate::measuring::error::RunError;

/// Run `speedmatrix run` to completion and return the exit code: 0 done, 3 done with error
/// cells, 1 failed (the server died), 130 / 143 interrupted ([`crate::command::exit`]).
///
/// # Errors
/// [`RunError`] when the run cannot start (bad flags, unreachable server, 401, unknown model, a
/// `--resume` file of another plan) or its file cannot be written. Errors while measuring become
/// cell statuses, not process errors.
pub fn run(args: &RunArgs) -> Result<u8, RunError> {
    crate::command::runtime().map_err(RunError::Runtime)?.block_on(measure(args))
}

/// The whole run inside an existing tokio runtime (what [`run`] and `demo` call): discovery,
/// plan, prefill rows, decode cells, the results file. Returns the exit code (as [`run`]).
///
/// # Errors
/// As [`run`].
pub async fn measure(args: &RunArgs) -> Result<u8, RunError> {
    let spec = RunSpec::from_args(args)?;
    crate::measuring::fdlimit::ensure(spec.max_concurrency() as u64)?;
    let client =
        Client::new(spec.url.as_str(), spec.api_key.clone(), spec.max_concurrency() + 8).map_err(RunError::Client)?;
    let (info, metrics) = discover(&client, spec.model.as_deref(), spec.kv_budget, spec.engine).await?;
    let plan = plan(&PlanInput {
        contexts: spec.contexts.clone(),
        concurrency: spec.concurrency.clone(),
        rates: spec.rates.clone(),
        trace: spec.trace.is_some(),
        prefill_contexts: spec.prefill_contexts.clone(),
        max_tokens: spec.max_tokens,
        window_s: spec.window.as_secs_f64(),
        max_model_len: info.facts.max_model_len,
        kv_budget: info.plan_kv_budget(),
        slot_context: info.facts.slot_context,
        prefix_shares: spec.prefix_shares.clone(),
    })?;
    if let Some(t) = &spec.trace {
        crate::measuring::trace::fits(t, info.facts.max_model_len)?;
    }
    crate::measuring::conversation::fits(&plan, &spec)?;
    print_plan(&info, &plan, &spec);
    if let Some(why @ crate::measuring::held::NotHeld::Proxy(_)) = client.not_held() {
        say!("note: {why}: the streams go through it, their warm-up connections open all at once and the opening requests of a cell leave less tightly together");
    }
    if spec.dry_run {
        let preview = header::fresh_results(&info, &plan, &spec, &Host::none());
        say!("plan: {}", estimate_line(&remaining(&preview, &[]), "estimated wall time"));
        if spec.serve.is_some() {
            say!("note: --serve serves the live page of a run; a dry run measures nothing, so nothing is served");
        }
        return Ok(0);
    }
    let Some(mut s) = start_session(spec, (client, info, metrics.is_some()), &plan).await? else {
        return Ok(0);
    };
    s.spec_start = metrics.as_ref().and_then(|m| Some((m.spec_drafts?, m.spec_draft_tokens?)));
    // The URL first, then the measuring; the page is served off the measuring path.
    let server = match s.spec.serve {
        Some(port) => Some(crate::site::live_page::serve_run(port, s.live.subscribe()).map_err(RunError::Serve)?),
        None => None,
    };
    let e = remaining(&s.results, &[]);
    let what = if s.spec.resume.is_some() { "estimated wall time of what is left" } else { "estimated wall time" };
    say!("plan: {}", estimate_line(&e, what));
    s.started = (std::time::Instant::now(), e.total_s);
    s.assumed = (e.prompt_tps.1 == Basis::Assumed, e.readiness.1 == Basis::Assumed, e.answer_pace.1 == Basis::Assumed);
    s.save()?;
    let stopped = tokio::select! {
        r = measure_all(&mut s) => r?.map(|cause| (RunStatus::Failed, cause, 1)),
        _ = tokio::signal::ctrl_c() => Some((RunStatus::Interrupted, "interrupted by Ctrl-C".to_string(), crate::command::exit::INTERRUPTED)),
        _ = terminated() => Some((RunStatus::Interrupted, "stopped by SIGTERM".to_string(), crate::command::exit::TERMINATED)),
    };
    let code = finish(&mut s, stopped)?;
    if let Some(server) = server {
        server.linger().await;
    }
    Ok(code)
}

/// The results file (fresh, or the `--resume` one) and everything the measuring needs; `None`
/// when the `--resume` file has nothing left to measure (said on the terminal; the file is not
/// touched).
async fn start_session(
    mut spec: RunSpec,
    server: (Client, ServerInfo, bool),
    plan: &Plan,
) -> Result<Option<Session>, RunError> {
    let host = header::host_facts(&spec);
    // The header the server gives now: the new file's, or what `--resume` compares with.
    let fresh = header::fresh_results(&server.1, plan, &spec, &host);
    let file = spec.resumed.take();
    let (mut results, accepted) = match &spec.resume {
        Some(path) => crate::measuring::resume::resume(path, file, &server.1, plan, &spec, &fresh)?,
        None => (fresh, vec![]),
    };
    // A complete file with nothing left: said, and not rewritten (an interrupted one with
    // nothing left is closed as complete below).
    let complete = results.run.status == RunStatus::Complete
        && speedmatrix_schema::resume::left_to_measure(&results, spec.keep_going) == 0;
    if let Some(path) = spec.resume.as_ref().filter(|_| complete) {
        say!("{}", already_complete(path, &results));
        return Ok(None);
    }
    results.run.status = RunStatus::Running;
    results.run.reason = None;
    Session::start(spec, server, (results, accepted), host.gpus).await.map(Some)
}

/// The line of a `--resume` whose file has nothing left to measure.
fn already_complete(path: &std::path::Path, results: &speedmatrix_schema::Results) -> String {
    let n = speedmatrix_schema::resume::rows_and_cells(results);
    format!(
        "{} is already complete: nothing is left to measure of its {n} rows and cells, so there is nothing to resume; the file is left as it was (to measure again, run without --resume and write another file with -o)",
        path.display()
    )
}

/// Close the run: unmeasured rows and cells say why, the run's status and end, the last save,
/// the closing line; returns the exit code.
fn finish(s: &mut Session, stopped: Option<(RunStatus, String, u8)>) -> Result<u8, FileError> {
    s.progress.finish_and_clear();
    let unmeasured = match &stopped {
        Some((_, cause, _)) => format!("not measured: {cause}"),
        None => "not measured".into(),
    };
    for p in s.results.prefill.iter_mut().filter(|p| p.status == CellStatus::NotRun) {
        p.reason = Some(unmeasured.clone());
    }
    for c in s.results.decode.iter_mut().filter(|c| c.status == CellStatus::NotRun) {
        c.reason = Some(unmeasured.clone());
    }
    for c in
        s.results.rates.iter_mut().filter(|c| c.status == CellStatus::NotRun && c.reason.as_deref() == Some("pending"))
    {
        c.reason = Some(unmeasured.clone());
    }
    for t in s.results.traces.iter_mut().filter(|t| t.cell.status == CellStatus::NotRun) {
        t.cell.reason = Some(unmeasured.clone());
    }
    for c in s.results.conversations.iter_mut().filter(|c| c.status == CellStatus::NotRun) {
        c.reason = Some(unmeasured.clone());
    }
    // A cell stopped between its repeats says how many it has (`--resume` measures the rest).
    let n = repeats::planned(&s.results);
    for c in s.results.decode.iter_mut().filter(|c| c.status.is_measured()) {
        if repeats::left(c, n) > 0 {
            let done = repeats::measured(c);
            crate::measuring::measure::add_note(
                &mut c.reason,
                format!("{done} of {n} repeats measured; the rest {unmeasured}"),
            );
        }
    }
    s.results.run.status = stopped.as_ref().map_or(RunStatus::Complete, |(st, _, _)| *st);
    s.results.run.reason = stopped.as_ref().map(|(_, cause, _)| cause.clone());
    s.results.run.finished_at = Some(header::now_rfc3339());
    s.save()?;
    s.live.ended();
    let errors = s.results.decode.iter().filter(|c| c.status == CellStatus::Error).count()
        + s.results.prefill.iter().filter(|c| c.status == CellStatus::Error).count()
        + s.results.rates.iter().filter(|c| c.status == CellStatus::Error).count()
        + s.results.traces.iter().filter(|t| t.cell.status == CellStatus::Error).count()
        + s.results.conversations.iter().filter(|c| c.status == CellStatus::Error).count();
    let detail = match errors {
        0 => String::new(),
        1 => " (1 error cell — see `speedmatrix show --all` for the reason)".into(),
        n => format!(" ({n} error cells — see `speedmatrix show --all` for the reasons)"),
    };
    let out = s.spec.out.display();
    let (since, estimated) = s.started;
    let took = format!("in {} (estimated {})", duration_text(since.elapsed().as_secs_f64()), duration_text(estimated));
    match &stopped {
        None => say!("done {took}; results in {out}{detail}"),
        Some((status, cause, _)) => say!(
            "{}{cause}; what was measured is in {out}{detail}; {}",
            if *status == RunStatus::Failed { "run failed: " } else { "" },
            if s.spec.from_demo {
                "the demo starts over when run again (`speedmatrix demo`)".to_string()
            } else {
                format!("continue with --resume {out}")
            },
        ),
    }
    Ok(match stopped {
        Some((_, _, code)) => code,
        None if errors > 0 => crate::command::exit::CELL_ERRORS,
        None => 0,
    })
}

/// Resolves when the process gets SIGTERM (`timeout`, `docker stop`, a cancelled CI job): the
/// run then ends like Ctrl-C, with a complete file. Never resolves where there is no SIGTERM.
async fn terminated() {
    #[cfg(unix)]
    {
        if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            term.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await;
}

fn print_plan(info: &ServerInfo, plan: &Plan, spec: &RunSpec) {
    let window = spec.window;
    let mml = info.facts.max_model_len.map_or("unknown".into(), |m| m.to_string());
    let kv = info.facts.kv_budget.map_or("unknown".into(), |(b, src)| {
        let src = serde_json::to_value(src).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        format!("{b} tokens (from {src})")
    });
    say!(
        "server: {} {} · model {} · max_model_len {mml} · KV budget {kv}",
        info.kind.id(),
        info.facts.version.as_deref().unwrap_or("(the server reports no version)"),
        info.model
    );
    if let Some(sim) = &info.simulated {
        say!(
            "note: the server is the {}{}: the run is recorded as simulated",
            sim.by,
            sim.profile.as_deref().map(|p| format!(" (profile {p})")).unwrap_or_default()
        );
    }
    if let Some(note) = &info.metrics_note {
        say!("note: {note}");
    }
    if let Some(note) = &info.model_note {
        say!("note: {note}");
    }
    for w in &plan.warnings {
        say!("warning: {w}");
    }
    let labels = |v: &[ContextSize]| {
        v.iter().map(|c| format!("{} ({} tokens)", c.label, c.tokens)).collect::<Vec<_>>().join(", ")
    };
    let prefill_dropped = plan.not_run.iter().any(|n| n.phase == speedmatrix_schema::PlanPhase::Prefill);
    match (plan.prefill.is_empty(), prefill_dropped) {
        (false, _) => say!("plan: prefill at {}{}", labels(&plan.prefill), warm_rows(&plan.prefix_shares)),
        (true, false) => say!("plan: no prefill rows (--prefill-contexts none)"),
        (true, true) => say!("plan: no prefill rows: every prefill context is over the server's limit (see below)"),
    }
    let contexts = format!(
        "{} context{} [{}]",
        plan.contexts.len(),
        if plan.contexts.len() == 1 { "" } else { "s" },
        labels(&plan.contexts)
    );
    if let Some((turns, think)) = spec.turns.filter(|_| !plan.concurrency.is_empty()) {
        say!(
            "plan: conversations {contexts} × sessions {:?}, {turns} turns each (every turn the whole history plus a new message of {} tokens), think time {} s, answers of max_tokens {}",
            plan.concurrency,
            speedmatrix_schema::conversation::FOLLOW_UP_TOKENS,
            think.as_secs_f64(),
            spec.max_tokens
        );
    } else if !plan.concurrency.is_empty() {
        say!(
            "plan: decode {contexts} × concurrency {:?}{}, {} s windows, max_tokens {}",
            plan.concurrency,
            rate_shares(&plan.prefix_shares),
            window.as_secs_f64(),
            spec.max_tokens
        );
    }
    if let (true, Some(slo)) = (spec.rate_search, spec.slo) {
        say!(
            "plan: rate search {contexts}: the highest rate meeting {} ({} arrivals, seed {}), doubling from {} then bisecting to within {:.0} %, {} s windows, max_tokens {}",
            speedmatrix_schema::rate::slo_text(&slo),
            speedmatrix_schema::arrivals::process_text(&spec.arrival),
            spec.arrival.seed,
            speedmatrix_schema::rate_label(speedmatrix_schema::rate::SEARCH_START_RPS),
            (speedmatrix_schema::rate::SEARCH_PRECISION - 1.0) * 100.0,
            window.as_secs_f64(),
            spec.max_tokens
        );
    }
    let window_s = window.as_secs_f64();
    if let Some(low) = plan.rates.iter().copied().find(|r| r * window_s < 10.0) {
        say!(
            "warning: at {} a {window_s} s window holds about {:.1} requests; its figures will be mostly noise (a window of {:.0} s holds 10)",
            speedmatrix_schema::rate_label(low),
            low * window_s,
            (10.0 / low).ceil()
        );
    }
    if !plan.rates.is_empty() {
        let rates: Vec<String> = plan.rates.iter().map(|r| speedmatrix_schema::rate_label(*r)).collect();
        say!(
            "plan: rate cells {contexts} × [{}]{}, {} arrivals (seed {}){}, {} s windows, max_tokens {}; latencies from each request's scheduled instant",
            rates.join(", "),
            rate_shares(&plan.prefix_shares),
            speedmatrix_schema::arrivals::process_text(&spec.arrival),
            spec.arrival.seed,
            spec.max_in_flight.map(|m| format!(", at most {m} in flight")).unwrap_or_default(),
            window.as_secs_f64(),
            spec.max_tokens
        );
    }
    if let Some(t) = &spec.trace {
        for line in crate::measuring::trace::plan_lines(t, spec.max_in_flight) {
            say!("{line}");
        }
    }
    if spec.repeat > 1 {
        say!("plan: every decode cell measured {} times, interleaved (every cell once, then again, …)", spec.repeat);
    }
    for c in plan.cells.iter().filter(|c| c.over_capacity.is_some()) {
        say!("plan: over capacity (not run): {} × {}", c.context.label, c.concurrency);
    }
}

/// The warm prefill rows of `--prefix-share` in the plan's line: `, each cold and warm at
/// prefix share [50%, 90%]` (a share above 0 gets a warm row; 0 is the cold row).
fn warm_rows(shares: &[f64]) -> String {
    let labels: Vec<String> =
        shares.iter().filter(|s| **s > 0.0).map(|s| speedmatrix_schema::prefix::share_label(*s)).collect();
    match labels.is_empty() {
        true => String::new(),
        false => format!(", each cold and warm at prefix share [{}]", labels.join(", ")),
    }
}

/// The prefix shares of the decode and rate cells in the plan's line: ` × prefix share [0%, 90%]`.
fn rate_shares(shares: &[f64]) -> String {
    if shares.is_empty() {
        return String::new();
    }
    let labels: Vec<String> = shares.iter().map(|s| speedmatrix_schema::prefix::share_label(*s)).collect();
    format!(" × prefix share [{}]", labels.join(", "))
}

/// "estimated wall time ≈ 52 s (assuming 10,000 prompt tok/s …)" for an estimate.
fn estimate_line(e: &Estimate, what: &str) -> String {
    let assumed = e.assumptions().map(|a| format!(" ({a}; corrected as rows and cells are measured)"));
    format!("{what} ≈ {}{}", duration_text(e.total_s), assumed.unwrap_or_default())
}

/// Measure every row and cell still `not_run`, saving after each. Returns `Some(cause)` when the
/// server died on the way (the remaining cells stay `not_run`).
async fn measure_all(s: &mut Session) -> Result<Option<String>, FileError> {
    for index in 0..s.results.prefill.len() {
        if s.results.prefill[index].status != CellStatus::NotRun {
            continue;
        }
        let p = &s.results.prefill[index];
        let row = PrefillAt { index, context: p.context.clone(), prefix_share: p.prefix_share };
        if let Some(cause) = measure_one(s, &row).await? {
            return Ok(Some(cause));
        }
    }
    // Interleaved: pass k measures repeat k of every cell that still needs it, so a slow
    // drift of the server spreads over the matrix instead of landing on one cell.
    let n = repeats::planned(&s.results);
    for pass in 1..=n {
        for index in 0..s.results.decode.len() {
            let c = &s.results.decode[index];
            if repeats::measured(c) != pass - 1 || repeats::left(c, n) == 0 {
                continue;
            }
            if over_capacity_now(s, index) {
                continue;
            }
            let c = &s.results.decode[index];
            let cell = DecodeAt {
                index,
                context: c.context.clone(),
                concurrency: c.concurrency,
                repeat: (pass, n),
                prefix_share: c.prefix_share,
            };
            if let Some(cause) = measure_one(s, &cell).await? {
                return Ok(Some(cause));
            }
        }
    }
    if let Some(cause) = measure_rates(s).await? {
        return Ok(Some(cause));
    }
    if let Some(cause) = measure_traces(s).await? {
        return Ok(Some(cause));
    }
    measure_conversations(s).await
}

/// Measure every conversation cell still to measure (`--turns`).
async fn measure_conversations(s: &mut Session) -> Result<Option<String>, FileError> {
    for index in 0..s.results.conversations.len() {
        if s.results.conversations[index].status != CellStatus::NotRun {
            continue;
        }
        let c = crate::measuring::conversation::Conversation { index, cell: s.results.conversations[index].clone() };
        if let Some(cause) = measure_one(s, &c).await? {
            return Ok(Some(cause));
        }
    }
    Ok(None)
}

/// Replay every trace still to measure (`--trace`).
async fn measure_traces(s: &mut Session) -> Result<Option<String>, FileError> {
    let Some(trace) = s.spec.trace.clone() else { return Ok(None) };
    for index in 0..s.results.traces.len() {
        let t = &s.results.traces[index];
        if t.cell.status != CellStatus::NotRun {
            continue;
        }
        let replay = TraceReplay { index, trace: trace.clone(), max_in_flight: t.cell.max_in_flight };
        if let Some(cause) = measure_one(s, &replay).await? {
            return Ok(Some(cause));
        }
    }
    Ok(None)
}

/// Measure every rate cell still to measure, context by context, rates ascending; after a
/// saturated rate the context's higher rates are not run, saying why (unless `--keep-going`).
async fn measure_rates(s: &mut Session) -> Result<Option<String>, FileError> {
    if s.results.config.rate_search {
        return search_rates(s).await;
    }
    for index in 0..s.results.rates.len() {
        let c = &s.results.rates[index];
        // Rates skipped after a saturated one stay skipped, unless this run keeps going.
        let skipped = c.reason.as_deref().is_some_and(|r| r.starts_with("not run: "));
        if c.status != CellStatus::NotRun || (skipped && !s.spec.keep_going) {
            continue;
        }
        let cell = RateAt {
            index,
            context: c.context.clone(),
            rate_rps: c.rate_rps,
            arrival: c.arrival,
            max_in_flight: c.max_in_flight,
            prefix_share: c.prefix_share,
        };
        if let Some(cause) = measure_one(s, &cell).await? {
            return Ok(Some(cause));
        }
        let c = &s.results.rates[index];
        let beyond = match c.status {
            CellStatus::Saturated => "saturated",
            CellStatus::OverCapacity => "over capacity",
            _ => "",
        };
        if !beyond.is_empty() && !s.spec.keep_going {
            let (tokens, share, label) = (c.context.tokens, c.prefix_share, c.rate_label());
            let at = match share {
                Some(x) => format!("this context and prefix share {}", speedmatrix_schema::prefix::share_label(x)),
                None => "this context".into(),
            };
            let why = format!(
                "not run: {label} was {beyond} at {at}, so higher rates are skipped (--keep-going measures them)"
            );
            let mut skipped = vec![];
            for higher in s.results.rates.iter_mut().skip(index + 1) {
                if higher.context.tokens == tokens
                    && higher.prefix_share == share
                    && higher.status == CellStatus::NotRun
                {
                    higher.reason = Some(why.clone());
                    skipped.push(format!(
                        "plan: rate {}{} at {}: {why}",
                        higher.context.label,
                        speedmatrix_schema::prefix::name_suffix(share),
                        higher.rate_label()
                    ));
                }
            }
            for line in skipped {
                s.log(line);
            }
            s.save()?;
        }
    }
    Ok(None)
}

/// `--rates auto`: per context, rate cells chosen one after another by
/// [`speedmatrix_schema::rate::search_step`] from the cells measured so far (a resumed file's
/// included), each appended to the results and saved; the rate found goes to `rate_at_slo`.
async fn search_rates(s: &mut Session) -> Result<Option<String>, FileError> {
    let Some(slo) = s.results.config.rate_slo else { return Ok(None) };
    for ctx in s.results.config.contexts.clone() {
        loop {
            let measured: Vec<(f64, bool)> = s
                .results
                .rates
                .iter()
                .filter(|c| c.context.tokens == ctx.tokens && c.status != CellStatus::NotRun)
                .map(|c| (c.rate_rps, speedmatrix_schema::rate::meets(c, &slo)))
                .collect();
            let min_rps = speedmatrix_schema::rate::search_min_rps(s.spec.window.as_secs_f64());
            match speedmatrix_schema::rate::search_step(&ctx, &measured, min_rps) {
                speedmatrix_schema::rate::SearchStep::Measure(rate_rps) => {
                    let cell = RateCell::new(ctx.clone(), rate_rps, s.spec.arrival, s.spec.max_in_flight);
                    s.results.rates.push(cell);
                    let index = s.results.rates.len() - 1;
                    let at = RateAt {
                        index,
                        context: ctx.clone(),
                        rate_rps,
                        arrival: s.spec.arrival,
                        max_in_flight: s.spec.max_in_flight,
                        prefix_share: None,
                    };
                    if let Some(cause) = measure_one(s, &at).await? {
                        return Ok(Some(cause));
                    }
                }
                speedmatrix_schema::rate::SearchStep::Done(found) => {
                    s.log(format!(
                        "rate search {}: {} ({})",
                        ctx.label,
                        found.rate_rps.map_or("no rate met the SLO".into(), |r| format!(
                            "{} meets the SLO",
                            speedmatrix_schema::rate_label(r)
                        )),
                        found.reason
                    ));
                    s.results.rate_at_slo.retain(|f| f.context.tokens != ctx.tokens);
                    s.results.rate_at_slo.push(found);
                    s.save()?;
                    break;
                }
            }
        }
    }
    Ok(None)
}

/// Whether decode cell `index` is over capacity now that a server ran past `--max-tokens`
/// (the rule counts the longest output measured): then it is recorded so, with the reason,
/// and saved.
fn over_capacity_now(s: &mut Session, index: usize) -> bool {
    let cell = &s.results.decode[index];
    let budget = s.info.plan_kv_budget();
    let Some((cap, why)) =
        crate::measuring::endings::over_capacity_now(cell, s.longest_output, s.spec.max_tokens, budget)
    else {
        return false;
    };
    s.log(format!("plan: over capacity (not run): {} × {}: {why}", cell.context.label, cell.concurrency));
    let cell = &mut s.results.decode[index];
    (cell.status, cell.capacity, cell.reason) = (CellStatus::OverCapacity, Some(cap), Some(why));
    true
}

/// Take one measurement (measured again once when the server stopped answering and came back,
/// see [`after_failure`]), record it and save. Returns `Some(cause)` when the server died on
/// the way.
async fn measure_one<M: Measurement>(s: &mut Session, m: &M) -> Result<Option<String>, FileError> {
    s.show(Some(m.current()));
    let mut row = take(m, s).await;
    s.log(m.line(&row));
    let mut gone = None;
    if row.status() == CellStatus::Error {
        match after_failure(s, row.reason()).await {
            Ok(None) => {}
            Ok(Some(note)) => {
                row = take(m, s).await;
                crate::measuring::measure::add_note(row.reason_mut(), note);
                s.log(m.line(&row));
            }
            Err(cause) => gone = Some(format!("{cause} (after {})", m.name())),
        }
    }
    m.record(s, row);
    s.note_metrics_health();
    if gone.is_none() {
        s.estimate_corrected();
    }
    s.save()?;
    s.show(None);
    Ok(gone)
}
