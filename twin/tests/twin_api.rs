//! The twin over real TCP: every endpoint, chunk shape, error and fault it serves, and the
//! h200 schedule read back from the `--trace` ground truth (planned times, so no wall-clock
//! assertions; the twin's clock runs faster than real time where the schedule is long).

use serde_json::{json, Value};
use speedmatrix_twin::{self as twin, Fault, Profile, ReasoningField, TwinConfig, TwinHandle};
use std::collections::BTreeSet;
use std::path::Path;

fn tiny() -> TwinConfig {
    TwinConfig::new(Profile::tiny())
}

async fn start(cfg: TwinConfig) -> TwinHandle {
    twin::start(cfg, "127.0.0.1:0").await.expect("twin starts")
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn get(url: &str) -> (u16, String) {
    let r = client().get(url).send().await.expect("GET");
    let s = r.status().as_u16();
    (s, r.text().await.unwrap_or_default())
}

async fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = client().post(url).json(body).send().await.expect("POST");
    let s = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (s, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A parsed SSE stream: data payloads, comment lines, how it ended.
#[derive(Debug, Default)]
struct Sse {
    status: u16,
    data: Vec<String>,
    comments: usize,
    /// The body ended with an error (connection cut) rather than cleanly.
    cut: bool,
    reads: usize,
    /// Some read began inside a multi-byte UTF-8 character.
    read_split_inside_char: bool,
    /// The whole body as received (CRLF kept).
    body: String,
}

impl Sse {
    fn json(&self) -> Vec<Value> {
        self.data.iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).expect("chunk is JSON")).collect()
    }
    fn done(&self) -> bool {
        self.data.last().map(String::as_str) == Some("[DONE]")
    }
}

/// A small SSE reader for tests: frames end at a blank line, `:` lines are comments, CRLF
/// tolerated, frames may span reads (bytes are buffered before UTF-8 decoding).
async fn sse(url: &str, body: &Value) -> Sse {
    let mut r = client().post(url).json(body).send().await.expect("POST");
    let mut out = Sse { status: r.status().as_u16(), ..Default::default() };
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match r.chunk().await {
            Ok(Some(b)) => {
                out.reads += 1;
                if b.first().is_some_and(|c| c & 0xC0 == 0x80) {
                    out.read_split_inside_char = true;
                }
                buf.extend_from_slice(&b);
            }
            Ok(None) => break,
            Err(_) => {
                out.cut = true;
                break;
            }
        }
    }
    out.body = String::from_utf8(buf).expect("stream is UTF-8");
    let text = out.body.replace("\r\n", "\n");
    for frame in text.split("\n\n") {
        let mut data = Vec::new();
        for line in frame.lines() {
            if line.starts_with(':') {
                out.comments += 1;
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d).to_string());
            }
        }
        if !data.is_empty() {
            out.data.push(data.join("\n"));
        }
    }
    out
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn set(k: &[&str]) -> BTreeSet<String> {
    k.iter().map(|s| s.to_string()).collect()
}

fn chat(max_tokens: u32, stream: bool) -> Value {
    json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": "Say something about speed."}],
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": true,
        "stream_options": if stream { json!({"include_usage": true, "continuous_usage_stats": true}) } else { Value::Null },
    })
}

fn read_trace(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("trace exists")
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace line is JSON"))
        .collect()
}

#[tokio::test]
async fn health_version_models() {
    let t = start(tiny()).await;
    let u = t.url();
    assert_eq!(get(&format!("{u}/health")).await, (200, String::new()));
    let (s, v) = get(&format!("{u}/version")).await;
    assert_eq!(s, 200);
    let v: Value = serde_json::from_str(&v).unwrap();
    // The version it imitates, labelled as the twin's.
    assert_eq!(v, json!({"version": "0.26.1rc1.dev638+g52be12cfa.speedmatrix.twin"}));
    let (s, m) = get(&format!("{u}/v1/models")).await;
    assert_eq!(s, 200);
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "tiny");
    assert_eq!(m["data"][0]["root"], "speedmatrix/tiny-twin");
    assert_eq!(m["data"][0]["max_model_len"], 32768);
    let (s, body) = get(&format!("{u}/nope")).await;
    assert_eq!((s, body.as_str()), (404, r#"{"detail":"Not Found"}"#));
    t.shutdown().await;
}

#[tokio::test]
async fn every_answer_says_it_is_the_twin() {
    let mut cfg = tiny();
    cfg.profile.engine_version = "0.11.0".into();
    let t = start(cfg).await;
    let u = t.url();
    for path in ["/health", "/version", "/v1/models", "/metrics", "/nope"] {
        let r = reqwest::get(format!("{u}{path}")).await.unwrap();
        let h = r.headers().get("x-speedmatrix-twin").map(|v| v.to_str().unwrap().to_string());
        assert_eq!(h.as_deref(), Some("tiny"), "{path}");
    }
    let v: Value = reqwest::get(format!("{u}/version")).await.unwrap().json().await.unwrap();
    assert_eq!(v["version"], "0.11.0+speedmatrix.twin", "--engine-version still sets what it imitates");
    let m: Value = reqwest::get(format!("{u}/v1/models")).await.unwrap().json().await.unwrap();
    assert_eq!(m["data"][0]["owned_by"], "speedmatrix-twin");
    // Streams too.
    let r = reqwest::Client::new()
        .post(format!("{u}/v1/completions"))
        .json(&json!({"prompt": "hi", "max_tokens": 2, "stream": true}))
        .send()
        .await
        .unwrap();
    assert!(r.headers().contains_key("x-speedmatrix-twin"));
    let _ = r.text().await;
    t.shutdown().await;
}

#[tokio::test]
async fn h200_profile_announces_the_seed_server() {
    let t = start(TwinConfig::new(Profile::h200_qwen())).await;
    let u = t.url();
    let m: Value = serde_json::from_str(&get(&format!("{u}/v1/models")).await.1).unwrap();
    assert_eq!(m["data"][0]["id"], "qwen");
    assert_eq!(m["data"][0]["max_model_len"], 262144);
    let (_, metrics) = get(&format!("{u}/metrics")).await;
    assert!(metrics.contains("kv_cache_size_tokens=\"6291456\""), "{metrics}");
    assert!(metrics.contains("num_gpu_blocks=\"393216\""));
    assert!(metrics.contains("block_size=\"16\""));
    t.shutdown().await;
}

#[tokio::test]
async fn chat_stream_chunk_shapes() {
    let t = start(tiny()).await;
    let s = sse(&format!("{}/v1/chat/completions", t.url()), &chat(5, true)).await;
    assert_eq!(s.status, 200);
    assert!(s.done(), "ends with [DONE]");
    let c = s.json();
    // Role-only first chunk, exactly as vLLM sends it.
    assert_eq!(keys(&c[0]), set(&["id", "object", "created", "model", "choices", "usage"]));
    assert_eq!(c[0]["object"], "chat.completion.chunk");
    assert_eq!(c[0]["model"], "tiny");
    assert!(c[0]["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(keys(&c[0]["choices"][0]), set(&["index", "delta", "logprobs", "finish_reason"]));
    assert_eq!(c[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(c[0]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(c[0]["usage"]["completion_tokens"], 0);
    // Content chunks, the last one with finish_reason.
    let n = c.len();
    for ch in &c[1..n - 1] {
        assert_eq!(ch["id"], c[0]["id"]);
        assert!(keys(&ch["choices"][0]["delta"]) == set(&["content"]));
    }
    let fin = &c[n - 2]["choices"][0];
    assert_eq!(fin["finish_reason"], "length");
    assert!(fin.as_object().unwrap().contains_key("stop_reason"));
    // Usage chunk: choices [] and the totals.
    assert_eq!(c[n - 1]["choices"], json!([]));
    let u = &c[n - 1]["usage"];
    assert_eq!(keys(u), set(&["prompt_tokens", "completion_tokens", "total_tokens"]));
    assert_eq!(u["completion_tokens"], 5);
    assert_eq!(u["total_tokens"].as_u64().unwrap(), u["prompt_tokens"].as_u64().unwrap() + 5);
    // Continuous usage grows with the tokens each chunk carries.
    let mut prev = 0;
    for ch in &c[..n - 1] {
        let now = ch["usage"]["completion_tokens"].as_u64().unwrap();
        assert!(now >= prev);
        prev = now;
    }
    assert_eq!(prev, 5);
    t.shutdown().await;
}

#[tokio::test]
async fn stream_without_usage_options_has_no_usage() {
    let t = start(tiny()).await;
    let mut body = chat(3, true);
    body["stream_options"] = Value::Null;
    let s = sse(&format!("{}/v1/chat/completions", t.url()), &body).await;
    assert!(s.done());
    for c in s.json() {
        assert!(c.get("usage").is_none(), "{c}");
        assert_eq!(c["choices"].as_array().unwrap().len(), 1);
    }
    t.shutdown().await;
}

#[tokio::test]
async fn completions_stream_and_full_shapes() {
    let t = start(tiny()).await;
    let u = t.url();
    let body = json!({"model": "tiny", "prompt": "The speed of", "max_tokens": 4, "stream": true,
                      "ignore_eos": true, "stream_options": {"include_usage": true}});
    let s = sse(&format!("{u}/v1/completions"), &body).await;
    assert!(s.done());
    let c = s.json();
    assert_eq!(c.len(), 5, "4 token chunks + usage");
    assert_eq!(c[0]["object"], "text_completion");
    assert!(c[0]["id"].as_str().unwrap().starts_with("cmpl-"));
    // Completions chunks carry every field (vLLM: exclude_unset=False), null when unset.
    assert_eq!(keys(&c[0]), set(&["id", "object", "created", "model", "choices", "usage"]));
    assert_eq!(c[0]["usage"], Value::Null);
    assert_eq!(
        keys(&c[0]["choices"][0]),
        set(&["index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_token_ids", "token_ids"])
    );
    assert_eq!(c[3]["choices"][0]["finish_reason"], "length");
    assert_eq!(c[4]["choices"], json!([]));
    assert_eq!(c[4]["usage"]["completion_tokens"], 4);
    assert_eq!(c[4]["usage"]["prompt_tokens"], 3);

    let (st, v) = post(
        &format!("{u}/v1/completions"),
        &json!({"model": "tiny", "prompt": [1, 2, 3, 4], "max_tokens": 3, "ignore_eos": true}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["usage"]["prompt_tokens"], 4);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    assert_eq!(v["choices"][0]["finish_reason"], "length");

    let (st, v) = post(&format!("{u}/v1/chat/completions"), &chat(7, false)).await;
    assert_eq!(st, 200);
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["usage"]["completion_tokens"], 7);
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(twin::tokenizer::count(text), 7);
    t.shutdown().await;
}

#[tokio::test]
async fn tokenize_usage_and_stream_agree() {
    let t = start(tiny()).await;
    let u = t.url();
    let prompt = "Benchmarks measure wrong in many ways: chunks, reasoning, café, 日本.";
    let (s, tok) = post(&format!("{u}/tokenize"), &json!({"model": "tiny", "prompt": prompt})).await;
    assert_eq!(s, 200);
    assert_eq!(keys(&tok), set(&["count", "max_model_len", "tokens", "token_strs"]));
    assert_eq!(tok["max_model_len"], 32768);
    let count = tok["count"].as_u64().unwrap();
    assert_eq!(tok["tokens"].as_array().unwrap().len() as u64, count);
    let (_, v) =
        post(&format!("{u}/v1/completions"), &json!({"prompt": prompt, "max_tokens": 2, "ignore_eos": true})).await;
    assert_eq!(v["usage"]["prompt_tokens"].as_u64().unwrap(), count);
    // Chat: /tokenize with messages counts the template like the request does.
    let msgs = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]);
    let (_, tok) = post(&format!("{u}/tokenize"), &json!({"messages": msgs})).await;
    let mut body = chat(40, true);
    body["messages"] = msgs;
    let s = sse(&format!("{u}/v1/chat/completions"), &body).await;
    let c = s.json();
    let usage = &c.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], tok["count"]);
    let text: String = c.iter().filter_map(|ch| ch["choices"][0]["delta"]["content"].as_str()).collect();
    let (_, back) = post(&format!("{u}/tokenize"), &json!({"prompt": text})).await;
    assert_eq!(back["count"], usage["completion_tokens"]);
    assert_eq!(usage["completion_tokens"], 40);
    t.shutdown().await;
}

#[tokio::test]
async fn max_tokens_min_tokens_and_eos() {
    let t = start(tiny()).await;
    let u = format!("{}/v1/chat/completions", t.url());
    // max_completion_tokens wins over max_tokens.
    let mut b = chat(50, false);
    b["max_completion_tokens"] = json!(3);
    let (_, v) = post(&u, &b).await;
    assert_eq!(v["usage"]["completion_tokens"], 3);
    // Without ignore_eos the answer stops on its own (16…512 tokens) before a large limit.
    let mut stops = 0;
    for seed in 0..6 {
        let mut b = chat(2000, false);
        b["ignore_eos"] = json!(false);
        b["seed"] = json!(seed);
        b["temperature"] = json!(0.7);
        let (_, v) = post(&u, &b).await;
        let n = v["usage"]["completion_tokens"].as_u64().unwrap();
        assert!((16..=512).contains(&n), "{n}");
        if v["choices"][0]["finish_reason"] == "stop" {
            stops += 1;
        }
    }
    assert_eq!(stops, 6);
    // min_tokens holds the answer open; a small max_tokens still ends it with "length".
    let mut b = chat(600, false);
    b["ignore_eos"] = json!(false);
    b["min_tokens"] = json!(520);
    let (_, v) = post(&u, &b).await;
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() >= 520);
    let mut b = chat(4, false);
    b["ignore_eos"] = json!(false);
    let (_, v) = post(&u, &b).await;
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    t.shutdown().await;
}

#[tokio::test]
async fn errors_look_like_vllm() {
    let mut cfg = tiny();
    cfg.api_key = Some("sekret".into());
    let t = start(cfg).await;
    let u = t.url();
    // 401 without or with a wrong key; metrics, health, tokenize need none.
    let r = client().get(format!("{u}/v1/models")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.text().await.unwrap(), r#"{"error":"Unauthorized"}"#);
    let r = client()
        .post(format!("{u}/v1/chat/completions"))
        .bearer_auth("wrong")
        .json(&chat(2, false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(get(&format!("{u}/metrics")).await.0, 200);
    assert_eq!(get(&format!("{u}/health")).await.0, 200);
    let ok = |b: &Value| client().post(format!("{u}/v1/chat/completions")).bearer_auth("sekret").json(b).send();
    let r = ok(&chat(2, false)).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // 404 unknown model.
    let mut b = chat(2, false);
    b["model"] = json!("gpt-9");
    let r = ok(&b).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(keys(&v["error"]), set(&["message", "type", "param", "code"]));
    assert_eq!(v["error"]["code"], 404);
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-9"));
    // 400 prompt longer than max_model_len, in vLLM's wording.
    let long = "word ".repeat(33_000);
    let mut b = chat(2, false);
    b["messages"] = json!([{"role": "user", "content": long}]);
    let r = ok(&b).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("maximum context length is 32768 tokens"), "{msg}");
    assert_eq!(v["error"]["type"], "BadRequestError");
    // 400 when prompt + max_tokens exceed it.
    let r = ok(&chat(32_760, false)).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("maximum context length"));
    let r = client()
        .post(format!("{u}/v1/completions"))
        .bearer_auth("sekret")
        .json(&json!({"prompt": [1, 999_999_999], "max_tokens": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Bad JSON and bad fields are 400s, not panics.
    let r =
        client().post(format!("{u}/v1/chat/completions")).bearer_auth("sekret").body("{not json").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    for bad in [
        json!({"messages": "hi"}),
        json!({"messages": [], "max_tokens": -1}),
        json!({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
        json!({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
        json!({"prompt": "x"}),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 2}),
    ] {
        let r = ok(&bad).await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], 400);
    }
    t.shutdown().await;
}

#[tokio::test]
async fn reasoning_streams_before_content() {
    let mut cfg = tiny();
    cfg.reasoning = Some(ReasoningField::Reasoning);
    cfg.reasoning_tokens = 4;
    let t = start(cfg).await;
    let u = format!("{}/v1/chat/completions", t.url());
    let c = sse(&u, &chat(10, true)).await.json();
    let reasoning: Vec<&Value> = c.iter().filter(|x| x["choices"][0]["delta"].get("reasoning").is_some()).collect();
    let content: Vec<&Value> = c.iter().filter(|x| x["choices"][0]["delta"].get("content").is_some()).collect();
    assert_eq!(reasoning.len(), 4);
    assert_eq!(content.len(), 1 + 6, "role chunk + 6 content tokens");
    // Reasoning eats max_tokens: no content at all, yet tokens were generated.
    let c = sse(&u, &chat(3, true)).await.json();
    let content: String = c.iter().filter_map(|x| x["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(content, "");
    assert_eq!(c.last().unwrap()["usage"]["completion_tokens"], 3);
    t.shutdown().await;

    let mut cfg = tiny();
    cfg.reasoning = Some(ReasoningField::ReasoningContent);
    cfg.reasoning_tokens = 2;
    let t = start(cfg).await;
    let u = format!("{}/v1/chat/completions", t.url());
    let c = sse(&u, &chat(4, true)).await.json();
    assert!(c[1]["choices"][0]["delta"].get("reasoning_content").is_some());
    let (_, v) = post(&u, &chat(4, false)).await;
    let m = &v["choices"][0]["message"];
    assert_eq!(twin::tokenizer::count(m["reasoning_content"].as_str().unwrap()), 2);
    assert_eq!(twin::tokenizer::count(m["content"].as_str().unwrap()), 2);
    t.shutdown().await;
}

#[tokio::test]
async fn speculative_chunks_carry_several_tokens_and_counters_move() {
    let mut cfg = tiny();
    cfg.profile.spec_tokens = 2;
    cfg.seed = 3;
    let t = start(cfg).await;
    let s = sse(&format!("{}/v1/chat/completions", t.url()), &chat(60, true)).await;
    let c = s.json();
    let mut prev = 0;
    let mut multi = 0;
    for ch in &c[..c.len() - 1] {
        let now = ch["usage"]["completion_tokens"].as_u64().unwrap();
        assert!(now - prev <= 3);
        if now - prev > 1 {
            multi += 1;
        }
        let text = ch["choices"][0]["delta"]["content"].as_str().unwrap_or("");
        assert_eq!(twin::tokenizer::count(text) as u64, now - prev);
        prev = now;
    }
    assert_eq!(prev, 60);
    assert!(multi > 0, "some chunks carry more than one token");
    assert!(c.len() < 60, "fewer chunks than tokens");
    let (_, m) = get(&format!("{}/metrics", t.url())).await;
    let val = |name: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(name) && l.contains('{'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    assert!(val("vllm:spec_decode_num_drafts_total") > 0.0);
    assert!(val("vllm:spec_decode_num_accepted_tokens_total") > 0.0);
    assert_eq!(val("vllm:generation_tokens_total"), 60.0);
    t.shutdown().await;
}

#[tokio::test]
async fn metrics_have_vllm_names_and_labels() {
    let t = start(tiny()).await;
    let _ = post(&format!("{}/v1/chat/completions", t.url()), &chat(3, false)).await;
    let (s, m) = get(&format!("{}/metrics", t.url())).await;
    assert_eq!(s, 200);
    for name in [
        "vllm:num_requests_running{",
        "vllm:num_requests_waiting{",
        "vllm:kv_cache_usage_perc{",
        "vllm:cache_config_info{",
        "vllm:prompt_tokens_total{",
        "vllm:generation_tokens_total{",
        "vllm:prefix_cache_queries_total{",
        "vllm:prefix_cache_hits_total{",
        "vllm:num_preemptions_total{",
        "vllm:time_to_first_token_seconds_bucket{",
        "vllm:inter_token_latency_seconds_count{",
        "vllm:e2e_request_latency_seconds_sum{",
        "# TYPE vllm:generation_tokens_total counter",
    ] {
        assert!(m.contains(name), "missing {name}");
    }
    assert!(m.contains(r#"vllm:num_requests_running{engine="0",model_name="tiny"} 0.0"#));
    assert!(m.contains(r#"vllm:generation_tokens_total{engine="0",model_name="tiny"} 3.0"#));
    assert!(m.contains("enable_prefix_caching=\"True\""));
    // As vLLM, which creates them only with a speculative config: no speculation, no counters.
    assert!(!m.contains("spec_decode"), "{m}");
    t.shutdown().await;
}

/// Ngram speculation (`--spec-decode ngram:3`): vLLM's counters, the per-position one by its
/// `position` label, agree with each other and with the trace's count of each request.
#[tokio::test]
async fn ngram_speculation_counts_per_position_and_in_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut cfg = tiny();
    cfg.profile.spec_tokens = 3;
    cfg.spec_ngram = true;
    cfg.trace = Some(path.clone());
    let t = start(cfg).await;
    for _ in 0..2 {
        let (s, _) = post(&format!("{}/v1/chat/completions", t.url()), &chat(200, false)).await;
        assert_eq!(s, 200);
    }
    let (_, m) = get(&format!("{}/metrics", t.url())).await;
    let val = |name: &str| -> f64 {
        let line = m.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {m}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (drafts, tokens, accepted) = (
        val("vllm:spec_decode_num_drafts_total{"),
        val("vllm:spec_decode_num_draft_tokens_total{"),
        val("vllm:spec_decode_num_accepted_tokens_total{"),
    );
    assert!(drafts > 0.0 && tokens == 3.0 * drafts, "{m}");
    let per_pos: Vec<f64> = (0..3)
        .map(|k| val(&format!("vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",model_name=\"tiny\",position=\"{k}\"}}")))
        .collect();
    assert_eq!(per_pos.iter().sum::<f64>(), accepted, "{per_pos:?}");
    assert!(per_pos[0] >= per_pos[1] && per_pos[1] >= per_pos[2], "{per_pos:?}");
    t.shutdown().await;
    let lines: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    // The same prompt, the same draws: equal counts for both requests.
    assert_eq!(lines[0]["spec"], lines[1]["spec"], "{lines:?}");
    let sum = |k: &str| lines.iter().map(|l| l["spec"][k].as_f64().unwrap()).sum::<f64>();
    assert_eq!((sum("drafts"), sum("draft_tokens"), sum("accepted_tokens")), (drafts, tokens, accepted));
}

#[tokio::test]
async fn prefix_cache_hits_show_in_metrics_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut cfg = tiny();
    cfg.trace = Some(path.clone());
    let t = start(cfg).await;
    let body = json!({"prompt": (0..200).collect::<Vec<u32>>(), "max_tokens": 2, "ignore_eos": true});
    for _ in 0..2 {
        let (s, _) = post(&format!("{}/v1/completions", t.url()), &body).await;
        assert_eq!(s, 200);
    }
    let (_, m) = get(&format!("{}/metrics", t.url())).await;
    assert!(m.contains(r#"vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 192.0"#), "{m}");
    t.shutdown().await;
    let tr = read_trace(&path);
    assert_eq!(tr.len(), 2);
    assert_eq!(tr[0]["cached_tokens"], 0);
    assert_eq!(tr[1]["cached_tokens"], 192);
}

async fn faulty(fault: &str, body: &Value) -> (Sse, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut cfg = tiny();
    cfg.faults = vec![fault.parse::<Fault>().unwrap()];
    cfg.trace = Some(path.clone());
    let t = start(cfg).await;
    let s = sse(&format!("{}/v1/chat/completions", t.url()), body).await;
    t.shutdown().await;
    let tr = read_trace(&path);
    assert_eq!(tr.len(), 1);
    (s, tr[0].clone())
}

#[tokio::test]
async fn fault_drop_cuts_the_stream() {
    let (s, tr) = faulty("drop", &chat(20, true)).await;
    assert!(s.cut, "connection closed mid-stream");
    assert!(!s.done());
    let c = s.json();
    let got = c.last().unwrap()["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(got > 0 && got < 20, "{got}");
    assert_eq!(tr["outcome"], "fault");
    assert_eq!(tr["faults"], json!(["drop"]));
}

#[tokio::test]
async fn fault_no_done_and_inband_error() {
    let (s, tr) = faulty("no-done", &chat(6, true)).await;
    assert!(!s.cut && !s.done());
    assert_eq!(s.json().last().unwrap()["choices"], json!([]), "usage chunk still sent");
    assert_eq!(tr["outcome"], "fault");

    let (s, tr) = faulty("inband-error", &chat(10, true)).await;
    assert_eq!(s.status, 200);
    let c = s.json();
    let err = c.last().unwrap();
    assert_eq!(keys(err), set(&["error"]));
    assert_eq!(err["error"]["code"], 500);
    assert!(s.done());
    assert!(c.iter().all(|x| x["choices"][0]["finish_reason"] != "length"));
    assert_eq!(tr["outcome"], "fault");
}

#[tokio::test]
async fn fault_stall_pauses_writing() {
    let (s, tr) = faulty("stall=300ms", &chat(8, true)).await;
    assert!(s.done());
    let chunks = tr["chunks"].as_array().unwrap();
    let gaps: Vec<f64> = chunks
        .windows(2)
        .map(|w| w[1]["written_ms"].as_f64().unwrap() - w[0]["written_ms"].as_f64().unwrap())
        .collect();
    let max = gaps.iter().cloned().fold(0.0, f64::max);
    assert!(max >= 300.0, "a write waited for the stall: {gaps:?}");
    // The schedule itself did not stall.
    let planned: Vec<f64> = chunks.iter().map(|c| c["planned_ms"].as_f64().unwrap()).collect();
    assert!(planned.last().unwrap() - planned[0] < 300.0);
}

#[tokio::test]
async fn fault_status_codes() {
    for (code, kind) in [(500u16, "InternalServerError"), (503, "ServiceUnavailableError"), (429, "RateLimitError")] {
        let (s, tr) = faulty(&format!("status={code}"), &chat(4, true)).await;
        assert_eq!(s.status, code);
        assert_eq!((&tr["status"], &tr["outcome"]), (&json!(code), &json!("fault")));
        // A streamed request that a status fault strikes gets vLLM's JSON error body, no SSE.
        assert!(s.data.is_empty(), "no SSE frames: {:?}", s.data);
        let v: Value = serde_json::from_str(&s.body).expect("the error body is JSON");
        assert_eq!((&v["error"]["code"], &v["error"]["type"]), (&json!(code), &json!(kind)), "{v}");
    }
    let mut cfg = tiny();
    cfg.faults = vec!["status=503".parse().unwrap()];
    let t = start(cfg).await;
    let (s, v) = post(&format!("{}/v1/chat/completions", t.url()), &chat(2, false)).await;
    assert_eq!(s, 503);
    assert_eq!(v["error"]["code"], 503);
    t.shutdown().await;
}

#[tokio::test]
async fn fault_keepalive_and_split_are_legal_sse() {
    let (s, tr) = faulty("keepalive", &chat(5, true)).await;
    assert!(s.done());
    assert!(s.comments >= 5);
    let c = s.json();
    assert_eq!(c.last().unwrap()["usage"]["completion_tokens"], 5);
    assert_eq!(tr["outcome"], "complete");

    let (s, tr) = faulty("split", &chat(100, true)).await;
    assert!(s.done());
    let c = s.json();
    assert_eq!(c.last().unwrap()["usage"]["completion_tokens"], 100);
    assert!(s.read_split_inside_char, "a frame was cut inside a character");
    assert_eq!(tr["outcome"], "complete");
    assert!(s.reads > c.len(), "frames arrived in pieces: {} reads", s.reads);
}

#[tokio::test]
async fn endpoint_404_faults_and_rates() {
    let mut cfg = tiny();
    cfg.faults = ["metrics-404", "tokenize-404", "version-404"].iter().map(|f| f.parse().unwrap()).collect();
    let t = start(cfg).await;
    let u = t.url();
    assert_eq!(get(&format!("{u}/metrics")).await.0, 404);
    assert_eq!(get(&format!("{u}/version")).await.0, 404);
    assert_eq!(post(&format!("{u}/tokenize"), &json!({"prompt": "x"})).await.0, 404);
    assert_eq!(get(&format!("{u}/health")).await.0, 200);
    t.shutdown().await;

    let mut cfg = tiny();
    cfg.faults = vec!["status=500@0.5".parse().unwrap()];
    cfg.seed = 9;
    let t = start(cfg).await;
    let mut failed = 0;
    for _ in 0..40 {
        if post(&format!("{}/v1/completions", t.url()), &json!({"prompt": "x", "max_tokens": 1})).await.0 == 500 {
            failed += 1;
        }
    }
    assert!((8..=32).contains(&failed), "{failed} of 40");
    t.shutdown().await;
}

#[tokio::test]
async fn trace_is_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut cfg = tiny();
    cfg.trace = Some(path.clone());
    let t = start(cfg).await;
    let s = sse(&format!("{}/v1/chat/completions", t.url()), &chat(12, true)).await;
    let (st, _) = post(&format!("{}/v1/chat/completions", t.url()), &json!({"messages": 3})).await;
    assert_eq!(st, 400);
    t.shutdown().await;
    let tr = read_trace(&path);
    assert_eq!(tr.len(), 2);
    let r = tr.iter().find(|r| r["status"] == 200).unwrap();
    let c = s.json();
    assert_eq!(r["id"], c[0]["id"]);
    assert_eq!(r["output_tokens"], 12);
    let chunks = r["chunks"].as_array().unwrap();
    let kinds: Vec<&str> = chunks.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"role"));
    assert_eq!(&kinds[kinds.len() - 3..], &["finish", "usage", "done"]);
    let tokens: u64 = chunks.iter().map(|c| c["tokens"].as_u64().unwrap()).sum();
    assert_eq!(tokens, 12);
    let arrival = r["arrival_ms"].as_f64().unwrap();
    let mut prev_w = 0.0;
    for ch in chunks {
        let p = ch["planned_ms"].as_f64().unwrap();
        let w = ch["written_ms"].as_f64().unwrap();
        assert!(p >= arrival && w >= p - 1e-6 && w >= prev_w, "{ch}");
        prev_w = w;
    }
    let rej = tr.iter().find(|r| r["status"] == 400).unwrap();
    assert_eq!(rej["outcome"], "rejected");
}

// ---- The h200 schedule, read from the trace ----------------------------------------------

/// Start an h200 twin whose clock runs `scale` times faster than real time, with a trace.
async fn h200(scale: f64, path: &Path) -> TwinHandle {
    let mut cfg = TwinConfig::new(Profile::h200_qwen());
    cfg.time_scale = scale;
    cfg.trace = Some(path.to_path_buf());
    cfg.seed = 1;
    start(cfg).await
}

fn token_prompt(key: u32, len: u32) -> Value {
    json!((0..len).map(|i| (i.wrapping_mul(2654435761) ^ key) % 150_000).collect::<Vec<u32>>())
}

fn planned(r: &Value, kind: &str) -> Vec<(f64, u64)> {
    r["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| kind.is_empty() || c["kind"] == kind || (kind == "tok" && c["tokens"].as_u64().unwrap() > 0))
        .map(|c| (c["planned_ms"].as_f64().unwrap(), c["tokens"].as_u64().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h200_trace_one_stream_8k_and_128k_ttft() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let t = h200(40.0, &path).await;
    let u = format!("{}/v1/completions", t.url());
    let p8 = token_prompt(1, 8192);
    let p128 = token_prompt(2, 131_072);
    // Warm 8K, then one stream of 1,000 tokens on the warm prompt.
    post(&u, &json!({"prompt": p8, "max_tokens": 1})).await;
    let s = sse(&u, &json!({"prompt": p8, "max_tokens": 1000, "ignore_eos": true, "stream": true})).await;
    assert!(s.done());
    // 128K cold, then warm.
    for _ in 0..2 {
        let (st, _) = post(&u, &json!({"prompt": p128, "max_tokens": 1})).await;
        assert_eq!(st, 200);
    }
    t.shutdown().await;
    let tr = read_trace(&path);
    assert_eq!(tr.len(), 4);
    // One stream at 8K: tokens after the first ÷ time from first to last token.
    let toks = planned(&tr[1], "tok");
    let (t0, t1) = (toks[0].0, toks.last().unwrap().0);
    let n: u64 = toks[1..].iter().map(|x| x.1).sum();
    let tps = n as f64 / ((t1 - t0) / 1000.0);
    assert!((tps - 240.0).abs() <= 0.15 * 240.0, "1 × 8K decodes at {tps:.1} tok/s");
    // 128K TTFT cold and warm: planned time of the answer − hand-over to the engine (the
    // twin's own parsing time is left out: at 40× it would count 40 times over).
    let ttft = |r: &Value| planned(r, "finish")[0].0 - r["engine_ms"].as_f64().unwrap();
    let (cold, warm) = (ttft(&tr[2]), ttft(&tr[3]));
    assert!((cold - 7800.0).abs() <= 0.15 * 7800.0, "cold TTFT {cold:.0} ms");
    assert!(warm < 1000.0, "warm TTFT {warm:.0} ms");
    assert_eq!(tr[3]["cached_tokens"], 131_072 - 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h200_trace_128_streams_at_8k() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    // The decode schedule alone: without the front end's one-at-a-time intake (~160 ms per 8K
    // request, 20 s for 128) the 128 streams start together and overlap for long enough.
    let mut cfg = TwinConfig::new(Profile::h200_qwen());
    cfg.profile.frontend = speedmatrix_twin::profile::FrontendModel::default();
    cfg.time_scale = 4.0;
    cfg.trace = Some(path.clone());
    cfg.seed = 1;
    let t = start(cfg).await;
    let u = format!("{}/v1/completions", t.url());
    let p8 = token_prompt(3, 8192);
    post(&u, &json!({"prompt": p8, "max_tokens": 1})).await;
    // A cold 128K prefill holds the engine (it takes every step's token budget for 7.8 s of
    // twin time), so the 128 streams, however slowly this machine sends them, queue up and
    // start together, as a benchmark's streams would against the real server.
    let blocker = {
        let (u, b) = (u.clone(), json!({"prompt": token_prompt(4, 131_072), "max_tokens": 1}));
        tokio::spawn(async move { post(&u, &b).await })
    };
    // Wait until the blocker runs.
    loop {
        let (_, m) = get(&format!("{}/metrics", t.url())).await;
        if m.contains(r#"vllm:num_requests_running{engine="0",model_name="qwen"} 1.0"#) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let body = json!({"prompt": p8, "max_tokens": 300, "ignore_eos": true, "stream": true});
    let mut tasks = Vec::new();
    for _ in 0..128 {
        let (u, b) = (u.clone(), body.clone());
        tasks.push(tokio::spawn(async move { sse(&u, &b).await }));
    }
    for task in tasks {
        assert!(task.await.unwrap().done());
    }
    assert_eq!(blocker.await.unwrap().0, 200);
    t.shutdown().await;
    let tr = read_trace(&path);
    let streams: Vec<&Value> = tr.iter().filter(|r| r["stream"] == true).collect();
    assert_eq!(streams.len(), 128);
    // Window: from the moment the last stream got its first token to the first stream's end.
    let start = streams.iter().map(|r| planned(r, "tok")[0].0).fold(0.0, f64::max);
    let end = streams.iter().map(|r| planned(r, "tok").last().unwrap().0).fold(f64::INFINITY, f64::min);
    assert!(end - start > 1000.0, "window {:.0} ms", end - start);
    let tokens: u64 =
        streams.iter().flat_map(|r| planned(r, "tok")).filter(|(p, _)| *p > start && *p <= end).map(|(_, n)| n).sum();
    let tps = tokens as f64 / ((end - start) / 1000.0);
    assert!((tps - 6300.0).abs() <= 0.15 * 6300.0, "128 × 8K: {tps:.0} tok/s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_when_the_kv_cache_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let mut cfg = tiny();
    // 256 blocks of 16: two requests of 1,500 + 50 tokens fit, a third must wait.
    cfg.profile.kv_tokens = 4096;
    cfg.trace = Some(path.clone());
    let t = start(cfg).await;
    let u = format!("{}/v1/completions", t.url());
    let mut tasks = Vec::new();
    for k in 0..4u32 {
        let body = json!({"prompt": token_prompt(k + 10, 1500), "max_tokens": 50,
                          "ignore_eos": true, "stream": true});
        let u = u.clone();
        tasks.push(tokio::spawn(async move { sse(&u, &body).await }));
    }
    for task in tasks {
        assert!(task.await.unwrap().done(), "every request completes in the end");
    }
    t.shutdown().await;
    let tr = read_trace(&path);
    let mut spans: Vec<(f64, f64)> = tr
        .iter()
        .map(|r| {
            let p = planned(r, "tok");
            (p[0].0, p.last().unwrap().0)
        })
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    // At no planned instant do more than two requests hold KV (first token … last token).
    for &(s, _) in &spans {
        let live = spans.iter().filter(|&&(a, b)| a <= s && s < b).count();
        assert!(live <= 2, "{live} running at {s}: {spans:?}");
    }
    assert!(spans[2].0 >= spans[0].1.min(spans[1].1), "the third waited: {spans:?}");
}

/// A twin that cannot start says why, naming the trace path or the address.
#[tokio::test]
async fn start_errors_name_the_path_or_the_address() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("trace.jsonl");
    let mut cfg = tiny();
    cfg.trace = Some(path.clone());
    let e = twin::start(cfg, "127.0.0.1:0").await.unwrap_err();
    assert!(matches!(&e, twin::StartError::Trace { path: p, .. } if *p == path), "{e:?}");
    assert!(e.to_string().starts_with(&format!("cannot create the trace file {}: ", path.display())), "{e}");

    let e = twin::start(tiny(), "not an address").await.unwrap_err();
    assert!(matches!(&e, twin::StartError::Listen { addr, .. } if addr == "not an address"), "{e:?}");
    let held = start(tiny()).await;
    let e = twin::start(tiny(), &held.addr().to_string()).await.unwrap_err();
    assert!(e.to_string().starts_with(&format!("cannot listen on {}: ", held.addr())), "{e}");
    held.shutdown().await;
}
