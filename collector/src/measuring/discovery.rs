//! What server is this? `/v1/models`, `/version`, `/metrics`, `/props`, `/slots`,
//! `/get_server_info`, turned by the engine's adapter ([`crate::measuring::engine`]) into the
//! engine, model, `max_model_len`, KV budget and slots the plan needs — and the Prometheus gauges
//! and counters sampled during decode windows ([`Metrics`]).

use crate::measuring::client::{Client, HttpError};
use crate::measuring::engine::{EngineKind, Facts, MetricSlot, Probe, Probes};
use serde_json::Value;
use speedmatrix_schema::simulation::{untag_version, TWIN_HEADER, TWIN_NAME};
use speedmatrix_schema::{KvBudgetSource, Simulated};

/// What discovery found.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The engine, as detected from the server's answers or set with `--engine`.
    pub kind: EngineKind,
    /// The served model name requests use.
    pub model: String,
    /// `/v1/models` `root` (the model loaded), or the model path the engine reports.
    pub root: Option<String>,
    /// What the engine's adapter made of the probes (version, max_model_len, KV budget, slots,
    /// figures it cannot give); `--kv-budget` already applied to `kv_budget` and `missing`.
    pub facts: Facts,
    /// Why `/metrics` is not usable, when it is not.
    pub metrics_note: Option<String>,
    /// Which model was chosen and why, when `/v1/models` lists several and `--model` chose none.
    pub model_note: Option<String>,
    /// Set when the server says it is the speedmatrix twin (a simulation, not a real engine).
    pub simulated: Option<Simulated>,
}

impl ServerInfo {
    /// The KV budget the plan's N × (C + max_tokens) rule uses: `None` where the rule does not
    /// apply (llama.cpp slots; see [`ServerInfo::slot_context`]).
    pub fn plan_kv_budget(&self) -> Option<u64> {
        let f = &self.facts;
        f.kv_budget.filter(|(_, src)| f.kv_rule || *src == KvBudgetSource::Flag).map(|(b, _)| b)
    }

    /// Streams a cell can expect to decode at once: N, or fewer when the server runs at most
    /// [`ServerInfo::max_running`] requests (the rest wait in its queue).
    pub fn decoding_at_once(&self, n: u32) -> u32 {
        self.facts.max_running.map_or(n, |m| n.min(m.max(1)))
    }

    /// Why a cell of `n` streams must queue on this server by construction, if it must.
    pub fn queued_by_construction(&self, n: u32) -> Option<String> {
        let m = self.facts.max_running?;
        (n > m).then(|| match self.facts.slots {
            Some(s) => format!("{n} streams on {s} slots: {} waited for a free slot", n - s),
            None => format!("{n} streams, the server runs at most {m} requests at once"),
        })
    }
}

/// Why discovery could not identify a usable server (exit code 2). Each names the URL asked.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// Nothing answered at the URL.
    #[error("{0} — {hint}", hint = unreachable_hint(.0))]
    Unreachable(HttpError),
    /// The server wants a (different) API key.
    #[error(
        "{url} answered HTTP 401: the server wants an API key and got none or a wrong one. Pass the right one with --api-key or set SPEEDMATRIX_API_KEY (or OPENAI_API_KEY)"
    )]
    Unauthorized {
        /// The URL that refused.
        url: String,
    },
    /// `--model` names a model the server does not serve.
    #[error("the server does not serve model '{asked}'; it serves: {served}. Pick one with --model")]
    ModelNotFound {
        /// What was asked for.
        asked: String,
        /// What is served, comma-separated.
        served: String,
    },
    /// `/v1/models` answered an error or something that is not a model list.
    #[error("{0}; is this an OpenAI-compatible server (GET /v1/models)?")]
    NotOpenAi(HttpError),
    /// `/v1/models` lists no model.
    #[error("{url} lists no models; is this an OpenAI-compatible server (GET /v1/models)?")]
    NoModels {
        /// The URL asked.
        url: String,
    },
}

/// What to try when nothing answered: an `https://` URL whose server answered in plain HTTP (the
/// TLS handshake read an HTTP response: rustls' "InvalidContentType") gets the `http://` URL;
/// anything else, the usual question.
fn unreachable_hint(e: &HttpError) -> String {
    let HttpError::Unreachable { url, message } = e else { return String::new() };
    let plain = message.contains("InvalidContentType") || message.contains("wrong version number");
    match reqwest::Url::parse(url).ok().filter(|u| plain && u.scheme() == "https") {
        Some(u) => format!(
            "the server answers plain HTTP, not TLS: use --url http://{}{}",
            u.host().map(|h| h.to_string()).unwrap_or_default(),
            u.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        None => "is the server running, and is --url right?".into(),
    }
}

fn classify(e: HttpError) -> DiscoverError {
    match e {
        HttpError::Status { status: 401 | 403, url, .. } => DiscoverError::Unauthorized { url },
        HttpError::Unreachable { .. } | HttpError::Unanswered { .. } => DiscoverError::Unreachable(e),
        other => DiscoverError::NotOpenAi(other),
    }
}

async fn probe_json(client: &Client, path: &str) -> Probe<Value> {
    match client.get_json(path).await {
        Ok(v) => Probe::Got(v),
        Err(e) => Probe::Failed(probe_failure(&e)),
    }
}

/// The longest discovery waits for `/metrics` (the server is idle then; one that accepts the
/// connection and never answers must not hold the run's start for long).
pub const METRICS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn probe_failure(e: &HttpError) -> String {
    match e {
        HttpError::Status { status, .. } => format!("answered HTTP {status}"),
        HttpError::Body { .. } => "answered something that is not JSON".into(),
        other => format!("failed: {other}"),
    }
}

/// Discover the server at `client`'s URL; `model` picks a served model (default: the first);
/// `engine` overrides detection ([`crate::measuring::engine::detect`]).
///
/// # Errors
/// [`DiscoverError`] when the server is unreachable, refuses the key, lacks the model or is not
/// OpenAI-compatible. Missing `/version`, `/metrics`, `/props` … are not errors: they become
/// entries of [`ServerInfo::missing`].
pub async fn discover(
    client: &Client,
    model: Option<&str>,
    kv_budget_flag: Option<u64>,
    engine: Option<EngineKind>,
) -> Result<(ServerInfo, Option<Metrics>), DiscoverError> {
    let (models, twin_header) = client.get_json_and_header("/v1/models", TWIN_HEADER).await.map_err(classify)?;
    let data = models
        .get("data")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| DiscoverError::NoModels { url: format!("{}/v1/models", client.base()) })?;
    let ids: Vec<&str> = data.iter().filter_map(|m| m.get("id").and_then(Value::as_str)).collect();
    let model_given = model;
    let entry = match model {
        Some(want) => data
            .iter()
            .find(|m| m.get("id").and_then(Value::as_str) == Some(want))
            .ok_or_else(|| DiscoverError::ModelNotFound { asked: want.to_string(), served: ids.join(", ") })?,
        None => &data[0],
    };
    let model = entry.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    let model_note = (model_given.is_none() && ids.len() > 1).then(|| {
        format!(
            "/v1/models lists {} models ({}); measured {model}, the first listed (--model picks another)",
            ids.len(),
            ids.join(", ")
        )
    });
    let root = entry.get("root").and_then(Value::as_str).map(str::to_string);
    let metrics_text = match engine {
        // "From the stream alone" (`--engine openai`): its /metrics is not read at all.
        Some(EngineKind::OpenAi) => Probe::Failed("not read: --engine openai measures from the stream alone".into()),
        _ => match client.get_text_within("/metrics", METRICS_TIMEOUT).await {
            Ok(t) => Probe::Got(t),
            Err(e) => Probe::Failed(probe_failure(&e)),
        },
    };
    let props = probe_json(client, "/props").await;
    let mut probes = Probes {
        model_entry: entry.clone(),
        version: probe_json(client, "/version").await,
        metrics: metrics_text,
        slots: Probe::Failed("not asked".into()),
        server_info: if props.ok().is_some() {
            Probe::Failed("not asked".into())
        } else {
            probe_json(client, "/get_server_info").await
        },
        props,
    };
    let kind = engine.unwrap_or_else(|| crate::measuring::engine::detect(&probes));
    if kind == EngineKind::LlamaCpp {
        probes.slots = probe_json(client, "/slots").await;
    }
    let mut facts = kind.adapter().facts(&probes);
    facts.counts_speculation = counts_speculation(&probes);
    let (metrics, metrics_note) = match &probes.metrics {
        Probe::Got(text) => match Metrics::parse(text) {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(format!("/metrics could not be parsed as Prometheus text ({e})"))),
        },
        Probe::Failed(why) => (None, Some(format!("/metrics {why}"))),
    };
    if let Some(v) = kv_budget_flag {
        facts.kv_budget = Some((v, KvBudgetSource::Flag));
        facts.missing.retain(|m| m.figure != "kv_budget");
    }
    let simulated = simulation(twin_header, &mut facts.version);
    let root = root.or_else(|| facts.model_path.clone());
    let info = ServerInfo { kind, model, root, facts, metrics_note, model_note, simulated };
    Ok((info, metrics))
}

/// Whether the server is the twin: its header (with the profile), else the label on its
/// version. The version is kept as the one it imitates.
fn simulation(header: Option<String>, version: &mut Option<String>) -> Option<Simulated> {
    let untagged = version.as_deref().and_then(untag_version).map(str::to_string);
    let tagged = untagged.is_some();
    if let Some(v) = untagged {
        *version = Some(v);
    }
    let evidence = match (&header, tagged) {
        (Some(_), true) => "x-speedmatrix-twin header and /version label",
        (Some(_), false) => "x-speedmatrix-twin header",
        (None, true) => "/version label",
        (None, false) => return None,
    };
    Some(Simulated { by: TWIN_NAME.into(), profile: header.filter(|h| !h.is_empty()), evidence: Some(evidence.into()) })
}

/// Whether `/metrics` counts speculative decoding (vLLM's and llama.cpp's
/// `spec_decode_num_drafts`, SGLang's `spec_accept_length`); `None` without a readable
/// `/metrics`. A server that does not speculate has none of them (vLLM creates them only with a
/// speculative config).
pub fn counts_speculation(p: &Probes) -> Option<bool> {
    let m = Metrics::parse(p.metrics.ok()?).ok()?;
    Some(m.spec_drafts.is_some() || m.spec_accept_length.is_some())
}

/// One scrape of the server's Prometheus metrics, summed over label sets (engines, models).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Requests running (gauge).
    pub running: Option<f64>,
    /// Requests waiting in the queue (gauge).
    pub waiting: Option<f64>,
    /// KV-cache usage, fraction 0–1 (gauge).
    pub kv_usage: Option<f64>,
    /// Output tokens generated so far (counter).
    pub generation_tokens: Option<f64>,
    /// Preemptions so far (counter).
    pub preemptions: Option<f64>,
    /// Prefix-cache hit tokens so far (counter).
    pub prefix_hits: Option<f64>,
    /// Prefix-cache query tokens so far (counter).
    pub prefix_queries: Option<f64>,
    /// Speculative-decoding drafts so far (counter).
    pub spec_drafts: Option<f64>,
    /// Draft tokens proposed so far (counter).
    pub spec_draft_tokens: Option<f64>,
    /// Draft tokens accepted so far (counter).
    pub spec_accepted_tokens: Option<f64>,
    /// Draft tokens accepted so far at each draft position from 0 (counter; vLLM's
    /// `spec_decode_num_accepted_tokens_per_pos` by its `position` label); empty without it.
    pub spec_accepted_per_pos: Vec<f64>,
    /// Mean accepted length (gauge; SGLang's `spec_accept_length`), the mean over its label
    /// sets.
    pub spec_accept_length: Option<f64>,
    /// KV budget from `cache_config_info`, if present.
    pub kv_budget: Option<(u64, KvBudgetSource)>,
    /// `cache_config_info`'s `enable_prefix_caching`, if present.
    pub prefix_caching: Option<bool>,
    /// `cache_config_info`'s `block_size`, tokens, if present.
    pub block_size: Option<u64>,
}

impl Metrics {
    /// Read a `/metrics` exposition (Prometheus text 0.0.4 or OpenMetrics, typed or not; see
    /// [`crate::measuring::prometheus`]) for the figures of vLLM, SGLang and llama.cpp, old and
    /// new names alike; samples of one figure are summed over their label sets.
    ///
    /// # Errors
    /// The first line that is not Prometheus text, with its number.
    pub fn parse(text: &str) -> Result<Metrics, crate::measuring::prometheus::ParseError> {
        let mut m = Metrics::default();
        let mut accept_length: Vec<f64> = Vec::new();
        for sample in crate::measuring::prometheus::parse(text)? {
            // An OpenMetrics counter family `x` has the sample `x_total`; 0.0.4 names it so.
            let name = sample.name.strip_suffix("_total").unwrap_or(sample.name);
            let Some((_, slot)) = crate::measuring::engine::metric_slot(name) else { continue };
            let v = sample.value;
            if !v.is_finite() {
                continue;
            }
            let add = |slot: &mut Option<f64>| *slot = Some(slot.unwrap_or(0.0) + v);
            match slot {
                MetricSlot::Running => add(&mut m.running),
                MetricSlot::Waiting => add(&mut m.waiting),
                MetricSlot::KvUsage => add(&mut m.kv_usage),
                MetricSlot::GenerationTokens => add(&mut m.generation_tokens),
                MetricSlot::Preemptions => add(&mut m.preemptions),
                MetricSlot::PrefixHits => add(&mut m.prefix_hits),
                MetricSlot::PrefixQueries => add(&mut m.prefix_queries),
                MetricSlot::SpecDrafts => add(&mut m.spec_drafts),
                MetricSlot::SpecDraftTokens => add(&mut m.spec_draft_tokens),
                MetricSlot::SpecAcceptedTokens => add(&mut m.spec_accepted_tokens),
                MetricSlot::SpecAcceptedPerPos => {
                    // A position beyond any draft a server makes (vLLM: num_speculative_tokens
                    // ≤ a few dozen) is not a position: the sample is skipped.
                    let Some(k) = sample.label("position").and_then(|x| x.parse::<usize>().ok()).filter(|k| *k < 1024)
                    else {
                        continue;
                    };
                    if m.spec_accepted_per_pos.len() <= k {
                        m.spec_accepted_per_pos.resize(k + 1, 0.0);
                    }
                    m.spec_accepted_per_pos[k] += v;
                }
                MetricSlot::SpecAcceptLength => accept_length.push(v),
                MetricSlot::CacheConfig => {
                    let num = |k: &str| sample.label(k).and_then(|x| x.parse::<f64>().ok()).map(|x| x as u64);
                    m.kv_budget = match (num("kv_cache_size_tokens"), num("num_gpu_blocks"), num("block_size")) {
                        (Some(t), _, _) if t > 0 => Some((t, KvBudgetSource::KvCacheSizeTokens)),
                        (_, Some(b), Some(bs)) if b > 0 => Some((b * bs, KvBudgetSource::NumGpuBlocks)),
                        _ => m.kv_budget,
                    };
                    m.prefix_caching = match sample.label("enable_prefix_caching") {
                        Some("True" | "true" | "1") => Some(true),
                        Some("False" | "false" | "0") => Some(false),
                        _ => m.prefix_caching,
                    };
                    m.block_size = num("block_size").filter(|b| *b > 0).or(m.block_size);
                }
            }
        }
        if !accept_length.is_empty() {
            m.spec_accept_length = Some(accept_length.iter().sum::<f64>() / accept_length.len() as f64);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speculation_is_counted_where_the_spec_decode_counters_are() {
        let failed = || Probe::Failed("answered HTTP 404".into());
        let mut p = Probes {
            model_entry: serde_json::json!({"id": "m"}),
            version: failed(),
            metrics: Probe::Failed("answered HTTP 404".into()),
            props: failed(),
            slots: failed(),
            server_info: failed(),
        };
        assert_eq!(counts_speculation(&p), None);
        p.metrics = Probe::Got("vllm:num_requests_running 0\n".into());
        assert_eq!(counts_speculation(&p), Some(false));
        p.metrics = Probe::Got(
            "vllm:spec_decode_num_drafts_total 4\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 2\n"
                .into(),
        );
        assert_eq!(counts_speculation(&p), Some(true));
        let m = Metrics::parse(p.metrics.ok().unwrap()).unwrap();
        assert_eq!(m.spec_accepted_per_pos, [0.0, 2.0], "by the position label");
        let g = Metrics::parse(
            "sglang:spec_accept_length{dp_rank=\"0\"} 2.0\nsglang:spec_accept_length{dp_rank=\"1\"} 3.0\n",
        )
        .unwrap();
        assert_eq!(g.spec_accept_length, Some(2.5), "a gauge's mean over its label sets");
    }

    #[test]
    fn parses_vllm_metrics() {
        let text = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} 1234.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",enable_prefix_caching="True",num_gpu_blocks="1000",engine="0"} 1.0
"#;
        let m = Metrics::parse(text).unwrap();
        assert_eq!((m.running, m.waiting, m.kv_usage), (Some(3.0), Some(1.0), Some(0.25)));
        assert_eq!(m.generation_tokens, Some(1234.0));
        assert_eq!(m.kv_budget, Some((16_000, KvBudgetSource::NumGpuBlocks)));
        let with_tokens =
            text.replace("num_gpu_blocks=\"1000\"", "num_gpu_blocks=\"1000\",kv_cache_size_tokens=\"6291456\"");
        assert_eq!(
            Metrics::parse(&with_tokens).unwrap().kv_budget,
            Some((6_291_456, KvBudgetSource::KvCacheSizeTokens))
        );
    }

    #[test]
    fn the_twin_is_told_by_its_header_or_its_version_label() {
        let mut v = Some("0.26.1rc1.dev638+g52be12cfa.speedmatrix.twin".to_string());
        let s = simulation(Some("h200-qwen3.5-122b".into()), &mut v).unwrap();
        assert_eq!(v.as_deref(), Some("0.26.1rc1.dev638+g52be12cfa"), "the imitated version is kept");
        assert_eq!((s.by.as_str(), s.profile.as_deref()), ("speedmatrix twin", Some("h200-qwen3.5-122b")));
        // A proxy that drops headers still passes the version through.
        let mut v = Some("0.11.0+speedmatrix.twin".to_string());
        assert_eq!(simulation(None, &mut v).unwrap().evidence.as_deref(), Some("/version label"));
        // /version missing (version-404): the header alone.
        let mut v = None;
        assert!(simulation(Some("tiny".into()), &mut v).is_some());
        // A real server.
        let mut v = Some("0.26.1".to_string());
        assert_eq!(simulation(None, &mut v), None);
        assert_eq!(v.as_deref(), Some("0.26.1"));
    }

    #[test]
    fn reads_untyped_openmetrics_and_old_vllm_names() {
        let untyped = "vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_running{engine=\"1\"} 1\n\
                       vllm:gpu_cache_usage_perc 0.5 1700000000000\nvllm:gpu_prefix_cache_hits_total 40\n\
                       vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"10\"} 1\n";
        let m = Metrics::parse(untyped).unwrap();
        assert_eq!((m.running, m.kv_usage), (Some(3.0), Some(0.5)));
        assert_eq!((m.prefix_hits, m.kv_budget), (Some(40.0), Some((160, KvBudgetSource::NumGpuBlocks))));
        let om = "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total 7.0\n\
                  vllm:generation_tokens_created 1.7e9\n# EOF\n";
        assert_eq!(Metrics::parse(om).unwrap().generation_tokens, Some(7.0), "_created is not the count");
    }

    #[test]
    fn unknown_metrics_fill_nothing() {
        let m = Metrics::parse("# TYPE foo_total counter\nfoo_total 3\n").unwrap();
        assert_eq!(m, Metrics::default());
    }

    #[test]
    fn text_that_is_not_prometheus_is_one_line_error() {
        let e = Metrics::parse("<html>\n<body>Bad gateway</body>\n</html>").unwrap_err();
        assert!(!e.to_string().is_empty() && !e.to_string().contains('\n'), "{e:?}");
    }
}
