//! What the twin writes on the wire, byte for byte, as snapshots
//! (`tests/tests/snapshots/twin_wire__*.snap`): a real twin on loopback, read over a socket. SSE
//! chunk shapes of chat and completions (with and without reasoning, usage chunks, continuous
//! usage stats, keep-alive comments), whole responses, error bodies, the discovery endpoints and
//! `/metrics` — for both wire flavors (vLLM, SGLang). Only the Unix time in `created` and the
//! measured timing histograms of `/metrics` are masked (`tests/tests/support/snap.rs`); chunk
//! boundaries, key order and text are compared as written.

use serde_json::{json, Value};
use speedmatrix_twin::{self as twin, Fault, Flavor, Profile, ReasoningField, TwinConfig, TwinHandle};
use std::time::{Duration, Instant};

/// One exchange as the snapshot shows it: the request line and body, the status, the content
/// type and the body exactly as received.
async fn exchange(t: &TwinHandle, method: &str, path: &str, body: Option<&Value>) -> String {
    let body = body.map(Value::to_string);
    let shown = body.as_deref().map(|b| format!("{method} {path}\n{b}"));
    send(t, method, path, body.as_deref(), &shown.unwrap_or_else(|| format!("{method} {path}"))).await
}

/// Send `body` (as JSON) to `path`; the snapshot text starts with `shown` instead of the
/// request.
async fn send(t: &TwinHandle, method: &str, path: &str, body: Option<&str>, shown: &str) -> String {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", t.url());
    let req = match (method, body) {
        ("GET", _) => client.get(&url),
        (_, Some(b)) => client.post(&url).header("content-type", "application/json").body(b.to_string()),
        (_, None) => client.post(&url),
    };
    let r = req.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = r.status().as_u16();
    let ctype = r.headers().get("content-type").map(|v| v.to_str().unwrap_or("?").to_string());
    let text = r.text().await.unwrap_or_else(|e| panic!("{method} {path}: body: {e}"));
    format!("{shown}\nHTTP {status} · content-type: {}\n\n{text}", ctype.as_deref().unwrap_or("none"))
}

/// Snapshot `name` with the shared placeholders.
fn snap(name: &str, text: &str) {
    support::snap::settings().bind(|| insta::assert_snapshot!(name, text));
}

/// A streamed chat request for `max_tokens` tokens (`ignore_eos`), with `stream_options`.
fn chat(max_tokens: u32, stream_options: Value) -> Value {
    json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": "Say something about speed."}],
        "max_tokens": max_tokens,
        "stream": true,
        "ignore_eos": true,
        "stream_options": stream_options,
    })
}

/// A streamed completions request for `max_tokens` tokens (`ignore_eos`), with `stream_options`.
fn completion(max_tokens: u32, stream_options: Value) -> Value {
    json!({"model": "tiny", "prompt": "The speed of", "max_tokens": max_tokens, "stream": true,
           "ignore_eos": true, "stream_options": stream_options})
}

fn usage_options(include: bool, continuous: bool) -> Value {
    json!({"include_usage": include, "continuous_usage_stats": continuous})
}

/// `/metrics` once every streamed request has ended inside the twin (the request counters move
/// when a response's last byte has left, a moment after the client read it): polled until
/// `done(text)`, for at most 10 s.
async fn settled_metrics(t: &TwinHandle, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = exchange(t, "GET", "/metrics", None).await;
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "the twin's metrics did not settle:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The sum of a counter's samples in Prometheus text (every line starting `name{`).
fn counter_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

#[tokio::test]
async fn vllm_streams() {
    let t = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await.expect("twin starts");
    let chat_path = "/v1/chat/completions";
    let cases = [
        ("vllm-chat-stream-continuous-usage", chat_path, chat(4, usage_options(true, true))),
        ("vllm-chat-stream-no-usage", chat_path, chat(3, Value::Null)),
        ("vllm-chat-stream-final-usage-only", chat_path, chat(3, usage_options(true, false))),
        ("vllm-completions-stream-final-usage-only", "/v1/completions", completion(4, usage_options(true, false))),
        ("vllm-completions-stream-continuous-usage", "/v1/completions", completion(3, usage_options(true, true))),
    ];
    for (name, path, body) in &cases {
        snap(name, &exchange(&t, "POST", path, Some(body)).await);
    }
    // Whole (not streamed) answers.
    let mut whole = chat(5, Value::Null);
    whole["stream"] = json!(false);
    snap("vllm-chat-whole", &exchange(&t, "POST", chat_path, Some(&whole)).await);
    let whole = json!({"model": "tiny", "prompt": [1, 2, 3, 4], "max_tokens": 3, "ignore_eos": true});
    snap("vllm-completions-whole", &exchange(&t, "POST", "/v1/completions", Some(&whole)).await);
    // Counters after 7 answered requests (5 streamed, 2 whole), every one finished by length.
    let metrics = settled_metrics(&t, |m| counter_sum(m, "vllm:request_success_total") >= 7.0).await;
    snap("vllm-metrics-after-requests", &support::snap::mask_timing_histograms(&metrics));
    t.shutdown().await;
}

#[tokio::test]
async fn vllm_reasoning_and_keepalive_streams() {
    for (name, field) in [
        ("vllm-chat-stream-reasoning", ReasoningField::Reasoning),
        ("vllm-chat-stream-reasoning-content", ReasoningField::ReasoningContent),
    ] {
        let mut cfg = TwinConfig::new(Profile::tiny());
        cfg.reasoning = Some(field);
        cfg.reasoning_tokens = 2;
        let t = twin::start(cfg, "127.0.0.1:0").await.expect("twin starts");
        snap(name, &exchange(&t, "POST", "/v1/chat/completions", Some(&chat(4, usage_options(true, true)))).await);
        t.shutdown().await;
    }
    let mut cfg = TwinConfig::new(Profile::tiny());
    cfg.faults = vec!["keepalive".parse::<Fault>().expect("a fault")];
    let t = twin::start(cfg, "127.0.0.1:0").await.expect("twin starts");
    snap(
        "vllm-chat-stream-keepalive",
        &exchange(&t, "POST", "/v1/chat/completions", Some(&chat(2, usage_options(true, true)))).await,
    );
    t.shutdown().await;
}

#[tokio::test]
async fn vllm_discovery_errors_and_fresh_metrics() {
    let t = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await.expect("twin starts");
    let mut out = String::new();
    for path in ["/health", "/version", "/v1/models", "/get_server_info", "/nope"] {
        out.push_str(&exchange(&t, "GET", path, None).await);
        out.push_str("\n\n");
    }
    let tokenize = json!({"model": "tiny", "prompt": "The speed of light, café, 日本."});
    out.push_str(&exchange(&t, "POST", "/tokenize", Some(&tokenize)).await);
    snap("vllm-discovery", &out);
    snap("vllm-metrics-fresh", &exchange(&t, "GET", "/metrics", None).await);
    snap("vllm-errors", &errors(&t).await);
    t.shutdown().await;
}

/// Error answers: an unknown model, a prompt over max_model_len, max_tokens 0, bad JSON.
async fn errors(t: &TwinHandle) -> String {
    let mut unknown = chat(2, Value::Null);
    unknown["model"] = json!("gpt-9");
    let mut zero = chat(2, Value::Null);
    zero["max_tokens"] = json!(0);
    let long = json!({"model": "tiny", "prompt": "word ".repeat(33_000), "max_tokens": 1});
    let long = long.to_string();
    let mut out = String::new();
    for (path, body) in [("/v1/chat/completions", &unknown), ("/v1/chat/completions", &zero)] {
        out.push_str(&exchange(t, "POST", path, Some(body)).await);
        out.push_str("\n\n");
    }
    let shown = "POST /v1/completions\n(a prompt of 33,000 words, max_tokens 1)";
    out.push_str(&send(t, "POST", "/v1/completions", Some(&long), shown).await);
    out.push_str("\n\n");
    out.push_str(
        &send(t, "POST", "/v1/chat/completions", Some("{not json"), "POST /v1/chat/completions\n{not json").await,
    );
    out
}

#[tokio::test]
async fn sglang_wire() {
    let mut cfg = TwinConfig::new(Profile::tiny());
    cfg.flavor = Flavor::Sglang;
    cfg.reasoning = Some(ReasoningField::ReasoningContent);
    cfg.reasoning_tokens = 2;
    let t = twin::start(cfg, "127.0.0.1:0").await.expect("twin starts");
    let mut out = String::new();
    for path in ["/health", "/version", "/v1/models", "/get_server_info"] {
        out.push_str(&exchange(&t, "GET", path, None).await);
        out.push_str("\n\n");
    }
    snap("sglang-discovery", &out);
    snap("sglang-metrics-fresh", &exchange(&t, "GET", "/metrics", None).await);
    snap(
        "sglang-chat-stream-reasoning-content",
        &exchange(&t, "POST", "/v1/chat/completions", Some(&chat(4, usage_options(true, true)))).await,
    );
    snap(
        "sglang-completions-stream-final-usage-only",
        &exchange(&t, "POST", "/v1/completions", Some(&completion(3, usage_options(true, false)))).await,
    );
    snap("sglang-errors", &errors(&t).await);
    // SGLang's metrics have no request counter: settle on the generation tokens (4 + 3).
    let metrics = settled_metrics(&t, |m| counter_sum(m, "sglang:generation_tokens_total") >= 7.0).await;
    snap("sglang-metrics-after-requests", &support::snap::mask_timing_histograms(&metrics));
    t.shutdown().await;
}
