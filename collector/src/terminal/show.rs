//! `speedmatrix show FILE`: print a results file the way the seed page reads — header cards,
//! prefill table, decode matrix — as text or Markdown; or the full measurement table as CSV or
//! JSON (the one writer in `speedmatrix_schema::export`).
//!
//! Rendering is pure (`render_*` return a `String`); [`run`] reads the file and prints.

use crate::cli::{ShowArgs, ShowFormat};
use crate::command::{CommandError, Failure, OutputError};
use crate::files::FileError;
use crate::text::clean;
use comfy_table::{presets, CellAlignment, Table};
use speedmatrix_schema::prefix::{hit_rate_text, share_label};
use speedmatrix_schema::registry::{self, metric};
use speedmatrix_schema::site::run_title;
use speedmatrix_schema::slo::{capacity, Slo};
use speedmatrix_schema::summary::{self, Card};
use speedmatrix_schema::table::{rows, Row, SEED_COLUMNS};
use speedmatrix_schema::{export, CellStatus, PrefillMode, Results};
use std::fmt::Write as _;

/// Why `show` could not print a file.
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    /// The file cannot be read or is no valid results file.
    #[error(transparent)]
    File(#[from] FileError),
    /// Standard output cannot be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `--slo` is not in the form `ttft=DUR,tps=N` (or `tpot=DUR`, `p=90`).
    #[error("--slo {value:?}: {why}; expected e.g. --slo ttft=2s,tps=20 (or tpot=50ms; p=90 for rate cells)")]
    Slo {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// `--slo` prints a table; CSV and JSON are the measurement rows.
    #[error("--slo prints a table in text or markdown; leave out -f csv / -f json")]
    SloFormat,
    /// `--rates` picks the rows of CSV and JSON; the text and markdown reports already show
    /// the rate table.
    #[error("--rates gives the rate cells' rows as -f csv or -f json; the text and markdown reports already show the rate table")]
    RatesFormat,
    /// `--traces` picks the rows of CSV and JSON.
    #[error("--traces gives the replayed traces' rows as -f csv or -f json; the text and markdown reports already show the trace table")]
    TracesFormat,
}

impl CommandError for ShowError {
    fn failure(&self) -> Failure {
        match self {
            ShowError::File(e) => e.failure(),
            ShowError::Output(e) => e.failure(),
            ShowError::Slo { .. } | ShowError::SloFormat | ShowError::RatesFormat | ShowError::TracesFormat => {
                Failure::BadInput
            }
        }
    }
}

/// Run `show`: read the file, render it in the asked format, print it to stdout.
///
/// # Errors
/// [`ShowError::File`] (bad input) when the file cannot be read or is invalid;
/// [`ShowError::Slo`] / [`ShowError::SloFormat`] for a bad `--slo` or one with `-f csv|json`;
/// [`ShowError::RatesFormat`] for `--rates` without `-f csv|json`.
pub fn run(args: &ShowArgs) -> Result<(), ShowError> {
    let slo = args.slo.as_deref().map(parse_slo).transpose()?;
    if slo.is_some() && matches!(args.format, ShowFormat::Csv | ShowFormat::Json) {
        return Err(ShowError::SloFormat);
    }
    if args.rates && !matches!(args.format, ShowFormat::Csv | ShowFormat::Json) {
        return Err(ShowError::RatesFormat);
    }
    if args.traces && !matches!(args.format, ShowFormat::Csv | ShowFormat::Json) {
        return Err(ShowError::TracesFormat);
    }
    let results = crate::files::read_results(&args.file)?;
    if let Some(slo) = slo {
        let markup = if args.format == ShowFormat::Markdown { Markup::Markdown } else { Markup::Text };
        return Ok(crate::command::print_out(&render_capacity(&results, &slo, markup))?);
    }
    let out = match args.format {
        ShowFormat::Text => render_report(&results, args.all, Markup::Text),
        ShowFormat::Markdown => render_report(&results, args.all, Markup::Markdown),
        ShowFormat::Csv if args.rates => export::rates_to_csv(&results),
        ShowFormat::Csv if args.traces => export::traces_to_csv(&results),
        ShowFormat::Csv => export::to_csv(&results),
        ShowFormat::Json if args.rates => {
            return Ok(crate::command::print_json(&export::rates_to_json_rows(&results))?)
        }
        ShowFormat::Json if args.traces => {
            return Ok(crate::command::print_json(&export::traces_to_json_rows(&results))?)
        }
        ShowFormat::Json => return Ok(crate::command::print_json(&export::to_json_rows(&results))?),
    };
    Ok(crate::command::print_out(&out)?)
}

/// Text or Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// Terminal text with box-drawn tables.
    Text,
    /// GitHub-flavoured Markdown.
    Markdown,
}

/// A simple table model rendered by either markup. Cells may hold several lines.
pub(crate) struct Grid {
    pub(crate) headers: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    /// Columns from this index on hold numbers: right-aligned.
    pub(crate) numeric_from: usize,
}

impl Grid {
    pub(crate) fn render(&self, markup: Markup) -> String {
        match markup {
            Markup::Text => {
                let mut t = Table::new();
                t.load_preset(presets::UTF8_FULL_CONDENSED).set_header(&self.headers);
                for r in &self.rows {
                    t.add_row(r);
                }
                for i in self.numeric_from..self.headers.len() {
                    if let Some(c) = t.column_mut(i) {
                        c.set_cell_alignment(CellAlignment::Right);
                    }
                }
                format!("{t}\n")
            }
            Markup::Markdown => {
                let cell = |s: &str| s.replace('|', "\\|").replace('\n', "<br>");
                let mut out = String::new();
                let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
                out.push_str(&line(self.headers.iter().map(|h| cell(h)).collect()));
                let sep = (0..self.headers.len()).map(|i| if i >= self.numeric_from { "---:" } else { "---" });
                out.push_str(&line(sep.map(String::from).collect()));
                for r in &self.rows {
                    out.push_str(&line(r.iter().map(|c| cell(c)).collect()));
                }
                out
            }
        }
    }
}

pub(crate) fn heading(out: &mut String, markup: Markup, level: usize, text: &str) {
    match markup {
        Markup::Text => {
            let _ = writeln!(out, "{text}");
            if level == 1 {
                let _ = writeln!(out, "{}", "=".repeat(text.chars().count()));
            }
        }
        Markup::Markdown => {
            let _ = writeln!(out, "{} {}\n", "#".repeat(level), text);
        }
    }
}

/// One header card: its label → value pairs (text from the file cleaned for the terminal).
fn card(out: &mut String, markup: Markup, card: &Card) {
    if card.items.is_empty() {
        return;
    }
    heading(out, markup, 2, card.title);
    let width = card.items.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    for (k, v) in &card.items {
        let v = clean(v);
        match markup {
            Markup::Text => {
                let _ = writeln!(out, "  {k:<width$}  {v}");
            }
            Markup::Markdown => {
                let _ = writeln!(out, "- **{k}**: {}", v.replace('|', "\\|"));
            }
        }
    }
    out.push('\n');
}

/// The Hardware, Engine and Run cards (the same as the page's), notes and the launch command.
fn header_cards(out: &mut String, r: &Results, markup: Markup) {
    for c in summary::cards(r) {
        card(out, markup, &c);
    }
    if let Some(notes) = &r.run.notes {
        card(out, markup, &Card { title: "Notes", items: vec![("Notes", notes.clone())] });
    }
    for g in summary::gaps(r) {
        heading(out, markup, 2, g.title);
        match markup {
            Markup::Text => {
                let _ = writeln!(out, "  {}", g.note);
                let width = g.rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0).min(48);
                for (k, v) in &g.rows {
                    let _ = writeln!(out, "  {:<width$}  {}", clean(k), clean(v));
                }
                out.push('\n');
            }
            Markup::Markdown => {
                let _ = writeln!(out, "{}\n", g.note);
                for (k, v) in &g.rows {
                    let _ = writeln!(out, "- `{}`: {}", clean(k).replace('`', "'"), clean(v));
                }
                out.push('\n');
            }
        }
    }
    let e = &r.engine;
    if let Some(cmd) = &e.launch_command {
        heading(out, markup, 2, "Launch command");
        match markup {
            Markup::Text => {
                let _ = writeln!(out, "  {}\n", clean(cmd));
            }
            Markup::Markdown => {
                let _ = writeln!(out, "```sh\n{}\n```\n", clean(cmd).replace("```", "`\u{200b}``"));
            }
        }
    }
}

fn dash() -> String {
    "—".to_string()
}

fn fmt(id: &str, v: Option<f64>) -> String {
    match (metric(id), v) {
        (Some(m), Some(v)) => m.display(v),
        _ => dash(),
    }
}

fn prefill_table(r: &Results) -> Grid {
    // The prompt-token column only when some row knows its real prompt length.
    let columns = if r.prefill.iter().any(|p| p.prompt_tokens.is_some()) { 4 } else { 3 };
    let warm_rows = r.prefill.iter().any(|p| p.prefix_share.is_some());
    let rows = r
        .prefill
        .iter()
        .map(|p| {
            let mut tps =
                if p.status.is_measured() { fmt("prompt_tps", p.prompt_tps) } else { p.status.label().to_string() };
            if let Some(note) = speedmatrix_schema::status::prefill_cache_note(p) {
                tps = format!("{tps}\n{note}");
            }
            let context = match p.prefix_share {
                Some(s) => format!("{} context, warm: prefix {}", clean(&p.context.label), share_label(s)),
                None => format!("{} context", clean(&p.context.label)),
            };
            let mut row = vec![
                context,
                tps,
                fmt("ttft_ms", p.ttft_ms),
                p.prompt_tokens.map(registry::format_int).unwrap_or_else(dash),
            ];
            row.truncate(columns);
            if warm_rows {
                row.push(p.prefix_share.map_or_else(|| "cold".into(), |s| hit_rate_text(s, p.prefix_cache.as_ref())));
            }
            row
        })
        .collect();
    let mut headers: Vec<String> = ["Context", "Prompt tok/s", "TTFT", "Prompt tokens"].map(String::from).to_vec();
    headers.truncate(columns);
    if warm_rows {
        headers.push("Prefix cache".into());
    }
    Grid { headers, rows, numeric_from: 1 }
}

/// One decode-matrix cell as text lines: total tok/s, the status words when not valid, a note
/// when its tokens were counted from chunks (approximate), then TTFT
/// (`"1,202.3\nRequests queued\n811 ms TTFT"`); `—` when the file has no such cell.
pub fn matrix_cell(r: &Results, context_tokens: u64, concurrency: u32) -> String {
    matrix_cell_at(r, context_tokens, concurrency, None)
}

/// [`matrix_cell`] of the cell at a prefix share (`--prefix-share`), with its measured hit
/// rate beside the plan as its last line.
pub fn matrix_cell_at(r: &Results, context_tokens: u64, concurrency: u32, share: Option<f64>) -> String {
    let key = speedmatrix_schema::prefix::key(share);
    let Some(c) = r.decode.iter().find(|c| {
        c.context.tokens == context_tokens
            && c.concurrency == concurrency
            && speedmatrix_schema::prefix::key(c.prefix_share) == key
    }) else {
        return dash();
    };
    let mut lines = Vec::new();
    if c.status.is_measured() {
        lines.push(fmt("total_tps", c.total_tps));
    }
    if c.status != CellStatus::Valid {
        lines.push(c.status.label().to_string());
    }
    lines.extend(speedmatrix_schema::status::approximate_note(c).map(str::to_string));
    if let Some(t) = c.ttft_ms.and_then(|d| d.p50) {
        lines.push(format!("{} TTFT", fmt("ttft_ms", Some(t))));
    }
    if let (Some(s), true) = (c.prefix_share, c.status.is_measured()) {
        lines.push(hit_rate_text(s, c.prefix_cache.as_ref()));
    }
    if let (Some(rate), true) = (c.spec_decode.as_ref().and_then(|f| f.acceptance_rate), c.status.is_measured()) {
        lines.push(format!("{} accepted", fmt("spec_accept_rate", Some(rate))));
    }
    lines.join("\n")
}

/// The speculative-decoding table (cells with `spec_decode`): one row per decode or rate cell
/// with its drafts, draft and accepted tokens, acceptance rate, mean accepted length and
/// acceptance by position; `None` when no cell has any.
fn spec_decode_table(r: &Results) -> Option<Grid> {
    let spec = |id: &str, v: Option<f64>| match (registry::SPEC_DECODE.iter().find(|m| m.id == id), v) {
        (Some(m), Some(v)) => m.display(v),
        _ => dash(),
    };
    let count = |v: Option<u64>| v.map_or_else(dash, registry::format_int);
    let row = |cell: String, f: &speedmatrix_schema::SpecDecodeFigures| {
        let by_pos: Vec<String> =
            f.acceptance_by_position.iter().map(|&p| spec("spec_acceptance_by_position", Some(p))).collect();
        vec![
            cell,
            count(f.drafts),
            count(f.draft_tokens),
            count(f.accepted_tokens),
            fmt("spec_accept_rate", f.acceptance_rate),
            spec("spec_mean_accepted_len", f.mean_accepted_length),
            if by_pos.is_empty() { dash() } else { by_pos.join(" · ") },
            crate::measuring::spec_decode::source_words(f.source).to_string(),
        ]
    };
    let decode = r.decode.iter().filter_map(|c| {
        let name = format!(
            "decode {} × {}{}",
            clean(&c.context.label),
            c.concurrency,
            speedmatrix_schema::prefix::name_suffix(c.prefix_share)
        );
        Some(row(name, c.spec_decode.as_ref()?))
    });
    let rates = r.rates.iter().filter_map(|c| {
        let name = format!(
            "rate {}{} at {}",
            clean(&c.context.label),
            speedmatrix_schema::prefix::name_suffix(c.prefix_share),
            c.rate_label()
        );
        Some(row(name, c.spec_decode.as_ref()?))
    });
    let rows: Vec<Vec<String>> = decode.chain(rates).collect();
    let headers = [
        "Cell",
        "Drafts",
        "Draft tokens",
        "Accepted",
        "Acceptance rate",
        "Mean accepted length",
        "By position",
        "Source",
    ];
    (!rows.is_empty()).then(|| Grid { headers: headers.map(String::from).to_vec(), rows, numeric_from: 1 })
}

/// The decode matrix: a row per context, or with prefix shares a row per context and share
/// (`8K · prefix 50%`).
fn decode_matrix(r: &Results) -> Grid {
    let headers =
        std::iter::once("Context".to_string()).chain(r.config.concurrency.iter().map(u32::to_string)).collect();
    let shares: Vec<Option<f64>> = match r.config.prefix_shares.is_empty() {
        true => vec![None],
        false => r.config.prefix_shares.iter().map(|s| Some(*s)).collect(),
    };
    let rows = r
        .config
        .contexts
        .iter()
        .flat_map(|ctx| shares.iter().map(move |share| (ctx, *share)))
        .map(|(ctx, share)| {
            let label = format!("{}{}", clean(&ctx.label), speedmatrix_schema::prefix::name_suffix(share));
            std::iter::once(label)
                .chain(r.config.concurrency.iter().map(|&n| matrix_cell_at(r, ctx.tokens, n, share)))
                .collect()
        })
        .collect();
    Grid { headers, rows, numeric_from: 1 }
}

/// The replayed traces (`--trace`): one row each with a rate cell's figures, the trace's
/// source, and (with `--all`) the reasons.
fn trace_section(r: &Results, markup: Markup, all: bool, out: &mut String) {
    heading(
        out,
        markup,
        2,
        "Trace replay — each request at its timestamp · latencies count from its scheduled instant",
    );
    let ms = |d: Option<speedmatrix_schema::Distribution>, p: fn(&speedmatrix_schema::Distribution) -> Option<f64>| {
        fmt("ttft_ms", d.as_ref().and_then(p))
    };
    let source = r.config.trace.as_ref();
    let rows = r
        .traces
        .iter()
        .map(|t| {
            let c = &t.cell;
            vec![
                clean(&source.map_or_else(dash, |s| format!("{} at {}×", s.file, s.speed))),
                t.requests.len().to_string(),
                c.status.label().to_string(),
                c.offered_rps.map_or_else(dash, |v| format!("{v:.2}")),
                c.achieved_rps.map_or_else(dash, |v| format!("{v:.2}")),
                fmt("total_tps", c.total_tps),
                ms(c.ttft_ms, |d| d.p50),
                ms(c.ttft_ms, |d| d.p99),
                ms(c.tpot_ms, |d| d.p50),
                ms(c.e2e_ms, |d| d.p50),
                c.send_lag_ms.and_then(|d| d.p99).map_or_else(dash, |v| format!("{v:.2} ms")),
                c.max_in_flight_seen.map_or_else(dash, |v| v.to_string()),
            ]
        })
        .collect();
    let headers = [
        "Trace",
        "Requests",
        "Status",
        "Offered req/s",
        "Achieved req/s",
        "Total tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "E2E p50",
        "Send lag p99",
        "Most in flight",
    ]
    .map(String::from)
    .to_vec();
    out.push_str(&Grid { headers, rows, numeric_from: 1 }.render(markup));
    out.push('\n');
    if let Some(s) = source {
        let slice = match (s.from_s, s.to_s) {
            (None, None) => "the whole trace".to_string(),
            (f, t) => format!("{} s to {}", f.unwrap_or(0.0), t.map_or("its end".into(), |t| format!("{t} s"))),
        };
        let _ = writeln!(
            out,
            "Trace: {} (Mooncake format, {} lines, sha256 {}), {} requests of {slice} over {:.1} s of trace time.",
            clean(&s.file),
            s.lines,
            clean(&s.sha256),
            s.requests,
            s.span_s
        );
    }
    for t in &r.traces {
        if let Some(line) = speedmatrix_schema::prefix::trace_cache_text(t) {
            let _ = writeln!(out, "{}", clean(&line));
        }
    }
    if all {
        for t in r.traces.iter().filter(|t| t.cell.reason.is_some()) {
            let _ =
                writeln!(out, "- {}: {}", t.cell.status.label(), clean(t.cell.reason.as_deref().unwrap_or_default()));
        }
    }
    out.push('\n');
}

/// The conversations (`--turns`): one row per cell and turn
/// ([`speedmatrix_schema::conversation::turn_rows`], the table the page shows too), then each
/// cell's status, reason and missing figures.
fn conversation_section(r: &Results, markup: Markup, out: &mut String) {
    heading(out, markup, 2, "Conversations — per turn, each turn the whole history plus a new message");
    let headers = speedmatrix_schema::conversation::TURN_HEADERS.map(String::from).to_vec();
    out.push_str(
        &Grid { headers, rows: speedmatrix_schema::conversation::turn_rows(r), numeric_from: 1 }.render(markup),
    );
    out.push('\n');
    for line in speedmatrix_schema::conversation::turn_notes(r) {
        let _ = writeln!(out, "{}", clean(&line));
    }
    out.push('\n');
}

/// The rate cells, one row each ([`export::rate_table_line`], the builder the page uses too),
/// rates ascending per context: what was offered and achieved, throughput, latencies from the
/// scheduled instants, the send lag, with an SLO the goodput, and with prefix shares the
/// measured hit rate beside the plan; when a context's rates were measured in another order
/// (`--rates auto`), a "Measured" column (`#n`) says which.
fn rate_table(r: &Results) -> Grid {
    let with_slo = r.config.rate_slo.is_some();
    let with_prefix = export::rates_have_shares(r);
    let measured = export::rates_measured_out_of_order(r);
    let rows = export::rate_table_order(r)
        .into_iter()
        .map(|(i, n)| {
            let l = export::rate_table_line(&r.rates[i]);
            let status = match l.note {
                Some(note) => format!("{}\n{note}", l.status.label()),
                None => l.status.label().to_string(),
            };
            let mut row = vec![clean(&l.context), l.rate.clone()];
            if measured {
                row.push(format!("#{n}"));
            }
            row.push(status);
            row.extend(l.figures().into_iter().map(|(_, v)| v.to_string()));
            if with_slo {
                row.push(l.goodput.clone());
            }
            if with_prefix {
                row.push(l.prefix_cache.clone());
            }
            row
        })
        .collect();
    let mut headers: Vec<String> = export::RATE_TABLE_HEADERS.map(String::from).to_vec();
    if measured {
        headers.insert(2, "Measured".into());
    }
    if with_slo {
        headers.push(export::RATE_GOODPUT_HEADER.to_string());
    }
    if with_prefix {
        headers.push(export::RATE_PREFIX_HEADER.to_string());
    }
    Grid { headers, rows, numeric_from: if measured { 4 } else { 3 } }
}

/// The full measurement table in the seed page's layout, one row per prefill row / decode cell.
pub fn all_measurements(r: &Results) -> Vec<Vec<String>> {
    rows(r)
        .iter()
        .map(|row| {
            let mut cells = vec![
                row.phase().label().to_string(),
                clean(&row.context().label),
                row.concurrency().to_string(),
                row.status().label().to_string(),
            ];
            for (_, id) in SEED_COLUMNS {
                let id = if id == "total_tps" && matches!(row, Row::Prefill(_)) { "prompt_tps" } else { id };
                let col = registry::column(id).expect("SEED_COLUMNS names registry columns");
                cells.push(row.value(&col).map(|v| col.display(v)).unwrap_or_else(dash));
            }
            cells
        })
        .collect()
}

/// The headers of [`all_measurements`].
pub fn all_measurements_headers() -> Vec<String> {
    ["Phase", "Context", "Requests at once", "Status"]
        .iter()
        .chain(SEED_COLUMNS.iter().map(|(h, _)| h))
        .map(|s| s.to_string())
        .collect()
}

/// What a status means, for the legend under the matrix.
fn legend(status: CellStatus) -> Option<&'static str> {
    match status {
        CellStatus::Valid => None,
        CellStatus::RequestsQueued => Some("the server could not run all requests at once, so some waited in a queue."),
        CellStatus::OverCapacity => {
            Some("not run because this many requests at this context would exceed the server's KV cache.")
        }
        CellStatus::Error => Some("a stream failed; no throughput is claimed (`show --all` gives the reason)."),
        CellStatus::NotRun => Some("planned but not measured (the run was interrupted)."),
        CellStatus::Saturated => {
            Some("the server did not keep up with the offered rate (`show --all` gives the evidence).")
        }
        CellStatus::ClientLimited => {
            Some("the client did not send on schedule; the server saw less than the planned load.")
        }
    }
}

/// Render the report: title, header cards, prefill table, decode matrix, legend; with `all` the
/// full measurement table too.
pub fn render_report(r: &Results, all: bool, markup: Markup) -> String {
    let mut out = String::new();
    heading(&mut out, markup, 1, "Speed test matrix");
    let _ = writeln!(out, "{}\n\n{}\n", clean(&run_title(r)), clean(&summary::subtitle(r)));
    if let Some(notice) = speedmatrix_schema::simulation::notice(r) {
        let _ = match markup {
            Markup::Markdown => writeln!(out, "> **{}**\n", clean(&notice)),
            Markup::Text => writeln!(out, "{}\n", clean(&notice)),
        };
    }
    header_cards(&mut out, r, markup);
    if !r.prefill.is_empty() {
        heading(&mut out, markup, 2, "Prefill — prompt tok/s by context length");
        out.push_str(&prefill_table(r).render(markup));
        out.push('\n');
    }
    if !r.decode.is_empty() {
        heading(
            &mut out,
            markup,
            2,
            "Sustained decode — total tok/s · rows are context length, columns are simultaneous requests",
        );
        out.push_str(&decode_matrix(r).render(markup));
        out.push('\n');
        for status in CellStatus::ALL.into_iter().filter(|s| r.decode.iter().any(|c| c.status == *s)) {
            if let Some(text) = legend(status) {
                let _ = writeln!(out, "{}: {text}", status.label());
            }
        }
        if !r.config.prefix_shares.is_empty() {
            let _ = writeln!(
                out,
                "Prefix-share cells: each request's prompt is the row's share of the context as a prefix shared by the cell's requests (sent once before the cell), then a rest of its own, so TTFT includes the rest's prefill; the hit rate is the server's own count of prompt tokens served from its prefix cache."
            );
        } else if r.config.prefill_mode == Some(PrefillMode::DecodeWarmup) {
            let _ = writeln!(
                out,
                "TTFT is measured after the benchmark warms the server's prompt cache, so it mostly excludes prefill."
            );
        }
        out.push('\n');
    }
    if !r.rates.is_empty() {
        heading(
            &mut out,
            markup,
            2,
            "Request rates — open-loop arrivals · latencies count from each request's scheduled instant",
        );
        out.push_str(&rate_table(r).render(markup));
        out.push('\n');
        if let Some(slo) = &r.config.rate_slo {
            let _ = writeln!(out, "SLO: {}.", speedmatrix_schema::rate::slo_text(slo));
        }
        for found in &r.rate_at_slo {
            let _ = writeln!(
                out,
                "Highest rate meeting the SLO at {}: {}{} — {}.",
                clean(&found.context.label),
                found.rate_rps.map_or("none".into(), speedmatrix_schema::rate_label),
                found
                    .failed_at_rps
                    .map(|f| format!(" ({} did not)", speedmatrix_schema::rate_label(f)))
                    .unwrap_or_default(),
                clean(&found.reason)
            );
        }
        for status in CellStatus::ALL.into_iter().filter(|s| r.rates.iter().any(|c| c.status == *s)) {
            if let Some(text) = legend(status) {
                let _ = writeln!(out, "{}: {text}", status.label());
            }
        }
        if all {
            let reasons: Vec<String> = r
                .rates
                .iter()
                .filter_map(|c| {
                    let why = c.reason.as_deref()?;
                    Some(format!(
                        "- rate {} at {}: {} — {}",
                        clean(&c.context.label),
                        c.rate_label(),
                        c.status.label(),
                        clean(why)
                    ))
                })
                .collect();
            if !reasons.is_empty() {
                let _ = writeln!(out, "\nRate cells' reasons:\n{}", reasons.join("\n"));
            }
        }
        out.push('\n');
    }
    if !r.traces.is_empty() {
        trace_section(r, markup, all, &mut out);
    }
    if !r.conversations.is_empty() {
        conversation_section(r, markup, &mut out);
    }
    if let Some(grid) = spec_decode_table(r) {
        heading(&mut out, markup, 2, "Speculative decoding — the server's counters over each cell's requests");
        out.push_str(&grid.render(markup));
        let corpus = r.config.prompt_corpus.as_ref().map_or_else(
            || "not recorded".to_string(),
            |c| match c.origin {
                Some(speedmatrix_schema::PromptOrigin::UserFile) => format!(
                    "{} (--prompts, sha256 {})",
                    clean(&c.name),
                    c.sha256.as_deref().map_or("unknown", |h| &h[..h.len().min(12)])
                ),
                _ => format!("{} (built in)", clean(&c.name)),
            },
        );
        let _ = writeln!(
            out,
            "\nAcceptance depends on the text: prompts from {corpus}. Mean accepted length is 1 + accepted ÷ drafts (tokens per verification step).\n"
        );
    }
    if all {
        heading(&mut out, markup, 2, "All measurements");
        let _ = writeln!(out, "Latencies are medians. Total tok/s is output across all simultaneous requests (prompt tok/s on prefill rows).\n");
        out.push_str(
            &Grid { headers: all_measurements_headers(), rows: all_measurements(r), numeric_from: 4 }.render(markup),
        );
        let reasons: Vec<String> = rows(r)
            .iter()
            .filter_map(|row| {
                row.reason().map(|why| {
                    format!(
                        "- {} {} × {}: {} — {}",
                        row.phase().label(),
                        clean(&row.context().label),
                        row.concurrency(),
                        row.status().label(),
                        clean(why)
                    )
                })
            })
            .collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "\nReasons:\n{}", reasons.join("\n"));
        }
    }
    out
}

/// `show --slo`, parsed: the decode cells' SLO (median TTFT, median per-request tok/s) and the
/// rate cells' (TTFT and TPOT per request and at a percentile), from the same limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShowSlo {
    /// For decode cells ([`capacity`]).
    pub decode: Slo,
    /// For rate cells ([`speedmatrix_schema::rate_slo`]); `tps=N` is a TPOT of 1000 ÷ N ms.
    pub rate: speedmatrix_schema::RateSlo,
}

/// Parse `--slo`: comma-separated `ttft=DUR` (`2s`, `500ms`, `1.5s`), `tps=N` (per-user
/// tok/s) or `tpot=DUR` (its inverse: 50 ms = 20 tok/s), and `p=50|90|99` (the percentile rate
/// cells are judged at; decode cells use medians), each at most once, at least one limit.
///
/// # Errors
/// [`ShowError::Slo`] naming the part that is wrong and the expected form.
pub fn parse_slo(value: &str) -> Result<ShowSlo, ShowError> {
    let bad = |why: String| ShowError::Slo { value: value.to_string(), why };
    let mut slo = Slo { ttft_ms: None, per_user_tps: None };
    let mut tpot_ms: Option<f64> = None;
    let mut percentile: Option<u8> = None;
    let duration = |key: &str, v: &str| -> Result<f64, ShowError> {
        let d = humantime::parse_duration(v.trim())
            .map_err(|_| bad(format!("{key}={v}: not a duration with a unit (2s, 500ms)")))?;
        let ms = d.as_secs_f64() * 1000.0;
        if ms <= 0.0 {
            return Err(bad(format!("{key} must be more than 0")));
        }
        Ok(ms)
    };
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, v) = part.split_once('=').ok_or_else(|| bad(format!("{part:?} is not KEY=VALUE")))?;
        match key.trim() {
            "ttft" if slo.ttft_ms.is_none() => slo.ttft_ms = Some(duration("ttft", v)?),
            "tps" if slo.per_user_tps.is_none() && tpot_ms.is_none() => {
                let n: f64 = v.trim().parse().map_err(|_| bad(format!("tps={v}: not a number of tok/s")))?;
                if !n.is_finite() || n < 0.0 {
                    return Err(bad(format!("tps={v}: must be a number ≥ 0")));
                }
                slo.per_user_tps = Some(n);
            }
            "tpot" if slo.per_user_tps.is_none() && tpot_ms.is_none() => tpot_ms = Some(duration("tpot", v)?),
            "p" if percentile.is_none() => {
                percentile = Some(match v.trim() {
                    "50" => 50,
                    "90" => 90,
                    "99" => 99,
                    other => return Err(bad(format!("p={other}: use 50, 90 or 99"))),
                })
            }
            "tps" | "tpot" if slo.per_user_tps.is_some() || tpot_ms.is_some() => {
                return Err(bad("give tps or tpot, not both (tpot = 1000 ÷ tps ms)".into()))
            }
            "ttft" | "p" => return Err(bad(format!("{key} is given twice"))),
            other => return Err(bad(format!("unknown key {other:?} (ttft, tps, tpot, p)"))),
        }
    }
    if slo.ttft_ms.is_none() && slo.per_user_tps.is_none() && tpot_ms.is_none() {
        return Err(bad("give ttft, tps or both (or tpot instead of tps)".into()));
    }
    if let Some(t) = tpot_ms {
        slo.per_user_tps = Some(1000.0 / t);
    }
    let rate = speedmatrix_schema::RateSlo {
        ttft_ms: slo.ttft_ms,
        tpot_ms: tpot_ms.or(slo.per_user_tps.filter(|n| *n > 0.0).map(|n| 1000.0 / n)),
        percentile: percentile.unwrap_or(50),
    };
    Ok(ShowSlo { decode: slo, rate })
}

/// The capacity at `slo` ([`capacity`]): title and subtitle, then per context the largest
/// concurrency meeting it with its figures, and why a context has none.
pub fn render_capacity(r: &Results, both: &ShowSlo, markup: Markup) -> String {
    let mut out = String::new();
    heading(&mut out, markup, 1, "Speed test matrix");
    let _ = writeln!(out, "{}\n\n{}\n", clean(&run_title(r)), clean(&summary::subtitle(r)));
    if !r.decode.is_empty() || r.rates.is_empty() {
        decode_capacity(&mut out, r, &both.decode, markup);
    }
    if !r.rates.is_empty() {
        rate_capacity(&mut out, r, &both.rate, markup);
    }
    out
}

/// The rate cells judged against the SLO ([`speedmatrix_schema::rate_slo`], the rules of
/// `run --slo`): rates ascending per context with the order they were measured, goodput and
/// whether each meets it; then per context the highest rate that does.
fn rate_capacity(out: &mut String, r: &Results, slo: &speedmatrix_schema::RateSlo, markup: Markup) {
    use speedmatrix_schema::rate_slo;
    if !out.ends_with("\n\n") {
        out.push('\n');
    }
    heading(out, markup, 2, &format!("Rate cells at your SLO — {}", speedmatrix_schema::rate::slo_text(slo)));
    let _ = writeln!(
        out,
        "A request counts toward goodput when its own TTFT (from its scheduled instant) and TPOT are within the limits; \
         a cell meets the SLO when it is valid and its TTFT and TPOT at p{} are within them (the rules of run --slo). \
         Rates ascending; Measured is the order the run measured them (with --rates auto, the search's).\n",
        slo.percentile
    );
    let judged = rate_slo::judge(r, slo);
    let p = slo.percentile;
    let headers = [
        "Context".to_string(),
        "Rate".into(),
        "Measured".into(),
        "Status".into(),
        "Achieved req/s".into(),
        format!("TTFT p{p}"),
        format!("TPOT p{p}"),
        "Goodput req/s".into(),
        "Meets the SLO".into(),
    ]
    .to_vec();
    let rows = judged
        .iter()
        .map(|j| {
            vec![
                clean(&j.cell.context.label),
                j.cell.rate_label(),
                format!("#{}", j.measured),
                j.cell.status.label().to_string(),
                export::rps_text(j.cell.achieved_rps),
                fmt("ttft_ms", j.ttft_ms),
                fmt("tpot_ms", j.tpot_ms),
                export::rps_text(j.goodput_rps),
                if j.meets { "yes".into() } else { "no".into() },
            ]
        })
        .collect();
    out.push_str(&Grid { headers, rows, numeric_from: 4 }.render(markup));
    out.push('\n');
    for cap in rate_slo::capacity(&judged) {
        let _ = writeln!(
            out,
            "Highest rate meeting the SLO at {}: {}{}.",
            clean(&cap.context.label),
            cap.rate_rps.map_or("none".into(), speedmatrix_schema::rate_label),
            cap.failed_at_rps.map(|f| format!(" ({} did not)", speedmatrix_schema::rate_label(f))).unwrap_or_default()
        );
    }
    if let Some(run_slo) = r.config.rate_slo.as_ref().filter(|s| *s != slo) {
        let _ = writeln!(
            out,
            "The run measured with another SLO ({}): its goodput column and --rates auto search were for that one.",
            speedmatrix_schema::rate::slo_text(run_slo)
        );
    }
}

/// The decode cells' capacity at `slo` ([`capacity`]).
fn decode_capacity(out: &mut String, r: &Results, slo: &Slo, markup: Markup) {
    heading(out, markup, 2, &format!("Capacity at your SLO — {}", slo.describe()));
    let _ = writeln!(
        out,
        "Per context, the most simultaneous requests whose cell is valid and meets the SLO; its total tok/s is the goodput.\n"
    );
    let caps = capacity(r, slo);
    let headers = ["Context", "Requests at once", "TTFT", "Per request tok/s", "Total tok/s", "Total tok/s per GPU"];
    let rows = caps
        .iter()
        .map(|c| {
            let mut row = vec![clean(&c.context.label)];
            match &c.best {
                Some(g) => row.extend([
                    g.concurrency.to_string(),
                    fmt("ttft_ms", g.ttft_ms),
                    fmt("per_request_tps", g.per_user_tps),
                    fmt("total_tps", Some(g.total_tps)),
                    g.total_tps_per_gpu.map(|v| per_gpu_metric().display(v)).unwrap_or_else(dash),
                ]),
                None => row.extend(["none".to_string(), dash(), dash(), dash(), dash()]),
            }
            row
        })
        .collect();
    out.push_str(&Grid { headers: headers.map(String::from).to_vec(), rows, numeric_from: 1 }.render(markup));
    let notes: Vec<String> = caps
        .iter()
        .filter_map(|c| c.note.as_ref().map(|n| format!("{}: {}", clean(&c.context.label), clean(n))))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNone meets the SLO at {}", notes.join("; "));
    }
    if let Err(why) = speedmatrix_schema::derived::gpu_count(r) {
        let _ = writeln!(out, "\nTotal tok/s per GPU: — because {why}.");
    }
}

fn per_gpu_metric() -> &'static registry::Metric {
    registry::derived("total_tps_per_gpu").expect("total_tps_per_gpu is a derived metric")
}
