//! The fields of an OpenAI-shaped SSE chunk that the measurement reads, deserialized straight
//! into typed, borrowed structs: no tree of every key and string of every chunk (the
//! [`serde_json::Value`] the parser falls back to), which is most of what a chunk costs the
//! client. Only the common shape is read here; anything else — an `error` or `timings` key or
//! `object: "error"` (read in full by the fallback), a field of an unexpected type, a
//! duplicated key — gives
//! `None`, and [`crate::measuring::client::ChunkParser`] parses the payload as a `Value`
//! instead, so both paths give the same answer (unit-tested on the odd shapes).

use serde::de::IgnoredAny;
use serde::Deserialize;
use std::borrow::Cow;

/// Whether a key was present at all, with any value (`null` included).
#[derive(Debug, Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d)?;
        Ok(Present(true))
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Present,
    #[serde(default)]
    timings: Present,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// What a chunk of the common shape says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    /// The completion's `id`.
    pub id: Option<String>,
    /// `choices` has a first element.
    pub has_choice: bool,
    /// Its delta's `content` or its `text` is a non-empty string.
    pub content: bool,
    /// Content, reasoning (`reasoning`, `reasoning_content`) or a non-empty `tool_calls`.
    pub has_text: bool,
    /// Its `finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u64>,
}

fn nonempty(s: &Option<Cow<'_, str>>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

/// The fields of `data` when it is a chunk of the common shape; `None` otherwise (the caller
/// reads it as a `Value`).
pub fn fields(data: &str) -> Option<Fields> {
    let c: Chunk<'_> = serde_json::from_str(data).ok()?;
    if c.error.0 || c.timings.0 || c.object.as_deref() == Some("error") {
        return None;
    }
    let choice = c.choices.as_ref().and_then(|v| v.first());
    let delta = choice.and_then(|c| c.delta.as_ref());
    let content = delta.is_some_and(|d| nonempty(&d.content)) || choice.is_some_and(|c| nonempty(&c.text));
    let reasoning = delta.is_some_and(|d| nonempty(&d.reasoning) || nonempty(&d.reasoning_content));
    let tool = delta.and_then(|d| d.tool_calls.as_ref()).is_some_and(|t| !t.is_empty());
    let usage = c.usage.as_ref();
    Some(Fields {
        id: c.id.map(Cow::into_owned),
        has_choice: choice.is_some(),
        content,
        has_text: content || reasoning || tool,
        finish_reason: choice.and_then(|c| c.finish_reason.clone()).map(Cow::into_owned),
        prompt_tokens: usage.and_then(|u| u.prompt_tokens),
        completion_tokens: usage.and_then(|u| u.completion_tokens),
        cached_tokens: usage.and_then(|u| u.prompt_tokens_details.as_ref()).and_then(|d| d.cached_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vllm_chunk_with_continuous_usage_is_read_here() {
        let data = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" w"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":128,"total_tokens":131,"completion_tokens":3}}"#;
        let f = fields(data).expect("the common shape");
        assert_eq!(f.id.as_deref(), Some("chatcmpl-1"));
        assert!(f.has_choice && f.content && f.has_text);
        assert_eq!((f.prompt_tokens, f.completion_tokens, f.finish_reason), (Some(128), Some(3), None));
        // What the fallback reads in full.
        assert_eq!(fields(r#"{"error":{"message":"x"}}"#), None);
        assert_eq!(fields(r#"{"choices":[{"text":"x"}],"timings":{"prompt_n":1}}"#), None);
        assert_eq!(fields(r#"{"object":"error","message":"x"}"#), None);
    }
}
