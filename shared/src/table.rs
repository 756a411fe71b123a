//! The flat "all measurements" table: one row per prefill row and decode cell, with every
//! registry column. The CSV/JSON exports, `show --all`, the viewer's table and the diff read
//! figures through [`Row::value`], so a figure is looked up in one place.

use crate::model::{CellStatus, ContextSize, DecodeCell, Distribution, PrefillRow, Results};
use crate::registry::{Column, Stat};

/// The seed page's "All measurements" columns after phase, context, concurrency and status:
/// (header, registry column id). On prefill rows the "Total tok/s" column holds prompt tok/s,
/// as on the seed page. `speedmatrix show --all` and the viewer's table both use it.
pub const SEED_COLUMNS: [(&str, &str); 8] = [
    ("Total tok/s", "total_tps"),
    ("Per request tok/s", "per_request_tps_p50"),
    ("TTFT", "ttft_ms_p50"),
    ("Time between tokens", "itl_ms_p50"),
    ("Average active requests", "avg_active_requests"),
    ("Completed requests", "completed_requests"),
    ("Output tokens", "output_tokens"),
    ("Measured for", "window_s"),
];

/// Which phase a row belongs to (serialised as its id: `prefill`, `decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// A cold prefill measurement.
    Prefill,
    /// A sustained-decode cell.
    Decode,
}

impl Phase {
    /// Stable id for CSV/URLs: `prefill`, `decode`.
    pub fn id(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        }
    }

    /// Label as the seed page writes it: "Prefill", "Sustained decode".
    pub fn label(self) -> &'static str {
        match self {
            Phase::Prefill => "Prefill",
            Phase::Decode => "Sustained decode",
        }
    }
}

/// One row of the table, borrowing from the results.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Row<'a> {
    /// A prefill row.
    Prefill(&'a PrefillRow),
    /// A decode cell.
    Decode(&'a DecodeCell),
}

/// All rows: prefill rows first, then decode cells, each in file order.
pub fn rows(results: &Results) -> Vec<Row<'_>> {
    results.prefill.iter().map(Row::Prefill).chain(results.decode.iter().map(Row::Decode)).collect()
}

impl<'a> Row<'a> {
    /// The phase.
    pub fn phase(&self) -> Phase {
        match self {
            Row::Prefill(_) => Phase::Prefill,
            Row::Decode(_) => Phase::Decode,
        }
    }

    /// The target context.
    pub fn context(&self) -> &'a ContextSize {
        match self {
            Row::Prefill(p) => &p.context,
            Row::Decode(d) => &d.context,
        }
    }

    /// Simultaneous requests (1 for prefill).
    pub fn concurrency(&self) -> u32 {
        match self {
            Row::Prefill(_) => 1,
            Row::Decode(d) => d.concurrency,
        }
    }

    /// The status.
    pub fn status(&self) -> CellStatus {
        match self {
            Row::Prefill(p) => p.status,
            Row::Decode(d) => d.status,
        }
    }

    /// Its prefix share (`--prefix-share`): a warm prefill row's or a prefix-share cell's.
    pub fn prefix_share(&self) -> Option<f64> {
        match self {
            Row::Prefill(p) => p.prefix_share,
            Row::Decode(d) => d.prefix_share,
        }
    }

    /// Its prefix cache's figures (a warm prefill row's or a prefix-share cell's).
    pub fn prefix_cache(&self) -> Option<&'a crate::PrefixCacheFigures> {
        match self {
            Row::Prefill(p) => p.prefix_cache.as_ref(),
            Row::Decode(d) => d.prefix_cache.as_ref(),
        }
    }

    /// The status reason, if any.
    pub fn reason(&self) -> Option<&'a str> {
        match self {
            Row::Prefill(p) => p.reason.as_deref(),
            Row::Decode(d) => d.reason.as_deref(),
        }
    }

    /// The value of one registry column in this row; `None` when the row has no such figure.
    ///
    /// A prefill row's single TTFT is reported as its `ttft_ms_p50` (the median of one request).
    pub fn value(&self, col: &Column) -> Option<f64> {
        let id = col.metric.id;
        match self {
            Row::Prefill(p) => match id {
                "prompt_tps" => p.prompt_tps,
                "prompt_tokens" => p.prompt_tokens.map(|v| v as f64),
                "completed_requests" => p.completed_requests.map(|v| v as f64),
                "ttft_ms" if col.stat == Some(Stat::P50) => p.ttft_ms,
                "prefix_cache_hit_rate" => p.prefix_cache.as_ref().and_then(|f| f.measured_hit_rate),
                _ => None,
            },
            Row::Decode(d) => {
                let dist = |x: &Option<Distribution>| x.as_ref().and_then(|x| col.stat.and_then(|s| s.of(x)));
                match id {
                    "total_tps" => d.total_tps,
                    "per_request_tps" => dist(&d.per_request_tps),
                    "ttft_ms" => dist(&d.ttft_ms),
                    "ttft_in_window_ms" => dist(&d.ttft_in_window_ms),
                    "ttft_content_ms" => dist(&d.ttft_content_ms),
                    "tpot_ms" => dist(&d.tpot_ms),
                    "itl_ms" => dist(&d.itl_ms),
                    "chunk_gap_ms" => dist(&d.chunk_gap_ms),
                    "e2e_ms" => dist(&d.e2e_ms),
                    "prompt_tokens" => d.prompt_tokens.map(|v| v as f64),
                    "output_tokens" => d.output_tokens.map(|v| v as f64),
                    "completed_requests" => d.completed_requests.map(|v| v as f64),
                    "avg_active_requests" => d.avg_active_requests,
                    "max_active_requests" => d.max_active_requests,
                    "spec_accept_rate" => d.spec_accept_rate,
                    "gpu_power_w" => d.gpu_power_w,
                    "energy_j_per_token" => d.energy_j_per_token,
                    "window_s" => d.window_s,
                    "prefix_cache_hit_rate" => d.prefix_cache.as_ref().and_then(|f| f.measured_hit_rate),
                    "spec_mean_accepted_len" => d.spec_decode.as_ref().and_then(|f| f.mean_accepted_length),
                    _ => None,
                }
            }
        }
    }

    /// The value of a column given by id (`ttft_ms_p50`; a bare distribution id means p50), or
    /// of a [`crate::registry::cell_figures`] figure.
    pub fn value_of(&self, column_id: &str) -> Option<f64> {
        crate::registry::column(column_id)
            .or_else(|| crate::registry::cell_figures().into_iter().find(|c| c.id() == column_id))
            .and_then(|c| self.value(&c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::columns;

    #[test]
    fn every_registry_column_is_reachable_from_a_decode_cell() {
        // A cell with every figure set: each column must find its value, so no registry id is
        // silently unmapped.
        let dist = Some(Distribution {
            p50: Some(1.0),
            p90: Some(1.0),
            p99: Some(1.0),
            mean: Some(1.0),
            min: Some(1.0),
            max: Some(1.0),
            count: Some(1),
        });
        let cell = DecodeCell {
            context: crate::context::size(8192),
            prompt_tokens: Some(1),
            concurrency: 1,
            prefix_share: None,
            prefix_cache: None,
            status: CellStatus::Valid,
            reason: None,
            capacity: None,
            window_s: Some(1.0),
            window_start_ms: None,
            window_end_ms: None,
            readiness: None,
            total_tps: Some(1.0),
            per_request_tps: dist,
            ttft_ms: dist,
            ttft_in_window_ms: dist,
            ttft_content_ms: dist,
            tpot_ms: dist,
            itl_ms: dist,
            chunk_gap_ms: dist,
            e2e_ms: dist,
            output_tokens: Some(1),
            token_count_source: None,
            token_count_reconciled: None,
            token_count_check: None,
            completed_requests: Some(1),
            avg_active_requests: Some(1.0),
            max_active_requests: Some(1.0),
            spec_accept_rate: Some(1.0),
            spec_decode: None,
            gpu_power_w: Some(1.0),
            energy_j_per_token: Some(1.0),
            server: None,
            gpu: None,
            client_cpu_pct: None,
            accepted_differences: vec![],
            requests: vec![],
            series: None,
            intervals: None,
            repeats: vec![],
            repeat_spread: vec![],
            missing: vec![],
        };
        let row = PrefillRow {
            context: crate::context::size(8192),
            prompt_tokens: Some(1),
            status: CellStatus::Valid,
            reason: None,
            prompt_tps: Some(1.0),
            ttft_ms: Some(1.0),
            completed_requests: Some(1),
            cached_tokens: None,
            accepted_differences: vec![],
            cached_tokens_source: None,
            prefix_share: None,
            prefix_cache: None,
            missing: vec![],
            requests: vec![],
        };
        for c in columns() {
            let found = Row::Decode(&cell).value(&c).or(Row::Prefill(&row).value(&c));
            assert_eq!(found, Some(1.0), "column {} unmapped", c.id());
        }
        assert_eq!(Row::Prefill(&row).value_of("ttft_ms"), Some(1.0));
        assert_eq!(Row::Prefill(&row).value_of("ttft_ms_p99"), None, "one request has no invented p99");
    }
}
