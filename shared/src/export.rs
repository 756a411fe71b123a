//! The one writer of the flat measurement table, as CSV or JSON rows. `speedmatrix show
//! --format csv|json` and the viewer's CSV export both call it.
//!
//! Columns: `phase, context, context_tokens, concurrency, status, reason`, then every registry
//! column ([`crate::registry::columns`]). Numbers are raw (no grouping, no units); a missing
//! figure is an empty CSV field / JSON `null`; statuses are snake_case ids.
//!
//! Rate cells (open-loop, `results.rates`) have figures of their own, so they have a table of
//! their own in the same style: [`rates_to_csv`] / [`rates_to_json_rows`], one row per rate cell
//! with the columns of [`RATE_COLUMNS`] (`speedmatrix show --rates -f csv|json`, and the page's
//! "Request rates (CSV)" download).

use crate::model::{ArrivalProcess, Distribution, RateCell, Results};
use crate::registry::{columns, Column, Stat, Style, Unit};
use crate::table::{rows, Row};

/// The fixed leading columns, before the registry columns.
pub const KEY_COLUMNS: [&str; 6] = ["phase", "context", "context_tokens", "concurrency", "status", "reason"];

/// Every header of the table, in order.
pub fn headers() -> Vec<String> {
    KEY_COLUMNS.iter().map(|s| s.to_string()).chain(columns().iter().map(|c| c.id())).collect()
}

/// A number as raw text: the shortest text that reads back as the same f64 (`6342.6`, `7113`).
fn raw(v: f64) -> String {
    format!("{v}")
}

fn key_fields(row: &Row<'_>) -> [String; 6] {
    [
        row.phase().id().to_string(),
        row.context().label.clone(),
        row.context().tokens.to_string(),
        row.concurrency().to_string(),
        row.status().id().to_string(),
        row.reason().unwrap_or_default().to_string(),
    ]
}

/// The columns a file with prefix shares (`config.prefix_shares`) adds after the registry's:
/// the row's or cell's share, its measured hit rate and the rate's source (empty on cold rows).
pub const PREFIX_COLUMNS: [&str; 3] = ["prefix_share", "prefix_cache_hit_rate", "prefix_cache_hit_rate_source"];

/// A row's [`PREFIX_COLUMNS`] values: share, measured hit rate, source id.
fn prefix_fields(row: &Row<'_>) -> [Option<serde_json::Value>; 3] {
    let pc = row.prefix_cache();
    [
        row.prefix_share().map(serde_json::Value::from),
        pc.and_then(|p| p.measured_hit_rate).map(serde_json::Value::from),
        pc.and_then(|p| p.hit_rate_source).and_then(|s| serde_json::to_value(s).ok()),
    ]
}

/// The whole table as CSV (RFC 4180, `\n` line ends): one header line, then one line per prefill
/// row and decode cell; with prefix shares, [`PREFIX_COLUMNS`] last.
pub fn to_csv(results: &Results) -> String {
    let cols = columns();
    let shares = !results.config.prefix_shares.is_empty();
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    // Writing into a Vec cannot fail, and every record has the header's length.
    let mut head = headers();
    if shares {
        head.extend(PREFIX_COLUMNS.map(String::from));
    }
    w.write_record(head).expect("in-memory CSV write");
    for row in rows(results) {
        let values = cols.iter().map(|c| row.value(c).map(raw).unwrap_or_default());
        let mut record: Vec<String> = key_fields(&row).into_iter().chain(values).collect();
        if shares {
            record.extend(prefix_fields(&row).map(|v| match v {
                Some(serde_json::Value::String(s)) => s,
                Some(v) => v.to_string(),
                None => String::new(),
            }));
        }
        w.write_record(&record).expect("in-memory CSV write");
    }
    let bytes = w.into_inner().expect("in-memory CSV flush");
    String::from_utf8(bytes).expect("CSV of UTF-8 strings is UTF-8")
}

/// A figure as JSON: counts (a distribution's `_count`, whole tokens and requests such as
/// `completed_requests`, `output_tokens`) as integers (`1`, not `1.0`) when integral, every
/// other figure as a float.
fn json_number(c: &Column, v: f64) -> serde_json::Value {
    let count = c.stat == Some(Stat::Count)
        || (c.stat.is_none()
            && c.metric.style == Style::Fixed(0)
            && matches!(c.metric.unit, Unit::Tokens | Unit::Requests | Unit::Count));
    if count && v.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&v) {
        serde_json::Value::from(v as u64)
    } else {
        serde_json::Value::from(v)
    }
}

/// The whole table as a JSON array of objects keyed by [`headers`] (numbers raw, counts as integers, `null` when
/// missing).
pub fn to_json_rows(results: &Results) -> serde_json::Value {
    let cols = columns();
    let rows = rows(results)
        .iter()
        .map(|row| {
            let mut obj = serde_json::Map::new();
            obj.insert("phase".into(), row.phase().id().into());
            obj.insert("context".into(), row.context().label.clone().into());
            obj.insert("context_tokens".into(), row.context().tokens.into());
            obj.insert("concurrency".into(), row.concurrency().into());
            obj.insert("status".into(), row.status().id().into());
            obj.insert("reason".into(), row.reason().into());
            for c in &cols {
                obj.insert(c.id(), row.value(c).map_or(serde_json::Value::Null, |v| json_number(c, v)));
            }
            if !results.config.prefix_shares.is_empty() {
                for (k, v) in PREFIX_COLUMNS.iter().zip(prefix_fields(row)) {
                    obj.insert((*k).into(), v.unwrap_or(serde_json::Value::Null));
                }
            }
            serde_json::Value::Object(obj)
        })
        .collect();
    serde_json::Value::Array(rows)
}

/// One field of a rate cell's row.
enum Field {
    /// Text (the context's label, a status id, the reason); empty when absent.
    Text(String),
    /// A measured or planned figure.
    Float(Option<f64>),
    /// A count (requests, tokens): an integer in JSON.
    Count(Option<u64>),
}

/// One statistic of a distribution.
type StatOf = fn(&Distribution) -> Option<f64>;
/// One distribution of a rate cell.
type DistributionOf = fn(&RateCell) -> Option<Distribution>;

/// The percentiles of a rate cell's distributions in its table: `ttft_ms_p50` … `_mean`.
const RATE_STATS: [(&str, StatOf); 4] =
    [("p50", |d| d.p50), ("p90", |d| d.p90), ("p99", |d| d.p99), ("mean", |d| d.mean)];

/// The distributions of a rate cell's table, in column order.
const RATE_DISTRIBUTIONS: [(&str, DistributionOf); 5] = [
    ("ttft_ms", |c| c.ttft_ms),
    ("tpot_ms", |c| c.tpot_ms),
    ("itl_ms", |c| c.itl_ms),
    ("e2e_ms", |c| c.e2e_ms),
    ("send_lag_ms", |c| c.send_lag_ms),
];

/// The columns of the rate cells' table before its distributions, in order.
pub const RATE_KEY_COLUMNS: [&str; 13] = [
    "context",
    "context_tokens",
    "rate_rps",
    "arrival",
    "arrival_cv",
    "seed",
    "max_in_flight",
    "status",
    "reason",
    "prompt_tokens",
    "offered_rps",
    "achieved_rps",
    "scheduled_requests",
];

/// The columns after the distributions (the prefix-cache ones empty without `--prefix-share`).
const RATE_TAIL_COLUMNS: [&str; 15] = [
    "completed_requests",
    "total_tps",
    "output_tokens",
    "held_back",
    "avg_in_flight",
    "max_in_flight_seen",
    "in_flight_start",
    "in_flight_end",
    "growth_allowed",
    "unfinished",
    "warmup_s",
    "window_s",
    "prefix_share",
    "prefix_cache_hit_rate",
    "prefix_cache_hit_rate_source",
];

/// Every header of the rate cells' table, in order: [`RATE_KEY_COLUMNS`], then
/// `ttft_ms`, `tpot_ms`, `itl_ms`, `e2e_ms`, `send_lag_ms` each as `_p50`, `_p90`, `_p99`,
/// `_mean`, then completions, throughput, in-flight figures and the saturation evidence.
pub fn rate_headers() -> Vec<String> {
    let dists = RATE_DISTRIBUTIONS.iter().flat_map(|(id, _)| RATE_STATS.iter().map(move |(s, _)| format!("{id}_{s}")));
    RATE_KEY_COLUMNS
        .iter()
        .map(|s| s.to_string())
        .chain(dists)
        .chain(RATE_TAIL_COLUMNS.iter().map(|s| s.to_string()))
        .collect()
}

fn arrival_id(p: ArrivalProcess) -> &'static str {
    match p {
        ArrivalProcess::Poisson => "poisson",
        ArrivalProcess::Constant => "constant",
        ArrivalProcess::Gamma => "gamma",
        ArrivalProcess::Trace => "trace",
    }
}

/// A rate cell's fields, in [`rate_headers`] order.
fn rate_fields(c: &RateCell) -> Vec<Field> {
    let sat = c.saturation.as_ref();
    let mut f = vec![
        Field::Text(c.context.label.clone()),
        Field::Count(Some(c.context.tokens)),
        Field::Float(Some(c.rate_rps)),
        Field::Text(arrival_id(c.arrival.process).to_string()),
        Field::Float(c.arrival.cv),
        Field::Count(Some(c.arrival.seed)),
        Field::Count(c.max_in_flight.map(u64::from)),
        Field::Text(c.status.id().to_string()),
        Field::Text(c.reason.clone().unwrap_or_default()),
        Field::Count(c.prompt_tokens),
        Field::Float(c.offered_rps),
        Field::Float(c.achieved_rps),
        Field::Count(c.scheduled_requests),
    ];
    for (_, dist) in RATE_DISTRIBUTIONS {
        let d = dist(c);
        f.extend(RATE_STATS.iter().map(|(_, stat)| Field::Float(d.as_ref().and_then(stat))));
    }
    f.extend([
        Field::Count(c.completed_requests),
        Field::Float(c.total_tps),
        Field::Count(c.output_tokens),
        Field::Count(c.held_back),
        Field::Float(c.avg_in_flight),
        Field::Count(c.max_in_flight_seen),
        Field::Count(sat.map(|s| s.in_flight_start)),
        Field::Count(sat.map(|s| s.in_flight_end)),
        Field::Float(sat.map(|s| s.growth_allowed)),
        Field::Count(sat.map(|s| s.unfinished)),
        Field::Float(c.warmup_s),
        Field::Float(c.window_s),
        Field::Float(c.prefix_share),
        Field::Float(c.prefix_cache.as_ref().and_then(|p| p.measured_hit_rate)),
        Field::Text(
            c.prefix_cache
                .as_ref()
                .and_then(|p| p.hit_rate_source)
                .and_then(|s| serde_json::to_value(s).ok())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        ),
    ]);
    f
}

/// The rate cells as CSV (RFC 4180, `\n` line ends): the header line of [`rate_headers`], then
/// one line per rate cell in file order (numbers raw, a missing figure empty, statuses as ids).
/// Only the header line when the run has no rate cells.
pub fn rates_to_csv(results: &Results) -> String {
    cells_to_csv(&results.rates.iter().collect::<Vec<_>>())
}

/// The replayed traces (`--trace`) as CSV: the columns of [`rates_to_csv`], one line per trace
/// (its `cell`: context `trace`, the trace's mean rate, arrival `trace`).
pub fn traces_to_csv(results: &Results) -> String {
    cells_to_csv(&results.traces.iter().map(|t| &t.cell).collect::<Vec<_>>())
}

/// The replayed traces as JSON rows keyed as [`rates_to_json_rows`]'s.
pub fn traces_to_json_rows(results: &Results) -> serde_json::Value {
    cells_to_json_rows(&results.traces.iter().map(|t| &t.cell).collect::<Vec<_>>())
}

fn cells_to_csv(cells: &[&RateCell]) -> String {
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    w.write_record(rate_headers()).expect("in-memory CSV write");
    for c in cells {
        let record: Vec<String> = rate_fields(c)
            .into_iter()
            .map(|f| match f {
                Field::Text(t) => t,
                Field::Float(v) => v.map(raw).unwrap_or_default(),
                Field::Count(v) => v.map(|v| v.to_string()).unwrap_or_default(),
            })
            .collect();
        w.write_record(&record).expect("in-memory CSV write");
    }
    let bytes = w.into_inner().expect("in-memory CSV flush");
    String::from_utf8(bytes).expect("CSV of UTF-8 strings is UTF-8")
}

/// The rate cells as a JSON array of objects keyed by [`rate_headers`] (counts as integers,
/// other figures as floats, `null` when missing; `reason` is `null` without one).
pub fn rates_to_json_rows(results: &Results) -> serde_json::Value {
    cells_to_json_rows(&results.rates.iter().collect::<Vec<_>>())
}

fn cells_to_json_rows(cells: &[&RateCell]) -> serde_json::Value {
    let headers = rate_headers();
    let rows = cells
        .iter()
        .map(|c| {
            let obj: serde_json::Map<String, serde_json::Value> = headers
                .iter()
                .cloned()
                .zip(rate_fields(c).into_iter().map(|f| match f {
                    Field::Text(t) if t.is_empty() => serde_json::Value::Null,
                    Field::Text(t) => t.into(),
                    Field::Float(v) => v.map_or(serde_json::Value::Null, serde_json::Value::from),
                    Field::Count(v) => v.map_or(serde_json::Value::Null, serde_json::Value::from),
                }))
                .collect();
            serde_json::Value::Object(obj)
        })
        .collect();
    serde_json::Value::Array(rows)
}

/// What a table shows for a figure it does not have.
pub const DASH: &str = "—";

/// The headers of the rate table people read (`show`'s "Request rates" and the page's), in
/// the order of [`RateTableLine::figures`] after context, rate and status.
pub const RATE_TABLE_HEADERS: [&str; 11] = [
    "Context",
    "Rate",
    "Status",
    "Offered req/s",
    "Achieved req/s",
    "Total tok/s",
    "TTFT p50",
    "TTFT p90",
    "TPOT p50",
    "E2E p50",
    "Send lag p99",
];

/// The header of the goodput column, shown when the run has an SLO.
pub const RATE_GOODPUT_HEADER: &str = "Goodput req/s (✓ meets the SLO)";

/// The header of the prefix-cache column, shown when a rate cell has a prefix share.
pub const RATE_PREFIX_HEADER: &str = "Prefix cache";

/// Whether some rate cell has a prefix share (`--prefix-share`): the rate table then shows
/// [`RATE_PREFIX_HEADER`].
pub fn rates_have_shares(results: &Results) -> bool {
    results.rates.iter().any(|c| c.prefix_share.is_some())
}

/// The header of the page's speculative-decoding column, shown when a rate cell has figures
/// of it (`show` prints them in its own speculative-decoding table).
pub const RATE_SPEC_HEADER: &str = "Speculative decoding";

/// Whether some rate cell has speculative-decoding figures (`spec_decode`).
pub fn rates_have_spec(results: &Results) -> bool {
    results.rates.iter().any(|c| c.spec_decode.is_some())
}

/// A rate cell's speculative decoding in one line: "25.7% accepted · mean accepted length 1.77
/// (Prometheus)"; a dash without figures.
fn spec_text(c: &RateCell) -> String {
    let Some(f) = c.spec_decode.as_ref() else { return DASH.to_string() };
    let metric =
        |id: &str| crate::registry::metric(id).or_else(|| crate::registry::SPEC_DECODE.iter().find(|m| m.id == id));
    let show = |id: &str, v: Option<f64>| match (metric(id), v) {
        (Some(m), Some(v)) if v.is_finite() => m.display(v),
        _ => DASH.to_string(),
    };
    format!(
        "{} accepted · mean accepted length {} ({})",
        show("spec_accept_rate", f.acceptance_rate),
        show("spec_mean_accepted_len", f.mean_accepted_length),
        f.source.words()
    )
}

/// One line of the rate table people read: a context at an offered rate, every figure
/// written as `show` prints it and the page draws it (a dash when absent). The one builder of
/// that table: `show` and the viewer both read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RateTableLine {
    /// The context's label, "8K", with the cell's prefix share: "8K · prefix 90%".
    pub context: String,
    /// The planned rate, "0.5 req/s".
    pub rate: String,
    /// The cell's status.
    pub status: crate::model::CellStatus,
    /// Why the status, and notes, if the file says.
    pub reason: Option<String>,
    /// Requests scheduled in the window ÷ its length, "0.48".
    pub offered: String,
    /// Requests finished in the window ÷ its length, "0.48".
    pub achieved: String,
    /// Output tok/s in the window, as the registry writes it.
    pub total_tps: String,
    /// TTFT median from the scheduled instants, "363 ms".
    pub ttft_p50: String,
    /// TTFT p90.
    pub ttft_p90: String,
    /// TPOT median.
    pub tpot_p50: String,
    /// E2E latency median.
    pub e2e_p50: String,
    /// Send lag p99, "0.41 ms".
    pub send_lag_p99: String,
    /// With an SLO: goodput, "0.40", with " ✓" when the cell meets the SLO; a dash without.
    pub goodput: String,
    /// A prefix-share cell: the measured hit rate beside the plan and its source, "89.6% hit
    /// (plan 90%, Prometheus)" ([`crate::prefix::hit_rate_text`]); a dash without a share.
    pub prefix_cache: String,
    /// Speculative decoding from the server's counters: acceptance rate, mean accepted length
    /// and the source; a dash without figures.
    pub spec_decode: String,
    /// The prefix cache in detail (the page's tooltip): "10,032 of 11,264 prompt tokens served
    /// from the cache · cache reset (POST /reset_prefix_cache)", and why the rate may be off the
    /// plan; `None` without a share.
    pub prefix_cache_detail: Option<String>,
    /// Speculative decoding in detail (the page's tooltip): "606 draft tokens, 156 accepted ·
    /// acceptance by position 0: 33.7% · 1: 25.7% · 2: 17.8%"; `None` without figures.
    pub spec_decode_detail: Option<String>,
    /// "≈ approximate: tokens counted from chunks" when the cell's tokens could not be counted
    /// exactly (total tok/s and TPOT are then approximate), as the decode table marks it.
    pub note: Option<&'static str>,
}

impl RateTableLine {
    /// The figures after context, rate and status, each with its column id (as in
    /// [`rate_headers`]), in [`RATE_TABLE_HEADERS`] order.
    pub fn figures(&self) -> [(&'static str, &str); 8] {
        [
            ("offered_rps", &self.offered),
            ("achieved_rps", &self.achieved),
            ("total_tps", &self.total_tps),
            ("ttft_ms_p50", &self.ttft_p50),
            ("ttft_ms_p90", &self.ttft_p90),
            ("tpot_ms_p50", &self.tpot_p50),
            ("e2e_ms_p50", &self.e2e_p50),
            ("send_lag_ms_p99", &self.send_lag_p99),
        ]
    }
}

/// A request rate as the rate table writes it: two decimals ("0.48", "7.90"), a dash when absent.
pub fn rps_text(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or_else(|| DASH.to_string(), |v| format!("{v:.2}"))
}

fn metric_text(id: &str, v: Option<f64>) -> String {
    match (crate::registry::metric(id), v) {
        (Some(m), Some(v)) if v.is_finite() => m.display(v),
        _ => DASH.to_string(),
    }
}

/// Where a rate cell sits in the rate table: its context, then its prefix share (none first).
fn rate_row_key(c: &RateCell) -> (u64, Option<u32>) {
    (c.context.tokens, crate::prefix::key(c.prefix_share))
}

/// The rate table's order: each rate cell as (its index in `results.rates`, its place in the
/// order its context's (and prefix share's) rates were measured, 1 = first), contexts by
/// tokens, then prefix shares ascending, rates ascending within them. The file keeps the
/// measuring order; with `--rates auto` it is the search's, not the rate order.
pub fn rate_table_order(results: &Results) -> Vec<(usize, usize)> {
    let rates = &results.rates;
    let mut order: Vec<(usize, usize)> = (0..rates.len())
        .map(|i| (i, 1 + rates[..i].iter().filter(|x| rate_row_key(x) == rate_row_key(&rates[i])).count()))
        .collect();
    order.sort_by(|&(i, _), &(j, _)| {
        rate_row_key(&rates[i]).cmp(&rate_row_key(&rates[j])).then(rates[i].rate_rps.total_cmp(&rates[j].rate_rps))
    });
    order
}

/// Whether some context's rates were measured in another order than ascending (`--rates auto`).
pub fn rates_measured_out_of_order(results: &Results) -> bool {
    let order = rate_table_order(results);
    order.windows(2).any(|w| {
        let same_row = rate_row_key(&results.rates[w[0].0]) == rate_row_key(&results.rates[w[1].0]);
        same_row && w[1].1 < w[0].1
    })
}

/// One rate cell as a line of the rate table.
pub fn rate_table_line(c: &RateCell) -> RateTableLine {
    let stat = |d: Option<Distribution>, p: StatOf| d.as_ref().and_then(p);
    RateTableLine {
        context: format!("{}{}", c.context.label, crate::prefix::name_suffix(c.prefix_share)),
        rate: c.rate_label(),
        status: c.status,
        reason: c.reason.clone(),
        offered: rps_text(c.offered_rps),
        achieved: rps_text(c.achieved_rps),
        total_tps: metric_text("total_tps", c.total_tps),
        ttft_p50: metric_text("ttft_ms", stat(c.ttft_ms, |d| d.p50)),
        ttft_p90: metric_text("ttft_ms", stat(c.ttft_ms, |d| d.p90)),
        tpot_p50: metric_text("tpot_ms", stat(c.tpot_ms, |d| d.p50)),
        e2e_p50: metric_text("e2e_ms", stat(c.e2e_ms, |d| d.p50)),
        send_lag_p99: stat(c.send_lag_ms, |d| d.p99)
            .filter(|v| v.is_finite())
            .map_or_else(|| DASH.to_string(), |v| format!("{v:.2} ms")),
        goodput: match (c.goodput_rps, c.meets_slo) {
            (Some(g), Some(m)) => format!("{g:.2}{}", if m { " ✓" } else { "" }),
            _ => DASH.to_string(),
        },
        note: crate::status::approximate_rate_note(c),
        prefix_cache: c
            .prefix_share
            .map_or_else(|| DASH.to_string(), |share| crate::prefix::hit_rate_text(share, c.prefix_cache.as_ref())),
        spec_decode: spec_text(c),
        prefix_cache_detail: prefix_detail(c),
        spec_decode_detail: spec_detail(c),
    }
}

/// A share rate cell's prefix cache in detail, for the page's tooltip: the counts the hit rate
/// comes from (or why there is none), how the cache began, and why the rate may be off the
/// plan when the cell says so. `None` without a share.
fn prefix_detail(c: &RateCell) -> Option<String> {
    let f = c.prefix_cache.as_ref()?;
    let counts = match (f.measured_hit_rate, f.hit_tokens, f.query_tokens) {
        (Some(_), Some(h), Some(q)) => format!(
            "{} of {} prompt tokens served from the cache",
            crate::registry::format_int(h),
            crate::registry::format_int(q)
        ),
        _ => {
            let why =
                c.missing.iter().find(|m| m.figure == "prefix_cache.measured_hit_rate").map(|m| m.reason.as_str());
            format!("no hit rate: {}", why.unwrap_or("the cell was not measured"))
        }
    };
    let start = match f.cache_start {
        crate::CacheStart::Reset => format!("cache reset ({})", f.cache_start_detail),
        crate::CacheStart::Salted => format!("prompts salted: {}", f.cache_start_detail),
    };
    let off = crate::prefix::off_plan_reason(c.reason.as_deref());
    Some([Some(counts), Some(start), off.map(str::to_string)].into_iter().flatten().collect::<Vec<_>>().join(" · "))
}

/// A rate cell's speculative decoding in detail, for the page's tooltip: draft and accepted
/// tokens, acceptance by draft position. `None` without figures.
fn spec_detail(c: &RateCell) -> Option<String> {
    let f = c.spec_decode.as_ref()?;
    let mut parts = Vec::new();
    if let (Some(d), Some(a)) = (f.draft_tokens, f.accepted_tokens) {
        parts.push(format!(
            "{} draft tokens, {} accepted",
            crate::registry::format_int(d),
            crate::registry::format_int(a)
        ));
    }
    let by = crate::registry::SPEC_DECODE.iter().find(|m| m.id == "spec_acceptance_by_position");
    if let (false, Some(m)) = (f.acceptance_by_position.is_empty(), by) {
        let by: Vec<String> =
            f.acceptance_by_position.iter().enumerate().map(|(k, v)| format!("{k}: {}", m.display(*v))).collect();
        parts.push(format!("acceptance by position {}", by.join(" · ")));
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rows_write_counts_as_integers_and_rates_as_floats() {
        let r = crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap();
        let rows = to_json_rows(&r);
        let first = rows.as_array().unwrap().iter().find(|x| x["phase"] == "decode").unwrap();
        assert_eq!(first["completed_requests"].to_string(), "1");
        assert_eq!(first["output_tokens"].to_string(), "7113");
        assert_eq!(first["total_tps"].to_string(), "237.1");
        assert_eq!(first["avg_active_requests"].to_string(), "1.0", "an average stays a float");
    }

    #[test]
    fn rate_rows_have_every_header_and_the_files_figures() {
        let r = crate::load_results(include_bytes!("../../tests/fixtures/rates-twin.json")).unwrap();
        let headers = rate_headers();
        let mut unique = headers.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), headers.len(), "column ids are unique");
        assert_eq!(headers.len(), RATE_KEY_COLUMNS.len() + 5 * 4 + RATE_TAIL_COLUMNS.len());
        assert!(r.rates.iter().all(|c| rate_fields(c).len() == headers.len()));
        let csv = rates_to_csv(&r);
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 8);
        let col = |id: &str| headers.iter().position(|h| h == id).unwrap();
        let sat = &rows[2];
        let fields = ["context", "rate_rps", "arrival", "status", "offered_rps", "achieved_rps", "ttft_ms_p50"];
        let got: Vec<&str> = fields.iter().map(|f| &sat[col(f)]).collect();
        assert_eq!(got, ["8K", "8", "poisson", "saturated", "10.8", "4.8", "4256.416"]);
        let evidence = ["in_flight_start", "in_flight_end", "growth_allowed", "unfinished"];
        assert_eq!(evidence.map(|f| &sat[col(f)]), ["29", "59", "29.726", "30"]);
        assert_eq!(&rows[3][col("status")], "not_run");
        assert_eq!(&rows[3][col("achieved_rps")], "", "a rate not run has no figures");
        assert_eq!(&rows[0][col("reason")], "", "a valid cell without a reason");
        let json = rates_to_json_rows(&r);
        assert_eq!(json[2]["scheduled_requests"].to_string(), "54");
        assert_eq!(json[2]["achieved_rps"].to_string(), "4.8");
        assert_eq!(json[0]["reason"], serde_json::Value::Null);
    }
}
