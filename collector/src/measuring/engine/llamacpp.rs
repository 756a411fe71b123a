//! llama.cpp `llama-server`: `/props` (`total_slots`, `default_generation_settings.n_ctx` =
//! context per slot, `model_path`, `build_info`), `/slots` (one entry per slot with its
//! `n_ctx`), `llamacpp:*` metrics (with `--metrics`): `requests_processing`,
//! `requests_deferred` (waiting for a free slot), `tokens_predicted_total` — added when a
//! request *ends* (slot release), so it is no per-window figure. No KV-usage gauge. Usage
//! arrives inside the `finish_reason` chunk (completions), with a `timings` object the client
//! keeps as server figures.
//!
//! Capacity: each slot holds its own context, so a stream whose prompt + max output exceeds
//! the context per slot is over capacity, and more streams than slots wait in the queue
//! (`requests_queued`), whatever the total.

use super::{common_missing, EngineAdapter, Facts, MetricSlot, Probes};
use serde_json::Value;
use speedmatrix_schema::{KvBudgetSource, MissingFigure};

/// The llama.cpp adapter.
#[derive(Debug, Clone, Copy)]
pub struct LlamaCpp;

impl EngineAdapter for LlamaCpp {
    fn name(&self) -> &'static str {
        "llamacpp"
    }

    fn metric(&self, family: &str) -> Option<MetricSlot> {
        Some(match family {
            "llamacpp:requests_processing" => MetricSlot::Running,
            "llamacpp:requests_deferred" => MetricSlot::Waiting,
            "llamacpp:tokens_predicted" => MetricSlot::GenerationTokens,
            "llamacpp:prompt_tokens_cached" => MetricSlot::PrefixHits,
            "llamacpp:spec_decode_num_drafts" => MetricSlot::SpecDrafts,
            "llamacpp:spec_decode_num_draft_tokens" => MetricSlot::SpecDraftTokens,
            "llamacpp:spec_decode_num_accepted_tokens" => MetricSlot::SpecAcceptedTokens,
            _ => return None,
        })
    }

    fn facts(&self, p: &Probes) -> Facts {
        let props = p.props.ok();
        let slot_list = p.slots.ok().and_then(Value::as_array);
        let slots = props
            .and_then(|v| v.get("total_slots"))
            .and_then(Value::as_u64)
            .or_else(|| slot_list.map(|s| s.len() as u64))
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0);
        let slot_context = props
            .and_then(|v| v.pointer("/default_generation_settings/n_ctx"))
            .and_then(Value::as_u64)
            .or_else(|| slot_list.and_then(|s| s.first()).and_then(|s| s.get("n_ctx")).and_then(Value::as_u64))
            .or_else(|| p.model_entry.pointer("/meta/n_ctx").and_then(Value::as_u64))
            .filter(|&n| n > 0);
        let train = p.model_entry.pointer("/meta/n_ctx_train").and_then(Value::as_u64);
        let version = props.and_then(|v| v.get("build_info")).and_then(Value::as_str).map(str::to_string);
        let mut f = Facts {
            version,
            // The model's own limit; the slot's is `slot_context` (the plan makes longer streams
            // over capacity rather than dropping their contexts).
            max_model_len: train.or(slot_context),
            kv_budget: match (slots, slot_context) {
                (Some(n), Some(c)) => Some((u64::from(n) * c, KvBudgetSource::Props)),
                _ => None,
            },
            kv_rule: false,
            slots,
            slot_context,
            max_running: slots,
            model_path: props.and_then(|v| v.get("model_path")).and_then(Value::as_str).map(str::to_string),
            // Each slot reuses the longest common prefix of tokens with its last prompt (no
            // blocks); whether it may (`cache_prompt`) is per request.
            prefix_caching: None,
            cache_block_tokens: None,
            missing: vec![],
            counts_speculation: None,
        };
        f.missing = common_missing(p, &f)
            .into_iter()
            .map(|m| {
                if m.figure == "server" {
                    MissingFigure { reason: format!("{} (start llama-server with --metrics)", m.reason), ..m }
                } else if m.figure == "engine.version" {
                    MissingFigure { reason: "llama-server has no /version and /props has no build_info".into(), ..m }
                } else {
                    m
                }
            })
            .collect();
        if p.metrics.ok().is_some() {
            f.missing.push(MissingFigure {
                figure: "kv_cache_usage".into(),
                reason: "llama.cpp exports no KV-cache usage gauge".into(),
            });
            f.missing.push(MissingFigure {
                figure: "server.generation_tokens".into(),
                reason: "llamacpp:tokens_predicted_total grows only when a request ends, so it is no per-window count; tokens come from the stream".into(),
            });
        }
        if slots.is_none() {
            f.missing.push(MissingFigure {
                figure: "engine.slots".into(),
                reason: format!(
                    "/props {}; streams beyond the slots cannot be told apart from running ones",
                    p.props.why().unwrap_or("has no total_slots")
                ),
            });
        }
        f
    }

    /// `POST /slots/{id}?action=erase` for every slot: llama.cpp keeps a prompt cache per slot.
    fn cache_reset(&self, facts: &Facts) -> Option<super::CacheReset> {
        let slots = facts.slots?;
        Some(super::CacheReset {
            paths: (0..slots).map(|i| format!("/slots/{i}?action=erase")).collect(),
            label: format!("POST /slots/{{id}}?action=erase for each of {slots} slots"),
        })
    }

    fn live_token_counter(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::engine::{Probe, Probes};
    use serde_json::json;

    #[test]
    fn props_give_slots_and_context_per_slot() {
        let p = Probes {
            model_entry: json!({"id": "smollm2", "meta": {"n_ctx_train": 8192, "n_ctx": 1024}}),
            version: Probe::Failed("answered HTTP 404".into()),
            metrics: Probe::Got("llamacpp:requests_processing 0\n".into()),
            props: Probe::Got(
                json!({"total_slots": 4, "default_generation_settings": {"n_ctx": 1024}, "build_info": "b7000-abc"}),
            ),
            slots: Probe::Got(json!([{"id": 0, "n_ctx": 1024}, {"id": 1, "n_ctx": 1024}])),
            server_info: Probe::Failed("answered HTTP 404".into()),
        };
        let f = LlamaCpp.facts(&p);
        assert_eq!((f.slots, f.slot_context, f.max_model_len), (Some(4), Some(1024), Some(8192)));
        assert_eq!(f.kv_budget, Some((4096, KvBudgetSource::Props)));
        assert!(!f.kv_rule);
        assert_eq!(f.version.as_deref(), Some("b7000-abc"));
        assert!(f.missing.iter().any(|m| m.figure == "kv_cache_usage"));
        assert!(!LlamaCpp.live_token_counter());
    }
}
