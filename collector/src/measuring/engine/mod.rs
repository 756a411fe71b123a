//! Engine adapters: what differs between vLLM, SGLang, llama.cpp `llama-server` and a plain
//! OpenAI-compatible endpoint (a hosted API, a proxy), behind one trait, [`EngineAdapter`].
//!
//! Discovery ([`crate::measuring::discovery`]) fetches the same few documents from every server
//! ([`Probes`]: `/v1/models`, `/version`, `/metrics`, `/props`, `/slots`, `/get_server_info`),
//! [`detect`] picks the engine from them (or `--engine` does), and the adapter turns them into
//! [`Facts`]: version, context limits, KV budget, slots, the figures the run will lack and why,
//! and the stream options to send. Everything here is pure (no I/O), so each adapter is tested
//! on captured documents.
//!
//! | engine | identified by | KV budget | queue evidence | token counter |
//! |---|---|---|---|---|
//! | `vllm` | `vllm:` metrics | `vllm:cache_config_info` | `num_requests_waiting` | live |
//! | `sglang` | `/get_server_info` | `max_total_num_tokens` | `sglang:num_queue_reqs`, `max_running_requests` | live |
//! | `llamacpp` | `/props` `total_slots` | slots × context per slot | `requests_deferred`, streams > slots | at request end |
//! | `openai` | none of the above | unknown (`--kv-budget`) | client only | none |

mod llamacpp;
mod openai;
mod sglang;
mod vllm;

pub use llamacpp::LlamaCpp;
pub use openai::OpenAi;
pub use sglang::Sglang;
pub use vllm::Vllm;

use serde_json::Value;
use speedmatrix_schema::{KvBudgetSource, MissingFigure};

/// The engines speedmatrix knows (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// SGLang's server.
    Sglang,
    /// llama.cpp `llama-server`.
    LlamaCpp,
    /// Any other OpenAI-compatible endpoint: figures from the stream alone.
    OpenAi,
}

impl EngineKind {
    /// The name written to the results file (`engine.name`).
    pub fn id(self) -> &'static str {
        self.adapter().name()
    }

    /// The adapter of this engine.
    pub fn adapter(self) -> &'static dyn EngineAdapter {
        match self {
            EngineKind::Vllm => &Vllm,
            EngineKind::Sglang => &Sglang,
            EngineKind::LlamaCpp => &LlamaCpp,
            EngineKind::OpenAi => &OpenAi,
        }
    }
}

/// One optional GET that discovery made: its JSON/text, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe<T> {
    /// The server answered 2xx with this.
    Got(T),
    /// It did not: HTTP status (404, 502 …) or transport error, as a short phrase.
    Failed(String),
}

impl<T> Probe<T> {
    /// The value, if the probe succeeded.
    pub fn ok(&self) -> Option<&T> {
        match self {
            Probe::Got(v) => Some(v),
            Probe::Failed(_) => None,
        }
    }

    /// Why it failed, if it did.
    pub fn why(&self) -> Option<&str> {
        match self {
            Probe::Got(_) => None,
            Probe::Failed(w) => Some(w),
        }
    }
}

/// What discovery fetched from the server, before any interpretation.
#[derive(Debug, Clone, PartialEq)]
pub struct Probes {
    /// The `/v1/models` entry of the chosen model.
    pub model_entry: Value,
    /// `GET /version`.
    pub version: Probe<Value>,
    /// `GET /metrics` (Prometheus text).
    pub metrics: Probe<String>,
    /// `GET /props` (llama.cpp).
    pub props: Probe<Value>,
    /// `GET /slots` (llama.cpp; only fetched when `/props` answered).
    pub slots: Probe<Value>,
    /// `GET /get_server_info` (SGLang).
    pub server_info: Probe<Value>,
}

/// What an adapter makes of the probes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Engine version.
    pub version: Option<String>,
    /// Longest sequence the server accepts, tokens.
    pub max_model_len: Option<u64>,
    /// KV budget and where it came from (`--kv-budget` replaces it in `ServerInfo::facts`).
    pub kv_budget: Option<(u64, KvBudgetSource)>,
    /// The N × (C + max_tokens) rule applies to this budget (false for llama.cpp, whose slots
    /// each hold their own context: see `slot_context`).
    pub kv_rule: bool,
    /// Parallel slots (llama.cpp).
    pub slots: Option<u32>,
    /// Context per slot, tokens (llama.cpp): a stream's C + max_tokens above it is over capacity.
    pub slot_context: Option<u64>,
    /// Most requests the server runs at once (SGLang `max_running_requests`, llama.cpp slots).
    pub max_running: Option<u32>,
    /// The model path the server loaded, when `/v1/models` has no `root`.
    pub model_path: Option<String>,
    /// Whether the server says its prefix cache is on (vLLM `cache_config_info`
    /// `enable_prefix_caching`, SGLang `disable_radix_cache`); `None` when it does not say.
    pub prefix_caching: Option<bool>,
    /// The server's KV-cache block, tokens (vLLM `cache_config_info` `block_size`, SGLang
    /// `page_size`): the prefix cache reuses whole blocks.
    pub cache_block_tokens: Option<u64>,
    /// Figures the run will not have, and why.
    pub missing: Vec<MissingFigure>,
    /// Whether `/metrics` counts speculative decoding
    /// ([`crate::measuring::discovery::counts_speculation`]); `None` without a readable
    /// `/metrics`.
    pub counts_speculation: Option<bool>,
}

/// The file's `missing` entry for speculative decoding the launch command sets (`speculating`:
/// its words) on a server whose `/metrics` counts none: every cell's `spec_decode` is absent,
/// and why. `None` otherwise (a server that does not speculate lacks nothing).
pub fn speculation_uncounted(speculating: Option<&str>, counted: Option<bool>) -> Option<MissingFigure> {
    let what = speculating?;
    let why = match counted? {
        true => return None,
        false => "its /metrics has no speculative-decoding counters (vLLM and llama.cpp spec_decode_num_drafts and the rest, SGLang spec_accept_length)",
    };
    Some(MissingFigure {
        figure: crate::measuring::spec_decode::FIGURE.into(),
        reason: format!(
            "the launch command sets speculative decoding ({what}), but {why}: no cell has its drafts or acceptance"
        ),
    })
}

/// The Prometheus figure a metric family feeds (names differ per engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricSlot {
    /// Requests running (gauge).
    Running,
    /// Requests waiting (gauge).
    Waiting,
    /// KV-cache usage, fraction 0–1 (gauge).
    KvUsage,
    /// Output tokens so far (counter).
    GenerationTokens,
    /// Preemptions so far (counter).
    Preemptions,
    /// Prefix-cache hit tokens (counter).
    PrefixHits,
    /// Prefix-cache query tokens (counter).
    PrefixQueries,
    /// Speculative drafts (counter).
    SpecDrafts,
    /// Draft tokens proposed (counter).
    SpecDraftTokens,
    /// Draft tokens accepted (counter).
    SpecAcceptedTokens,
    /// Draft tokens accepted at one draft position, its `position` label from 0 (counter).
    SpecAcceptedPerPos,
    /// Mean accepted length (SGLang's gauge).
    SpecAcceptLength,
    /// vLLM `cache_config_info` (labels carry the KV budget).
    CacheConfig,
}

/// What differs between engines. Implementations are unit structs; all methods are pure.
pub trait EngineAdapter: Sync {
    /// `engine.name` in the results file: `vllm`, `sglang`, `llamacpp`, `openai`.
    fn name(&self) -> &'static str;

    /// The metric family (name without `_total`) → the figure it feeds, for this engine's
    /// prefix (`vllm:`, `sglang:`, `llamacpp:`); `None` for families it does not use.
    fn metric(&self, family: &str) -> Option<MetricSlot>;

    /// Version, limits, KV budget, slots and missing figures from the probes.
    fn facts(&self, p: &Probes) -> Facts;

    /// Whether the server's output-token counter grows while requests stream. llama.cpp adds
    /// a request's tokens only when it ends, so its counter is no per-window figure.
    fn live_token_counter(&self) -> bool {
        true
    }

    /// How this engine empties its prefix cache on request (`docs/METHODOLOGY.md`, "Prefix
    /// caching"); `None` where it has no way (a plain OpenAI-compatible endpoint).
    fn cache_reset(&self, _facts: &Facts) -> Option<CacheReset> {
        None
    }
}

/// The requests that empty a server's prefix cache: each `POST` path in turn, all answering
/// 2xx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheReset {
    /// The paths to `POST` (llama.cpp: one per slot).
    pub paths: Vec<String>,
    /// The reset in words, for the results file (`POST /reset_prefix_cache`).
    pub label: String,
}

impl CacheReset {
    /// One `POST path`.
    pub fn post(path: &str) -> CacheReset {
        CacheReset { paths: vec![path.to_string()], label: format!("POST {path}") }
    }
}

/// The adapter whose metric names match `family` (any engine): lets one parser read any
/// server's `/metrics`.
pub fn metric_slot(family: &str) -> Option<(EngineKind, MetricSlot)> {
    [EngineKind::Vllm, EngineKind::Sglang, EngineKind::LlamaCpp]
        .into_iter()
        .find_map(|k| k.adapter().metric(family).map(|s| (k, s)))
}

/// Pick the engine from what the server answered: llama.cpp's `/props` (with `total_slots`),
/// SGLang's `/get_server_info` (with `max_total_num_tokens`), then the prefix of the metric
/// names (`vllm:`, `sglang:`, `llamacpp:`); otherwise a plain OpenAI-compatible endpoint.
pub fn detect(p: &Probes) -> EngineKind {
    if p.props.ok().is_some_and(|v| v.get("total_slots").is_some() || v.get("default_generation_settings").is_some()) {
        return EngineKind::LlamaCpp;
    }
    if p.server_info.ok().is_some_and(|v| v.get("max_total_num_tokens").is_some()) {
        return EngineKind::Sglang;
    }
    if let Some(text) = p.metrics.ok() {
        for (prefix, kind) in
            [("vllm:", EngineKind::Vllm), ("sglang:", EngineKind::Sglang), ("llamacpp:", EngineKind::LlamaCpp)]
        {
            if text.lines().any(|l| !l.starts_with('#') && l.starts_with(prefix)) {
                return kind;
            }
        }
    }
    // `owned_by` is not evidence: a proxy in front of vLLM says "vllm" and still has no /metrics.
    EngineKind::OpenAi
}

/// `/version` → `version` (vLLM, SGLang).
pub(crate) fn version_field(p: &Probes) -> Option<String> {
    p.version.ok().and_then(|v| v.get("version")).and_then(Value::as_str).map(str::to_string)
}

/// `/v1/models` `max_model_len` (vLLM, SGLang).
pub(crate) fn models_max_len(p: &Probes) -> Option<u64> {
    p.model_entry.get("max_model_len").and_then(Value::as_u64)
}

/// Missing figures every engine shares: no `/metrics`, no `/version`, no `max_model_len`.
pub(crate) fn common_missing(p: &Probes, facts: &Facts) -> Vec<MissingFigure> {
    let mut out = Vec::new();
    let miss = |figure: &str, reason: String| MissingFigure { figure: figure.into(), reason };
    let unparsed = p.metrics.ok().and_then(|t| crate::measuring::prometheus::parse(t).err());
    let metrics_why = match (p.metrics.why(), unparsed) {
        (Some(why), _) => Some(why.to_string()),
        (None, Some(e)) => Some(format!("could not be parsed as Prometheus text ({e})")),
        (None, None) => None,
    };
    if let Some(why) = metrics_why {
        out.push(miss(
            "server",
            format!(
                "/metrics {why}: no server gauges or counters (running, waiting, KV-cache usage, generation tokens, prefix cache, speculative acceptance); statuses come from client evidence"
            ),
        ));
    }
    if facts.version.is_none() {
        let why = p.version.why().map_or("/version has no version field".to_string(), |w| format!("/version {w}"));
        out.push(miss("engine.version", why));
    }
    if facts.max_model_len.is_none() {
        out.push(miss(
            "engine.max_model_len",
            "/v1/models does not report it; `max` contexts cannot be resolved".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn probes() -> Probes {
        Probes {
            model_entry: json!({"id": "m"}),
            version: Probe::Failed("answered HTTP 404".into()),
            metrics: Probe::Failed("answered HTTP 404".into()),
            props: Probe::Failed("answered HTTP 404".into()),
            slots: Probe::Failed("not asked".into()),
            server_info: Probe::Failed("answered HTTP 404".into()),
        }
    }

    #[test]
    fn detection_order() {
        let mut p = probes();
        assert_eq!(detect(&p), EngineKind::OpenAi);
        p.metrics = Probe::Got("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n".into());
        assert_eq!(detect(&p), EngineKind::Vllm);
        p.server_info = Probe::Got(json!({"max_total_num_tokens": 1000}));
        assert_eq!(detect(&p), EngineKind::Sglang);
        p.props = Probe::Got(json!({"total_slots": 4}));
        assert_eq!(detect(&p), EngineKind::LlamaCpp);
    }

    #[test]
    fn metric_names_per_engine() {
        assert_eq!(metric_slot("vllm:num_requests_waiting"), Some((EngineKind::Vllm, MetricSlot::Waiting)));
        assert_eq!(metric_slot("sglang:num_queue_reqs"), Some((EngineKind::Sglang, MetricSlot::Waiting)));
        assert_eq!(metric_slot("llamacpp:requests_deferred"), Some((EngineKind::LlamaCpp, MetricSlot::Waiting)));
        assert_eq!(
            metric_slot("llamacpp:tokens_predicted"),
            Some((EngineKind::LlamaCpp, MetricSlot::GenerationTokens))
        );
        assert_eq!(metric_slot("foo_bar"), None);
    }

    #[test]
    fn speculation_is_missing_only_where_the_launch_command_sets_it_and_nothing_counts_it() {
        assert_eq!(speculation_uncounted(None, Some(false)), None, "no speculation: nothing lacks");
        let m = speculation_uncounted(Some("ngram, 3 tokens"), Some(false)).unwrap();
        assert_eq!(m.figure, "spec_decode");
        assert!(
            m.reason.contains("ngram, 3 tokens") && m.reason.contains("no speculative-decoding counters"),
            "{}",
            m.reason
        );
        assert_eq!(speculation_uncounted(Some("ngram"), Some(true)), None);
    }

    #[test]
    fn plain_openai_lists_what_is_missing_and_why() {
        let f = OpenAi.facts(&probes());
        let figures: Vec<&str> = f.missing.iter().map(|m| m.figure.as_str()).collect();
        assert!(figures.contains(&"server"), "{figures:?}");
        assert!(figures.contains(&"engine.version"));
        assert!(figures.contains(&"kv_budget"));
        assert!(f.missing.iter().any(|m| m.reason.contains("HTTP 404")));
    }
}
