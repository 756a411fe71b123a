//! Prefix caching, speculative decoding and conversations on a run's page, in real headless
//! Chromium (`speedmatrix serve` on 127.0.0.1 serving the embedded viewer), from two twin runs:
//!
//! - tests/fixtures/prefix-spec-twin.json: `run --contexts 1k --concurrency 1,2
//!   --prefill-contexts 1k --prefix-share 0,90%` against `simulate --profile tiny --spec-decode
//!   ngram:3`. The prefill table has the warm row right after the cold one, labelled by its
//!   share, with the measured hit rate beside the plan and its TTFT against the cold row's; the
//!   TTFT chart draws a warm line beside the cold one. The heatmap picks the share its cells
//!   show (`?share=90` keeps it), its metric selector offers the measured prefix-cache hit
//!   rate, and a cell's panel gives its measured hit rate beside the
//!   planned share and its speculative decoding (acceptance rate, mean accepted length).
//! - tests/fixtures/turns-twin.json: `run --contexts 1k --concurrency 1 --turns 4 --think-time
//!   100ms --max-tokens 32`. The "Conversations" section has one table row per turn (the table
//!   `show` prints) and a TTFT-by-turn chart with a point per turn.
//! - tests/fixtures/trace-cache-twin.json: `run --trace tests/fixtures/traces/mooncake-100.jsonl
//!   --trace-to 6 --max-tokens 32` (37 requests). The trace section gives the trace's ideal reuse
//!   beside the hit rate the server measured.
//! - tests/fixtures/rates-share-spec-twin.json: `run --contexts 1k --rates 1,2 --arrival
//!   constant --prefill-contexts none --prefix-share 0,90% --duration 6s --max-tokens 64`
//!   against `simulate --profile tiny --spec-decode ngram:3`. The "Request rates" table has a
//!   row per context, share and rate, each share cell with its measured hit rate beside the plan
//!   and every cell with its speculative decoding (acceptance rate, mean accepted length).
//! - The diff view of the rate fixture against a copy whose 90 % cell at 1 req/s hit half as
//!   often and accepted half as many drafts: the rate table pairs the cells by share and adds
//!   the hit rate ("changed") and the acceptance rate ("worse") beside the usual figures.
//! - The diff view of each fixture against a changed copy: a matrix row per prefix share, the
//!   warm row's TTFT compared with the other warm row's (worse when doubled), and the
//!   conversations' turns paired by number (turn 2's TTFT doubled: worse; turn 1: same).
//!
//! Every expected figure is read from the fixture and written by the same registry formats;
//! nothing depends on timing. Skips without Chromium and chromedriver, except under `CI=true`.

use serde_json::Value;
use speedmatrix_schema::registry::{self, metric};
use speedmatrix_schema::{load_results, prefix, Results};
use support::browser::*;

fn fixture(name: &str) -> (std::path::PathBuf, Results) {
    let path = root().join("tests/fixtures").join(name);
    let r = load_results(&std::fs::read(&path).unwrap()).expect("a valid results file");
    (path, r)
}

fn pct(id: &str, v: f64) -> String {
    registry::PREFIX_CACHE
        .iter()
        .chain(registry::SPEC_DECODE)
        .chain(registry::METRICS)
        .find(|m| m.id == id)
        .unwrap()
        .display(v)
}

/// The series and points a canvas drew (`data-series`, `data-points`), once drawn.
async fn drawn(c: &fantoccini::Client, id: &str) -> (usize, usize) {
    let body = format!(
        "const e = document.querySelector('#chart-{id}'); \
         return e && e.dataset.points ? [e.dataset.series, e.dataset.points] : null;"
    );
    let v = until(c, &format!("the chart {id} drawn"), &body).await;
    let series = v[0].as_str().unwrap_or_default().parse().unwrap_or(0);
    (series, v[1].as_str().unwrap_or_default().split_whitespace().count())
}

/// The heatmap cell of `context` × `n`.
fn heat(context: &str, n: u32) -> String {
    format!("#heatmap td[data-context=\"{context}\"][data-concurrency=\"{n}\"]")
}

#[test]
fn warm_prefill_rows_sit_beside_the_cold_ones_and_the_heatmap_picks_the_share() {
    let (path, r) = fixture("prefix-spec-twin.json");
    let cold = r.prefill.iter().find(|p| p.prefix_share.is_none()).expect("a cold prefill row").clone();
    let warm = r.prefill.iter().find(|p| p.prefix_share == Some(0.9)).expect("a warm row at 90 %").clone();
    assert_eq!(warm.context.tokens, cold.context.tokens);
    let at = |share: f64, n: u32| {
        r.decode.iter().find(|c| c.prefix_share == Some(share) && c.concurrency == n).expect("the cell").clone()
    };
    let (cold2, warm2) = (at(0.0, 2), at(0.9, 2));
    let total = |c: &speedmatrix_schema::DecodeCell| metric("total_tps").unwrap().display(c.total_tps.unwrap());
    assert_ne!(total(&cold2), total(&warm2), "the two shares' cells read differently");
    let pc = warm2.prefix_cache.clone().expect("the 90 % cell's prefix cache");
    let spec = warm2.spec_decode.clone().expect("the cell's speculative decoding");
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#prefill h2", "Prefill").await;
        // The prefill table: cold, then warm at 90 %, labelled; the hit rate beside the plan.
        let rows = until(
            &c,
            "the prefill rows",
            "const rows = [...document.querySelectorAll('#prefill tbody tr')]; \
             return rows.length ? rows.map(tr => [tr.dataset.share || '', tr.querySelector('th').innerText, \
               (tr.querySelector('[data-col=prefix-cache]') || {}).innerText, \
               (tr.querySelector('[data-col=vs-cold]') || {}).innerText]) : null;",
        )
        .await;
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), r.prefill.len(), "{rows:?}");
        assert_eq!(rows[0][0], "", "the cold row first: {rows:?}");
        assert_eq!(rows[0][1], format!("{} context", cold.context.label));
        assert_eq!(rows[0][2], "cold");
        assert_eq!(rows[1][0], "9000", "the warm row right after it: {rows:?}");
        assert_eq!(rows[1][1], format!("{} context · warm, prefix 90%", warm.context.label));
        assert_eq!(rows[1][2].as_str().unwrap(), prefix::hit_rate_text(0.9, warm.prefix_cache.as_ref()));
        assert!(rows[1][2].as_str().unwrap().contains("hit (plan 90%, Prometheus)"), "{rows:?}");
        let ratio = format!("{:.2}× cold", warm.ttft_ms.unwrap() / cold.ttft_ms.unwrap());
        assert_eq!(rows[1][3].as_str().unwrap(), ratio);
        // The TTFT chart: a cold line and a warm one, a point per row.
        assert_eq!(drawn(&c, "prefill-ttft").await, (2, 2));

        // The heatmap: share 0 by default, the picker offers both shares.
        let options = until(
            &c,
            "the share picker",
            "const s = document.querySelector('#heatmap-share'); \
             return s && [...s.options].map(o => o.value + (o.selected ? '*' : ''));",
        )
        .await;
        assert_eq!(options, serde_json::json!(["0*", "90"]));
        wait_text(&c, &heat(&cold2.context.label, 2), &total(&cold2)).await;
        c.execute(
            "const s = document.querySelector('#heatmap-share'); s.value = '90'; \
             s.dispatchEvent(new Event('change', {bubbles: true}));",
            vec![],
        )
        .await
        .unwrap();
        wait_text(&c, &heat(&warm2.context.label, 2), &total(&warm2)).await;
        wait_text(&c, "#decode .section-sub", "prefix share 90%").await;
        until(&c, "the share in the URL", "return location.search.includes('share=90') && location.search;").await;
        // The metric selector offers the measured hit rate: the 90 % cells read it.
        c.execute(
            "const s = document.querySelector('#heatmap-metric'); s.value = 'prefix_cache_hit_rate'; \
             s.dispatchEvent(new Event('change', {bubbles: true}));",
            vec![],
        )
        .await
        .unwrap();
        let m = pc.measured_hit_rate.expect("a measured hit rate");
        wait_text(&c, &heat(&warm2.context.label, 2), &pct("prefix_cache_hit_rate", m)).await;

        // A link with the share and a cell opens that cell's panel at that share.
        c.goto(&format!("{url}/?share=90&cell={}x2", warm2.context.tokens)).await.unwrap();
        wait_text(&c, "#cell-panel-title", "· prefix 90%").await;
        let hit = text(&c, "#cell-prefix-cache li[data-figure=prefix_cache_hit_rate]").await;
        assert!(hit.contains(&format!("{} (Prometheus", pct("prefix_cache_hit_rate", m))), "{hit}");
        let plan = text(&c, "#cell-prefix-cache li[data-figure=prefix_share]").await;
        assert!(plan.contains("90% (plan)"), "{plan}");
        let off = c
            .execute("return !!document.querySelector('#cell-prefix-cache li[data-figure=off_plan]');", vec![])
            .await
            .unwrap();
        assert_eq!(off, Value::Bool((m - 0.9).abs() > prefix::TOLERANCE), "the why line only when off the plan");
        let accept = text(&c, "#cell-spec-decode li[data-figure=spec_accept_rate]").await;
        let rate = spec.acceptance_rate.expect("an acceptance rate");
        assert!(accept.contains(&format!("{} (Prometheus counters)", pct("spec_accept_rate", rate))), "{accept}");
        let len = text(&c, "#cell-spec-decode li[data-figure=spec_mean_accepted_len]").await;
        let mean = spec.mean_accepted_length.expect("a mean accepted length");
        assert!(len.contains(&pct("spec_mean_accepted_len", mean)), "{len}");
    });
}

#[test]
fn conversations_have_a_row_and_a_ttft_point_per_turn() {
    let (path, r) = fixture("turns-twin.json");
    let cell = r.conversations.first().expect("a conversation cell").clone();
    let turns = cell.per_turn.len();
    assert!(turns >= 3, "every turn measured: {turns}");
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#conversations h2", "Conversations").await;
        let rows = until(
            &c,
            "the turn rows",
            "const rows = [...document.querySelectorAll('#turns-table tbody tr')]; \
             return rows.length ? rows.map(tr => [...tr.cells].map(td => td.innerText)) : null;",
        )
        .await;
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), turns);
        let want = speedmatrix_schema::conversation::turn_rows(&r);
        for (got, want) in rows.iter().zip(&want) {
            let got: Vec<&str> = got.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            assert_eq!(got, *want);
        }
        assert_eq!(drawn(&c, "turn-ttft").await, (1, turns));
    });
}

/// A copy of fixture `name` as another run (`id`, `label`), changed by `edit`, in `dir`.
fn changed(dir: &std::path::Path, name: &str, id: &str, edit: impl FnOnce(&mut Value)) -> std::path::PathBuf {
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(root().join("tests/fixtures").join(name)).unwrap()).unwrap();
    v["run"]["id"] = id.into();
    v["run"]["label"] = format!("changed {name}").into();
    edit(&mut v);
    let out = dir.join(format!("{id}.json"));
    std::fs::write(&out, serde_json::to_vec(&v).unwrap()).unwrap();
    out
}

#[test]
fn the_diff_view_compares_warm_rows_share_cells_and_turns() {
    let dir = tempfile::tempdir().unwrap();
    let (a_share, a_turns) = (fixture("prefix-spec-twin.json").0, fixture("turns-twin.json").0);
    // B: the warm row's TTFT doubled; turn 2's TTFT p50 doubled.
    let b_share = changed(dir.path(), "prefix-spec-twin.json", "b-share", |v| {
        let warm = v["prefill"].as_array_mut().unwrap().iter_mut().find(|p| p["prefix_share"] == 0.9).unwrap();
        warm["ttft_ms"] = (warm["ttft_ms"].as_f64().unwrap() * 2.0).into();
    });
    let b_turns = changed(dir.path(), "turns-twin.json", "b-turns", |v| {
        let t = &mut v["conversations"][0]["per_turn"][1]["ttft_ms"]["p50"];
        *t = (t.as_f64().unwrap() * 2.0).into();
    });
    scenario(|c| async move {
        let (_server, base) = serve(&[&a_share, &b_share, &a_turns, &b_turns]);
        c.goto(&format!("{base}?a=runs/prefix-spec-twin.json&b=runs/b-share.json")).await.unwrap();
        // The delta matrix: a row for the cold cells and one for the 90 % cells.
        let rows = until(
            &c,
            "the delta matrix rows",
            "const t = document.querySelector('#delta table'); \
             return t && [...t.querySelectorAll('tbody th')].map(th => th.innerText);",
        )
        .await;
        assert_eq!(rows, serde_json::json!(["1K", "1K · prefix 90%"]));
        // The matched measurements: the warm row's TTFT, twice A's, is worse.
        let warm = until(
            &c,
            "the warm row's TTFT in the matched table",
            "const rows = [...document.querySelectorAll('#diff-table tbody tr')].map(tr => tr.innerText); \
             return rows.find(r => r.includes('1K · prefix 90%') && r.includes('TTFT (ms)') && r.toLowerCase().includes('prefill'));",
        )
        .await;
        assert!(warm.as_str().unwrap().to_lowercase().contains("worse"), "{warm}");
        let notes =
            c.execute("return document.body.innerText.includes('prefix-share cells and warm prefill rows');", vec![]);
        assert_eq!(notes.await.unwrap(), Value::Bool(false), "no 'Not compared' note for them");

        // Conversations: turn 2's TTFT, twice A's, is worse; turn 1's the same.
        c.goto(&format!("{base}?a=runs/turns-twin.json&b=runs/b-turns.json")).await.unwrap();
        wait_text(&c, "#diff-turns h2", "Conversations").await;
        let kind = |turn: u32| {
            format!(
                "const td = document.querySelector('#turn-diff-table tr[data-turn=\"{turn}\"] td[data-col=ttft_ms_p50]'); \
                 return td && td.dataset.kind;"
            )
        };
        assert_eq!(until(&c, "turn 2's verdict", &kind(2)).await, Value::from("worse"));
        assert_eq!(until(&c, "turn 1's verdict", &kind(1)).await, Value::from("same"));
    });
}

#[test]
fn the_trace_section_gives_the_ideal_reuse_beside_the_measured_hit_rate() {
    let (path, r) = fixture("trace-cache-twin.json");
    let pc = r.traces[0].prefix_cache.clone().expect("the replay's prefix cache");
    let want = prefix::trace_cache_text(&r.traces[0]).unwrap();
    assert!(want.contains(&format!("ideal reuse {}", pct("trace_ideal_reuse", pc.ideal_reuse))), "{want}");
    let m = pc.measured_hit_rate.expect("a measured hit rate");
    assert!(want.contains(&format!("measured hit rate {} (Prometheus)", pct("prefix_cache_hit_rate", m))), "{want}");
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#traces h2", "Trace replay").await;
        assert_eq!(text(&c, ".trace-prefix-cache[data-trace=\"0\"]").await, want);
    });
}

#[test]
fn rate_cells_show_their_share_hit_rate_and_acceptance_in_the_rate_table() {
    let (path, r) = fixture("rates-share-spec-twin.json");
    assert!(r.rates.len() >= 4, "two shares × two rates");
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#rates h2", "Request rates").await;
        let headers = text(&c, "#rates-table thead").await;
        assert!(headers.contains("Prefix cache") && headers.contains("Speculative decoding"), "{headers}");
        for cell in &r.rates {
            let share = cell.prefix_share.expect("every rate cell of the fixture has a share");
            let context = format!("{} · prefix {}", cell.context.label, prefix::share_label(share));
            let row = format!("#rates-table tr[data-context={context:?}][data-rate={:?}]", cell.rate_label());
            // The hit rate beside the plan, with its source, as the file has it.
            let pc = cell.prefix_cache.as_ref().expect("a share cell's prefix cache");
            let hit = pct("prefix_cache_hit_rate", pc.measured_hit_rate.expect("a measured hit rate"));
            let want = format!("{hit} hit (plan {}, Prometheus)", prefix::share_label(share));
            let got = wait_text(&c, &format!("{row} td[data-col=prefix_cache]"), &want).await;
            assert!(got.starts_with(&want), "{got:?}");
            // Speculative decoding from the server's counters: acceptance, mean accepted length.
            let spec = cell.spec_decode.as_ref().expect("the twin speculated");
            let want = format!(
                "{} accepted · mean accepted length {} (Prometheus counters)",
                pct("spec_accept_rate", spec.acceptance_rate.unwrap()),
                pct("spec_mean_accepted_len", spec.mean_accepted_length.unwrap())
            );
            let got = text(&c, &format!("{row} td[data-col=spec_decode]")).await;
            assert!(got.starts_with(&want), "{got:?} starts with {want:?}");
            // The counts behind both, in a tooltip on focus.
            let pc_tip = format!(
                "{} of {} prompt tokens served from the cache · cache reset (POST /reset_prefix_cache)",
                registry::format_int(pc.hit_tokens.unwrap()),
                registry::format_int(pc.query_tokens.unwrap())
            );
            assert_eq!(tip(&c, &format!("{row} td[data-col=prefix_cache]")).await, pc_tip);
            let by: Vec<String> = spec
                .acceptance_by_position
                .iter()
                .enumerate()
                .map(|(k, v)| format!("{k}: {}", pct("spec_acceptance_by_position", *v)))
                .collect();
            let spec_tip = format!(
                "{} draft tokens, {} accepted · acceptance by position {}",
                registry::format_int(spec.draft_tokens.unwrap()),
                registry::format_int(spec.accepted_tokens.unwrap()),
                by.join(" · ")
            );
            assert_eq!(tip(&c, &format!("{row} td[data-col=spec_decode]")).await, spec_tip);
        }
    });
}

/// The tooltip of the element `css` once focused and shown.
async fn tip(c: &fantoccini::Client, css: &str) -> String {
    let body = format!(
        "const td = document.querySelector({css:?}); td.focus(); const t = td.querySelector('.hm-tip'); \
         return t && getComputedStyle(t).display === 'block' ? t.textContent : null;"
    );
    until(c, &format!("the tooltip of {css}"), &body).await.as_str().unwrap_or_default().to_string()
}

#[test]
fn the_diff_view_compares_rate_cells_by_share_with_their_hit_rate_and_acceptance() {
    let dir = tempfile::tempdir().unwrap();
    let (a, r) = fixture("rates-share-spec-twin.json");
    // B: the 90 % cell at 1 req/s hit half as often and accepted half the drafts it did.
    let b = changed(dir.path(), "rates-share-spec-twin.json", "b-rates", |v| {
        let cell =
            v["rates"].as_array_mut().unwrap().iter_mut().find(|c| c["prefix_share"] == 0.9 && c["rate_rps"] == 1.0);
        let cell = cell.unwrap();
        let hit = &mut cell["prefix_cache"]["measured_hit_rate"];
        *hit = (hit.as_f64().unwrap() / 2.0).into();
        let acc = &mut cell["spec_decode"]["acceptance_rate"];
        *acc = (acc.as_f64().unwrap() / 2.0).into();
    });
    let cell = r.rates.iter().find(|c| c.prefix_share == Some(0.9) && c.rate_rps == 1.0).unwrap().clone();
    let hit = cell.prefix_cache.as_ref().unwrap().measured_hit_rate.unwrap();
    scenario(|c| async move {
        let (_server, base) = serve(&[&a, &b]);
        c.goto(&format!("{base}?a=runs/rates-share-spec-twin.json&b=runs/b-rates.json")).await.unwrap();
        wait_text(&c, "#diff-rates h2", "Request rates").await;
        let head = text(&c, "#rate-diff-table thead").await;
        for h in ["Prefix-cache hit rate", "Acceptance rate", "Mean accepted length"] {
            assert!(head.contains(h), "{h} in {head:?}");
        }
        let rows = until(
            &c,
            "the rate diff rows",
            "return document.querySelectorAll('#rate-diff-table tbody tr').length || null;",
        )
        .await;
        assert_eq!(rows, Value::from(4), "the 0 % and 90 % cells pair with their own share");
        let row = "#rate-diff-table tr[data-context=\"1K · prefix 90%\"][data-rate=\"1 req/s\"]";
        let kind =
            |col: &str| format!("return document.querySelector('{row} td[data-col={col}]')?.dataset.kind || null;");
        let hit_kind = until(&c, "the hit-rate cell", &kind("prefix_cache_hit_rate")).await;
        assert_eq!(hit_kind, Value::from("changed"), "the hit rate has no direction: changed");
        let detail = text(&c, &format!("{row} td[data-col=prefix_cache_hit_rate] .dm-detail")).await;
        assert_eq!(
            detail,
            format!("{} → {}", pct("prefix_cache_hit_rate", hit), pct("prefix_cache_hit_rate", hit / 2.0))
        );
        assert_eq!(until(&c, "the acceptance cell", &kind("spec_accept_rate")).await, Value::from("worse"));
        // The share-0 cell at the same rate did not change.
        let same = "#rate-diff-table tr[data-context=\"1K · prefix 0%\"][data-rate=\"1 req/s\"]";
        let same_kind = until(
            &c,
            "the share-0 acceptance cell",
            &format!("return document.querySelector('{same} td[data-col=spec_accept_rate]')?.dataset.kind || null;"),
        )
        .await;
        assert_eq!(same_kind, Value::from("same"));
    });
}
