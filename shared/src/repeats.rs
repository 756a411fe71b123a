//! Repeats of a decode cell (`run --repeat N`): which repeats a cell still needs, the compact
//! record each measurement leaves, and how the measurements fold into the cell's figures — the
//! mean over repeats, their spread, and intervals between repeats ([`crate::noise::repeats`]).
//! Pure; `docs/METHODOLOGY.md` ("Repeats") defines the rules.
//!
//! A cell planned for N ≥ 2 repeats carries one [`CellRepeat`] per measurement; a cell
//! measured once (N = 1, and every file from before repeats) carries none and counts as one.

use crate::model::{
    CellIntervals, CellRepeat, CellStatus, DecodeCell, Distribution, FigureSpread, MissingFigure, Results,
};
use crate::noise;

/// The repeats the run planned per decode cell (`config.repeats`; absent means 1).
pub fn planned(r: &Results) -> u32 {
    r.config.repeats.unwrap_or(1).max(1)
}

/// The repeats of `cell` measured so far: 0 before the first (and for a cell that is never
/// measured), its records' count, or 1 for a measured cell without records.
pub fn measured(cell: &DecodeCell) -> u32 {
    match cell.status {
        CellStatus::NotRun | CellStatus::OverCapacity => 0,
        _ if cell.repeats.is_empty() => 1,
        _ => u32::try_from(cell.repeats.len()).unwrap_or(u32::MAX),
    }
}

/// The repeats `cell` still needs of a plan of `n`: all of them before the first; none for a
/// cell over capacity or one whose latest measurement failed (an error stops its repeats); the
/// rest otherwise.
pub fn left(cell: &DecodeCell, n: u32) -> u32 {
    match cell.status {
        CellStatus::NotRun => n,
        CellStatus::OverCapacity | CellStatus::Error => 0,
        _ => n.saturating_sub(measured(cell)),
    }
}

/// The compact record of one measurement of a cell, as repeat number `repeat` (1-based).
pub fn record(cell: &DecodeCell, repeat: u32) -> CellRepeat {
    CellRepeat {
        repeat,
        status: cell.status,
        reason: cell.reason.clone(),
        window_start_ms: cell.window_start_ms,
        window_end_ms: cell.window_end_ms,
        total_tps: cell.total_tps,
        ttft_ms: cell.ttft_ms,
        tpot_ms: cell.tpot_ms,
        output_tokens: cell.output_tokens,
        completed_requests: cell.completed_requests,
        requests: Some(cell.requests.len() as u64),
        series: cell.series.clone(),
    }
}

/// Fold the measurement `new`, repeat number `repeat`, into `prev` (the cell as the results
/// file holds it, its earlier repeats' records included) for a plan of several repeats.
///
/// The result keeps every repeat's record and every repeat's requests. Its `total_tps`,
/// `ttft_ms` and `tpot_ms` are the means over the repeats with figures ([`mean_distribution`]);
/// its `repeat_spread` their spread; its intervals are between repeats once two have figures
/// ([`repeat_intervals`]), else those of the one window. Its other figures are those of the
/// latest repeat with figures. Its status is the worst of its repeats' (error, then requests
/// queued, then valid); its reason lists each repeat's reason.
pub fn fold(prev: &DecodeCell, new: DecodeCell, repeat: u32) -> DecodeCell {
    let mut cell = prev.clone();
    fold_in_place(&mut cell, new, repeat);
    cell
}

/// [`fold`] into `cell` itself: its records and requests are moved, not copied (a cell of many
/// repeats at high concurrency holds tens of thousands of request samples, and a copy at every
/// repeat stays in the process's memory).
pub fn fold_in_place(cell: &mut DecodeCell, mut new: DecodeCell, repeat: u32) {
    let mut records: Vec<CellRepeat> = if repeat > 1 { std::mem::take(&mut cell.repeats) } else { vec![] };
    records.push(record(&new, repeat));
    let mut requests = if repeat > 1 { std::mem::take(&mut cell.requests) } else { vec![] };
    requests.append(&mut new.requests);
    if new.status.is_measured() || repeat == 1 {
        *cell = new;
    }
    cell.requests = requests;
    cell.repeats = records;
    refresh(cell);
}

/// A cell of a run that failed, to measure again on `--resume`: without its failed repeats
/// (an error stops a cell's repeats, so they are its last records) and their requests, its
/// figures folded again from the repeats that remain. `None` when no measured repeat remains
/// (a cell measured once, or whose first repeat failed): it is measured again from the start.
pub fn without_failed(cell: &DecodeCell) -> Option<DecodeCell> {
    let mut c = cell.clone();
    while c.repeats.last().is_some_and(|r| r.status == CellStatus::Error) {
        let failed = c.repeats.pop()?;
        let keep = c.requests.len().saturating_sub(usize::try_from(failed.requests.unwrap_or(0)).unwrap_or(usize::MAX));
        c.requests.truncate(keep);
    }
    if !c.repeats.iter().any(|r| r.status.is_measured()) {
        return None;
    }
    refresh(&mut c);
    Some(c)
}

/// The cell's folded figures from its repeats' records (`cell.repeats`): the means over the
/// repeats with figures, their spread, intervals between repeats once two have figures, and
/// the status and reason of the repeats.
fn refresh(cell: &mut DecodeCell) {
    let records = std::mem::take(&mut cell.repeats);
    let with: Vec<&CellRepeat> = records.iter().filter(|r| r.status.is_measured()).collect();
    if !with.is_empty() {
        cell.total_tps = mean(&with.iter().filter_map(|r| r.total_tps).collect::<Vec<_>>());
        cell.ttft_ms = mean_distribution(&with.iter().filter_map(|r| r.ttft_ms.as_ref()).collect::<Vec<_>>());
        cell.tpot_ms = mean_distribution(&with.iter().filter_map(|r| r.tpot_ms.as_ref()).collect::<Vec<_>>());
    }
    let figures = headline_values(&with);
    cell.repeat_spread = figures.iter().filter_map(|(figure, v)| spread(figure, v)).collect();
    if with.len() >= noise::MIN_REPEATS {
        cell.intervals = Some(repeat_intervals(&figures));
    }
    (cell.status, cell.reason) = status_of(&records);
    cell.repeats = records;
}

/// Each headline figure's values over the repeats that have it.
fn headline_values(with: &[&CellRepeat]) -> [(&'static str, Vec<f64>); 3] {
    [
        ("total_tps", with.iter().filter_map(|r| r.total_tps).collect()),
        ("ttft_ms_p50", with.iter().filter_map(|r| r.ttft_ms.and_then(|d| d.p50)).collect()),
        ("tpot_ms_p50", with.iter().filter_map(|r| r.tpot_ms.and_then(|d| d.p50)).collect()),
    ]
}

/// The intervals between repeats of each headline figure (Student's t over the repeats' values,
/// [`noise::repeats`]); a figure with fewer than two values has none, with the reason.
pub fn repeat_intervals(figures: &[(&'static str, Vec<f64>)]) -> CellIntervals {
    let mut out = CellIntervals::default();
    for (figure, values) in figures {
        let got = match noise::repeats(values) {
            Ok(i) => Some(i),
            Err(e) => {
                out.missing.push(MissingFigure { figure: (*figure).into(), reason: e.reason });
                None
            }
        };
        match *figure {
            "total_tps" => out.total_tps = got,
            "ttft_ms_p50" => out.ttft_ms_p50 = got,
            _ => out.tpot_ms_p50 = got,
        }
    }
    out
}

/// The worst status of the repeats and the reasons behind it: `repeat k: reason` for each
/// repeat that has one.
fn status_of(records: &[CellRepeat]) -> (CellStatus, Option<String>) {
    let rank = |s: CellStatus| match s {
        CellStatus::Error => 2,
        CellStatus::RequestsQueued => 1,
        _ => 0,
    };
    let worst = records.iter().map(|r| r.status).max_by_key(|s| rank(*s)).unwrap_or(CellStatus::NotRun);
    let reasons: Vec<String> =
        records.iter().filter_map(|r| r.reason.as_ref().map(|why| format!("repeat {}: {why}", r.repeat))).collect();
    (worst, (!reasons.is_empty()).then(|| reasons.join("; ")))
}

/// The mean of `v`, kept within `v`'s extremes; `None` when empty. A sum divided can round
/// past them: the mean of three 2.806 is 2.8059999999999996, and a TPOT p50 below the min
/// 2.806 of the same repeats made a file the loader refuses (min ≤ p50).
fn mean(v: &[f64]) -> Option<f64> {
    let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let m = noise::mean(v);
    (!v.is_empty()).then_some(if lo <= hi { m.clamp(lo, hi) } else { m })
}

/// The spread of one figure over two or more repeats.
fn spread(figure: &str, v: &[f64]) -> Option<FigureSpread> {
    if v.len() < 2 {
        return None;
    }
    Some(FigureSpread {
        figure: figure.into(),
        repeats: v.len() as u64,
        mean: noise::mean(v),
        sd: noise::sample_sd(v),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The distribution of a figure over repeats: each percentile and the mean are the means of the
/// repeats' (so p50 ≤ p90 ≤ p99 still holds), `min` and `max` the extremes of all, `count` the
/// sum. A field missing from any repeat is `null`. `None` for no repeats.
pub fn mean_distribution(ds: &[&Distribution]) -> Option<Distribution> {
    if ds.is_empty() {
        return None;
    }
    let all = |f: fn(&Distribution) -> Option<f64>| -> Option<Vec<f64>> { ds.iter().map(|d| f(d)).collect() };
    let avg = |f: fn(&Distribution) -> Option<f64>| all(f).and_then(|v| mean(&v));
    Some(Distribution {
        p50: avg(|d| d.p50),
        p90: avg(|d| d.p90),
        p99: avg(|d| d.p99),
        mean: avg(|d| d.mean),
        min: all(|d| d.min).map(|v| v.into_iter().fold(f64::INFINITY, f64::min)),
        max: all(|d| d.max).map(|v| v.into_iter().fold(f64::NEG_INFINITY, f64::max)),
        count: ds.iter().map(|d| d.count).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{IntervalMethod, RequestSample};

    fn dist(p50: f64) -> Distribution {
        Distribution {
            p50: Some(p50),
            p90: Some(p50 * 1.5),
            p99: Some(p50 * 2.0),
            mean: Some(p50 * 1.1),
            min: Some(p50 * 0.5),
            max: Some(p50 * 3.0),
            count: Some(4),
        }
    }

    fn measured_cell(tps: f64, ttft: f64, tpot: f64, requests: usize) -> DecodeCell {
        let mut c = DecodeCell::new(crate::context::size(8192), 4, CellStatus::Valid, None);
        c.total_tps = Some(tps);
        c.ttft_ms = Some(dist(ttft));
        c.tpot_ms = Some(dist(tpot));
        c.window_start_ms = Some(1000.0);
        c.window_end_ms = Some(11_000.0);
        c.requests = (0..requests).map(|i| RequestSample::at(i as f64)).collect();
        c
    }

    #[test]
    fn counts_of_repeats_measured_and_left() {
        let blank = DecodeCell::new(crate::context::size(8192), 4, CellStatus::NotRun, Some("pending".into()));
        assert_eq!((measured(&blank), left(&blank, 3)), (0, 3));
        let once = measured_cell(100.0, 50.0, 10.0, 1);
        assert_eq!((measured(&once), left(&once, 1), left(&once, 3)), (1, 0, 2));
        let two = fold(&fold(&blank, once.clone(), 1), once.clone(), 2);
        assert_eq!((measured(&two), left(&two, 3)), (2, 1));
        let mut over = blank.clone();
        over.status = CellStatus::OverCapacity;
        assert_eq!(left(&over, 3), 0);
        let mut err = once;
        err.status = CellStatus::Error;
        err.reason = Some("HTTP 500".into());
        assert_eq!(left(&fold(&two, err, 3), 5), 0, "an error stops the cell's repeats");
    }

    #[test]
    fn three_repeats_fold_into_means_spread_and_t_intervals() {
        let blank = DecodeCell::new(crate::context::size(8192), 4, CellStatus::NotRun, Some("pending".into()));
        let mut c = fold(&blank, measured_cell(100.0, 40.0, 10.0, 2), 1);
        assert_eq!(c.repeats.len(), 1);
        assert!(c.repeat_spread.is_empty());
        assert_eq!(c.intervals, None, "one window: the measurement's own intervals (none here)");
        c = fold(&c, measured_cell(110.0, 50.0, 11.0, 3), 2);
        c = fold(&c, measured_cell(120.0, 60.0, 12.0, 1), 3);
        assert_eq!(c.repeats.iter().map(|r| r.repeat).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(c.repeats.iter().map(|r| r.requests).collect::<Vec<_>>(), vec![Some(2), Some(3), Some(1)]);
        assert_eq!(c.requests.len(), 6, "every repeat's requests are kept");
        assert_eq!(c.total_tps, Some(110.0));
        let ttft = c.ttft_ms.unwrap();
        assert_eq!((ttft.p50, ttft.p90, ttft.p99), (Some(50.0), Some(75.0), Some(100.0)));
        assert_eq!((ttft.min, ttft.max, ttft.count), (Some(20.0), Some(180.0), Some(12)));
        let iv = c.intervals.unwrap();
        let tps = iv.total_tps.unwrap();
        // mean 110, sd 10, se 10 / √3, t(2) = 4.302653.
        assert_eq!((tps.method, tps.evidence, tps.df), (IntervalMethod::BetweenRepeats, 3, Some(2.0)));
        assert!((tps.high - (110.0 + 4.302_653 * 10.0 / 3f64.sqrt())).abs() < 1e-4, "{tps:?}");
        assert_eq!(iv.ttft_ms_p50.unwrap().estimate, 50.0);
        assert!((iv.tpot_ms_p50.unwrap().estimate - 11.0).abs() < 1e-12);
        assert!(iv.missing.is_empty());
        let s = &c.repeat_spread[0];
        assert_eq!(
            (s.figure.as_str(), s.repeats, s.mean, s.sd, s.min, s.max),
            ("total_tps", 3, 110.0, 10.0, 100.0, 120.0)
        );
        assert_eq!((c.status, c.reason), (CellStatus::Valid, None));
    }

    #[test]
    fn a_failed_repeat_keeps_the_figures_and_says_which() {
        let blank = DecodeCell::new(crate::context::size(8192), 4, CellStatus::NotRun, Some("pending".into()));
        let c = fold(&blank, measured_cell(100.0, 40.0, 10.0, 2), 1);
        let mut queued = measured_cell(90.0, 45.0, 12.0, 2);
        (queued.status, queued.reason) = (CellStatus::RequestsQueued, Some("2 of 4 streams queued".into()));
        let c = fold(&c, queued, 2);
        assert_eq!(c.status, CellStatus::RequestsQueued);
        assert_eq!(c.reason.as_deref(), Some("repeat 2: 2 of 4 streams queued"));
        let mut err = DecodeCell::new(crate::context::size(8192), 4, CellStatus::Error, Some("HTTP 500".into()));
        err.requests = measured_cell(0.0, 0.0, 0.0, 1).requests;
        let c = fold(&c, err, 3);
        assert_eq!(c.status, CellStatus::Error);
        assert_eq!(c.reason.as_deref(), Some("repeat 2: 2 of 4 streams queued; repeat 3: HTTP 500"));
        assert_eq!(c.total_tps, Some(95.0), "the means of the repeats with figures");
        assert_eq!(c.window_end_ms, Some(11_000.0), "the latest repeat with figures");
        assert_eq!(c.requests.len(), 5);
        assert_eq!(c.intervals.unwrap().total_tps.unwrap().evidence, 2);
    }

    #[test]
    fn a_failed_run_measures_again_only_the_failed_repeat() {
        let blank = DecodeCell::new(crate::context::size(8192), 4, CellStatus::NotRun, Some("pending".into()));
        let one = fold(&blank, measured_cell(100.0, 40.0, 10.0, 2), 1);
        let two = fold(&one, measured_cell(110.0, 44.0, 11.0, 3), 2);
        let mut err = DecodeCell::new(crate::context::size(8192), 4, CellStatus::Error, Some("HTTP 500".into()));
        err.requests = measured_cell(0.0, 0.0, 0.0, 4).requests;
        let failed = fold(&two, err.clone(), 3);
        assert_eq!((failed.status, left(&failed, 3)), (CellStatus::Error, 0));
        let again = without_failed(&failed).expect("two measured repeats remain");
        assert_eq!(again, two, "as it was before the failed repeat");
        assert_eq!((again.status, left(&again, 3), again.requests.len()), (CellStatus::Valid, 1, 5));
        // Nothing measured remains: measured again from the start.
        assert_eq!(without_failed(&fold(&blank, err.clone(), 1)), None);
        let mut once = err;
        once.repeats.clear();
        assert_eq!(without_failed(&once), None, "a cell of a run without repeats");
    }

    #[test]
    fn a_mean_over_equal_repeats_is_their_value_and_the_folded_distribution_loads() {
        // 2.806 × 3 sums to 8.418 and divides to 2.8059999999999996.
        assert!(noise::mean(&[2.806; 3]) < 2.806);
        assert_eq!(mean(&[2.806; 3]), Some(2.806));
        let d = Distribution { p50: Some(2.806), min: Some(2.806), max: Some(2.806), count: Some(8), ..dist(2.806) };
        let m = mean_distribution(&[&d, &d, &d]).unwrap();
        assert_eq!((m.min, m.p50), (Some(2.806), Some(2.806)));
        assert!(m.min <= m.p50 && m.p50 <= m.p90, "{m:?}");
    }

    #[test]
    fn intervals_refuse_with_one_value() {
        let iv =
            repeat_intervals(&[("total_tps", vec![1.0, 2.0]), ("ttft_ms_p50", vec![3.0]), ("tpot_ms_p50", vec![])]);
        assert!(iv.total_tps.is_some());
        assert_eq!(iv.missing.len(), 2);
        assert_eq!(iv.missing[0].reason, "1 repeat(s); an interval between repeats needs at least 2");
        assert_eq!(mean_distribution(&[]), None);
        let partial = Distribution { p90: None, ..dist(10.0) };
        let m = mean_distribution(&[&dist(20.0), &partial]).unwrap();
        assert_eq!((m.p50, m.p90), (Some(15.0), None), "a percentile one repeat lacks is null");
    }
}
