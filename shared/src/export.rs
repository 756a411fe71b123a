//! The one writer of the flat measurement table, as CSV or JSON rows. `speedmatrix show
//! --format csv|json` and the viewer's CSV export both call it.
//!
//! Columns: `phase, context, context_tokens, concurrency, status, reason`, then every registry
//! column ([`crate::registry::columns`]). Numbers are raw (no grouping, no units); a missing
//! figure is an empty CSV field / JSON `null`; statuses are snake_case ids.

use crate::model::Results;
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

/// The whole table as CSV (RFC 4180, `\n` line ends): one header line, then one line per prefill
/// row and decode cell.
pub fn to_csv(results: &Results) -> String {
    let cols = columns();
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    // Writing into a Vec cannot fail, and every record has the header's length.
    w.write_record(headers()).expect("in-memory CSV write");
    for row in rows(results) {
        let values = cols.iter().map(|c| row.value(c).map(raw).unwrap_or_default());
        let record: Vec<String> = key_fields(&row).into_iter().chain(values).collect();
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
            serde_json::Value::Object(obj)
        })
        .collect();
    serde_json::Value::Array(rows)
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
}
