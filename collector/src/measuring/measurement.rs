//! One measurement, whatever its kind: the life cycle every row and cell of a run goes through,
//! and the one driver ([`take`]) that runs it.
//!
//! **plan → warm → window → drain → figures → record (save).** The plan (`plan.rs`) made the
//! results file's `not_run` rows and cells; the sequencer (`run.rs`) picks the next one, makes
//! the [`Measurement`] for it and has [`take`] run its stages:
//!
//! - **warm** ([`Measurement::warm`]): what must be in place before anything is timed — the
//!   prompts (built, or warmed into the prefix cache), their request bodies, idle connections.
//!   A failure here is the row's `error` ([`Measurement::not_started`]);
//! - **window** ([`Measurement::window`]): the requests that are timed, issued the kind's way;
//!   it returns what is still open when the window closes;
//! - **drain** ([`Measurement::drain`]): cancel and collect what is open (records, readings);
//! - **figures** ([`Measurement::figures`]): what was seen → the row or cell, its status and
//!   reason (the maths is pure, in `measure.rs`), and what the session learns from it;
//!
//! then the sequencer stamps it (accepted header differences), logs its
//! [`line`](Measurement::line), asks `recovery.rs` what a failure means (measure it again, or
//! stop the run), **records** it in the results ([`Measurement::record`]) and saves the file.
//!
//! Two kinds plug in today, by what differs: how requests are issued and what is computed.
//! A prefill row (`prefill.rs`: one cold `max_tokens: 1` request, prompt tok/s and how cold it
//! was) and a decode cell at one concurrency (`cell.rs`: N streams kept at N through a fixed
//! window, readiness first, decode figures after). A future kind — a rate cell (requests
//! arriving at a set rate), a trace replay, a prefix-cache cell, a multi-turn conversation —
//! is one more type implementing [`Measurement`]: its warm-up, its way of issuing requests in
//! the window, its drain and its figures, the results-file entry it fills ([`Row`]) and where
//! it records it; the session (`session.rs`) gives it the client, prompts, bodies and log, and
//! the sequencer, the saving, the live state and the failure recovery stay as they are.

use crate::measuring::error::CellError;
use crate::measuring::session::Session;
use speedmatrix_schema::progress::Current;
use speedmatrix_schema::{
    AcceptedDifference, CellStatus, ConversationCell, DecodeCell, PrefillRow, RateCell, TraceRow,
};

/// One kind of measurement (module docs): its stages, and the row or cell it fills.
pub(crate) trait Measurement {
    /// What the warm stage prepared for the window (prompts, request bodies).
    type Warmed;
    /// What is still open when the window closes (streams, a scraper), for the drain.
    type Open;
    /// What the drain collected (records, readings), for the figures.
    type Seen;
    /// The results-file entry it fills.
    type Row: Row;

    /// What the live state shows as it starts.
    fn current(&self) -> Current;

    /// How a stop cause names it: `prefill 8K`, `decode 8K × 4`.
    fn name(&self) -> String;

    /// Warm: everything in place before anything is timed.
    async fn warm(&self, s: &mut Session) -> Result<Self::Warmed, CellError>;

    /// Window: the timed requests.
    async fn window(&self, s: &mut Session, warmed: &Self::Warmed) -> Self::Open;

    /// Drain: what is still open, cancelled and collected.
    async fn drain(&self, s: &mut Session, open: Self::Open) -> Self::Seen;

    /// Figures: what was seen → the row or cell.
    fn figures(&self, s: &mut Session, warmed: Self::Warmed, seen: Self::Seen) -> Self::Row;

    /// The row or cell of a measurement that could not start (its warm stage failed).
    fn not_started(&self, why: &CellError) -> Self::Row;

    /// The log line of the measured row or cell.
    fn line(&self, row: &Self::Row) -> String;

    /// Record: the row or cell in its place in the session's results.
    fn record(&self, s: &mut Session, row: Self::Row);
}

/// What the sequencer reads and writes on every kind's row or cell.
pub(crate) trait Row {
    /// Its status.
    fn status(&self) -> CellStatus;
    /// Its reason (a failure's cause, notes).
    fn reason(&self) -> Option<&str>;
    /// Its reason, to add a note to.
    fn reason_mut(&mut self) -> &mut Option<String>;
    /// The header differences accepted on `--resume`, recorded on it.
    fn accept(&mut self, accepted: &[AcceptedDifference]);
}

/// [`Row`] for a results-file entry with `status`, `reason` and `accepted_differences` fields.
macro_rules! row_of {
    ($($entry:ty),+) => {$(
        impl Row for $entry {
            fn status(&self) -> CellStatus {
                self.status
            }
            fn reason(&self) -> Option<&str> {
                self.reason.as_deref()
            }
            fn reason_mut(&mut self) -> &mut Option<String> {
                &mut self.reason
            }
            fn accept(&mut self, accepted: &[AcceptedDifference]) {
                self.accepted_differences = accepted.to_vec();
            }
        }
    )+};
}
row_of!(PrefillRow, DecodeCell, RateCell, ConversationCell);

/// A replayed trace's status and reason are its figures' (`cell`).
impl Row for TraceRow {
    fn status(&self) -> CellStatus {
        self.cell.status
    }
    fn reason(&self) -> Option<&str> {
        self.cell.reason.as_deref()
    }
    fn reason_mut(&mut self) -> &mut Option<String> {
        &mut self.cell.reason
    }
    fn accept(&mut self, accepted: &[AcceptedDifference]) {
        self.cell.accepted_differences = accepted.to_vec();
    }
}

/// Take one measurement: warm, window, drain, figures; the row stamped with the accepted
/// header differences (not yet recorded).
pub(crate) async fn take<M: Measurement>(m: &M, s: &mut Session) -> M::Row {
    let mut row = match m.warm(s).await {
        Ok(warmed) => {
            let open = m.window(s, &warmed).await;
            let seen = m.drain(s, open).await;
            m.figures(s, warmed, seen)
        }
        Err(why) => m.not_started(&why),
    };
    row.accept(&s.accepted);
    row
}
