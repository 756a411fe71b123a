//! The seed run as a fixture: `tests/fixtures/h200-qwen3.5-122b-vllm.json` must carry every
//! figure of the published seed page (`../shared/seed/000_9ca01d13c50de007.txt`, resolved from
//! the workspace root). The page's "All measurements" table, decode matrix, prefill list and
//! header cards are parsed here and compared, number by number and as formatted text, with what
//! speedmatrix makes of the fixture.
//!
//! Where the seed page is absent (a user's clone) the test prints that it skipped; under
//! `CI=true` it fails instead.

use speedmatrix::terminal::show::{all_measurements, matrix_cell, render_report, Markup};
use speedmatrix_schema::{load_results, registry, Results};
use std::path::PathBuf;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture() -> Results {
    let bytes = std::fs::read(workspace_root().join("tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap();
    load_results(&bytes).expect("the seed fixture loads and validates")
}

fn seed_page() -> Option<String> {
    let path = workspace_root().join("../shared/seed/000_9ca01d13c50de007.txt");
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(e) => {
            support::skip(&format!(
                "seed page {} not found ({e}; it sits beside the repository in the team's checkout)",
                path.display()
            ));
            None
        }
    }
}

/// Rows of a `| a | b |` Markdown table that start with one of `prefixes`, split into cells.
fn table_rows(text: &str, prefixes: &[&str]) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .map(|l| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

/// A number as the seed page writes it: `22.5K`, `10,187 ms`, `30.0 s`, `1,202.3`; `—` is none.
/// Returns the value and half the unit of its last shown digit (the display precision).
fn parse_shown(s: &str) -> Option<(f64, f64)> {
    let t = s.trim().trim_end_matches(" ms").trim_end_matches(" s").replace(',', "");
    if t == "—" {
        return None;
    }
    let (digits, mult) = match t.strip_suffix('K') {
        Some(d) => (d.to_string(), 1000.0),
        None => (t.clone(), 1.0),
    };
    let v: f64 = digits.parse().unwrap_or_else(|_| panic!("seed number {s:?}"));
    let decimals = digits.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
    Some((v * mult, 0.5 * 10f64.powi(-decimals) * mult))
}

#[test]
fn fixture_has_every_planned_cell() {
    let r = fixture();
    assert_eq!(r.prefill.len(), 7);
    assert_eq!(r.decode.len(), 48);
    assert_eq!(r.decode.iter().filter(|c| c.status == speedmatrix_schema::CellStatus::OverCapacity).count(), 6);
    assert_eq!(r.decode.iter().filter(|c| c.status == speedmatrix_schema::CellStatus::RequestsQueued).count(), 1);
    // Figures the page lacks stay null, never invented.
    assert!(r.decode.iter().all(|c| c.ttft_ms.is_none_or(|d| d.p90.is_none() && d.p99.is_none())));
    assert!(r.decode.iter().all(|c| c.requests.is_empty()));
}

#[test]
fn every_number_of_the_all_measurements_table_matches() {
    let Some(page) = seed_page() else { return };
    let seed_rows = table_rows(&page, &["| Prefill", "| Sustained decode"]);
    assert_eq!(seed_rows.len(), 55, "the seed table has 7 prefill rows and 48 decode cells");
    let r = fixture();
    let ours = all_measurements(&r);
    assert_eq!(ours.len(), seed_rows.len());
    let all_rows = speedmatrix_schema::table::rows(&r);
    let ids = [
        "total_tps",
        "per_request_tps_p50",
        "ttft_ms_p50",
        "itl_ms_p50",
        "avg_active_requests",
        "completed_requests",
        "output_tokens",
        "window_s",
    ];
    let mut numbers = 0;
    for ((seed, mine), row) in seed_rows.iter().zip(&ours).zip(&all_rows) {
        // Text equality: phase, context, requests at once, status and every formatted figure.
        assert_eq!(seed, mine, "row differs from the seed page");
        // Number equality: the fixture's raw value lies within the page's display precision.
        for (i, id) in ids.iter().enumerate() {
            let id = if *id == "total_tps" && row.phase() == speedmatrix_schema::table::Phase::Prefill {
                "prompt_tps"
            } else {
                id
            };
            let value = row.value_of(id);
            match (parse_shown(&seed[4 + i]), value) {
                (None, None) => {}
                (Some((shown, half_ulp)), Some(v)) => {
                    assert!((shown - v).abs() <= half_ulp + 1e-9, "{id}: page {shown}, fixture {v}");
                    numbers += 1;
                }
                (shown, v) => panic!("{id} in {seed:?}: page {shown:?}, fixture {v:?}"),
            }
        }
    }
    assert!(numbers > 300, "compared only {numbers} numbers");
}

#[test]
fn decode_matrix_cells_read_as_on_the_seed_page() {
    let Some(page) = seed_page() else { return };
    let r = fixture();
    let rows = table_rows(&page, &["| 8K |", "| 16K |", "| 32K |", "| 64K |", "| 128K |", "| 251K |"]);
    assert_eq!(rows.len(), 6);
    for (row, ctx) in rows.iter().zip(&r.config.contexts) {
        assert_eq!(row[0], ctx.label);
        for (cell, &n) in row[1..].iter().zip(&r.config.concurrency) {
            // The page runs the lines of a cell together: "1,202.3Requests queued811 ms TTFT".
            assert_eq!(cell, &matrix_cell(&r, ctx.tokens, n).replace('\n', ""), "{} × {n}", ctx.label);
        }
    }
}

#[test]
fn prefill_list_and_header_cards_match() {
    let Some(page) = seed_page() else { return };
    let r = fixture();
    for p in &r.prefill {
        let shown = format!(
            "{} context{}{} TTFT",
            p.context.label,
            registry::metric("prompt_tps").unwrap().display(p.prompt_tps.unwrap()),
            registry::metric("ttft_ms").unwrap().display(p.ttft_ms.unwrap())
        );
        assert!(page.contains(&shown), "seed page lacks {shown:?}");
    }
    // Header cards: each "- Key" line is followed by its value. Our text report prints the same
    // key and value on one line ("  GPU count  2"), under the same card heading.
    let header = &page[page.find("\nHardware\n").unwrap()..page.find("\nLaunch command\n").unwrap()];
    let report = render_report(&r, false, Markup::Text);
    let our_cards: Vec<(String, String, String)> = {
        let mut card = String::new();
        let mut out = Vec::new();
        for l in report.lines() {
            if !l.starts_with(' ') && !l.is_empty() {
                card = l.to_string();
            } else if let Some((k, v)) = l.trim().split_once("  ") {
                out.push((card.clone(), k.trim().to_string(), v.trim().to_string()));
            }
        }
        out
    };
    let (mut card, mut key, mut checked) = (String::new(), None, 0);
    for l in header.lines().filter(|l| !l.is_empty()) {
        if ["Hardware", "Engine", "Run"].contains(&l) {
            card = l.to_string();
            continue;
        }
        let text = l.trim_start_matches("- ").to_string();
        match key.take() {
            None => key = Some(text),
            Some(k) => {
                assert!(
                    our_cards.contains(&(card.clone(), k.clone(), text.clone())),
                    "card {card}: {k} = {text} missing"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 19, "the seed page has 19 header values (5 hardware, 7 engine, 7 run)");
    let launch = r.engine.launch_command.as_deref().unwrap();
    assert!(page.contains(launch) && report.contains(launch), "launch command differs");
    assert!(launch.contains("--api-key <redacted>"));
}

#[test]
fn over_capacity_rule_reproduces_the_seed_cells() {
    // The conservative over-capacity rule, N × (C + max_tokens) > KV budget, with any budget
    // between the largest valid cell (32K × 128 = 4,718,592) and the smallest over-capacity cell
    // (251K × 32 = 8,355,840), marks exactly the six cells the seed run skipped.
    let r = fixture();
    for budget in [4_718_592, 6_291_456, 8_355_839] {
        for c in &r.decode {
            let over = speedmatrix_schema::status::over_capacity(
                c.concurrency,
                c.context.tokens,
                u64::from(r.config.max_tokens.unwrap()),
                budget,
            );
            assert_eq!(
                over.is_some(),
                c.status == speedmatrix_schema::CellStatus::OverCapacity,
                "{} × {} with budget {budget}",
                c.context.label,
                c.concurrency
            );
        }
    }
    let max = speedmatrix_schema::context::decode_max(
        r.engine.max_model_len.unwrap(),
        u64::from(r.config.max_tokens.unwrap()),
    )
    .unwrap();
    assert_eq!(
        speedmatrix_schema::context::label(max),
        r.config.contexts.last().unwrap().label,
        "decode max is the seed's 251K"
    );
}
