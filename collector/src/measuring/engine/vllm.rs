//! vLLM: `/version`, `/v1/models` `max_model_len`, `vllm:*` metrics, the KV budget
//! from `vllm:cache_config_info`, usage on every chunk with `continuous_usage_stats`.

use super::{common_missing, models_max_len, version_field, CacheReset, EngineAdapter, Facts, MetricSlot, Probes};
use speedmatrix_schema::MissingFigure;

/// The vLLM adapter.
#[derive(Debug, Clone, Copy)]
pub struct Vllm;

impl EngineAdapter for Vllm {
    fn name(&self) -> &'static str {
        "vllm"
    }

    fn metric(&self, family: &str) -> Option<MetricSlot> {
        Some(match family {
            "vllm:num_requests_running" => MetricSlot::Running,
            "vllm:num_requests_waiting" => MetricSlot::Waiting,
            "vllm:kv_cache_usage_perc" | "vllm:gpu_cache_usage_perc" => MetricSlot::KvUsage,
            "vllm:generation_tokens" => MetricSlot::GenerationTokens,
            "vllm:num_preemptions" => MetricSlot::Preemptions,
            // `gpu_prefix_cache_*`: the names of vLLM V1 before 0.10.
            "vllm:prefix_cache_hits" | "vllm:gpu_prefix_cache_hits" => MetricSlot::PrefixHits,
            "vllm:prefix_cache_queries" | "vllm:gpu_prefix_cache_queries" => MetricSlot::PrefixQueries,
            "vllm:spec_decode_num_drafts" => MetricSlot::SpecDrafts,
            "vllm:spec_decode_num_draft_tokens" => MetricSlot::SpecDraftTokens,
            "vllm:spec_decode_num_accepted_tokens" => MetricSlot::SpecAcceptedTokens,
            "vllm:spec_decode_num_accepted_tokens_per_pos" => MetricSlot::SpecAcceptedPerPos,
            "vllm:cache_config_info" => MetricSlot::CacheConfig,
            _ => return None,
        })
    }

    fn facts(&self, p: &Probes) -> Facts {
        let parsed = p.metrics.ok().map(|t| crate::measuring::discovery::Metrics::parse(t));
        let m = parsed.as_ref().and_then(|m| m.as_ref().ok());
        let mut f = Facts {
            version: version_field(p),
            max_model_len: models_max_len(p),
            kv_budget: m.and_then(|m| m.kv_budget),
            kv_rule: true,
            prefix_caching: m.and_then(|m| m.prefix_caching),
            cache_block_tokens: m.and_then(|m| m.block_size),
            ..Facts::default()
        };
        f.missing = common_missing(p, &f);
        let why = match &parsed {
            Some(Err(e)) => Some(format!("/metrics could not be parsed as Prometheus text ({e})")),
            Some(Ok(_)) if f.kv_budget.is_none() => {
                Some("/metrics has no vllm:cache_config_info with a KV size".into())
            }
            _ => None,
        };
        if let Some(why) = why {
            f.missing.push(MissingFigure {
                figure: "kv_budget".into(),
                reason: format!("{why}; over capacity is not applied (give --kv-budget)"),
            });
        }
        f
    }

    /// `POST /reset_prefix_cache`: served only with `VLLM_SERVER_DEV_MODE=1` (else 404, and
    /// the run salts its prompts instead).
    fn cache_reset(&self, _facts: &Facts) -> Option<CacheReset> {
        Some(CacheReset::post("/reset_prefix_cache"))
    }
}
