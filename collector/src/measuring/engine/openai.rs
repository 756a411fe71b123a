//! A plain OpenAI-compatible endpoint (a hosted API, a proxy): no `/metrics`, often no
//! `/version` (404 or 502). Every figure comes from the stream; statuses from client evidence
//! (streams decoding vs. asked); the results file lists what is missing and why.

use super::{common_missing, models_max_len, version_field, EngineAdapter, Facts, MetricSlot, Probes};
use serde_json::Value;
use speedmatrix_schema::MissingFigure;

/// The plain OpenAI-compatible adapter.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi;

impl EngineAdapter for OpenAi {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn metric(&self, _family: &str) -> Option<MetricSlot> {
        None
    }

    fn facts(&self, p: &Probes) -> Facts {
        let mut f = Facts {
            version: version_field(p),
            max_model_len: models_max_len(p).or_else(|| p.model_entry.get("context_length").and_then(Value::as_u64)),
            kv_rule: true,
            ..Facts::default()
        };
        f.missing = common_missing(p, &f);
        f.missing.push(MissingFigure {
            figure: "kv_budget".into(),
            reason: "a plain OpenAI-compatible endpoint does not report its KV cache; over capacity is not applied (give --kv-budget)".into(),
        });
        f.missing.push(MissingFigure {
            figure: "spec_accept_rate".into(),
            reason: "speculative-decoding counters come only from an engine's /metrics".into(),
        });
        f
    }
}
