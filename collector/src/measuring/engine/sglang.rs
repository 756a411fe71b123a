//! SGLang: `/get_server_info` (`max_total_num_tokens` = the KV budget in tokens,
//! `max_running_requests`, often `version`), `sglang:*` metrics, `reasoning_content` deltas and
//! flat error bodies (`{"object": "error", "message": …}`, read by the client for any engine).

use super::{common_missing, models_max_len, version_field, EngineAdapter, Facts, MetricSlot, Probes};
use serde_json::Value;
use speedmatrix_schema::{KvBudgetSource, MissingFigure};

/// The SGLang adapter.
#[derive(Debug, Clone, Copy)]
pub struct Sglang;

impl EngineAdapter for Sglang {
    fn name(&self) -> &'static str {
        "sglang"
    }

    fn metric(&self, family: &str) -> Option<MetricSlot> {
        Some(match family {
            "sglang:num_running_reqs" => MetricSlot::Running,
            "sglang:num_queue_reqs" => MetricSlot::Waiting,
            "sglang:token_usage" => MetricSlot::KvUsage,
            "sglang:generation_tokens" => MetricSlot::GenerationTokens,
            "sglang:num_retracted_reqs" => MetricSlot::Preemptions,
            "sglang:cached_tokens" => MetricSlot::PrefixHits,
            "sglang:prompt_tokens" => MetricSlot::PrefixQueries,
            "sglang:spec_accept_length" => MetricSlot::SpecAcceptLength,
            _ => return None,
        })
    }

    fn facts(&self, p: &Probes) -> Facts {
        let info = p.server_info.ok();
        let num = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_u64);
        let mut f = Facts {
            version: version_field(p)
                .or_else(|| info.and_then(|i| i.get("version")).and_then(Value::as_str).map(str::to_string)),
            max_model_len: models_max_len(p).or_else(|| num("context_length")),
            kv_budget: num("max_total_num_tokens").filter(|&t| t > 0).map(|t| (t, KvBudgetSource::ServerInfo)),
            kv_rule: true,
            max_running: num("max_running_requests").and_then(|n| u32::try_from(n).ok()),
            model_path: info.and_then(|i| i.get("model_path")).and_then(Value::as_str).map(str::to_string),
            prefix_caching: info.and_then(|i| i.get("disable_radix_cache")).and_then(Value::as_bool).map(|off| !off),
            cache_block_tokens: num("page_size"),
            ..Facts::default()
        };
        f.missing = common_missing(p, &f);
        if f.kv_budget.is_none() {
            f.missing.push(MissingFigure {
                figure: "kv_budget".into(),
                reason: match p.server_info.why() {
                    Some(w) => format!("/get_server_info {w}; over capacity is not applied (give --kv-budget)"),
                    None => "/get_server_info has no max_total_num_tokens; over capacity is not applied".into(),
                },
            });
        }
        f
    }

    /// `POST /flush_cache` (SGLang empties its radix cache when no request is running).
    fn cache_reset(&self, _facts: &Facts) -> Option<super::CacheReset> {
        Some(super::CacheReset::post("/flush_cache"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::engine::{Probe, Probes};
    use serde_json::json;

    #[test]
    fn server_info_gives_budget_and_running_limit() {
        let p = Probes {
            model_entry: json!({"id": "qwen", "max_model_len": 32768}),
            version: Probe::Got(json!({"version": "0.5.4"})),
            metrics: Probe::Got("sglang:num_running_reqs 0\n".into()),
            props: Probe::Failed("answered HTTP 404".into()),
            slots: Probe::Failed("not asked".into()),
            server_info: Probe::Got(json!({"max_total_num_tokens": 120000, "max_running_requests": 48})),
        };
        let f = Sglang.facts(&p);
        assert_eq!(f.kv_budget, Some((120_000, KvBudgetSource::ServerInfo)));
        assert_eq!((f.max_running, f.max_model_len, f.version.as_deref()), (Some(48), Some(32768), Some("0.5.4")));
        assert!(f.missing.is_empty(), "{:?}", f.missing);
    }
}
