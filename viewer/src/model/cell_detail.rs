//! One decode cell in detail, for the panel under the heatmap: its window second by second
//! (tok/s, streams decoding, the server's running / waiting gauges), its requests' TTFTs
//! against when they were sent, its repeats and their spread, and its intervals. Pure (no DOM):
//! chart specs ([`crate::model::chart_spec`], drawn by the charts' own view) and the panel's
//! texts (drawn by `view::run_report::cell_panel`), unit-tested on wasm32 in headless Chromium.
//!
//! What the file does not give comes back as the words that say so (`Err(text)`), never as a
//! zero or an empty chart: a file without samples (the seed run, round-1 files) has no
//! per-second series and no noise data.

use crate::model::chart_spec::{all_x, all_y, axis, col, ChartSpec, LegendEntry, Point, Series, Stroke, TickStyle};
use crate::model::run_report;
use speedmatrix_schema::prefix;
use speedmatrix_schema::registry::{self, column, Column, Style, INTERVAL_FIGURES};
use speedmatrix_schema::{
    CacheStart, CellStatus, DecodeCell, Interval, IntervalMethod, RequestSample, Results, WindowSeries,
};

/// What the panel says for a window without a per-second series.
pub const NO_SERIES: &str = "Per-second series unavailable: this file has no per-second series for this window \
     (it was not recorded), so there is nothing to draw — not a zero.";
/// What the panel says for a cell without intervals.
pub const NO_NOISE: &str = "Intervals unavailable: this file has no noise data for this cell (no per-second \
     series and no repeats), so no interval can be given.";
/// What the panel says for a window without request samples.
pub const NO_REQUESTS: &str = "Request samples unavailable: this file records no requests for this window.";
/// What the panel says when the window's opening time is not in the file.
pub const NO_START: &str =
    "Send times unavailable: the file does not record when this window opened, so TTFTs cannot be placed in it.";
/// What the panel says when no request of the window has a TTFT.
pub const NO_TTFT: &str = "No TTFT to draw: no request of this window recorded a first token.";

/// Which decode cell: its context in tokens and its concurrency, `?cell=8192x128` in the URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellKey {
    /// The context, tokens.
    pub tokens: u64,
    /// Simultaneous streams.
    pub concurrency: u32,
}

impl CellKey {
    /// The URL value: `8192x128`.
    pub fn param(self) -> String {
        format!("{}x{}", self.tokens, self.concurrency)
    }

    /// The inverse of [`CellKey::param`]; `None` for anything else.
    pub fn parse(value: &str) -> Option<CellKey> {
        let (tokens, n) = value.split_once('x')?;
        Some(CellKey { tokens: tokens.trim().parse().ok()?, concurrency: n.trim().parse().ok()? })
    }

    /// The cell of `r` with this key, if the file has one.
    pub fn find(self, r: &Results) -> Option<&DecodeCell> {
        r.decode.iter().find(|c| c.context.tokens == self.tokens && c.concurrency == self.concurrency)
    }

    /// The key of a heatmap cell from what it carries: its row's context label and its
    /// concurrency (the run's contexts give the tokens).
    pub fn from_label(r: &Results, label: &str, concurrency: u32) -> Option<CellKey> {
        let tokens = r.config.contexts.iter().find(|c| c.label == label)?.tokens;
        Some(CellKey { tokens, concurrency })
    }
}

/// The panel's heading: "8K context · 128 at once", with ` · prefix 90%` for a prefix-share
/// cell.
pub fn title(c: &DecodeCell) -> String {
    format!("{} context · {} at once{}", c.context.label, c.concurrency, prefix::name_suffix(c.prefix_share))
}

/// One measurement window of a cell: the cell's own, or one repeat's.
#[derive(Debug, Clone, PartialEq)]
pub struct Window<'a> {
    /// "The window", or "Repeat 2 of 3".
    pub label: String,
    /// Its per-second series, when the file has one.
    pub series: Option<&'a WindowSeries>,
    /// When it opened, ms from the run start (client clock).
    pub start_ms: Option<f64>,
    /// Its requests.
    pub requests: Vec<&'a RequestSample>,
}

/// The windows of a cell: one per repeat (in order), or the cell's own when it was measured
/// once. A cell's requests are those of every repeat; each goes to the repeat whose window is
/// the first to close after it was sent (a request is sent before its window closes, and a
/// cell's next repeat starts after its previous window closed).
pub fn windows(c: &DecodeCell) -> Vec<Window<'_>> {
    if c.repeats.is_empty() {
        let requests = c.requests.iter().collect();
        return vec![Window {
            label: "The window".into(),
            series: c.series.as_ref(),
            start_ms: c.window_start_ms,
            requests,
        }];
    }
    let n = c.repeats.len();
    c.repeats
        .iter()
        .enumerate()
        .map(|(i, rep)| {
            let after = i.checked_sub(1).and_then(|j| c.repeats[j].window_end_ms);
            Window {
                label: format!("Repeat {} of {n}", rep.repeat),
                series: rep.series.as_ref(),
                start_ms: rep.window_start_ms,
                requests: sent_between(&c.requests, after, rep.window_end_ms),
            }
        })
        .collect()
}

/// The requests sent after `after` (exclusive) and until `until` (inclusive), ms; an open end
/// does not bound.
fn sent_between(requests: &[RequestSample], after: Option<f64>, until: Option<f64>) -> Vec<&RequestSample> {
    requests.iter().filter(|q| after.is_none_or(|a| q.start_ms > a) && until.is_none_or(|u| q.start_ms <= u)).collect()
}

/// Seconds as the charts write them: "2.5 s", "−0.3 s".
fn seconds(s: f64) -> String {
    format!("{} s", registry::format_number(s, Style::Fixed(1)))
}

/// The middle of bucket `i` of a series, s into the window (a bucket's figure is its mean).
fn bucket_mid(i: usize, bucket_s: f64) -> f64 {
    (i as f64 + 0.5) * bucket_s
}

/// Output tok/s per bucket: (bucket middle, s; output tokens ÷ bucket width), one per bucket;
/// none when the bucket width is not a positive number.
pub fn rate_points(s: &WindowSeries) -> Vec<(f64, f64)> {
    if !(s.bucket_s.is_finite() && s.bucket_s > 0.0) {
        return Vec::new();
    }
    s.output_tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_finite())
        .map(|(i, t)| (bucket_mid(i, s.bucket_s), t / s.bucket_s))
        .collect()
}

/// A gauge's buckets as runs of consecutive known values (bucket middle, value): a bucket
/// without a scrape (`null`) ends a run, so the chart has a gap there, not a zero.
pub fn gauge_runs(values: &[Option<f64>], bucket_s: f64) -> Vec<Vec<(f64, f64)>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for (i, v) in values.iter().enumerate() {
        match v.filter(|v| v.is_finite()) {
            Some(v) => run.push((bucket_mid(i, bucket_s), v)),
            None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
            None => {}
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// A point of a window chart: valid, at (`x` s, `y`), read out as "second 3".
fn point(x: f64, y: f64, y_text: String) -> Point {
    Point {
        x,
        y,
        status: CellStatus::Valid,
        label: format!("second {}", (x.floor() as i64) + 1),
        x_text: seconds(x),
        y_text,
        interval: None,
    }
}

/// A series of `points` named `name` in palette colour `colour`.
fn line(name: &str, colour: usize, stroke: Stroke, points: Vec<Point>) -> Series {
    Series { name: name.into(), colour, stroke, points }
}

/// A chart of the panel: linear axes (seconds across), no frontier, marker or guide.
fn spec(id: &'static str, title: &str, caption: &str, axes: (&str, &str), series: Vec<Series>) -> ChartSpec {
    ChartSpec {
        id,
        title: title.into(),
        caption: caption.into(),
        x: axis(axes.0.into(), all_x(&series), TickStyle::Compact, false),
        y: axis(axes.1.into(), all_y(&series), TickStyle::Compact, false),
        series,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    }
}

/// The window's output tok/s second by second (`cell-window`): one point per bucket.
///
/// # Errors
/// [`NO_SERIES`] when the file has no series for the window (or none with a whole bucket).
pub fn rate_chart(w: &Window<'_>) -> Result<ChartSpec, &'static str> {
    let s = w.series.ok_or(NO_SERIES)?;
    let total = col("total_tps");
    let points: Vec<Point> = rate_points(s).into_iter().map(|(x, y)| point(x, y, total.display(y))).collect();
    if points.is_empty() {
        return Err(NO_SERIES);
    }
    let series = vec![line("Output tok/s", 0, Stroke::Solid, points)];
    let caption = "Output tokens of all streams in each second of the window ÷ the second (client clock).";
    Ok(spec(
        "cell-window",
        "Output tok/s, second by second",
        caption,
        ("Seconds into the window", "Output tok/s"),
        series,
    ))
}

/// The gauge `values` as series named `name` (one per run of known buckets, one colour).
fn gauge_series(name: &str, colour: usize, values: &[Option<f64>], bucket_s: f64) -> Vec<Series> {
    let text = |v: f64| format!("{} requests", registry::format_number(v, Style::Fixed(1)));
    gauge_runs(values, bucket_s)
        .into_iter()
        .map(|run| line(name, colour, Stroke::Solid, run.into_iter().map(|(x, y)| point(x, y, text(y))).collect()))
        .collect()
}

/// Streams decoding (client) and, where the server gives them, its running and waiting gauges
/// per second (`cell-streams`); a bucket without a scrape is a gap in its gauge's line.
///
/// # Errors
/// [`NO_SERIES`] when the file has no series for the window.
pub fn streams_chart(w: &Window<'_>) -> Result<ChartSpec, &'static str> {
    let s = w.series.ok_or(NO_SERIES)?;
    if !(s.bucket_s.is_finite() && s.bucket_s > 0.0) {
        return Err(NO_SERIES);
    }
    let decoding: Vec<Option<f64>> = s.streams_decoding.iter().copied().map(Some).collect();
    let lines = [
        ("Streams decoding (client)", 0, &decoding),
        ("Running (server)", 1, &s.running),
        ("Waiting (server)", 2, &s.waiting),
    ];
    let mut series = Vec::new();
    let mut legend = Vec::new();
    for (name, colour, values) in lines {
        let parts = gauge_series(name, colour, values, s.bucket_s);
        if !parts.is_empty() {
            legend.push(LegendEntry { text: name.into(), colour: Some(colour), stroke: Stroke::Solid });
        }
        series.extend(parts);
    }
    if series.is_empty() {
        return Err(NO_SERIES);
    }
    let caption = "Time-weighted streams past their first token (client), and the server's running and waiting \
                   gauges (Prometheus; a second without a scrape is a gap).";
    let mut chart =
        spec("cell-streams", "Streams, second by second", caption, ("Seconds into the window", "Requests"), series);
    chart.legend = Some(legend);
    Ok(chart)
}

/// A request's TTFT at its send time, s from the window's opening `start_ms`; `None` without
/// a TTFT. A failed request is drawn with the error mark.
fn ttft_point(q: &RequestSample, start_ms: f64) -> Option<Point> {
    let ttft = q.ttft_ms.filter(|t| t.is_finite())?;
    let x = (q.start_ms - start_ms) / 1000.0;
    let status = if q.error.is_some() { CellStatus::Error } else { CellStatus::Valid };
    Some(Point {
        x,
        y: ttft,
        status,
        label: format!("sent at {}", seconds(x)),
        x_text: seconds(x),
        y_text: col("ttft_ms").display(ttft),
        interval: None,
    })
}

/// The TTFT of each request against when it was sent, s from the window's opening (the
/// opening streams are sent before it opens, so they sit left of 0), opening streams apart
/// from replacements (`cell-ttft`).
///
/// # Errors
/// [`NO_REQUESTS`], [`NO_START`] or [`NO_TTFT`] when the file cannot place a TTFT.
pub fn ttft_chart(w: &Window<'_>) -> Result<ChartSpec, &'static str> {
    if w.requests.is_empty() {
        return Err(NO_REQUESTS);
    }
    let start = w.start_ms.ok_or(NO_START)?;
    let groups = [
        (Some(true), "Opening streams", 0),
        (Some(false), "Replacements", 1),
        (None, "Opening or replacement not recorded", 2),
    ];
    let series: Vec<Series> = groups
        .into_iter()
        .filter_map(|(opening, name, colour)| {
            let points: Vec<Point> =
                w.requests.iter().filter(|q| q.opening == opening).filter_map(|q| ttft_point(q, start)).collect();
            (!points.is_empty()).then(|| line(name, colour, Stroke::Marks, points))
        })
        .collect();
    if series.is_empty() {
        return Err(NO_TTFT);
    }
    let caption = "Each request's time to first token against when it was sent (client clock).";
    Ok(spec(
        "cell-ttft",
        "TTFT of each request",
        caption,
        ("Sent, seconds from the window's opening", "TTFT (ms)"),
        series,
    ))
}

/// The window's failed requests, one line each: "sent at 1.2 s: HTTP 500" (the time left out
/// when the window's opening is not recorded).
pub fn errors(w: &Window<'_>) -> Vec<String> {
    w.requests
        .iter()
        .filter_map(|q| {
            let e = q.error.as_ref()?;
            Some(match w.start_ms {
                Some(s) => format!("sent at {}: {e}", seconds((q.start_ms - s) / 1000.0)),
                None => e.clone(),
            })
        })
        .collect()
}

/// One row of the repeats table, every figure as the registry writes it (a dash when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatLine {
    /// Its number, 1 = the first pass.
    pub repeat: u32,
    /// Its status.
    pub status: CellStatus,
    /// Why, when its status has a reason.
    pub reason: Option<String>,
    /// Total tok/s.
    pub total_tps: String,
    /// TTFT p50.
    pub ttft_p50: String,
    /// TPOT p50.
    pub tpot_p50: String,
    /// When its window opened: "12.3 s" after the run start.
    pub window_start: String,
}

/// `v` in the style of the metric `id`, or a dash.
fn figure(id: &str, v: Option<f64>) -> String {
    v.map(|v| col(id).display(v)).unwrap_or_else(|| run_report::DASH.into())
}

/// The repeats of the cell, one row each (none for a cell measured once).
pub fn repeat_lines(c: &DecodeCell) -> Vec<RepeatLine> {
    c.repeats
        .iter()
        .map(|r| RepeatLine {
            repeat: r.repeat,
            status: r.status,
            reason: r.reason.clone(),
            total_tps: figure("total_tps", r.total_tps),
            ttft_p50: figure("ttft_ms", r.ttft_ms.and_then(|d| d.p50)),
            tpot_p50: figure("tpot_ms", r.tpot_ms.and_then(|d| d.p50)),
            window_start: r.window_start_ms.map(|ms| seconds(ms / 1000.0)).unwrap_or_else(|| run_report::DASH.into()),
        })
        .collect()
}

/// The spread over repeats of each headline figure: "Total tok/s: mean 1,234.5, sd 12.3,
/// 1,220.1 – 1,249.0 over 3 repeats".
pub fn spread_lines(c: &DecodeCell) -> Vec<String> {
    c.repeat_spread
        .iter()
        .filter_map(|f| {
            let col = column(&f.figure)?;
            let d = |v: f64| col.display(v);
            Some(format!(
                "{}: mean {}, sd {}, {} – {} over {} repeats",
                run_report::metric_option_label(&col),
                d(f.mean),
                d(f.sd),
                d(f.min),
                d(f.max),
                f.repeats
            ))
        })
        .collect()
}

/// One figure's interval line.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalLine {
    /// The figure's column id (`total_tps`, `ttft_ms_p50`, `tpot_ms_p50`).
    pub figure: &'static str,
    /// "Total tok/s", "TTFT (ms, median)".
    pub label: String,
    /// "1,234.5 ± 1.2 % (95 % interval, batch means over 12 batches)", or "no interval: why".
    pub text: String,
    /// Whether the figure has an interval.
    pub available: bool,
}

/// How an interval was computed, with its evidence: "batch means over 12 batches".
fn method_words(iv: &Interval) -> String {
    match iv.method {
        IntervalMethod::BatchMeans => format!("batch means over {} batches", iv.evidence),
        IntervalMethod::BootstrapRequests => format!("bootstrap over {} requests", iv.evidence),
        IntervalMethod::BetweenRepeats => format!("between {} repeats", iv.evidence),
    }
}

/// An interval for people: "1,234.5 ± 1.2 % (95 % interval, batch means over 12 batches)".
pub fn interval_text(iv: &Interval, col: &Column) -> String {
    let level = registry::format_number(iv.level * 100.0, Style::Fixed(0));
    format!(
        "{} {} ({level} % interval, {})",
        col.display(iv.estimate),
        run_report::plus_minus(iv, col),
        method_words(iv)
    )
}

/// The cell's interval of each figure that can have one, or for a figure without one the
/// reason the file gives.
///
/// # Errors
/// [`NO_NOISE`] when the cell has no intervals at all (a file without samples).
pub fn interval_lines(c: &DecodeCell) -> Result<Vec<IntervalLine>, &'static str> {
    if c.intervals.is_none() {
        return Err(NO_NOISE);
    }
    let lines = INTERVAL_FIGURES
        .iter()
        .filter_map(|f| {
            let col = column(f.column)?;
            let (text, available) = match speedmatrix_schema::diff::cell_interval(c, f.column) {
                Ok(iv) => (interval_text(iv, &col), true),
                Err(_) => (format!("no interval: {}", missing_reason(c, f.column)), false),
            };
            Some(IntervalLine { figure: f.column, label: run_report::metric_option_label(&col), text, available })
        })
        .collect();
    Ok(lines)
}

/// Why the cell has no interval of `figure`: the reason in its `intervals.missing`, else that
/// the file gives none.
fn missing_reason<'c>(c: &'c DecodeCell, figure: &str) -> &'c str {
    let listed = c.intervals.as_ref().and_then(|iv| iv.missing.iter().find(|m| m.figure == figure));
    listed.map_or("the file gives neither an interval nor a reason", |m| m.reason.as_str())
}

/// One figure of the panel's prefix-cache or speculative-decoding list.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureLine {
    /// The figure's id (`data-figure`): a registry metric id, or `cache_start`, `off_plan`.
    pub figure: &'static str,
    /// "Prefix-cache hit rate".
    pub label: String,
    /// "89.6% (Prometheus: 1,840 of 2,048 prompt tokens)".
    pub text: String,
}

fn registry_label(list: &[registry::Metric], id: &str) -> String {
    list.iter().chain(registry::METRICS).find(|m| m.id == id).map_or_else(|| id.to_string(), |m| m.label.to_string())
}

fn registry_display(list: &[registry::Metric], id: &str, v: f64) -> String {
    list.iter().chain(registry::METRICS).find(|m| m.id == id).map_or_else(|| v.to_string(), |m| m.display(v))
}

/// A prefix-share cell's prefix cache (`run --prefix-share`): the planned share, the hit rate
/// the server measured beside it with its source (or why there is none), how the cache started,
/// and when the rate is more than [`prefix::TOLERANCE`] off the plan, why it may be. Empty for a
/// cell without a share.
pub fn prefix_cache_lines(c: &DecodeCell) -> Vec<FigureLine> {
    let Some(share) = c.prefix_share else { return Vec::new() };
    let list = registry::PREFIX_CACHE;
    let f = c.prefix_cache.as_ref();
    let mut out = vec![FigureLine {
        figure: "prefix_share",
        label: registry_label(list, "prefix_share"),
        text: format!("{} (plan)", prefix::share_label(share)),
    }];
    let measured = f.and_then(|f| Some((f.measured_hit_rate?, f)));
    let hit = match measured {
        Some((m, f)) => {
            let tokens = match (f.hit_tokens, f.query_tokens) {
                (Some(h), Some(q)) => {
                    format!(": {} of {} prompt tokens", registry::format_int(h), registry::format_int(q))
                }
                _ => String::new(),
            };
            let src = f.hit_rate_source.map_or("source not recorded", |s| s.words());
            format!("{} ({src}{tokens})", registry_display(list, "prefix_cache_hit_rate", m))
        }
        None => {
            let why = c.missing.iter().find(|m| m.figure.contains("hit_rate")).map(|m| m.reason.as_str());
            format!("{}: {}", run_report::DASH, why.unwrap_or("the file gives no measured hit rate"))
        }
    };
    out.push(FigureLine {
        figure: "prefix_cache_hit_rate",
        label: registry_label(list, "prefix_cache_hit_rate"),
        text: hit,
    });
    if let Some(f) = f {
        let how = match f.cache_start {
            CacheStart::Reset => "reset",
            CacheStart::Salted => "salted",
        };
        out.push(FigureLine {
            figure: "cache_start",
            label: "Cache start".into(),
            text: format!("{how} ({})", f.cache_start_detail),
        });
    }
    if let Some((m, _)) = measured.filter(|(m, _)| (m - share).abs() > prefix::TOLERANCE + 1e-9) {
        let why = prefix::off_plan_reason(c.reason.as_deref()).map_or_else(
            || format!("{:.0} points off the plan; the file says no more", (m - share).abs() * 100.0),
            str::to_string,
        );
        out.push(FigureLine { figure: "off_plan", label: "Why it may differ".into(), text: why });
    }
    out
}

/// A cell's speculative decoding (`spec_decode`, from the server's counters): acceptance rate
/// and mean accepted length with their source, draft and accepted tokens, acceptance by
/// position. Empty for a cell without it.
pub fn spec_decode_lines(c: &DecodeCell) -> Vec<FigureLine> {
    let Some(f) = c.spec_decode.as_ref() else { return Vec::new() };
    let list = registry::SPEC_DECODE;
    let or_dash =
        |id: &str, v: Option<f64>| v.map_or_else(|| run_report::DASH.to_string(), |v| registry_display(list, id, v));
    let mut out = vec![
        FigureLine {
            figure: "spec_accept_rate",
            label: registry_label(list, "spec_accept_rate"),
            text: format!("{} ({})", or_dash("spec_accept_rate", f.acceptance_rate), f.source.words()),
        },
        FigureLine {
            figure: "spec_mean_accepted_len",
            label: registry_label(list, "spec_mean_accepted_len"),
            text: match f.mean_accepted_length {
                Some(v) => {
                    format!("{} tokens per verification step", registry_display(list, "spec_mean_accepted_len", v))
                }
                None => run_report::DASH.to_string(),
            },
        },
    ];
    if let (Some(d), Some(a)) = (f.draft_tokens, f.accepted_tokens) {
        out.push(FigureLine {
            figure: "spec_draft_tokens",
            label: registry_label(list, "spec_draft_tokens"),
            text: format!("{} drafted, {} accepted", registry::format_int(d), registry::format_int(a)),
        });
    }
    if !f.acceptance_by_position.is_empty() {
        let by: Vec<String> = f
            .acceptance_by_position
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{k}: {}", registry_display(list, "spec_acceptance_by_position", *v)))
            .collect();
        out.push(FigureLine {
            figure: "spec_acceptance_by_position",
            label: registry_label(list, "spec_acceptance_by_position"),
            text: by.join(" · "),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn seed() -> Results {
        speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json"))
            .expect("the seed fixture loads")
    }

    /// The twin run at prefix shares 0 and 90 % with ngram speculation
    /// (tests/fixtures/prefix-spec-twin.json).
    fn shared_prefix() -> Results {
        speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/prefix-spec-twin.json"))
            .expect("the prefix-share fixture loads")
    }

    #[test]
    fn a_share_cell_gives_its_hit_rate_beside_the_plan_and_its_speculation() {
        let r = shared_prefix();
        let c = r.decode.iter().find(|c| c.prefix_share == Some(0.9) && c.concurrency == 2).unwrap();
        assert_eq!(title(c), "1K context · 2 at once · prefix 90%");
        let lines = prefix_cache_lines(c);
        let text = |id: &str| lines.iter().find(|l| l.figure == id).map(|l| l.text.clone());
        assert_eq!(text("prefix_share").as_deref(), Some("90% (plan)"));
        assert_eq!(
            text("prefix_cache_hit_rate").as_deref(),
            Some("89.1% (Prometheus: 34,656 of 38,912 prompt tokens)")
        );
        assert_eq!(text("cache_start").as_deref(), Some("reset (POST /reset_prefix_cache)"));
        assert_eq!(text("off_plan"), None, "within 10 points of the plan");
        // 90 points off: the line says why, from the cell's reason.
        let mut off = c.clone();
        off.prefix_cache.as_mut().unwrap().measured_hit_rate = Some(0.0);
        off.reason =
            Some("prefix cache: measured hit rate 0% is 90 points below the planned share 90%: caching off".into());
        let why = prefix_cache_lines(&off).into_iter().find(|l| l.figure == "off_plan").unwrap();
        assert!(why.text.starts_with("prefix cache: measured hit rate 0% is 90 points below"), "{}", why.text);
        let spec = spec_decode_lines(c);
        let text = |id: &str| spec.iter().find(|l| l.figure == id).map(|l| l.text.clone());
        assert_eq!(text("spec_accept_rate").as_deref(), Some("25.7% (Prometheus counters)"));
        assert_eq!(text("spec_mean_accepted_len").as_deref(), Some("1.77 tokens per verification step"));
        assert_eq!(text("spec_draft_tokens").as_deref(), Some("4,089 drafted, 1,051 accepted"));
        assert_eq!(text("spec_acceptance_by_position").as_deref(), Some("0: 45.9% · 1: 21.4% · 2: 9.8%"));
        // The seed has neither.
        let seed = seed();
        assert!(prefix_cache_lines(&seed.decode[0]).is_empty() && spec_decode_lines(&seed.decode[0]).is_empty());
    }

    fn series() -> WindowSeries {
        WindowSeries {
            bucket_s: 1.0,
            output_tokens: vec![100.0, 120.0, 110.0, 90.0],
            streams_decoding: vec![3.5, 4.0, 4.0, 3.8],
            running: vec![Some(4.0), None, Some(4.0), Some(3.0)],
            waiting: vec![],
        }
    }

    #[test]
    fn keys_round_trip_and_find_the_cell() {
        let r = seed();
        let k = CellKey::from_label(&r, "8K", 128).expect("8K is a context of the seed");
        assert_eq!(k, CellKey { tokens: 8192, concurrency: 128 });
        assert_eq!(k.param(), "8192x128");
        assert_eq!(CellKey::parse("8192x128"), Some(k));
        assert_eq!(CellKey::parse("8K,128"), None);
        assert_eq!(k.find(&r).map(|c| c.total_tps), Some(Some(6342.6)));
        assert_eq!(CellKey::from_label(&r, "3K", 1), None);
    }

    #[test]
    fn a_series_gives_one_point_per_bucket_and_gauge_gaps_stay_gaps() {
        let s = series();
        assert_eq!(rate_points(&s), vec![(0.5, 100.0), (1.5, 120.0), (2.5, 110.0), (3.5, 90.0)]);
        let half = WindowSeries { bucket_s: 0.5, ..series() };
        assert_eq!(rate_points(&half)[0], (0.25, 200.0), "tokens ÷ bucket width, at the bucket's middle");
        assert!(rate_points(&WindowSeries { bucket_s: 0.0, ..series() }).is_empty());
        assert_eq!(gauge_runs(&s.running, 1.0), vec![vec![(0.5, 4.0)], vec![(2.5, 4.0), (3.5, 3.0)]]);
        let mut c = seed().decode[0].clone();
        c.series = Some(s);
        let w = &windows(&c)[0];
        let rate = rate_chart(w).expect("a chart");
        assert_eq!(rate.series[0].points.len(), 4);
        assert_eq!(rate.series[0].points[1].y_text, "120.0");
        let streams = streams_chart(w).expect("a chart");
        let names: Vec<&str> = streams.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["Streams decoding (client)", "Running (server)", "Running (server)"],
            "the gap splits the line"
        );
        assert_eq!(streams.legend_entries().len(), 2, "one legend entry per gauge, none for the empty waiting");
    }

    #[test]
    fn the_seed_has_no_series_no_noise_data_and_no_requests() {
        let r = seed();
        let c = &r.decode[0];
        let ws = windows(c);
        assert_eq!(ws.len(), 1);
        assert_eq!(rate_chart(&ws[0]), Err(NO_SERIES));
        assert_eq!(streams_chart(&ws[0]), Err(NO_SERIES));
        assert_eq!(ttft_chart(&ws[0]), Err(NO_REQUESTS));
        assert_eq!(interval_lines(c), Err(NO_NOISE));
        assert!(NO_SERIES.contains("unavailable") && NO_NOISE.contains("unavailable"));
        assert!(repeat_lines(c).is_empty() && spread_lines(c).is_empty() && errors(&ws[0]).is_empty());
    }

    fn request(start_ms: f64, ttft: Option<f64>, opening: Option<bool>, error: Option<&str>) -> RequestSample {
        let mut q = RequestSample::at(start_ms);
        q.ttft_ms = ttft;
        q.opening = opening;
        q.error = error.map(str::to_string);
        q
    }

    #[test]
    fn ttfts_sit_at_their_send_time_opening_apart_and_errors_listed() {
        let mut c = seed().decode[0].clone();
        c.window_start_ms = Some(10_000.0);
        c.requests = vec![
            request(9_800.0, Some(150.0), Some(true), None),
            request(9_800.0, Some(160.0), Some(true), None),
            request(12_500.0, Some(90.0), Some(false), None),
            request(13_000.0, None, Some(false), Some("HTTP 500")),
        ];
        let w = &windows(&c)[0];
        let chart = ttft_chart(w).expect("a chart");
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Opening streams", "Replacements"]);
        assert_eq!(chart.series[0].points.iter().map(|p| p.x).collect::<Vec<_>>(), [-0.2, -0.2]);
        assert_eq!((chart.series[1].points[0].x, chart.series[1].points[0].y_text.as_str()), (2.5, "90 ms"));
        assert_eq!(errors(w), ["sent at 3.0 s: HTTP 500"]);
        c.window_start_ms = None;
        assert_eq!(ttft_chart(&windows(&c)[0]), Err(NO_START));
    }

    #[test]
    fn repeats_split_the_requests_and_intervals_read_as_plus_minus() {
        let mut c = seed().decode[0].clone();
        let rep = |n: u32, start: f64, end: f64, tps: f64| speedmatrix_schema::CellRepeat {
            repeat: n,
            status: CellStatus::Valid,
            reason: None,
            window_start_ms: Some(start),
            window_end_ms: Some(end),
            total_tps: Some(tps),
            ttft_ms: None,
            tpot_ms: None,
            output_tokens: None,
            completed_requests: None,
            requests: Some(2),
            series: Some(series()),
        };
        c.repeats = vec![rep(1, 1_000.0, 4_000.0, 100.0), rep(2, 9_000.0, 12_000.0, 110.0)];
        c.requests = vec![
            request(900.0, Some(50.0), Some(true), None),
            request(2_000.0, Some(40.0), Some(false), None),
            request(8_900.0, Some(55.0), Some(true), None),
        ];
        let ws = windows(&c);
        assert_eq!(
            ws.iter().map(|w| (w.label.as_str(), w.requests.len())).collect::<Vec<_>>(),
            [("Repeat 1 of 2", 2), ("Repeat 2 of 2", 1)]
        );
        let lines = repeat_lines(&c);
        assert_eq!(
            (lines[1].repeat, lines[1].total_tps.as_str(), lines[1].window_start.as_str()),
            (2, "110.0", "9.0 s")
        );
        assert_eq!(lines[0].ttft_p50, run_report::DASH, "a figure the repeat lacks is a dash");
        let iv = Interval {
            estimate: 105.0,
            low: 100.0,
            high: 110.0,
            level: 0.95,
            method: IntervalMethod::BetweenRepeats,
            evidence: 2,
            std_error: 0.4,
            df: Some(1.0),
        };
        c.intervals = Some(speedmatrix_schema::CellIntervals {
            total_tps: Some(iv),
            missing: vec![speedmatrix_schema::MissingFigure { figure: "tpot_ms_p50".into(), reason: "too few".into() }],
            ..Default::default()
        });
        let lines = interval_lines(&c).expect("intervals");
        assert_eq!(lines[0].text, "105.0 ± 4.8 % (95 % interval, between 2 repeats)");
        assert!(lines[0].available);
        assert_eq!(
            (lines[2].figure, lines[2].text.as_str(), lines[2].available),
            ("tpot_ms_p50", "no interval: too few", false)
        );
        assert_eq!(lines[1].text, "no interval: the file gives neither an interval nor a reason");
    }
}
