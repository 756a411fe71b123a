//! The pure figures of a decode cell, with exact numbers.

use super::*;
use crate::measuring::client::Chunk;
use speedmatrix_schema::ReadinessOutcome;

/// A stream `id` sent at `sent` with `chunks` (time, tokens); `finished` streams ended with
/// `finish_reason` and `[DONE]` at their last chunk, the others were cancelled there.
fn stream(id: usize, sent: f64, chunks: &[(f64, u32)], finished: bool, opening: bool) -> CellStream {
    CellStream {
        record: StreamRecord {
            id,
            sent_ms: sent,
            chunks: chunks.iter().map(|&(t_ms, tokens)| Chunk { t_ms, tokens }).collect(),
            continuous_usage: true,
            done: finished,
            finish_reason: finished.then(|| "length".into()),
            cancelled: !finished,
            ended_ms: chunks.last().map(|c| c.0),
            ..StreamRecord::default()
        },
        opening,
    }
}

/// The same stream as a server without per-chunk usage sends it: one token counted per chunk,
/// and the final `usage.completion_tokens` when it finished.
fn without_chunk_usage(mut s: CellStream, final_usage: Option<u64>) -> CellStream {
    s.record.continuous_usage = false;
    for c in &mut s.record.chunks {
        c.tokens = 1;
    }
    s.record.completion_tokens = final_usage;
    s
}

fn weights_of(streams: &[CellStream]) -> Vec<Vec<f64>> {
    count_tokens(streams, None, None, None).weights
}

fn scrape(t_ms: f64, generation: f64) -> Scrape {
    Scrape { t_ms, metrics: Metrics { generation_tokens: Some(generation), ..Metrics::default() } }
}

fn observation(streams: Vec<CellStream>, start: f64, closed: f64) -> Observation {
    Observation {
        context: ContextSize { label: "1K".into(), tokens: 1024 },
        concurrency: streams.iter().filter(|s| s.opening).count() as u32,
        prompt_tokens: Some(1024),
        streams,
        readiness: Some(Readiness {
            outcome: ReadinessOutcome::Ready,
            after_ms: 50.0,
            limit_ms: 120_000.0,
            streams_producing: 2,
        }),
        window: Some(WindowTimes { start_ms: start, deadline_ms: closed.floor(), closed_ms: closed }),
        scrapes: vec![],
        live_counter: false,
        queued_by_construction: None,
        cold_ttft_ms: Some(20.0),
        client_cpu_s: None,
        cores: 2,
        gpu: None,
    }
}

#[test]
fn counts_only_tokens_inside_the_window() {
    // Chunks every 10 ms carrying 1, then 3 tokens (speculative decoding) alternately.
    let chunks: Vec<(f64, u32)> = (0..100).map(|i| (100.0 + 10.0 * i as f64, if i % 2 == 0 { 1 } else { 3 })).collect();
    let s = [stream(0, 0.0, &chunks, false, true)];
    let f = window_figures(&s, &weights_of(&s), 300.0, 800.0, 1000.0);
    // Chunks at 310..=800 → 50 chunks, 25 of 1 token and 25 of 3 tokens.
    assert_eq!(f.output_tokens, 100);
    let total_tps = f.output_tokens as f64 / f.window_s;
    assert!((total_tps - 200.0).abs() < 1e-9, "{total_tps}");
    assert!((f.window_s - 0.5).abs() < 1e-12);
    // ITL per token: 10 ms for 1-token chunks, 3.33 ms for each of 3 tokens → median 3.33.
    let itl = f.itl_ms.unwrap();
    assert_eq!(itl.count, Some(100));
    assert!((itl.p50.unwrap() - 10.0 / 3.0).abs() < 1e-3);
    assert_eq!(f.chunk_gap_ms.unwrap().p50, Some(10.0));
    // TTFT is the opening stream's, from before the window.
    assert_eq!(f.ttft_ms.unwrap().p50, Some(100.0));
    assert!(f.ttft_in_window_ms.is_none());
    // TPOT: (800 − 310) ms over the 97 tokens after the first in-window chunk (which carried 3).
    let tpot = f.tpot_ms.unwrap().p50.unwrap();
    assert!((tpot - 490.0 / 97.0).abs() < 1e-3, "{tpot}");
}

#[test]
fn replacement_streams_and_completions() {
    let a = stream(0, 0.0, &[(50.0, 1), (60.0, 1), (70.0, 1)], true, true); // finished at 70
    let b = stream(1, 70.0, &[(90.0, 1), (100.0, 1), (110.0, 1)], false, false); // replacement
    let s = [a, b];
    let f = window_figures(&s, &weights_of(&s), 55.0, 105.0, 1000.0);
    assert_eq!(f.completed_requests, 1);
    assert_eq!(f.e2e_ms.unwrap().p50, Some(70.0));
    assert_eq!(f.ttft_in_window_ms.unwrap().p50, Some(20.0));
    assert_eq!(f.ttft_ms.unwrap().count, Some(1));
    assert_eq!(f.output_tokens, 4);
    // In flight: a from 55 to 70, b from 70 to 105 → one stream all along.
    assert!((f.avg_in_flight - 1.0).abs() < 1e-9, "{}", f.avg_in_flight);
    assert_eq!(f.max_in_flight, 1);
    // b waited 20 ms for its first token: an ordinary start, no queue.
    assert_eq!(f.avg_queued, 0.0);
}

#[test]
fn final_usage_reconciles_chunk_counts_and_sets_the_rate_of_cancelled_streams() {
    // 6 chunks 10 ms apart that carried 12 tokens (the final usage says so), and a stream
    // still streaming at the close: 4 chunks, no usage.
    let done: Vec<(f64, u32)> = (0..6).map(|i| (100.0 + 10.0 * f64::from(i), 2)).collect();
    let open: Vec<(f64, u32)> = (0..4).map(|i| (105.0 + 10.0 * f64::from(i), 2)).collect();
    let s = vec![
        without_chunk_usage(stream(0, 0.0, &done, true, true), Some(12)),
        without_chunk_usage(stream(1, 0.0, &open, false, true), None),
    ];
    let c = count_tokens(&s, None, None, Some((0.0, 200.0)));
    assert_eq!((c.source, c.reconciled), (TokenCountSource::FinalUsage, Some(true)));
    assert_eq!(c.weights, [vec![2.0; 6], vec![2.0; 4]]);
    let f = window_figures(&s, &c.weights, 0.0, 200.0, 1000.0);
    assert_eq!(f.output_tokens, 20);
    // TPOT of the finished stream: 50 ms over the 10 tokens after its first chunk.
    assert_eq!(f.tpot_ms.unwrap().min, Some(5.0));
    // Each 10-ms gap over 2 tokens: 5 ms per token, 2 values per chunk after the first.
    let itl = f.itl_ms.unwrap();
    assert_eq!((itl.p50, itl.count), (Some(5.0), Some(16)));
    // Requests carry their counted tokens.
    let r = sample(&s[1].record, &c.weights[1], true, Some((0.0, 200.0)));
    assert_eq!((r.output_tokens, r.window_output_tokens), (Some(8), Some(8)));
}

#[test]
fn fractional_tokens_per_chunk_number_the_tokens() {
    // 3 chunks that carried 4 tokens: 4/3 tokens each; the ITL values number 4 − 4/3 after the
    // first chunk, rounded on the running total (3 values: 1.33 → 1, 2.67 → 3, 4 → 4).
    let s = vec![without_chunk_usage(stream(0, 0.0, &[(10.0, 1), (20.0, 1), (30.0, 1)], true, true), Some(4))];
    let c = count_tokens(&s, None, None, None);
    let f = window_figures(&s, &c.weights, 0.0, 100.0, 1000.0);
    assert_eq!(f.output_tokens, 4);
    let itl = f.itl_ms.unwrap();
    assert_eq!(itl.count, Some(3));
    assert_eq!(itl.p50, Some(7.5), "each 10-ms gap over 4/3 tokens");
    assert_eq!(f.tpot_ms.unwrap().p50, Some(7.5), "20 ms over the 8/3 tokens after the first chunk");
}

#[test]
fn without_any_usage_the_server_counter_scales_the_chunks_else_they_are_approximate() {
    let chunks: Vec<(f64, u32)> = (1..=10).map(|i| (10.0 * f64::from(i), 1)).collect();
    let s = vec![without_chunk_usage(stream(0, 0.0, &chunks, false, true), None)];
    // The counter grew by 30 tokens over the window (0, 100]: 3 tokens per counted chunk.
    let c = count_tokens(&s, Some(30.0), None, Some((0.0, 100.0)));
    assert_eq!((c.source, c.reconciled), (TokenCountSource::ServerCounter, Some(true)));
    assert_eq!(c.weights[0], vec![3.0; 10]);
    let c = count_tokens(&s, None, None, Some((0.0, 100.0)));
    assert_eq!((c.source, c.reconciled), (TokenCountSource::ChunkCount, Some(false)));
    assert_eq!(c.weights[0], vec![1.0; 10]);
}

#[test]
fn counters_are_read_between_scrapes() {
    let scrapes = [scrape(0.0, 100.0), scrape(500.0, 200.0), scrape(1000.0, 400.0)];
    let get = |m: &Metrics| m.generation_tokens;
    assert_eq!(counter_at(&scrapes, get, 250.0), Some(150.0));
    assert_eq!(counter_at(&scrapes, get, 750.0), Some(300.0));
    assert_eq!(counter_at(&scrapes, get, 1000.0), Some(400.0));
    assert_eq!(counter_at(&scrapes, get, 1000.5), None, "no reading after it");
    assert_eq!(counter_delta(&scrapes, get, 250.0, 750.0), Some(150.0));
}

#[test]
fn a_cell_from_its_observation() {
    // Two opening streams, 1 token every 10 ms from 20 ms on; the window opens at 100 and is
    // due at 600, but really closes at 601.25.
    let chunks = |from: f64| -> Vec<(f64, u32)> { (0..80).map(|i| (from + 10.0 * f64::from(i), 1)).collect() };
    let s = vec![stream(0, 0.0, &chunks(20.0), false, true), stream(1, 0.0, &chunks(25.0), false, true)];
    let mut obs = observation(s, 100.0, 601.25);
    obs.scrapes = vec![scrape(0.0, 0.0), scrape(90.0, 18.0), scrape(610.0, 122.0), scrape(900.0, 160.0)];
    obs.live_counter = true;
    obs.client_cpu_s = Some((1.0, 1.1));
    let (cell, notes) = decode_cell(&obs);
    assert_eq!(cell.status, CellStatus::Valid, "{:?}", cell.reason);
    assert!(notes.is_empty());
    assert_eq!((cell.window_start_ms, cell.window_end_ms, cell.window_s), (Some(100.0), Some(601.25), Some(0.501)));
    // Stream 0: chunks at 110 … 600 (50), stream 1: 105 … 595 (50).
    assert_eq!(cell.output_tokens, Some(100));
    assert_eq!(cell.total_tps, Some(199.501), "100 tokens over 0.50125 s");
    assert_eq!(cell.token_count_source, Some(TokenCountSource::ContinuousUsage));
    assert_eq!(cell.token_count_reconciled, None);
    assert_eq!(cell.itl_ms.unwrap().p50, Some(10.0));
    assert_eq!(cell.ttft_ms.unwrap().p50, Some(20.0));
    assert_eq!(cell.client_cpu_pct, Some(19.95));
    assert_eq!(cell.server.as_ref().unwrap().generation_tokens, Some(160), "before open → after drain");
    assert_eq!(cell.requests.iter().map(|r| r.window_output_tokens.unwrap()).sum::<u64>(), 100);
    assert_eq!(cell.readiness.unwrap().outcome, ReadinessOutcome::Ready);
    // Half a second: no whole bucket, so no series and no interval (with the reasons).
    assert_eq!(cell.series, None);
    let iv = cell.intervals.unwrap();
    assert_eq!((iv.total_tps, iv.ttft_ms_p50, iv.tpot_ms_p50), (None, None, None));
    assert_eq!(iv.missing[0].reason, "no per-second series of the window");
    assert_eq!(iv.missing[1].reason, noise::TTFT_ONE_BURST);
    assert_eq!(iv.missing[2].reason, noise::TPOT_SHARED_BATCHES);
}

#[test]
fn a_cell_carries_its_series_and_intervals() {
    // Twelve opening streams sent at 0, stream i's first token at 100 + 10·i ms, then one token
    // every 100 ms (stream i with a 1-ms lag per token on odd seconds, so seconds differ); the
    // window (1000, 13000] is twelve buckets.
    let streams: Vec<CellStream> = (0..12)
        .map(|i| {
            let first = 100.0 + 10.0 * i as f64;
            let chunks: Vec<(f64, u32)> = (0..150).map(|k| (first + 100.0 * f64::from(k), 1 + (k % 2))).collect();
            let mut s = stream(i, 0.0, &chunks, false, true);
            s.record.ended_ms = Some(15_000.0);
            s
        })
        .collect();
    let (cell, _) = decode_cell(&observation(streams, 1000.0, 13_000.0));
    let series = cell.series.as_ref().unwrap();
    // Each stream: ten chunks a second, alternately 1 and 2 tokens → 15 a second, 180 for 12.
    assert_eq!(series.output_tokens, vec![180.0; 12]);
    assert_eq!(series.streams_decoding, vec![12.0; 12]);
    assert!(series.running.is_empty(), "no scrapes, no gauge");
    let iv = cell.intervals.as_ref().unwrap();
    let tps = iv.total_tps.unwrap();
    // Steady seconds: the interval is the figure itself (batches of 2 s, six of them).
    assert_eq!((tps.estimate, tps.low, tps.high, tps.evidence), (180.0, 180.0, 180.0, 6));
    assert_eq!(tps.method, speedmatrix_schema::IntervalMethod::BatchMeans);
    assert_eq!(cell.total_tps, Some(180.0));
    // The opening streams' TTFT is one burst, the streams' TPOTs share their batches: no
    // interval from one window, and each says why.
    assert_eq!((iv.ttft_ms_p50, iv.tpot_ms_p50), (None, None));
    let missing: Vec<(&str, &str)> = iv.missing.iter().map(|m| (m.figure.as_str(), m.reason.as_str())).collect();
    assert_eq!(missing, [("ttft_ms_p50", noise::TTFT_ONE_BURST), ("tpot_ms_p50", noise::TPOT_SHARED_BATCHES)]);
}

#[test]
fn cell_statuses_from_client_evidence() {
    let long = |from: f64| -> Vec<(f64, u32)> { (0..60).map(|i| (from + 10.0 * f64::from(i), 1)).collect() };
    // A server that runs one of two streams at a time: stream 1 waits for its first token until
    // stream 0 ends at 2,500 ms; counted as queued from 1,000 ms (the start allowance) to 2,510.
    let first: Vec<(f64, u32)> = (0..250).map(|i| (10.0 + 10.0 * f64::from(i), 1)).collect();
    let mut queued = vec![
        stream(0, 0.0, &first, true, true),
        stream(1, 0.0, &[(2510.0, 1), (2520.0, 1), (2600.0, 1)], false, true),
        stream(2, 2500.0, &[(2540.0, 1), (2990.0, 1)], false, false),
    ];
    for s in &mut queued[1..] {
        s.record.ended_ms = Some(3000.0); // cancelled at the close
    }
    let (cell, _) = decode_cell(&observation(queued, 100.0, 3000.0));
    assert_eq!(cell.status, CellStatus::RequestsQueued);
    // In flight: 2 all along; queued: 1,510 of the window's 2,900 ms → 2 − 0.52 = 1.48 running.
    let why = cell.reason.unwrap();
    assert!(
        why.starts_with("on average 1.5 of 2 streams were running (client view: a stream waiting longer than 1.0 s"),
        "{why}"
    );

    // A stream that finished without a token: error, not a queue at 0 tok/s.
    let empty = vec![stream(0, 0.0, &long(10.0), false, true), stream(1, 0.0, &[], true, true)];
    let (cell, _) = decode_cell(&observation(empty, 100.0, 500.0));
    assert_eq!(cell.status, CellStatus::Error);
    assert!(
        cell.reason.as_deref().unwrap().starts_with("stream 1: the stream finished without a token"),
        "{:?}",
        cell.reason
    );
    assert!(cell.total_tps.is_none() && cell.output_tokens.is_none());

    // Readiness timed out: the window is measured, the cell says why it is queued.
    let fine = vec![stream(0, 0.0, &long(10.0), false, true), stream(1, 0.0, &long(15.0), false, true)];
    let mut obs = observation(fine, 100.0, 500.0);
    obs.readiness = Some(Readiness {
        outcome: ReadinessOutcome::TimedOut,
        after_ms: 120_000.0,
        limit_ms: 120_000.0,
        streams_producing: 1,
    });
    let (cell, _) = decode_cell(&obs);
    assert_eq!(cell.status, CellStatus::RequestsQueued);
    assert!(cell.reason.unwrap().starts_with("readiness timed out: 1 stream(s) had produced a token"));
    assert!(cell.total_tps.unwrap() > 0.0);
}

#[test]
fn sample_summarises_a_request() {
    let s = stream(0, 10.0, &[(20.0, 1), (30.0, 2), (40.0, 2)], true, true).record;
    let r = sample(&s, &[1.0, 2.0, 2.0], true, Some((25.0, 35.0)));
    assert_eq!(r.ttft_ms, Some(10.0));
    assert_eq!(r.tpot_ms, Some(5.0));
    assert_eq!(r.window_output_tokens, Some(2));
    assert_eq!(r.output_tokens, Some(5));
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
    assert_eq!(r.e2e_ms, Some(30.0));
}

#[test]
fn the_cells_prompt_length_is_what_the_server_counted() {
    let chunks: Vec<(f64, u32)> = (1..=10).map(|i| (10.0 * f64::from(i), 1)).collect();
    let mut streams: Vec<CellStream> = (0..3).map(|i| stream(i, 0.0, &chunks, true, true)).collect();
    // The warm stage counted 1,024 (`/tokenize`); the server's usage says 1,324 (and one
    // request sent no usage).
    streams[0].record.prompt_tokens = Some(1324);
    streams[1].record.prompt_tokens = Some(1324);
    let (cell, _) = decode_cell(&observation(streams.clone(), 0.0, 200.0));
    assert_eq!(cell.prompt_tokens, Some(1324));
    // Without any usage, the warm stage's count stands.
    for s in &mut streams {
        s.record.prompt_tokens = None;
    }
    assert_eq!(decode_cell(&observation(streams, 0.0, 200.0)).0.prompt_tokens, Some(1024));
}

#[test]
fn a_usage_of_zero_prompt_tokens_is_no_count() {
    let chunks: Vec<(f64, u32)> = (1..=10).map(|i| (10.0 * f64::from(i), 1)).collect();
    let mut streams: Vec<CellStream> = (0..3).map(|i| stream(i, 0.0, &chunks, true, true)).collect();
    // A proxy that fills usage with zeros: the warm stage's count (`/tokenize`) stands.
    for s in &mut streams {
        s.record.prompt_tokens = Some(0);
    }
    let (cell, _) = decode_cell(&observation(streams.clone(), 0.0, 200.0));
    assert_eq!(cell.prompt_tokens, Some(1024));
    assert!(!cell.missing.iter().any(|m| m.figure == "prompt_tokens"), "{:?}", cell.missing);
    // Two zeros and one count: the count.
    streams[1].record.prompt_tokens = Some(1324);
    assert_eq!(decode_cell(&observation(streams.clone(), 0.0, 200.0)).0.prompt_tokens, Some(1324));
    // No /tokenize either: null, and `missing` says the server reported 0, not that nothing did.
    streams[1].record.prompt_tokens = Some(0);
    let mut obs = observation(streams, 0.0, 200.0);
    obs.prompt_tokens = None;
    let (cell, _) = decode_cell(&obs);
    assert_eq!(cell.prompt_tokens, None);
    let why = cell.missing.iter().find(|m| m.figure == "prompt_tokens").map(|m| m.reason.as_str());
    assert_eq!(why, Some(ZERO_PROMPT));
    assert!(ZERO_PROMPT.contains("reported 0 prompt tokens") && ZERO_PROMPT.contains("/tokenize"));
    // A warm-stage count of 0 counts nothing either; nothing at all says so as before.
    let mut missing = vec![];
    assert_eq!(prompt_count([None, None], Some(0), &mut missing), None);
    assert_eq!(prompt_count([None, None], None, &mut missing), None);
    let reasons: Vec<&str> = missing.iter().map(|m| m.reason.as_str()).collect();
    assert_eq!(reasons, [ZERO_PROMPT, UNCOUNTED_PROMPT]);
}

#[test]
fn requests_that_stop_before_max_tokens_are_named() {
    let chunks: Vec<(f64, u32)> = (1..=4).map(|i| (10.0 * f64::from(i), 1)).collect();
    let mut stopped = stream(0, 0.0, &chunks, true, true);
    stopped.record.finish_reason = Some("stop".into());
    let full = stream(1, 0.0, &chunks, true, true);
    let records = [stopped.record.clone(), full.record.clone()];
    let note = early_stop_note(records.iter(), 32).expect("one stopped early");
    assert!(note.starts_with("1 of 2 finished requests stopped before max_tokens (32)"), "{note}");
    assert!(note.contains("after 4 tokens (median)"), "{note}");
    // Ending with "stop" at max_tokens, or with "length", is no early stop.
    assert_eq!(early_stop_note(records.iter(), 4), None);
    assert_eq!(early_stop_note([full.record].iter(), 32), None);
}

/// A stream as a server whose usage is stuck at 1 sends it (sglang#7084): usage on every
/// chunk, growing on the first only; the parser counts each later text chunk as one token, a
/// stall of the running total.
fn stuck_at_one(mut s: CellStream) -> CellStream {
    let n = s.record.chunks.len() as u64;
    for c in &mut s.record.chunks {
        c.tokens = 1;
    }
    s.record.text_chunks = n;
    s.record.usage_stalls = n.saturating_sub(1);
    s.record.completion_tokens = Some(1);
    s
}

#[test]
fn usage_stuck_at_one_gives_way_to_the_server_counter_else_the_cell_is_not_valid() {
    // Two streams, 1 token every 10 ms from 20 ms on, 80 chunks each; the counter saw them all.
    let chunks = |from: f64| -> Vec<(f64, u32)> { (0..80).map(|i| (from + 10.0 * f64::from(i), 1)).collect() };
    let s = vec![
        stuck_at_one(stream(0, 0.0, &chunks(20.0), true, true)),
        stuck_at_one(stream(1, 0.0, &chunks(25.0), false, true)),
    ];
    let mut obs = observation(s, 100.0, 600.0);
    obs.scrapes = vec![scrape(0.0, 0.0), scrape(100.0, 20.0), scrape(600.0, 120.0), scrape(900.0, 160.0)];
    obs.live_counter = true;
    let (cell, _) = decode_cell(&obs);
    assert!(cell.status.is_measured(), "{:?}", cell.reason);
    assert_eq!(cell.token_count_source, Some(TokenCountSource::ServerCounter));
    assert_eq!(cell.output_tokens, Some(100), "the counter's 100 tokens over the window's 100 chunks");
    let reason = cell.reason.unwrap();
    assert!(reason.contains("per-chunk usage did not grow on 158 of 160 text chunks (2 of 2 requests)"), "{reason}");
    assert!(
        reason.contains("final usage below the text chunks in 1 of 1 finished requests (e.g. 1 tokens for 80 chunks)")
    );
    assert!(reason.ends_with("counted from the server's token counter"), "{reason}");
    let check = cell.token_count_check.unwrap();
    assert_eq!(
        (check.text_chunks, check.chunk_usage, check.final_usage, check.server_counter),
        (160, Some(2), Some(1), Some(160))
    );
    // No chunk's own count: ITL keeps its mean only, and says why.
    let itl = cell.itl_ms.unwrap();
    assert_eq!((itl.p50, itl.min, itl.mean), (None, None, Some(10.0)));
    assert!(cell.missing.iter().any(|m| m.figure == "itl_ms" && m.reason.contains("chunk_gap_ms")));
    // The requests carry the counted tokens, not the usage of 1.
    assert_eq!(cell.requests[0].output_tokens, Some(80));
    // Without the counter nothing counts but the lower bound: an error that says so.
    obs.live_counter = false;
    let (cell, _) = decode_cell(&obs);
    assert_eq!(cell.status, CellStatus::Error);
    let reason = cell.reason.unwrap();
    assert!(
        reason.starts_with("no token count to trust: token counts disagree: per-chunk usage did not grow"),
        "{reason}"
    );
    assert!(reason.contains("at least 100 tokens arrived in the window (at least 200.0 tok/s)"), "{reason}");
    assert_eq!(cell.total_tps, None);
}

#[test]
fn final_usage_under_multi_token_chunks_keeps_only_the_itl_mean() {
    // 1- and 3-token chunks every 10 ms, final usage only: 64 tokens in 32 chunks each.
    let chunks: Vec<(f64, u32)> = (0..32).map(|i| (20.0 + 10.0 * f64::from(i), 1)).collect();
    let text = |mut s: CellStream| {
        s.record.text_chunks = s.record.chunks.len() as u64;
        s
    };
    let s = vec![
        text(without_chunk_usage(stream(0, 0.0, &chunks, true, true), Some(64))),
        text(without_chunk_usage(stream(1, 0.0, &chunks[..20], false, true), None)),
    ];
    let (cell, _) = decode_cell(&observation(s, 0.0, 400.0));
    assert_eq!(cell.token_count_source, Some(TokenCountSource::FinalUsage));
    assert_eq!(cell.output_tokens, Some(104), "32 + 20 chunks at 2 tokens each");
    assert!(!cell.reason.as_deref().unwrap_or_default().contains("token counts"), "{:?}", cell.reason);
    let itl = cell.itl_ms.unwrap();
    assert_eq!((itl.p50, itl.p90, itl.p99, itl.max), (None, None, None, None));
    assert_eq!(itl.mean, Some(5.0), "each 10-ms gap over 2 tokens, on average");
    assert_eq!(cell.chunk_gap_ms.unwrap().p50, Some(10.0));
    // With one token a chunk, reported by every request, each chunk's count is known.
    let one: Vec<(f64, u32)> = (0..32).map(|i| (20.0 + 10.0 * f64::from(i), 1)).collect();
    let s = vec![text(without_chunk_usage(stream(0, 0.0, &one, true, true), Some(32)))];
    let (cell, _) = decode_cell(&observation(s, 0.0, 400.0));
    assert_eq!(cell.itl_ms.unwrap().p50, Some(10.0));
    assert!(cell.missing.is_empty());
}

#[test]
fn the_rate_limit_note_gives_the_waits_in_all_and_the_longest_of_one_request() {
    let limited = |waits: &[u64]| StreamRecord { rate_limited: waits.to_vec(), ..StreamRecord::default() };
    let records = [limited(&[1]), limited(&[]), limited(&[1]), limited(&[2, 1])];
    let note = rate_limit_note(&records).unwrap();
    assert!(note.contains("HTTP 429 to 3 request(s)"), "{note}");
    assert!(note.contains("(5 s of waits in all, at most 3 s for one request)"), "{note}");
    assert_eq!(rate_limit_note(&[limited(&[])]), None);
}
