//! An SSE `data:` payload of an OpenAI-shaped stream → what the measurement reads of it
//! ([`ChunkParser`]: tokens from cumulative usage, finish reason, in-band errors), pure.
//!
//! The fields of the common chunk shape are read in one pass over its bytes ([`fields`],
//! [`super::chunk_scan`]): no tree of every key and string of every chunk (the
//! [`serde_json::Value`] the parser falls back to), which was most of what a chunk cost the
//! client. Only the common shape is read so; anything else — an `error` or `timings` key or
//! `object: "error"` (read in full by the fallback), a field of an unexpected type, a
//! duplicated key — gives `None`, and [`ChunkParser`] parses the payload as a `Value`
//! instead, so both paths give the same answer (unit- and property-tested on the odd shapes).

use serde_json::Value;
use speedmatrix_schema::stats::round3;

/// The longest excerpt of a server's answer an error message quotes, characters.
const EXCERPT_CHARS: usize = 300;

/// `s` cut to [`EXCERPT_CHARS`], safe for one line (the client's HTTP errors quote so too).
pub(crate) fn excerpt(s: &str) -> String {
    crate::text::excerpt(s, EXCERPT_CHARS)
}

pub use super::chunk_scan::Fields;

/// The fields of `data` when it is a chunk of the common shape; `None` otherwise (the caller
/// reads it as a `Value`).
pub fn fields(data: &str) -> Option<Fields> {
    fields_of(data, true)
}

/// [`fields`], with the completion's `id` copied out only when `want_id` (a stream's first
/// chunk names it; the others repeat it).
fn fields_of(data: &str, want_id: bool) -> Option<Fields> {
    super::chunk_scan::scan(data, want_id)
}

/// What one SSE `data:` payload told us.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedChunk {
    /// Tokens this chunk carried (0 for role-only, usage-only and empty chunks).
    pub tokens: u32,
    /// Whether it carried content (not only reasoning or a tool call).
    pub content: bool,
    /// `finish_reason`, if set.
    pub finish_reason: Option<String>,
    /// Cumulative `usage.completion_tokens`, if present.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, if present.
    pub prompt_tokens: Option<u64>,
    /// The completion's `id`: from the first chunk of the stream that names it (the chunks
    /// after it repeat it and are not copied out).
    pub id: Option<String>,
    /// The server's own timing of the request (llama.cpp `timings`), if present.
    pub timings: Option<speedmatrix_schema::ServerTimings>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens served from the prefix cache.
    pub cached_tokens: Option<u64>,
    /// It carried text (content, reasoning or a tool call): at least one token.
    pub text: bool,
    /// It carried text and usage, and the usage did not grow (not a running total): counted as
    /// one token, the least its text can be.
    pub stalled: bool,
}

/// llama.cpp's `timings` object → [`speedmatrix_schema::ServerTimings`].
fn server_timings(t: &Value) -> Option<speedmatrix_schema::ServerTimings> {
    let t = t.as_object()?;
    let u = |k: &str| t.get(k).and_then(Value::as_u64);
    let f = |k: &str| t.get(k).and_then(Value::as_f64).filter(|v| v.is_finite() && *v >= 0.0).map(round3);
    Some(speedmatrix_schema::ServerTimings {
        prompt_tokens: u("prompt_n"),
        cached_tokens: u("cache_n"),
        prompt_ms: f("prompt_ms"),
        prompt_tps: f("prompt_per_second"),
        predicted_tokens: u("predicted_n"),
        predicted_ms: f("predicted_ms"),
        predicted_tps: f("predicted_per_second"),
    })
}

/// The content text a chunk's payload carries (chat `delta.content`, completions `text`),
/// when it carries some: what a conversation sends back as the assistant's message.
pub fn content_text(data: &str) -> Option<String> {
    let v: Value = serde_json::from_str(data).ok()?;
    let choice = v.get("choices")?.get(0)?;
    let text = choice.get("delta").and_then(|d| d.get("content")).or_else(|| choice.get("text"))?;
    text.as_str().filter(|t| !t.is_empty()).map(str::to_string)
}

/// The server's own message in an error body — OpenAI's `{"error": {"message": …}}`, a bare
/// `{"error": "…"}`, the flat `{"object": "error", "message": …}` of vLLM and SGLang, FastAPI's
/// `{"detail": …}` — cut to an excerpt; `None` when `body` is no JSON error.
pub fn error_message(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body.trim()).ok()?;
    let msg = match (v.get("error"), v.get("object").and_then(Value::as_str), v.get("detail")) {
        (Some(e), _, _) => e.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| match e {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        (None, Some("error"), _) => {
            v.get("message").and_then(Value::as_str).map_or_else(|| v.to_string(), str::to_string)
        }
        (None, _, Some(d)) => d.as_str().map_or_else(|| d.to_string(), str::to_string),
        _ => return None,
    };
    Some(excerpt(&msg))
}

/// Turns `data:` payloads of one stream into token counts (stateful: usage is cumulative).
///
/// A chunk's tokens are the growth of `usage.completion_tokens` since the previous chunk
/// (speculative decoding sends several per chunk; some carry tokens whose text is empty). When
/// a chunk has text but no usage, it counts as 1 token and the stream is marked as not having
/// continuous usage. The role-only first chat chunk and the final `choices: []` usage chunk
/// carry no new tokens.
#[derive(Debug, Clone)]
pub struct ChunkParser {
    pub(crate) last_total: u64,
    /// A chunk named the completion's `id` (later chunks' ids are not copied out).
    has_id: bool,
    /// False once a text chunk arrived without usage.
    pub continuous_usage: bool,
}

impl Default for ChunkParser {
    fn default() -> Self {
        ChunkParser { last_total: 0, has_id: false, continuous_usage: true }
    }
}

/// Why an SSE `data:` payload ends a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The payload is not JSON.
    #[error("SSE data is not JSON ({message}): {excerpt}")]
    NotJson {
        /// What serde_json said.
        message: String,
        /// The start of the payload.
        excerpt: String,
    },
    /// The server sent an error object inside the stream (with HTTP 200).
    #[error("in-band error in the stream: {0}")]
    InBand(String),
}

fn nonempty_str(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

impl ChunkParser {
    /// Parse one payload.
    ///
    /// # Errors
    /// [`ChunkError::InBand`] for an error object (`{"error": …}`, sent with HTTP 200),
    /// [`ChunkError::NotJson`] for a payload that is not JSON.
    pub fn parse(&mut self, data: &str) -> Result<ParsedChunk, ChunkError> {
        let Some(f) = fields_of(data, !self.has_id) else {
            return self.parse_value(data);
        };
        self.has_id |= f.id.is_some();
        let out = ParsedChunk {
            content: f.content,
            finish_reason: f.finish_reason,
            completion_tokens: f.completion_tokens,
            prompt_tokens: f.prompt_tokens,
            id: f.id,
            cached_tokens: f.cached_tokens,
            ..ParsedChunk::default()
        };
        Ok(self.count(out, f.has_choice, f.has_text))
    }

    /// [`ChunkParser::parse`] of any payload, through a [`Value`]: what the typed fast path
    /// (`wire::fields`) leaves to it (errors, llama.cpp's `timings`, odd shapes).
    pub(crate) fn parse_value(&mut self, data: &str) -> Result<ParsedChunk, ChunkError> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ChunkError::NotJson { message: e.to_string(), excerpt: excerpt(data) })?;
        if let Some(err) = v.get("error") {
            let msg = err.get("message").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| err.to_string());
            return Err(ChunkError::InBand(excerpt(&msg)));
        }
        // SGLang and some proxies send flat errors: {"object": "error", "message": …}.
        if v.get("object").and_then(Value::as_str) == Some("error") {
            return Err(ChunkError::InBand(excerpt(&v.to_string())));
        }
        let mut out = ParsedChunk {
            id: v.get("id").and_then(Value::as_str).filter(|_| !self.has_id).map(str::to_string),
            timings: v.get("timings").and_then(server_timings),
            ..ParsedChunk::default()
        };
        self.has_id |= out.id.is_some();
        let choice = v.get("choices").and_then(Value::as_array).and_then(|c| c.first());
        let mut has_text = false;
        if let Some(c) = choice {
            let delta = c.get("delta");
            let content = nonempty_str(delta.and_then(|d| d.get("content"))) || nonempty_str(c.get("text"));
            let reasoning = nonempty_str(delta.and_then(|d| d.get("reasoning")))
                || nonempty_str(delta.and_then(|d| d.get("reasoning_content")));
            let tool = delta.and_then(|d| d.get("tool_calls")).and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            has_text = content || reasoning || tool;
            out.content = content;
            out.finish_reason = c.get("finish_reason").and_then(Value::as_str).map(str::to_string);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.prompt_tokens = u.get("prompt_tokens").and_then(Value::as_u64);
            out.completion_tokens = u.get("completion_tokens").and_then(Value::as_u64);
            out.cached_tokens = u.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64);
        }
        Ok(self.count(out, choice.is_some(), has_text))
    }

    /// The chunk's tokens: the growth of cumulative usage, else 1 for a chunk with text (and
    /// usage is then not continuous). A chunk with text whose usage did not grow counts as 1
    /// and is marked `stalled`: usage that is not a running total (each chunk's own count, or
    /// stuck at 1) must not hide the chunks that prove it wrong.
    fn count(&mut self, mut out: ParsedChunk, has_choice: bool, has_text: bool) -> ParsedChunk {
        out.text = has_text;
        match out.completion_tokens {
            Some(total) if has_choice => {
                let grown = total.saturating_sub(self.last_total);
                out.stalled = grown == 0 && has_text;
                out.tokens = if out.stalled { 1 } else { u32::try_from(grown).unwrap_or(u32::MAX) };
                self.last_total = self.last_total.max(total);
            }
            // The final usage-only chunk (`choices: []`) adds no tokens and moves no time.
            Some(total) => self.last_total = self.last_total.max(total),
            None if has_text => {
                self.continuous_usage = false;
                out.tokens = 1;
                self.last_total += 1;
            }
            None => {}
        }
        out
    }
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

    /// The typed fast path and the `Value` path give the same chunk (and the same parser state)
    /// on every shape: the common ones (vLLM with continuous usage, SGLang, llama.cpp, the
    /// final usage chunk) and the odd ones the fast path leaves to the other (errors, `timings`,
    /// values of unexpected types, escapes, duplicated keys).
    #[test]
    fn the_fast_path_and_the_value_path_agree() {
        let shapes = [
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}"#,
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":" there, \"you\" \u00e9"},"finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":6}}}"#,
            r#"{"id":"c1","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":4}}"#,
            r#"{"id":"c2","choices":[{"delta":{"reasoning_content":"hm"}}]}"#,
            r#"{"id":"c2","choices":[{"delta":{"reasoning":"hm"}}]}"#,
            r#"{"id":"c2","choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"id":"c2","choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"text":"x","finish_reason":null}]}"#,
            r#"{"choices":[{"text":"x"}],"timings":{"prompt_n":5,"prompt_ms":1.5,"predicted_n":1}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"object":"error","message":"flat"}"#,
            r#"{"id":7,"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"content":["part"]}}]}"#,
            r#"{"choices":[{"delta":"x"}]}"#,
            r#"{"choices":"none","usage":5}"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"usage":{"completion_tokens":2.0}}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":""}}]}"#,
            r#"{"choices":[null]}"#,
            r#"[1,2]"#,
            r#"not json"#,
            // What the one-pass scan reads itself, or leaves to the `Value` path.
            " { \"id\" : \"c3\" ,\n \"choices\":[ {\"text\" : \"\\n\" } , 7 ] ,\"usage\":{ \"completion_tokens\" : 9 } } \r\n",
            r#"{"id":"c\u00e9","choices":[{"text":"\ud83d\ude00","finish_reason":"stop"}]}"#,
            r#"{"choices":[{"text":"\ud83d"}]}"#,
            r#"{"choices":[{"text":"\ude00x"}]}"#,
            r#"{"choices":[{"text":"a\qb"}]}"#,
            r#"{"choices":[{"text":"tab	inside"}]}"#,
            r#"{"choices":[{"finish_reason":"st\"op"}]}"#,
            r#"{"\u0069d":"c4","choices":[{"text":"x"}]}"#,
            r#"{"object":"\u0065rror","message":"escaped"}"#,
            r#"{"choices":[{"text":"x"}],"usage":{"completion_tokens":-1}}"#,
            r#"{"choices":[{"text":"x"}],"usage":{"completion_tokens":1e2}}"#,
            r#"{"choices":[{"text":"x"}],"usage":{"completion_tokens":18446744073709551616}}"#,
            r#"{"choices":[{"text":"x"}],"usage":{"completion_tokens":01}}"#,
            r#"{"choices":[{"text":"x"}],"usage":null,"model":[[[[{"a":[1.5e-3,-0,true,false,null]}]]]]}"#,
            r#"{"choices":[{"text":"x","text":""}]}"#,
            r#"{"choices":[{"delta":{"content":"","content":"y"}}]}"#,
            r#"{"choices":[{"text":"x"}],"usage":{"prompt_tokens_details":{"cached_tokens":3,"cached_tokens":4}}}"#,
            r#"{"choices":[{"text":"x"}]} trailing"#,
            r#"{"choices":[{"text":"x"},]}"#,
            r#"{"choices":[{"text":"x"}],}"#,
            r#"{"choices":[{"text":"x"}]"#,
            r#"{"choices":[{"delta":{"tool_calls":null,"content":null,"reasoning":""}}],"id":null,"object":null}"#,
            r#"{"choices":[{"delta":null,"finish_reason":null,"text":null}],"usage":{"prompt_tokens":null,"prompt_tokens_details":null}}"#,
            r#"{"a":nul}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#""just a string""#,
            "",
        ];
        for data in shapes {
            let (mut fast, mut slow) =
                (ChunkParser { last_total: 3, ..ChunkParser::default() }, ChunkParser::default());
            slow.last_total = 3;
            let a = fast.parse(data);
            let b = slow.parse_value(data);
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{data}");
            assert_eq!((fast.last_total, fast.continuous_usage), (slow.last_total, slow.continuous_usage), "{data}");
        }
    }

    #[test]
    fn the_id_is_read_once_and_only_the_first_choice_is_measured() {
        let mut p = ChunkParser::default();
        let a = p.parse(r#"{"id":"c1","choices":[{"delta":{"content":"a"}},{"delta":{"content":""}}],"usage":{"completion_tokens":1}}"#).unwrap();
        let b =
            p.parse(r#"{"id":"c1","choices":[{"delta":{"content":"b"}}],"usage":{"completion_tokens":2}}"#).unwrap();
        assert_eq!((a.id.as_deref(), b.id.as_deref()), (Some("c1"), None));
        assert!(a.content && b.content);
        // A second choice of any shape is skipped, not read.
        let f = fields(r#"{"choices":[{"delta":{"content":""}},{"delta":{"content":"x"}},[1,{"z":null}]]}"#).unwrap();
        assert!(f.has_choice && !f.content);
        assert_eq!(fields(r#"{"choices":[]}"#).map(|f| f.has_choice), Some(false));
    }

    #[test]
    fn role_only_first_chunk_is_not_a_token() {
        let mut p = ChunkParser::default();
        let c = p
            .parse(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10}}"#)
            .unwrap();
        assert_eq!(c.tokens, 0);
        assert_eq!(c.prompt_tokens, Some(10));
    }

    #[test]
    fn speculative_chunks_count_usage_not_chunks() {
        let mut p = ChunkParser::default();
        let a = p.parse(r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1}}"#).unwrap();
        let b = p.parse(r#"{"choices":[{"delta":{"content":"bcd"}}],"usage":{"completion_tokens":4}}"#).unwrap();
        // Tokens whose text is empty still count (seen on real vLLM with ngram speculation).
        let c = p.parse(r#"{"choices":[{"delta":{"content":""}}],"usage":{"completion_tokens":6}}"#).unwrap();
        assert_eq!((a.tokens, b.tokens, c.tokens), (1, 3, 2));
        assert!(p.continuous_usage);
    }

    /// Usage that is not a running total (stuck at 1, sglang#7084; or each chunk's own count):
    /// a text chunk on which it did not grow is still a token, and a stall the cell can see.
    #[test]
    fn text_chunks_whose_usage_does_not_grow_count_one_and_are_stalls() {
        let mut p = ChunkParser::default();
        let chunk =
            |n: u64| format!(r#"{{"choices":[{{"delta":{{"content":"w"}}}}],"usage":{{"completion_tokens":{n}}}}}"#);
        let a = p.parse(&chunk(1)).unwrap();
        let b = p.parse(&chunk(1)).unwrap();
        assert_eq!((a.tokens, a.stalled, a.text), (1, false, true));
        assert_eq!((b.tokens, b.stalled, b.text), (1, true, true));
        // Each chunk's own count: 3 after 1 grows by 2, then 1 and 3 again do not grow.
        let mut p = ChunkParser::default();
        let counts: Vec<(u32, bool)> =
            [1, 3, 1, 3].iter().map(|&n| p.parse(&chunk(n)).map(|c| (c.tokens, c.stalled)).unwrap()).collect();
        assert_eq!(counts, [(1, false), (2, false), (1, true), (1, true)]);
        assert!(p.continuous_usage, "usage came on every chunk; the cell decides what it is worth");
        // A chunk without text whose usage did not grow is nothing (a finish chunk).
        let f =
            p.parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"completion_tokens":3}}"#).unwrap();
        assert_eq!((f.tokens, f.stalled), (0, false));
    }

    #[test]
    fn reasoning_counts_for_ttft_not_for_content() {
        let mut p = ChunkParser::default();
        let r = p.parse(r#"{"choices":[{"delta":{"reasoning":"hmm"}}],"usage":{"completion_tokens":1}}"#).unwrap();
        assert_eq!((r.tokens, r.content), (1, false));
        let r =
            p.parse(r#"{"choices":[{"delta":{"reasoning_content":"so"}}],"usage":{"completion_tokens":2}}"#).unwrap();
        assert_eq!((r.tokens, r.content), (1, false));
        let c = p.parse(r#"{"choices":[{"delta":{"content":"Hi"}}],"usage":{"completion_tokens":3}}"#).unwrap();
        assert_eq!((c.tokens, c.content), (1, true));
    }

    #[test]
    fn usage_only_last_chunk_adds_nothing() {
        let mut p = ChunkParser::default();
        p.parse(r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1}}"#).unwrap();
        let f =
            p.parse(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"completion_tokens":1}}"#).unwrap();
        assert_eq!((f.tokens, f.finish_reason.as_deref()), (0, Some("length")));
        let u = p.parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#).unwrap();
        assert_eq!(u.tokens, 0);
    }

    #[test]
    fn cached_prompt_tokens_are_read_from_usage_details() {
        let mut p = ChunkParser::default();
        let u = p
            .parse(r#"{"choices":[],"usage":{"prompt_tokens":900,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":896}}}"#)
            .unwrap();
        assert_eq!(u.cached_tokens, Some(896));
        let n = p.parse(r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}"#).unwrap();
        assert_eq!(n.cached_tokens, None);
    }

    #[test]
    fn without_usage_text_chunks_count_one_and_flag_it() {
        let mut p = ChunkParser::default();
        let c = p.parse(r#"{"choices":[{"text":"hello"}]}"#).unwrap();
        assert_eq!(c.tokens, 1);
        assert!(!p.continuous_usage);
    }

    #[test]
    fn content_text_is_the_chunks_answer_text() {
        let chat = r#"{"choices":[{"index":0,"delta":{"content":" there, \"you\""},"finish_reason":null}]}"#;
        assert_eq!(content_text(chat).as_deref(), Some(" there, \"you\""));
        assert_eq!(content_text(r#"{"choices":[{"text":"abc"}]}"#).as_deref(), Some("abc"));
        assert_eq!(content_text(r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#), None);
        assert_eq!(content_text(r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#), None);
        assert_eq!(content_text("not json"), None);
    }

    #[test]
    fn an_error_body_gives_the_servers_own_message() {
        let openai = r#"{"error": {"message": "model overloaded", "type": "server_error", "code": 503}}"#;
        assert_eq!(error_message(openai).as_deref(), Some("model overloaded"));
        assert_eq!(error_message(r#"{"error": "model overloaded"}"#).as_deref(), Some("model overloaded"));
        let flat = r#"{"object": "error", "message": "The engine is overloaded", "code": 503}"#;
        assert_eq!(error_message(flat).as_deref(), Some("The engine is overloaded"));
        assert_eq!(error_message(r#"{"detail": "Not Found"}"#).as_deref(), Some("Not Found"));
        assert_eq!(error_message(r#"{"choices": []}"#), None);
        assert_eq!(error_message("<html>"), None);
    }

    #[test]
    fn in_band_errors_fail() {
        let mut p = ChunkParser::default();
        let e = p.parse(r#"{"error":{"message":"CUDA out of memory","code":500}}"#).unwrap_err();
        assert_eq!(e.to_string(), "in-band error in the stream: CUDA out of memory");
        let e = p.parse(r#"{"object":"error","message":"boom"}"#).unwrap_err();
        assert!(matches!(&e, ChunkError::InBand(m) if m.contains("boom")), "{e}");
        let e = p.parse("not json\u{1b}[2J").unwrap_err();
        assert!(e.to_string().starts_with("SSE data is not JSON (expected"), "{e}");
        assert!(e.to_string().ends_with(": not json\u{fffd}[2J"), "no raw escape from the server: {e}");
    }
}
