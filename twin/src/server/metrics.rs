//! `/metrics` in Prometheus text: vLLM's dialect (`vllm:*` gauges, counters with `_total`,
//! `cache_config_info`, TTFT / ITL / E2E histograms) and SGLang's (`sglang:*` gauges and
//! counters, no histograms).
//!
//! This module owns the figures behind them ([`Metrics`], fed by the engine loop and by each
//! request's end) and the two text writers.

use super::{not_found, AppState};
use crate::engine::Counters;
use crate::faults::FaultKind;
use crate::profile::Profile;
use crate::Flavor;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// Prometheus histogram with fixed buckets (seconds).
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    /// Count one observation (seconds).
    pub(super) fn observe(&mut self, v: f64) {
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];

/// What `/metrics` reports.
#[derive(Debug, Clone)]
pub(super) struct Metrics {
    pub(super) counters: Counters,
    pub(super) running: usize,
    pub(super) waiting: usize,
    pub(super) kv_usage: f64,
    pub(super) ttft: Histogram,
    pub(super) itl: Histogram,
    pub(super) e2e: Histogram,
    /// Requests ended, by finish reason (`stop`, `length`, `abort`).
    pub(super) success: HashMap<&'static str, u64>,
}

impl Metrics {
    pub(super) fn new() -> Metrics {
        Metrics {
            counters: Counters::default(),
            running: 0,
            waiting: 0,
            kv_usage: 0.0,
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            success: HashMap::new(),
        }
    }
}

/// `GET /metrics`.
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if state.endpoint_fault(FaultKind::Metrics404) {
        return not_found().await;
    }
    let m = state.metrics.lock().expect("metrics lock").clone();
    let p = &state.cfg.profile;
    let text = match state.cfg.flavor {
        Flavor::Vllm => vllm_text(&m, p),
        Flavor::Sglang => sglang_text(&m, &p.served_name),
    };
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

/// vLLM's dialect: gauges, `cache_config_info`, counters, request successes by finish reason,
/// histograms.
fn vllm_text(m: &Metrics, p: &Profile) -> String {
    let labels = format!("engine=\"0\",model_name=\"{}\"", p.served_name);
    let mut s = String::with_capacity(8192);
    let gauge = |s: &mut String, name: &str, help: &str, v: f64| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}");
    };
    gauge(&mut s, "vllm:num_requests_running", "Number of requests in model execution batches.", m.running as f64);
    gauge(&mut s, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.waiting as f64);
    gauge(&mut s, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kv_usage);
    let _ = writeln!(
        s,
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"{}\",engine=\"0\",gpu_memory_utilization=\"0.86269\",kv_cache_size_tokens=\"{}\",num_gpu_blocks=\"{}\",num_cpu_blocks=\"None\"}} 1.0",
        p.block_size,
        if p.prefix_cache { "True" } else { "False" },
        p.kv_tokens,
        p.kv_blocks()
    );
    vllm_counters(&mut s, &labels, &m.counters);
    let _ = writeln!(s, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter");
    for reason in ["stop", "length", "abort"] {
        let _ = writeln!(
            s,
            "vllm:request_success_total{{{labels},finished_reason=\"{reason}\"}} {:?}",
            *m.success.get(reason).unwrap_or(&0) as f64
        );
    }
    for (name, help, h) in [
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m.ttft),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &m.itl),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &m.e2e),
    ] {
        vllm_histogram(&mut s, &labels, name, help, h);
    }
    s
}

/// vLLM's token, prefix-cache, preemption and speculative-decoding counters.
fn vllm_counters(s: &mut String, labels: &str, c: &Counters) {
    for (name, help, v) in [
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens),
        ("vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens),
        (
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            c.prefix_cache_queries,
        ),
        ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", c.prefix_cache_hits),
        ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions),
    ] {
        counter(s, labels, name, help, v);
    }
    // As vLLM: the speculative-decoding counters exist only while it speculates.
    if c.spec_accepted_per_pos.is_empty() {
        return;
    }
    for (name, help, v) in [
        ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c.spec_drafts),
        ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c.spec_draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", c.spec_accepted_tokens),
    ] {
        counter(s, labels, name, help, v);
    }
    let name = "vllm:spec_decode_num_accepted_tokens_per_pos";
    let _ = writeln!(s, "# HELP {name}_total Accepted tokens per draft position.\n# TYPE {name}_total counter");
    for (k, v) in c.spec_accepted_per_pos.iter().enumerate() {
        let _ = writeln!(s, "{name}_total{{{labels},position=\"{k}\"}} {:?}", *v as f64);
    }
}

/// One counter, `_total` added.
fn counter(s: &mut String, labels: &str, name: &str, help: &str, v: u64) {
    let _ =
        writeln!(s, "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{labels}}} {:?}", v as f64);
}

/// One histogram: cumulative buckets, `+Inf`, count and sum.
fn vllm_histogram(s: &mut String, labels: &str, name: &str, help: &str, h: &Histogram) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (b, n) in h.bounds.iter().zip(&h.counts) {
        let _ = writeln!(s, "{name}_bucket{{{labels},le=\"{b:?}\"}} {:?}", *n as f64);
    }
    let _ = writeln!(s, "{name}_bucket{{{labels},le=\"+Inf\"}} {:?}", h.count as f64);
    let _ = writeln!(s, "{name}_count{{{labels}}} {:?}", h.count as f64);
    let _ = writeln!(s, "{name}_sum{{{labels}}} {:?}", h.sum);
}

/// SGLang's dialect: `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`,
/// and counters of prompt, generation and cached tokens.
fn sglang_text(m: &Metrics, model: &str) -> String {
    let labels = format!("model_name=\"{model}\"");
    let mut s = String::with_capacity(2048);
    for (name, help, v) in [
        ("sglang:num_running_reqs", "The number of running requests.", m.running as f64),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", m.waiting as f64),
        ("sglang:token_usage", "The token usage.", m.kv_usage),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}");
    }
    let c = &m.counters;
    for (name, help, v) in [
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", c.prompt_tokens),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", c.generation_tokens),
        ("sglang:cached_tokens_total", "Number of cached prompt tokens.", c.prefix_cache_hits),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{labels}}} {:?}", v as f64);
    }
    s
}
