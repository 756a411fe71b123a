//! The unit tests of the rate part of the diff, against the twin fixture and cells made here.

use super::*;
use crate::model::{RateAtSlo, RequestSample};
use crate::{load_results, CellStatus::*};

/// A real twin run: 8K and 32K at 0.5, 1, 8 and 16 req/s; 8 req/s saturated at both, so
/// 16 req/s was not run.
fn twin() -> Results {
    load_results(include_bytes!("../../../../tests/fixtures/rates-twin.json")).expect("valid rates fixture")
}

fn at<'r>(r: &'r mut Results, label: &str, rate: f64) -> &'r mut RateCell {
    r.rates.iter_mut().find(|c| c.context.label == label && c.rate_rps == rate).expect("the fixture has the cell")
}

fn slo_found(label: &str, tokens: u64, met: Option<f64>, failed: Option<f64>) -> RateAtSlo {
    RateAtSlo {
        context: ContextSize { label: label.into(), tokens },
        rate_rps: met,
        failed_at_rps: failed,
        reason: "test".into(),
    }
}

#[test]
fn rate_cells_are_matched_and_judged_with_their_changes_listed() {
    let a = twin();
    let mut b = twin();
    // 8K at 1 req/s: TTFT twice as long; 32K at 1 req/s saturated in B; 32K at 0.5 only in A;
    // 8K at 2 req/s only in B.
    let c = at(&mut b, "8K", 1.0);
    let d = c.ttft_ms.as_mut().unwrap();
    d.p50 = d.p50.map(|v| v * 2.0);
    d.p90 = d.p90.map(|v| v * 2.0);
    for q in &mut c.requests {
        q.ttft_ms = q.ttft_ms.map(|v| v * 2.0);
    }
    let mut extra = c.clone();
    extra.rate_rps = 2.0;
    b.rates.push(extra);
    at(&mut b, "32K", 1.0).status = Saturated;
    b.rates.retain(|c| !(c.context.label == "32K" && c.rate_rps == 0.5));

    let x = crate::diff::diff(&a, &b, 0.05).rates;
    assert_eq!(x.rows.len(), 9);
    let keys: Vec<String> = x.rows.iter().map(|r| r.cell.describe()).collect();
    assert_eq!(keys[..5], ["8K at 0.5 req/s", "8K at 1 req/s", "8K at 2 req/s", "8K at 8 req/s", "8K at 16 req/s"]);
    assert_eq!(x.only_in_a.iter().map(RateRef::describe).collect::<Vec<_>>(), ["32K at 0.5 req/s"]);
    assert_eq!(x.only_in_b.iter().map(RateRef::describe).collect::<Vec<_>>(), ["8K at 2 req/s"]);
    assert_eq!(x.status_changes.len(), 1);
    assert_eq!(
        (x.status_changes[0].cell.describe(), x.status_changes[0].a, x.status_changes[0].b),
        ("32K at 1 req/s".into(), Valid, Saturated)
    );

    // Both files keep every request: the noise rule holds, and 8K at 1 req/s has too few
    // requests in its 5 s window for an interval, so TTFT p50 is "not enough data" with why;
    // TTFT p90 (no interval) is judged by the threshold: +100 % is worse.
    assert!(x.noise.is_some());
    let one = x.cell(8192, 1.0).unwrap();
    let p50 = one.delta("ttft_ms_p50").unwrap();
    assert_eq!(p50.verdict, Some(Verdict::NotEnoughData));
    assert!(p50.noise_note.as_deref().unwrap().contains("request(s)"), "{:?}", p50.noise_note);
    let p90 = one.delta("ttft_ms_p90").unwrap();
    assert_eq!((p90.verdict, p90.rel.map(|r| (r * 100.0).round())), (Some(Verdict::Worse), Some(100.0)));
    assert_eq!(one.delta("tpot_ms_p90").unwrap().verdict, Some(Verdict::Same));
    assert_eq!(one.delta("total_tps").unwrap().verdict, Some(Verdict::Same), "total tok/s keeps the threshold rule");
    // A cell not run in either has no figures to compare.
    assert!(x.cell(8192, 16.0).unwrap().deltas.is_empty());
    assert_eq!(x.tally("ttft_ms_p90").get("worse"), Some(&1));
    assert_eq!(x.tally("ttft_ms_p90").get(crate::diff::STATUS_CHANGED), Some(&1));
}

#[test]
fn the_slo_rate_is_compared_within_the_search_brackets() {
    let mut a = twin();
    let mut b = twin();
    let slo = RateSlo { ttft_ms: Some(2000.0), tpot_ms: None, percentile: 50 };
    a.config.rate_slo = Some(slo);
    b.config.rate_slo = Some(slo);
    a.rate_at_slo = vec![slo_found("8K", 8192, Some(1.0), Some(8.0)), slo_found("32K", 32768, Some(1.0), Some(8.0))];
    b.rate_at_slo = vec![
        slo_found("8K", 8192, Some(8.0), Some(16.0)),
        slo_found("32K", 32768, Some(0.5), Some(1.0)),
        slo_found("64K", 65536, None, Some(1.0 / 64.0)),
    ];
    let x = crate::diff::diff(&a, &b, 0.05).rates;
    type Found = (u64, Option<f64>, Option<f64>, Option<Verdict>);
    let got: Vec<Found> = x.rate_at_slo.iter().map(|s| (s.context.tokens, s.a, s.b, s.verdict)).collect();
    assert_eq!(
        got,
        [
            (8192, Some(1.0), Some(8.0), Some(Verdict::Better)),
            (32768, Some(1.0), Some(0.5), Some(Verdict::Worse)),
            (65536, None, None, None),
        ]
    );
    assert!(!x.rate_at_slo[2].in_a && x.rate_at_slo[2].in_b);
    // Within each other's bracket: the same, whatever the numbers.
    assert_eq!(bracket_verdict((1.0, Some(2.0)), (1.4, Some(1.6))), Verdict::Same);
    // Another SLO: no verdict, and goodput is not compared.
    b.config.rate_slo = Some(RateSlo { percentile: 90, ..slo });
    let x = crate::diff::diff(&a, &b, 0.05).rates;
    assert!(x.rate_at_slo.iter().all(|s| s.verdict.is_none()));
    assert_ne!(x.slo_a, x.slo_b);
}

/// A valid cell of a 20 s window at 10 req/s: request i scheduled at i × 100 ms, its TTFT
/// `ttft + (i × 37 mod 20)` ms, E2E 500 ms, two in flight on average.
fn steady(ttft: f64) -> RateCell {
    let arrival = Arrival { process: ArrivalProcess::Constant, cv: None, seed: 0 };
    let mut c = RateCell::new(ContextSize { label: "8K".into(), tokens: 8192 }, 10.0, arrival, None);
    c.status = Valid;
    c.reason = None;
    c.window_start_ms = Some(0.0);
    c.window_s = Some(20.0);
    c.avg_in_flight = Some(2.0);
    c.requests = (0..200)
        .map(|i| RequestSample {
            ttft_ms: Some(ttft + f64::from(i * 37 % 20)),
            tpot_ms: Some(10.0 + f64::from(i % 3)),
            e2e_ms: Some(500.0),
            ..RequestSample::at(f64::from(i) * 100.0)
        })
        .collect();
    let values: Vec<f64> = c.requests.iter().filter_map(|q| q.ttft_ms).collect();
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    c.ttft_ms = Some(Distribution { p50: crate::stats::percentile_sorted(&sorted, 50.0), ..Distribution::default() });
    c.tpot_ms = Some(Distribution { p50: Some(11.0), ..Distribution::default() });
    c.achieved_rps = Some(195.0 / 20.0);
    c
}

#[test]
fn per_request_samples_give_the_noise_verdicts() {
    let (mut a, mut b) = (twin(), twin());
    a.rates = vec![steady(100.0)];
    b.rates = vec![steady(150.0)];
    let x = crate::diff::diff_with(&a, &b, None).rates;
    let row = &x.rows[0];
    let ttft = row.delta("ttft_ms_p50").unwrap();
    let iv = ttft.interval.expect("200 requests in blocks of 2: an interval");
    assert!(iv.low > 0.0 && iv.discovery, "{iv:?}");
    assert_eq!(ttft.verdict, Some(Verdict::Worse));
    // The same TPOT and completions on both sides: within noise, not "same" by a threshold.
    assert_eq!(row.delta("tpot_ms_p50").unwrap().verdict, Some(Verdict::WithinNoise));
    let achieved = row.delta("achieved_rps").unwrap();
    assert_eq!(achieved.verdict, Some(Verdict::WithinNoise));
    assert!(achieved.interval.is_some(), "20 one-second buckets give batch means");
    // A 5 s window is too short for batch means: not enough data, with why.
    let mut short = steady(100.0);
    short.window_s = Some(5.0);
    let err = rate_interval(&short, "achieved_rps", None).unwrap_err();
    assert!(err.contains("batch"), "{err}");
    // Many in flight: the window's 199 requests (the one at its open is not in it) in blocks
    // of 50 are 3 blocks, too few.
    short.window_s = Some(20.0);
    short.avg_in_flight = Some(49.5);
    let err = rate_interval(&short, "ttft_ms_p50", None).unwrap_err();
    assert!(err.contains("199 request(s) in blocks of 50") && err.contains("3 block(s)"), "{err}");
}

/// `--fail-on-regression` reads rate cells too: a rate cell valid in A whose TTFT doubled in B
/// (no interval for its few requests, so the share decides), one saturated in B and one B did
/// not run each fail the gate, named by their place; identical runs pass with the rate cells
/// counted among the compared.
#[test]
fn the_gate_fails_on_a_rate_cell_that_got_worse_or_was_not_kept_up_with() {
    use crate::diff::{gate, Place, Regression};
    use crate::registry::column;
    let a = twin();
    let ttft = column("ttft_ms_p50").unwrap();
    let same = gate(&crate::diff::diff(&a, &a, 0.05), &ttft, 0.05);
    assert!(same.passed(), "{same:?}");
    let valid_in_a = a.rates.iter().filter(|c| c.status == Valid && c.ttft_ms.is_some_and(|d| d.p50.is_some())).count();
    assert!(
        valid_in_a >= 2 && same.compared >= valid_in_a,
        "{} compared, {valid_in_a} valid rate cells",
        same.compared
    );

    let mut b = twin();
    let c = at(&mut b, "8K", 1.0);
    let d = c.ttft_ms.as_mut().unwrap();
    d.p50 = d.p50.map(|v| v * 2.0);
    for q in &mut c.requests {
        q.ttft_ms = q.ttft_ms.map(|v| v * 2.0);
    }
    at(&mut b, "32K", 1.0).status = Saturated;
    b.rates.retain(|c| !(c.context.label == "32K" && c.rate_rps == 0.5));
    let g = gate(&crate::diff::diff(&a, &b, 0.05), &ttft, 0.05);
    assert!(!g.passed());
    let said: Vec<String> = g.regressions.iter().map(Regression::describe).collect();
    assert!(said.iter().any(|l| l.starts_with("8K at 1 req/s: TTFT") && l.contains("100.0 % worse")), "{said:#?}");
    assert!(
        said.contains(&"32K at 1 req/s: Valid → Saturated (B's server did not keep up with the rate)".to_string()),
        "{said:#?}"
    );
    assert!(said.contains(&"32K at 0.5 req/s: only in A (B has no such cell)".to_string()), "{said:#?}");
    // The JSON names a rate cell by its own fields.
    let json = serde_json::to_value(&g).unwrap();
    let missing = json["regressions"].as_array().unwrap().iter().find(|r| r["kind"] == "missing").unwrap();
    assert_eq!((missing["rate_rps"].as_f64(), missing["context"]["label"].as_str()), (Some(0.5), Some("32K")));
    assert!(
        g.regressions.iter().all(|r| matches!(
            r,
            Regression::Worse { cell: Place::Rate(_), .. }
                | Regression::Status { cell: Place::Rate(_), .. }
                | Regression::Missing { cell: Place::Rate(_) }
        )),
        "{said:#?}"
    );
}
