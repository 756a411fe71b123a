//! What server is this? `/v1/models`, `/version`, `/metrics` (DESIGN §3), turned into the
//! engine, model, `max_model_len` and KV budget the plan needs — and the Prometheus gauges and
//! counters sampled during decode windows.

use crate::client::{Client, HttpError};
use serde_json::Value;
use speedmatrix_schema::KvBudgetSource;

/// What discovery found.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// `vllm`, `sglang`, `llamacpp` or `openai`.
    pub engine: String,
    /// `GET /version` → `version`.
    pub version: Option<String>,
    /// The served model name requests use.
    pub model: String,
    /// `/v1/models` `root` (the model loaded), if given.
    pub root: Option<String>,
    /// Longest sequence the server accepts, tokens.
    pub max_model_len: Option<u64>,
    /// KV-cache budget, tokens, and where it came from.
    pub kv_budget: Option<(u64, KvBudgetSource)>,
    /// Why `/metrics` is not usable, when it is not.
    pub metrics_note: Option<String>,
}

/// Why discovery could not identify a usable server (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// Nothing answered at the URL.
    #[error("{0} — is the server running, and is --url right?")]
    Unreachable(String),
    /// The server wants a (different) API key.
    #[error(
        "{url} answered HTTP 401: the server needs an API key. Pass it with --api-key or set SPEEDMATRIX_API_KEY (or OPENAI_API_KEY)"
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
    /// `/v1/models` is missing or malformed.
    #[error("{0}; is this an OpenAI-compatible server (GET /v1/models)?")]
    NotOpenAi(String),
}

fn classify(e: HttpError) -> DiscoverError {
    match e {
        HttpError::Status { status: 401 | 403, url, .. } => DiscoverError::Unauthorized { url },
        HttpError::Unreachable { .. } => DiscoverError::Unreachable(e.to_string()),
        other => DiscoverError::NotOpenAi(other.to_string()),
    }
}

/// Discover the server at `client`'s URL; `model` picks a served model (default: the first).
///
/// # Errors
/// [`DiscoverError`] when the server is unreachable, refuses the key, lacks the model or is not
/// OpenAI-compatible. Missing `/version` or `/metrics` are not errors (recorded as notes).
pub async fn discover(
    client: &Client,
    model: Option<&str>,
    kv_budget_flag: Option<u64>,
) -> Result<(ServerInfo, Option<Metrics>), DiscoverError> {
    let models = client.get_json("/v1/models").await.map_err(classify)?;
    let data = models
        .get("data")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| DiscoverError::NotOpenAi(format!("{}/v1/models lists no models", client.base())))?;
    let ids: Vec<&str> = data.iter().filter_map(|m| m.get("id").and_then(Value::as_str)).collect();
    let entry = match model {
        Some(want) => data
            .iter()
            .find(|m| m.get("id").and_then(Value::as_str) == Some(want))
            .ok_or_else(|| DiscoverError::ModelNotFound { asked: want.to_string(), served: ids.join(", ") })?,
        None => &data[0],
    };
    let model = entry.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    let root = entry.get("root").and_then(Value::as_str).map(str::to_string);
    let max_model_len = entry
        .get("max_model_len")
        .and_then(Value::as_u64)
        .or_else(|| entry.get("meta").and_then(|m| m.get("n_ctx_train")).and_then(Value::as_u64));
    let version = match client.get_json("/version").await {
        Ok(v) => v.get("version").and_then(Value::as_str).map(str::to_string),
        Err(_) => None,
    };
    let (metrics, metrics_note) = match client.get_text("/metrics").await {
        Ok(text) => match Metrics::parse(&text) {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(format!("/metrics is not Prometheus text: {e}"))),
        },
        Err(e) => (None, Some(format!("/metrics unavailable: {e}"))),
    };
    let engine = metrics.as_ref().map(|m| m.engine.clone()).unwrap_or_else(|| "openai".into());
    let kv_budget = match kv_budget_flag {
        Some(v) => Some((v, KvBudgetSource::Flag)),
        None => metrics.as_ref().and_then(|m| m.kv_budget),
    };
    Ok((ServerInfo { engine, version, model, root, max_model_len, kv_budget, metrics_note }, metrics))
}

/// One scrape of the server's Prometheus metrics, summed over label sets (engines, models).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Engine inferred from metric prefixes (`vllm:` …), `openai` when none matches.
    pub engine: String,
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
    /// KV budget from `cache_config_info`, if present.
    pub kv_budget: Option<(u64, KvBudgetSource)>,
}

impl Metrics {
    /// Parse Prometheus text exposition (vLLM, SGLang and llama.cpp names).
    ///
    /// # Errors
    /// When the text is not Prometheus exposition format.
    pub fn parse(text: &str) -> Result<Metrics, String> {
        use openmetrics_parser::{prometheus::parse_prometheus, PrometheusValue};
        // The parser wants a final newline.
        let text = if text.ends_with('\n') { text.to_string() } else { format!("{text}\n") };
        let exposition = parse_prometheus(&text).map_err(|e| format!("{e:?}"))?;
        let mut m = Metrics { engine: "openai".into(), ..Metrics::default() };
        for family in exposition.families.values() {
            let name = family.family_name.trim_end_matches("_total");
            if let Some((prefix, _)) = name.split_once(':') {
                if ["vllm", "sglang", "llamacpp"].contains(&prefix) && m.engine == "openai" {
                    m.engine = prefix.to_string();
                }
            }
            for sample in family.iter_samples() {
                let v = match &sample.value {
                    PrometheusValue::Gauge(n) | PrometheusValue::Unknown(n) => n.as_f64(),
                    PrometheusValue::Counter(c) => c.value.as_f64(),
                    _ => continue,
                };
                let add = |slot: &mut Option<f64>| *slot = Some(slot.unwrap_or(0.0) + v);
                match name {
                    "vllm:num_requests_running" | "sglang:num_running_reqs" | "llamacpp:requests_processing" => {
                        add(&mut m.running)
                    }
                    "vllm:num_requests_waiting" | "sglang:num_queue_reqs" | "llamacpp:requests_deferred" => {
                        add(&mut m.waiting)
                    }
                    "vllm:kv_cache_usage_perc" | "vllm:gpu_cache_usage_perc" | "sglang:token_usage" => {
                        add(&mut m.kv_usage)
                    }
                    "vllm:generation_tokens" | "sglang:generation_tokens" | "llamacpp:tokens_predicted" => {
                        add(&mut m.generation_tokens)
                    }
                    "vllm:num_preemptions" => add(&mut m.preemptions),
                    "vllm:prefix_cache_hits" => add(&mut m.prefix_hits),
                    "vllm:prefix_cache_queries" => add(&mut m.prefix_queries),
                    "vllm:spec_decode_num_drafts" => add(&mut m.spec_drafts),
                    "vllm:spec_decode_num_draft_tokens" => add(&mut m.spec_draft_tokens),
                    "vllm:spec_decode_num_accepted_tokens" => add(&mut m.spec_accepted_tokens),
                    "vllm:cache_config_info" => {
                        let labels = sample.get_labelset().ok();
                        let num = |k: &str| {
                            labels
                                .as_ref()
                                .and_then(|l| l.get_label_value(k))
                                .and_then(|x| x.parse::<f64>().ok())
                                .map(|x| x as u64)
                        };
                        m.kv_budget = match (num("kv_cache_size_tokens"), num("num_gpu_blocks"), num("block_size")) {
                            (Some(t), _, _) if t > 0 => Some((t, KvBudgetSource::KvCacheSizeTokens)),
                            (_, Some(b), Some(bs)) if b > 0 => Some((b * bs, KvBudgetSource::NumGpuBlocks)),
                            _ => m.kv_budget,
                        };
                    }
                    _ => {}
                }
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(m.engine, "vllm");
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
    fn unknown_metrics_mean_plain_openai() {
        let m = Metrics::parse("# TYPE foo_total counter\nfoo_total 3\n").unwrap();
        assert_eq!(m.engine, "openai");
        assert_eq!(m.running, None);
    }
}
