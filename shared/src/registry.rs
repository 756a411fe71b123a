//! The metric registry: every figure speedmatrix reports, listed once.
//!
//! Metric ids are snake_case and stable: they are CSV headers, `--metric` values and URL
//! parameters. A distribution metric (e.g. `ttft_ms`) expands into one column per statistic
//! (`ttft_ms_p50`, `ttft_ms_p90`, `ttft_ms_p99`, `ttft_ms_mean`, `ttft_ms_min`, `ttft_ms_max`,
//! `ttft_ms_count`); see [`Column`].
//!
//! Each metric's full definition — what it measures, over which streams, chunks or window, and
//! where its numbers come from — is in `docs/METHODOLOGY.md` (section "Metrics"), the one place
//! it is written down; [`Metric::description`] is its one-line summary for tooltips and
//! headers. A metric added here gets its row there (a test checks that every id is in it).

use crate::model::Distribution;

/// The unit a metric is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Tokens per second.
    TokPerS,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Tokens.
    Tokens,
    /// Requests (a count or an average count).
    Requests,
    /// A fraction 0–1, shown as a percentage.
    Fraction,
    /// Watts.
    Watts,
    /// Joules per output token.
    JoulesPerToken,
    /// A plain count (the `_count` of a distribution).
    Count,
    /// Tokens per second per GPU.
    TokPerSPerGpu,
    /// Output tokens per joule of GPU energy.
    TokensPerJoule,
    /// Money per million output tokens, in the currency of the GPU-hour price it came from.
    CostPerMillionTokens,
}

impl Unit {
    /// The unit as people write it, e.g. `tok/s`, `ms`.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::TokPerS => "tok/s",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Tokens => "tokens",
            Unit::Requests => "requests",
            Unit::Fraction => "%",
            Unit::Watts => "W",
            Unit::JoulesPerToken => "J/token",
            Unit::Count => "",
            Unit::TokPerSPerGpu => "tok/s per GPU",
            Unit::TokensPerJoule => "tokens/J",
            Unit::CostPerMillionTokens => "per 1M output tokens",
        }
    }

    /// Suffix written after a value in tables (the seed page writes `196 ms`, `30.0 s` but a bare
    /// `237.1` for tok/s, whose unit is in the column header).
    fn inline_suffix(self) -> &'static str {
        match self {
            Unit::Ms => " ms",
            Unit::S => " s",
            Unit::Watts => " W",
            Unit::Fraction => "%",
            Unit::JoulesPerToken => " J/token",
            Unit::TokensPerJoule => " tokens/J",
            Unit::TokPerS | Unit::Tokens | Unit::Requests | Unit::Count | Unit::TokPerSPerGpu => "",
            Unit::CostPerMillionTokens => "",
        }
    }
}

/// How a number is written for people (the seed page's style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Fixed decimals with thousands separators: `6,342.6` (1), `10,187` (0).
    Fixed(u8),
    /// Compact with K/M suffix and at most one decimal: `22.5K`, `12K`, `1.2M`, `650`.
    Compact,
    /// A fraction 0–1 shown as a percentage with the given decimals: `0.734` → `73.4`.
    Percent(u8),
}

/// Whether a metric is one number or a distribution over requests / token gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One number per row.
    Scalar,
    /// A [`Distribution`]: p50/p90/p99/mean/min/max/count.
    Distribution,
}

/// One metric of the registry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// Stable snake_case id, e.g. `total_tps`.
    pub id: &'static str,
    /// Column label as on the seed page, e.g. "Total tok/s".
    pub label: &'static str,
    /// One sentence: what it is and where the figure comes from (the full definition is in
    /// `docs/METHODOLOGY.md`, "Metrics").
    pub description: &'static str,
    /// Unit of every value (and of each statistic of a distribution, except `count`).
    pub unit: Unit,
    /// Number style for people.
    pub style: Style,
    /// `Some(true)` when more is better, `Some(false)` when less is better, `None` when neither
    /// (the diff reports a change but not "better"/"worse").
    pub higher_is_better: Option<bool>,
    /// Scalar or distribution.
    pub kind: Kind,
}

const fn m(
    id: &'static str,
    label: &'static str,
    unit: Unit,
    style: Style,
    higher_is_better: Option<bool>,
    kind: Kind,
    description: &'static str,
) -> Metric {
    Metric { id, label, description, unit, style, higher_is_better, kind }
}

use Kind::{Distribution as D, Scalar as S};

/// Every metric, in the order columns appear (CSV, tables).
#[rustfmt::skip]
pub static METRICS: &[Metric] = &[
    m("total_tps", "Total tok/s", Unit::TokPerS, Style::Fixed(1), Some(true), S,
      "Output tokens of all streams inside the window ÷ window length (tokens: server usage, see token_count_source; client clock)."),
    m("per_request_tps", "Per request tok/s", Unit::TokPerS, Style::Fixed(1), Some(true), D,
      "Per-stream decode rate, 1000 ÷ TPOT (tokens: server usage, see token_count_source; client clock)."),
    m("ttft_ms", "TTFT", Unit::Ms, Style::Fixed(0), Some(false), D,
      "Request sent → first token on any channel (client clock); decode cells: the streams that open the cell."),
    m("ttft_in_window_ms", "TTFT in window", Unit::Ms, Style::Fixed(0), Some(false), D,
      "TTFT of replacement streams started inside the window (client clock)."),
    m("ttft_content_ms", "TTFT to content", Unit::Ms, Style::Fixed(0), Some(false), D,
      "Request sent → first content token, after any reasoning (client clock)."),
    m("tpot_ms", "TPOT", Unit::Ms, Style::Fixed(1), Some(false), D,
      "Time per output token per request: (last − first token time) ÷ (output tokens − 1) (client clock, server usage)."),
    m("itl_ms", "Time between tokens", Unit::Ms, Style::Fixed(1), Some(false), D,
      "Inter-token latency: each chunk gap divided over the tokens it carries (client clock, server usage); percentiles only where each chunk's tokens are known, else the mean alone."),
    m("chunk_gap_ms", "Chunk gap", Unit::Ms, Style::Fixed(1), Some(false), D,
      "Raw gap between token-carrying SSE chunks (client clock)."),
    m("e2e_ms", "E2E latency", Unit::Ms, Style::Fixed(0), Some(false), D,
      "Request sent → last token, for requests that finished (client clock)."),
    m("prompt_tps", "Prompt tok/s", Unit::TokPerS, Style::Compact, Some(true), S,
      "Prefill rate: prompt tokens ÷ TTFT of a cold request (server usage, client clock)."),
    m("prompt_tokens", "Prompt tokens", Unit::Tokens, Style::Fixed(0), None, S,
      "Real prompt length the server counted (server usage)."),
    m("output_tokens", "Output tokens", Unit::Tokens, Style::Fixed(0), Some(true), S,
      "Output tokens produced inside the window by all streams (server usage; the cell's token_count_source says how)."),
    m("completed_requests", "Completed requests", Unit::Requests, Style::Fixed(0), None, S,
      "Requests that finished inside the window (client)."),
    m("avg_active_requests", "Average active requests", Unit::Requests, Style::Fixed(1), None, S,
      "Mean requests being served during the window: the server's running gauge (Prometheus), else streams decoding as the client saw them."),
    m("max_active_requests", "Max active requests", Unit::Requests, Style::Fixed(0), None, S,
      "Most requests running at once during the window (Prometheus, else client)."),
    m("spec_accept_rate", "Acceptance rate", Unit::Fraction, Style::Percent(1), Some(true), S,
      "Speculative decoding: accepted ÷ draft tokens over the cell's requests (Prometheus counters)."),
    m("gpu_power_w", "GPU power", Unit::Watts, Style::Fixed(0), None, S,
      "Mean total GPU board power during the window (NVML)."),
    m("energy_j_per_token", "Energy per token", Unit::JoulesPerToken, Style::Fixed(3), Some(false), S,
      "GPU energy used in the window ÷ output tokens (NVML)."),
    m("window_s", "Measured for", Unit::S, Style::Fixed(1), None, S,
      "Length of the measurement window actually used: its real close − its open (client clock)."),
];

/// A figure that carries a confidence interval, and how it gets one (the methods are defined in
/// `docs/METHODOLOGY.md`, "Noise"; computed by [`crate::noise`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalFigure {
    /// The column id, e.g. `total_tps`, `tpot_ms_p50`.
    pub column: &'static str,
    /// The method of one window (its `IntervalMethod` id), `None` when one window gives none.
    pub window_method: Option<&'static str>,
    /// The method once the cell has two or more repeats (`run --repeat`): every figure here
    /// then has one, between repeats.
    pub repeats_method: &'static str,
    /// The evidence it is taken over, for people.
    pub evidence: &'static str,
}

/// Every figure with a confidence interval (a decode cell's `intervals`).
pub static INTERVAL_FIGURES: &[IntervalFigure] = &[
    IntervalFigure {
        column: "total_tps",
        window_method: Some("batch_means"),
        repeats_method: "between_repeats",
        evidence: "the window's per-second series; with repeats, the repeats' totals",
    },
    IntervalFigure {
        column: "ttft_ms_p50",
        window_method: None,
        repeats_method: "between_repeats",
        evidence: "repeats of the cell (the opening streams are one burst)",
    },
    IntervalFigure {
        column: "tpot_ms_p50",
        window_method: None,
        repeats_method: "between_repeats",
        evidence: "repeats of the cell (the streams share their batches)",
    },
];

/// The metric with this id (`total_tps`), if any.
pub fn metric(id: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.id == id)
}

/// Figures derived from a decode cell and its run's header rather than measured: per GPU (the
/// hardware card's GPU count), per joule (the cell's energy) and per money (a GPU-hour price
/// the reader types into the page). They are not columns of the flat measurement table (a cell
/// alone cannot give them); [`crate::derived`] computes them, and the run comparison, the
/// capacity table and `show --slo` show them. Defined, like every metric, in
/// `docs/METHODOLOGY.md`.
#[rustfmt::skip]
pub static DERIVED: &[Metric] = &[
    m("total_tps_per_gpu", "Total tok/s per GPU", Unit::TokPerSPerGpu, Style::Fixed(1), Some(true), S,
      "Total tok/s ÷ the GPUs serving the model (hardware card: NVML, or the --gpu-count flag)."),
    m("tokens_per_joule", "Tokens per joule", Unit::TokensPerJoule, Style::Fixed(2), Some(true), S,
      "Output tokens per joule of GPU energy in the window: 1 ÷ energy per token (NVML)."),
    m("cost_per_million_tokens", "Cost per 1M output tokens", Unit::CostPerMillionTokens, Style::Fixed(2), Some(false), S,
      "GPU-hour price × GPUs ÷ (total tok/s × 3,600 s) × 1,000,000, in the price's currency (price typed in the page)."),
];

/// The figures of prefix-share rows and cells (`--prefix-share`) and trace replays: the
/// planned share (a trace's ideal reuse) and the hit rate the server's counters measured
/// beside it. They are not columns of the flat
/// measurement table (a row or cell without a share has neither); `show` prints them beside
/// the cell, and the page's heatmap and the diff take the hit rate ([`cell_figures`]). Defined, like every metric, in `docs/METHODOLOGY.md` ("Prefix caching").
#[rustfmt::skip]
pub static PREFIX_CACHE: &[Metric] = &[
    m("prefix_share", "Prefix share", Unit::Fraction, Style::Percent(0), None, S,
      "Share of each prompt that is a prefix shared by the cell's requests, the rest unique (plan)."),
    m("prefix_cache_hit_rate", "Prefix-cache hit rate", Unit::Fraction, Style::Percent(1), None, S,
      "Prompt tokens served from the server's prefix cache ÷ prompt tokens, over the row's or cell's requests (Prometheus counters, else server usage)."),
    m("trace_ideal_reuse", "Ideal reuse", Unit::Fraction, Style::Percent(1), None, S,
      "A replayed trace's prompt tokens in blocks an earlier request of its slice sent ÷ its prompt tokens: the hit rate of a cache that never forgets (trace)."),
];

/// The figures of conversations (`--turns`), per turn: what turn k costs against turn 1 and
/// how much of its prompt the server's prefix cache served. Not columns of the flat
/// measurement table; `show` prints them in the per-turn table. Defined, like every metric, in
/// `docs/METHODOLOGY.md` ("Conversations").
#[rustfmt::skip]
pub static CONVERSATION: &[Metric] = &[
    m("turn_ttft_ratio", "TTFT vs turn 1", Unit::Count, Style::Fixed(2), Some(false), S,
      "Turn k's TTFT p50 ÷ turn 1's, over a conversation cell's sessions (client clock)."),
    m("turn_cache_hit_rate", "Turn cache hit rate", Unit::Fraction, Style::Percent(1), None, S,
      "Prompt tokens of turn k served from the server's prefix cache ÷ its prompt tokens (server usage, else Prometheus with one session)."),
];

/// The figures of speculative decoding beside `spec_accept_rate` (a cell's `spec_decode`): the
/// draft tokens, the mean accepted length and the acceptance by position, from the server's
/// counters. They are not columns of the flat measurement table (a run without speculation has
/// none); `show` prints them beside the cell. Defined, like every metric, in
/// `docs/METHODOLOGY.md` ("Speculative decoding").
#[rustfmt::skip]
pub static SPEC_DECODE: &[Metric] = &[
    m("spec_draft_tokens", "Draft tokens", Unit::Tokens, Style::Fixed(0), None, S,
      "Tokens the drafter proposed over the cell's requests: the growth of the server's draft-token counter (Prometheus)."),
    m("spec_mean_accepted_len", "Mean accepted length", Unit::Tokens, Style::Fixed(2), Some(true), S,
      "Tokens one verification step yields: 1 + accepted tokens ÷ drafts, over the cell's requests (Prometheus counters; SGLang: its accept-length gauge)."),
    m("spec_acceptance_by_position", "Acceptance by position", Unit::Fraction, Style::Percent(1), Some(true), S,
      "Per draft position k (from 0): accepted tokens at k ÷ drafts (Prometheus, vLLM's per-position counter)."),
];

/// The derived metric with this id (`total_tps_per_gpu`), if any (see [`DERIVED`]).
pub fn derived(id: &str) -> Option<&'static Metric> {
    DERIVED.iter().find(|m| m.id == id)
}

/// One statistic of a distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// Mean.
    Mean,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Number of values.
    Count,
}

impl Stat {
    /// Every statistic, in column order.
    pub const ALL: [Stat; 7] = [Stat::P50, Stat::P90, Stat::P99, Stat::Mean, Stat::Min, Stat::Max, Stat::Count];

    /// Column suffix without the underscore, e.g. `p50`.
    pub fn suffix(self) -> &'static str {
        match self {
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Mean => "mean",
            Stat::Min => "min",
            Stat::Max => "max",
            Stat::Count => "count",
        }
    }

    /// This statistic of a distribution.
    pub fn of(self, d: &Distribution) -> Option<f64> {
        match self {
            Stat::P50 => d.p50,
            Stat::P90 => d.p90,
            Stat::P99 => d.p99,
            Stat::Mean => d.mean,
            Stat::Min => d.min,
            Stat::Max => d.max,
            Stat::Count => d.count.map(|c| c as f64),
        }
    }
}

/// One column of the flat measurement table: a scalar metric, or one statistic of a
/// distribution metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    /// The metric.
    pub metric: &'static Metric,
    /// `None` for a scalar; the statistic for a distribution.
    pub stat: Option<Stat>,
}

impl Column {
    /// The column id: `total_tps`, `ttft_ms_p50`.
    pub fn id(&self) -> String {
        match self.stat {
            None => self.metric.id.to_string(),
            Some(s) => format!("{}_{}", self.metric.id, s.suffix()),
        }
    }

    /// Format a value of this column for people (see [`Metric::display`]); counts are plain
    /// integers.
    pub fn display(&self, v: f64) -> String {
        match self.stat {
            Some(Stat::Count) => format_number(v, Style::Fixed(0)),
            _ => self.metric.display(v),
        }
    }

    /// Two figures of this column as a comparison shows them side by side: as [`Column::display`]
    /// does, with more decimals (up to 3, as files store them) where that would show two different
    /// figures as the same number — "0.6 ms → 1.0 ms", never "1 ms → 1 ms" beside a change of
    /// −40 %.
    pub fn display_pair(&self, a: f64, b: f64) -> (String, String) {
        let (da, db) = (self.display(a), self.display(b));
        let Style::Fixed(shown) = self.metric.style else { return (da, db) };
        if da != db || a == b || self.stat == Some(Stat::Count) {
            return (da, db);
        }
        let with = |v: f64, d: u8| format!("{}{}", format_number(v, Style::Fixed(d)), self.metric.unit.inline_suffix());
        (shown + 1..=3).map(|d| (with(a, d), with(b, d))).find(|(x, y)| x != y).unwrap_or((da, db))
    }
}

/// Every column of the flat measurement table, in order: scalars as they are, distributions
/// expanded to their seven statistics.
pub fn columns() -> Vec<Column> {
    METRICS
        .iter()
        .flat_map(|metric| match metric.kind {
            Kind::Scalar => vec![Column { metric, stat: None }],
            Kind::Distribution => Stat::ALL.iter().map(|&s| Column { metric, stat: Some(s) }).collect(),
        })
        .collect()
}

/// The figures of a decode cell beyond the flat table's columns that a heatmap can show and a
/// diff compares: the measured prefix-cache hit rate ([`PREFIX_CACHE`]) and the mean accepted
/// length of speculative decoding ([`SPEC_DECODE`]), as scalar columns.
pub fn cell_figures() -> Vec<Column> {
    PREFIX_CACHE
        .iter()
        .chain(SPEC_DECODE)
        .filter(|m| matches!(m.id, "prefix_cache_hit_rate" | "spec_mean_accepted_len"))
        .map(|metric| Column { metric, stat: None })
        .collect()
}

/// The column with this id (`total_tps`, `ttft_ms_p50`); a bare distribution id means its p50.
pub fn column(id: &str) -> Option<Column> {
    if let Some(metric) = metric(id) {
        let stat = (metric.kind == Kind::Distribution).then_some(Stat::P50);
        return Some(Column { metric, stat });
    }
    let (base, suffix) = id.rsplit_once('_')?;
    let metric = metric(base).filter(|m| m.kind == Kind::Distribution)?;
    let stat = Stat::ALL.into_iter().find(|s| s.suffix() == suffix)?;
    Some(Column { metric, stat: Some(stat) })
}

impl Metric {
    /// The number alone in this metric's style: `6,342.6`, `22.5K`, `10,187`.
    pub fn format(&self, v: f64) -> String {
        format_number(v, self.style)
    }

    /// The number with its inline unit, as tables show it: `10,187 ms`, `30.0 s`, `6,342.6`.
    pub fn display(&self, v: f64) -> String {
        format!("{}{}", self.format(v), self.unit.inline_suffix())
    }

    /// Label with unit for headers, e.g. "TTFT (ms)", "Total tok/s".
    pub fn header(&self) -> String {
        let symbol = self.unit.symbol();
        if symbol.is_empty() || self.label.contains(symbol) {
            self.label.to_string()
        } else {
            format!("{} ({})", self.label, symbol)
        }
    }
}

/// Write `v` in `style`. Non-finite values (never valid in a results file) are written as `—`.
pub fn format_number(v: f64, style: Style) -> String {
    if !v.is_finite() {
        return "—".to_string();
    }
    // -0.0 would print as "-0"; a results file never holds it, computed values might.
    let v = if v == 0.0 { 0.0 } else { v };
    match style {
        Style::Fixed(decimals) => group_thousands(&format!("{:.*}", decimals as usize, v)),
        Style::Percent(decimals) => group_thousands(&format!("{:.*}", decimals as usize, v * 100.0)),
        Style::Compact => {
            let (scaled, suffix) = match v.abs() {
                a if a >= 999_950.0 => (v / 1_000_000.0, "M"),
                a if a >= 999.95 => (v / 1_000.0, "K"),
                _ => (v, ""),
            };
            let mut s = if suffix.is_empty() { format!("{scaled:.0}") } else { format!("{scaled:.1}") };
            if let Some(stripped) = s.strip_suffix(".0") {
                s = stripped.to_string();
            }
            format!("{}{suffix}", group_thousands(&s))
        }
    }
}

/// An integer with thousands separators, exact for every u64: `262144` → `262,144`.
pub fn format_int(v: u64) -> String {
    group_thousands(&v.to_string())
}

/// Insert `,` every three digits of the integer part: `6342.6` → `6,342.6`.
fn group_thousands(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map_or(("", s), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, None), |(i, f)| (i, Some(f)));
    let mut out = String::with_capacity(s.len() + int.len() / 3);
    out.push_str(sign);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_seed_page() {
        let f = |id: &str, v: f64| metric(id).unwrap().display(v);
        assert_eq!(f("total_tps", 6342.6), "6,342.6");
        assert_eq!(f("total_tps", 237.1), "237.1");
        assert_eq!(f("prompt_tps", 22_500.0), "22.5K");
        assert_eq!(f("prompt_tps", 12_000.0), "12K");
        assert_eq!(f("prompt_tps", 650.4), "650");
        assert_eq!(f("prompt_tps", 1_234_567.0), "1.2M");
        assert_eq!(f("ttft_ms", 10_187.0), "10,187 ms");
        assert_eq!(f("itl_ms", 4.2), "4.2 ms");
        assert_eq!(f("window_s", 30.0), "30.0 s");
        assert_eq!(f("output_tokens", 190_216.0), "190,216");
        assert_eq!(f("avg_active_requests", 128.0), "128.0");
        assert_eq!(f("spec_accept_rate", 0.734), "73.4%");
        assert_eq!(format_number(-1234.5, Style::Fixed(1)), "-1,234.5");
        assert_eq!(format_number(f64::NAN, Style::Fixed(1)), "—");
    }

    #[test]
    fn a_pair_shows_enough_decimals_to_tell_two_figures_apart() {
        let ttft = column("ttft_ms_p50").unwrap();
        assert_eq!(ttft.display_pair(0.632, 1.06), ("0.6 ms".into(), "1.1 ms".into()));
        assert_eq!(ttft.display_pair(2.101, 2.1), ("2.101 ms".into(), "2.100 ms".into()));
        assert_eq!(ttft.display_pair(196.0, 532.4), ("196 ms".into(), "532 ms".into()), "apart already");
        assert_eq!(ttft.display_pair(5.0, 5.0), ("5 ms".into(), "5 ms".into()), "the same figure");
        assert_eq!(ttft.display_pair(5.0, 5.0001), ("5 ms".into(), "5 ms".into()), "below what files store");
        let p = column("prompt_tps").unwrap();
        assert_eq!(p.display_pair(650.1, 650.2), ("650".into(), "650".into()), "compact stays compact");
    }

    #[test]
    fn ids_are_unique_snake_case_and_cover_design_list() {
        let design = [
            "total_tps",
            "per_request_tps",
            "ttft_ms",
            "ttft_content_ms",
            "tpot_ms",
            "itl_ms",
            "e2e_ms",
            "prompt_tps",
            "prompt_tokens",
            "output_tokens",
            "completed_requests",
            "avg_active_requests",
            "max_active_requests",
            "spec_accept_rate",
            "gpu_power_w",
            "energy_j_per_token",
        ];
        for id in design {
            assert!(metric(id).is_some(), "{id} missing from the registry");
        }
        let ids: Vec<String> = columns().iter().map(Column::id).collect();
        let mut dedup = ids.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(ids.len(), dedup.len(), "duplicate column ids");
        assert!(ids.iter().all(|id| id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')));
    }

    #[test]
    fn interval_figures_are_columns_the_diff_judges_by_noise() {
        let ids: Vec<&str> = INTERVAL_FIGURES.iter().map(|f| f.column).collect();
        assert_eq!(ids, crate::diff::NOISE_COLUMNS);
        for f in INTERVAL_FIGURES {
            assert!(column(f.column).is_some(), "{}", f.column);
            for m in f.window_method.into_iter().chain([f.repeats_method]) {
                let parsed: crate::IntervalMethod = serde_json::from_value(m.into()).expect("a method id");
                assert_eq!(serde_json::to_value(parsed).unwrap(), m);
            }
        }
    }

    #[test]
    fn column_lookup_round_trips() {
        for c in columns() {
            assert_eq!(column(&c.id()), Some(c));
        }
        assert_eq!(column("ttft_ms").unwrap().id(), "ttft_ms_p50");
        assert!(column("ttft_ms_p42").is_none());
        assert!(column("total_tps_p50").is_none());
        assert!(column("nope").is_none());
    }

    #[test]
    fn headers_carry_units() {
        assert_eq!(metric("ttft_ms").unwrap().header(), "TTFT (ms)");
        assert_eq!(metric("total_tps").unwrap().header(), "Total tok/s");
        assert_eq!(derived("total_tps_per_gpu").unwrap().header(), "Total tok/s per GPU");
        assert_eq!(derived("tokens_per_joule").unwrap().header(), "Tokens per joule (tokens/J)");
        assert_eq!(derived("cost_per_million_tokens").unwrap().header(), "Cost per 1M output tokens");
        assert_eq!(derived("tokens_per_joule").unwrap().display(3.456), "3.46 tokens/J");
        assert!(metric("total_tps_per_gpu").is_none(), "derived figures are not table columns");
        assert!(DERIVED.iter().all(|d| metric(d.id).is_none()), "ids are unique across both lists");
    }
}
