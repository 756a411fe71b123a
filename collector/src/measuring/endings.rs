//! How a row's or cell's requests ended, applied to it (the rules are
//! `speedmatrix_schema::endings`, pure): the requests the server ended, their finish reasons
//! and output lengths against `max_tokens` → an error cell when most were cut short, notes in
//! the reason otherwise; and the over-capacity rule with the longest measured output once a
//! server ran past `max_tokens`.

use crate::measuring::client::StreamRecord;
use crate::measuring::measure::{add_note, blank_cell};
use speedmatrix_schema::endings::{self, Ended, Verdict};
use speedmatrix_schema::status::{over_capacity, over_capacity_reason};
use speedmatrix_schema::{CellStatus, DecodeCell};

/// Every request of `records` the server ended, with its finish reason and output tokens.
pub fn ended<'a>(records: impl IntoIterator<Item = &'a StreamRecord>) -> Vec<Ended<'a>> {
    records
        .into_iter()
        .filter(|r| r.ended_by_server())
        .map(|r| Ended { finish_reason: r.finish_reason.as_deref(), tokens: r.output_tokens() })
        .collect()
}

/// The verdict on `records`, each having asked `max_tokens`.
pub fn verdict<'a>(records: impl IntoIterator<Item = &'a StreamRecord>, max_tokens: u32) -> Verdict {
    endings::verdict(&ended(records), max_tokens)
}

/// `cell` with `v` applied: a measured cell whose requests were mostly cut short becomes an
/// error that keeps what its requests saw (no throughput is claimed, as after a failed
/// stream); otherwise the error, if any, and the notes join its reason.
pub fn apply(cell: DecodeCell, v: Verdict) -> DecodeCell {
    let mut cell = match v.error {
        Some(why) if cell.status.is_measured() => {
            let mut e = blank_cell(&cell.context, cell.concurrency);
            e.status = CellStatus::Error;
            e.reason = Some(why);
            e.prompt_tokens = cell.prompt_tokens;
            e.readiness = cell.readiness;
            e.requests = cell.requests;
            e.ttft_ms = cell.ttft_ms;
            e
        }
        Some(why) => {
            let mut cell = cell;
            add_note(&mut cell.reason, why);
            cell
        }
        None => cell,
    };
    for note in v.notes {
        add_note(&mut cell.reason, note);
    }
    cell
}

/// The over-capacity verdict on a cell not yet measured, once a server ran past `max_tokens`:
/// N × (C + the longest output measured) against the KV budget. `None` when it fits, or no
/// output ran past `max_tokens`, or there is no budget.
pub fn over_capacity_now(
    cell: &DecodeCell,
    longest: Option<u64>,
    max_tokens: u32,
    kv_budget: Option<u64>,
) -> Option<(speedmatrix_schema::Capacity, String)> {
    let longest = longest.filter(|l| *l > u64::from(max_tokens))?;
    let cap = over_capacity(cell.concurrency, cell.context.tokens, longest, kv_budget?)?;
    let why = format!(
        "{} — counting the longest output this server produced ({longest} tokens: it runs past max_tokens {max_tokens}), not max_tokens",
        over_capacity_reason(&cap)
    );
    Some((cap, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::ContextSize;

    fn record(finish: &str, tokens: u64) -> StreamRecord {
        StreamRecord {
            finish_reason: Some(finish.into()),
            completion_tokens: Some(tokens),
            done: true,
            ..StreamRecord::default()
        }
    }

    #[test]
    fn a_cell_of_aborted_requests_is_an_error_without_throughput() {
        let ctx = ContextSize { label: "256".into(), tokens: 256 };
        let mut cell = DecodeCell::new(ctx, 2, CellStatus::Valid, None);
        cell.total_tps = Some(134.0);
        let records =
            [record("abort", 30), record("abort", 30), { StreamRecord { cancelled: true, ..record("length", 9) } }];
        let cell = apply(cell, verdict(&records, 128));
        assert_eq!(cell.status, CellStatus::Error);
        assert_eq!(cell.total_tps, None);
        assert!(cell.reason.unwrap().starts_with("2 of 2 requests the server ended were cut short"));
    }

    #[test]
    fn later_cells_count_the_longest_measured_output() {
        let ctx = ContextSize { label: "1K".into(), tokens: 1024 };
        let cell = DecodeCell::new(ctx, 4, CellStatus::NotRun, None);
        // 4 × (1,024 + 128) = 4,608 fits 5,000; 4 × (1,024 + 300) = 5,296 does not.
        assert_eq!(over_capacity_now(&cell, Some(300), 128, Some(5000)).map(|c| c.0.required_tokens), Some(5296));
        assert!(over_capacity_now(&cell, Some(300), 128, Some(5000)).unwrap().1.contains("300 tokens"));
        assert_eq!(over_capacity_now(&cell, Some(128), 128, Some(5000)), None);
        assert_eq!(over_capacity_now(&cell, Some(300), 128, None), None);
    }
}
