//! The JSON of a response, field for field as vLLM writes it: each streamed chunk (role,
//! reasoning, content, finish, usage) and the body of a full (non-streamed) answer. The text
//! is the tokenizer's filler, deterministic in the request's text key.

use super::Endpoint;
use crate::tokenizer;
use crate::ReasoningField;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// Builds the JSON of one response (its id, model, options, and how far the stream has got).
pub(super) struct Writer {
    pub(super) ep: Endpoint,
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) reasoning: Option<(ReasoningField, u32)>,
    pub(super) prompt_tokens: u32,
    pub(super) text_key: u64,
    pub(super) finish_reason: &'static str,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    /// Output tokens already put into chunks.
    pub(super) sent: u32,
}

impl Writer {
    fn usage(&self, completion: u32) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + completion,
            "completion_tokens": completion,
        })
    }

    fn object(&self) -> &'static str {
        match self.ep {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        }
    }

    /// `{"id":…,"object":…,"created":…,"model":…,"choices":[` — the same for every chunk.
    fn prefix(&self) -> String {
        format!(
            "{{\"id\":{},\"object\":\"{}\",\"created\":{},\"model\":{},\"choices\":[",
            Value::from(self.id.as_str()),
            self.object(),
            self.created,
            Value::from(self.model.as_str())
        )
    }

    /// One chunk's JSON: the shared prefix, one choice, and usage with continuous usage stats.
    ///
    /// vLLM writes chat chunks with `exclude_unset=True` (only the fields it set) and
    /// completions chunks with `exclude_unset=False` (every field, `null` when unset: `usage`,
    /// and the choice's `stop_reason`, `prompt_token_ids`, `token_ids`).
    fn chunk(&self, choice: Value, completion: u32) -> String {
        let completions = self.ep == Endpoint::Completions;
        let mut choice = choice;
        if completions {
            for key in ["stop_reason", "prompt_token_ids", "token_ids"] {
                if choice.get(key).is_none() {
                    choice[key] = Value::Null;
                }
            }
        }
        let mut out = self.prefix();
        out.push_str(&choice.to_string());
        out.push(']');
        if self.continuous_usage {
            let _ = write!(
                out,
                ",\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{}{}}}",
                self.prompt_tokens,
                self.prompt_tokens + completion,
                completion,
                if completions { ",\"prompt_tokens_details\":null" } else { "" }
            );
        } else if completions {
            out.push_str(",\"usage\":null");
        }
        out.push('}');
        out
    }

    pub(super) fn role_chunk(&self) -> String {
        self.chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}),
            0,
        )
    }

    /// Split `n` new tokens into (reasoning, content) counts.
    fn split(&self, n: u32) -> (u32, u32) {
        match self.reasoning {
            Some((_, r)) => {
                let reasoning = r.saturating_sub(self.sent).min(n);
                (reasoning, n - reasoning)
            }
            None => (0, n),
        }
    }

    /// The frames for `n` new tokens: (json, tokens, kind). `last` adds `finish_reason`.
    pub(super) fn token_chunks(&mut self, n: u32, last: bool) -> Vec<(String, u32, &'static str)> {
        let (r, c) = self.split(n);
        let mut out = Vec::new();
        if r > 0 {
            // Reasoning tokens are the first `reasoning_tokens` of the answer; their text
            // starts at token 0 of the reasoning channel.
            let text = tokenizer::filler(self.text_key ^ 0x7ea5, self.sent, r);
            self.sent += r;
            let field = match self.reasoning {
                Some((ReasoningField::ReasoningContent, _)) => "reasoning_content",
                _ => "reasoning",
            };
            let finish = last && c == 0;
            let choice = json!({
                "index": 0,
                "delta": {field: text},
                "logprobs": null,
                "finish_reason": if finish { Value::from(self.finish_reason) } else { Value::Null },
            });
            let mut choice = choice;
            if finish {
                choice["stop_reason"] = Value::Null;
            }
            out.push((self.chunk(choice, self.sent), r, if finish { "finish" } else { "reasoning" }));
        }
        if c > 0 {
            let start = self.sent - self.reasoning.map_or(0, |(_, r)| r.min(self.sent));
            let text = tokenizer::filler(self.text_key, start, c);
            self.sent += c;
            let mut choice = match self.ep {
                Endpoint::Chat => json!({"index": 0, "delta": {"content": text}, "logprobs": null}),
                Endpoint::Completions => json!({"index": 0, "text": text, "logprobs": null}),
            };
            if last {
                choice["finish_reason"] = Value::from(self.finish_reason);
                choice["stop_reason"] = Value::Null;
            } else {
                choice["finish_reason"] = Value::Null;
                if self.ep == Endpoint::Completions {
                    choice["stop_reason"] = Value::Null;
                }
            }
            out.push((self.chunk(choice, self.sent), c, if last { "finish" } else { "content" }));
        }
        out
    }

    pub(super) fn usage_chunk(&self) -> String {
        let mut out = self.prefix();
        let _ = write!(out, "],\"usage\":{}}}", self.usage(self.sent));
        out
    }

    /// The whole (non-streamed) reasoning and content text of `n` tokens.
    fn full_text(&self, n: u32) -> (Option<String>, String) {
        match self.reasoning {
            Some((_, r)) => {
                let rn = r.min(n);
                let reasoning = (rn > 0).then(|| tokenizer::filler(self.text_key ^ 0x7ea5, 0, rn));
                (reasoning, tokenizer::filler(self.text_key, 0, n - rn))
            }
            None => (None, tokenizer::filler(self.text_key, 0, n)),
        }
    }

    /// The body of a full (non-streamed) answer of `total` tokens. Its `usage` has
    /// `prompt_tokens_details: null`, as vLLM's has.
    pub(super) fn full_body(&self, total: u32) -> Value {
        let (reasoning, content) = self.full_text(total);
        let usage = json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + total,
            "completion_tokens": total,
            "prompt_tokens_details": null,
        });
        match self.ep {
            Endpoint::Chat => {
                let mut message = json!({"role": "assistant", "content": content, "tool_calls": []});
                if let Some((field, _)) = self.reasoning {
                    let key = match field {
                        ReasoningField::Reasoning => "reasoning",
                        ReasoningField::ReasoningContent => "reasoning_content",
                    };
                    message[key] = reasoning.map(Value::from).unwrap_or(Value::Null);
                }
                json!({
                    "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                    "choices": [{"index": 0, "message": message, "logprobs": null,
                                 "finish_reason": self.finish_reason, "stop_reason": null}],
                    "usage": usage,
                })
            }
            Endpoint::Completions => json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "text": content, "logprobs": null,
                             "finish_reason": self.finish_reason, "stop_reason": null, "prompt_logprobs": null}],
                "usage": usage,
            }),
        }
    }
}
