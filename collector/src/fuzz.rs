//! Fuzzing (property tests) of every parser of outside input in the collector: the SSE framing
//! with the chunk parser, the Prometheus text parser, the launch-command redactor and the
//! `run` flags. Case counts are bounded for the normal test run; `PROPTEST_CASES=N` gives the
//! long form (docs/ARCHITECTURE.md, "Tests").

use crate::measuring::launch::{redact_argv, scrub, REDACTED};
use crate::measuring::prometheus;
use crate::measuring::wire::{ChunkError, ChunkParser};
use proptest::prelude::*;

/// `PROPTEST_CASES` if set, else `default`.
fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    ProptestConfig { cases: n, failure_persistence: None, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------
// SSE: any split of a byte stream into reads gives the same events and token counts.

/// One frame of a generated stream.
#[derive(Debug, Clone)]
enum Frame {
    /// A chunk with `text` and `tokens` new tokens; with usage (cumulative) or without.
    Chunk { text: String, tokens: u32, usage: bool },
    /// An SSE comment (keep-alive), which carries no event.
    Comment(String),
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        6 => ("\\PC{0,12}", 0..5u32, any::<bool>()).prop_map(|(text, tokens, usage)| Frame::Chunk { text, tokens, usage }),
        1 => "[ -~]{0,10}".prop_map(Frame::Comment),
    ]
}

/// The wire bytes of `frames` (then the final usage chunk and `[DONE]`) with `eol` line ends,
/// and the events a reader must see: each chunk's payload.
fn wire(frames: &[Frame], eol: &str) -> (Vec<u8>, Vec<String>) {
    let mut out = String::new();
    let mut events = Vec::new();
    let mut total = 0u32;
    for f in frames {
        match f {
            Frame::Chunk { text, tokens, usage } => {
                total += tokens;
                let mut v = serde_json::json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}}]});
                if *usage {
                    v["usage"] = serde_json::json!({"prompt_tokens": 7, "completion_tokens": total});
                }
                let data = v.to_string();
                out.push_str(&format!("data: {data}{eol}{eol}"));
                events.push(data);
            }
            Frame::Comment(c) => out.push_str(&format!(":{c}{eol}{eol}")),
        }
    }
    let last =
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": total}}).to_string();
    out.push_str(&format!("data: {last}{eol}{eol}data: [DONE]{eol}{eol}"));
    events.push(last);
    events.push("[DONE]".into());
    (out.into_bytes(), events)
}

/// Feed `bytes` cut at `cuts` (byte offsets, anywhere — inside a line ending or a multi-byte
/// character too) to the SSE reader the client uses, and parse each event like the client.
fn read(bytes: &[u8], cuts: &[usize]) -> (Vec<String>, Vec<u32>, bool) {
    use futures_util::StreamExt;
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    at.dedup();
    let mut pieces = Vec::new();
    let mut from = 0;
    for c in at.into_iter().chain([bytes.len()]) {
        pieces.push(Ok::<_, std::convert::Infallible>(bytes::Bytes::copy_from_slice(&bytes[from..c])));
        from = c;
    }
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    rt.block_on(async {
        let mut sse = std::pin::pin!(sseer::EventStream::new(futures_util::stream::iter(pieces)));
        let (mut events, mut tokens) = (Vec::new(), Vec::new());
        let mut parser = ChunkParser::default();
        while let Some(ev) = sse.next().await {
            let ev = ev.expect("the generated stream is valid SSE");
            if ev.data.trim() != "[DONE]" {
                tokens.push(parser.parse(&ev.data).expect("a generated chunk").tokens);
            }
            events.push(ev.data.to_string());
        }
        (events, tokens, parser.continuous_usage)
    })
}

proptest! {
    #![proptest_config(cases(600))]

    #[test]
    fn any_split_of_a_stream_gives_the_same_events_and_tokens(
        frames in prop::collection::vec(frame(), 0..24),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let (bytes, expected) = wire(&frames, if crlf { "\r\n" } else { "\n" });
        let whole = read(&bytes, &[]);
        prop_assert_eq!(&whole.0, &expected);
        let split = read(&bytes, &cuts);
        prop_assert_eq!(&split, &whole);
        // Every read one byte long: the hardest split.
        let bytewise: Vec<usize> = (1..bytes.len()).collect();
        prop_assert_eq!(&read(&bytes, &bytewise), &whole);
        // Token counts: with usage on every text chunk they are the usage deltas, except that a
        // chunk with text whose usage did not grow counts 1 (a stall: its text is at least one
        // token); a chunk without usage counts 1 token if it carries text.
        let all_usage = frames.iter().all(|f| !matches!(f, Frame::Chunk { usage: false, .. }));
        if all_usage {
            let want: Vec<u32> = frames.iter().filter_map(|f| match f {
                Frame::Chunk { tokens: 0, text, .. } if !text.is_empty() => Some(1),
                Frame::Chunk { tokens, .. } => Some(*tokens),
                Frame::Comment(_) => None,
            }).chain([0]).collect();
            prop_assert_eq!(&whole.1, &want);
            prop_assert!(whole.2);
        }
    }

    /// The one-pass scan of a chunk and the full `Value` parse agree on any payload: generated
    /// chunks with odd values, the same cut short or with a byte changed anywhere, and any text.
    #[test]
    fn the_chunk_scan_and_the_full_parse_agree(
        json in json_payload(),
        common in common_chunk(),
        data in "\\PC{0,120}",
        at in any::<usize>(),
        byte in prop::sample::select(b"{}[]\",:\\ 0-9eE.nulltrfas".to_vec()),
    ) {
        // What servers send is read by the scan itself, not left to the full parse.
        prop_assert!(crate::measuring::wire::fields(&common).is_some(), "{}", common);
        let cut = |s: &str| s.char_indices().map(|(i, _)| i).nth(at % s.chars().count().max(1)).unwrap_or(0);
        let mut edited = common.clone();
        let k = cut(&common);
        edited.replace_range(k..k + common[k..].chars().next().map_or(0, char::len_utf8), &(byte as char).to_string());
        for d in [json.as_str(), common.as_str(), &common[..cut(&common)], edited.as_str(), data.as_str()] {
            for last_total in [0, 3] {
                let (mut fast, mut slow) = (ChunkParser::default(), ChunkParser::default());
                (fast.last_total, slow.last_total) = (last_total, last_total);
                let (a, b) = (fast.parse(d), slow.parse_value(d));
                prop_assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", d);
                prop_assert_eq!((fast.last_total, fast.continuous_usage), (slow.last_total, slow.continuous_usage));
            }
        }
    }

    /// Any payload: a chunk, an in-band error or "not JSON" with an excerpt; never a panic.
    #[test]
    fn any_payload_parses_or_fails_cleanly(data in "\\PC{0,200}", json in json_payload()) {
        for d in [data.as_str(), json.as_str()] {
            let mut p = ChunkParser::default();
            match p.parse(d) {
                Ok(_) | Err(ChunkError::InBand(_)) => {}
                Err(ChunkError::NotJson { excerpt, .. }) => prop_assert!(excerpt.chars().count() <= 201),
            }
        }
    }
}

/// A chunk as vLLM, SGLang and llama.cpp send it (chat or completions, with or without usage),
/// with text of any characters (escaped by the serializer as JSON requires).
fn common_chunk() -> impl Strategy<Value = String> {
    (any::<bool>(), "\\PC{0,12}", prop::option::of(0u64..5000), any::<bool>(), prop::option::of("stop|length")).prop_map(
        |(chat, text, usage, cached, finish)| {
            let choice = if chat {
                serde_json::json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": finish})
            } else {
                serde_json::json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish, "stop_reason": null})
            };
            let mut v = serde_json::json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]});
            if let Some(n) = usage {
                v["usage"] = serde_json::json!({"prompt_tokens": 128, "total_tokens": 128 + n, "completion_tokens": n});
                if cached {
                    v["usage"]["prompt_tokens_details"] = serde_json::json!({"cached_tokens": 64});
                }
            }
            v.to_string()
        },
    )
}

/// Chunk-shaped JSON with wrong types and odd values in every field the parser reads.
fn json_payload() -> impl Strategy<Value = String> {
    let odd = prop_oneof![
        Just(serde_json::Value::Null),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        Just(serde_json::Value::from(1e300)),
        "\\PC{0,6}".prop_map(serde_json::Value::from),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
    ];
    (odd.clone(), odd.clone(), odd.clone(), odd).prop_map(|(a, b, c, d)| {
        serde_json::json!({
            "choices": [{"delta": {"content": a, "tool_calls": b}, "finish_reason": c}],
            "usage": {"completion_tokens": d.clone(), "prompt_tokens_details": {"cached_tokens": d}},
            "timings": {"prompt_n": 1, "prompt_ms": 1e308},
        })
        .to_string()
    })
}

// ---------------------------------------------------------------------------------------------
// Prometheus text: any text → samples or an error naming the line; generated expositions read
// back exactly.

/// A generated sample: name, labels (unescaped values), value.
type Gen = (String, Vec<(String, String)>, f64);

fn sample() -> impl Strategy<Value = Gen> {
    let value = prop_oneof![
        any::<f64>().prop_filter("NaN is never equal", |v| !v.is_nan()),
        (0u64..1 << 53).prop_map(|v| v as f64),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ];
    ("[a-zA-Z_:][a-zA-Z0-9_:]{0,30}", prop::collection::vec(("[a-zA-Z_][a-zA-Z0-9_]{0,10}", "\\PC{0,12}"), 0..4), value)
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn exposition(samples: &[Gen], crlf: bool, with_meta: bool, timestamps: bool) -> String {
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut out = String::new();
    for (i, (name, labels, value)) in samples.iter().enumerate() {
        if with_meta {
            out.push_str(&format!("# HELP {name} Some help with \"quotes\" and \\ {{}}.{eol}# TYPE {name} gauge{eol}"));
        }
        let set: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        let labels = if set.is_empty() && i % 2 == 0 { String::new() } else { format!("{{{}}}", set.join(",")) };
        let value = match *value {
            v if v == f64::INFINITY => "+Inf".to_string(),
            v if v == f64::NEG_INFINITY => "-Inf".to_string(),
            v => format!("{v:?}"),
        };
        let ts = if timestamps { " 1700000000000" } else { "" };
        out.push_str(&format!("{name}{labels} {value}{ts}{eol}"));
        if i % 3 == 0 {
            out.push_str(eol);
        }
    }
    out
}

proptest! {
    #![proptest_config(cases(1500))]

    #[test]
    fn any_text_gives_samples_or_names_its_line(text in "\\PC{0,300}", lines in prop::collection::vec(
        r#"[a-z_:{}="\\, 0-9.eE+\-#]{0,40}"#, 0..8)) {
        for t in [text, lines.join("\n")] {
            if let Err(e) = prometheus::parse(&t) {
                prop_assert!(e.line >= 1 && e.line <= t.lines().count().max(1), "{e}");
                prop_assert!(e.excerpt.chars().count() <= 81);
            }
        }
    }

    #[test]
    fn generated_expositions_read_back(
        samples in prop::collection::vec(sample(), 0..12),
        crlf in any::<bool>(), meta in any::<bool>(), ts in any::<bool>(),
    ) {
        let text = exposition(&samples, crlf, meta, ts);
        let got = prometheus::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(got.len(), samples.len());
        for (g, (name, labels, value)) in got.iter().zip(&samples) {
            prop_assert_eq!(g.name, name.as_str());
            prop_assert_eq!(g.value, *value);
            let want: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let have: Vec<(&str, &str)> = g.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            prop_assert_eq!(have, want);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The launch-command redactor: a secret in any secret position of any command shape never
// reaches the stored line.

/// Where the secret goes.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// `--api-key S` (and the other secret flags), `--api-key=S`.
    FlagValue(&'static str, bool),
    /// `NAME=S` before the command or after `env` / `-e` / `--env`.
    Env(&'static str, &'static str),
    /// `--env=NAME=S`, as docker and podman accept.
    EnvFlagJoined(&'static str),
    /// A key-shaped value (`hf_…`, `sk-…`) after any flag, or bare.
    Shaped(&'static str, &'static str),
    /// The run's own `--api-key` anywhere, inside any argument (the last guard).
    RunKey,
}

fn slot() -> impl Strategy<Value = Slot> {
    // The redactor's own flags, and spellings of them it must also catch.
    let flags = prop::sample::select(
        crate::measuring::launch::SECRET_FLAGS
            .iter()
            .copied()
            .chain(["--API_KEY", "--openai-api-key", "--hf_token", "--admin-password"])
            .collect::<Vec<_>>(),
    );
    let envs = prop::sample::select(vec![
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "OPENAI_API_KEY",
        "VLLM_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "MYTOKEN",
        "hf_token",
    ]);
    let before = prop::sample::select(vec!["", "env", "-e", "--env"]);
    let prefixes = prop::sample::select(vec!["hf_", "sk-", "ghp_", "github_pat_", "xoxb-", "AKIA"]);
    let after = prop::sample::select(vec!["", "--model", "--served-model-name", "-m", "--foo"]);
    prop_oneof![
        (flags, any::<bool>()).prop_map(|(f, joined)| Slot::FlagValue(f, joined)),
        (envs.clone(), before).prop_map(|(e, b)| Slot::Env(e, b)),
        envs.prop_map(Slot::EnvFlagJoined),
        (prefixes, after).prop_map(|(p, a)| Slot::Shaped(p, a)),
        Just(Slot::RunKey),
    ]
}

/// Command shapes people launch servers with (argv), before the secret goes in.
fn shape() -> impl Strategy<Value = Vec<String>> {
    let base = prop::sample::select(vec![
        "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2",
        "python3 -m vllm.entrypoints.openai.api_server --model /models/q --port 8000",
        "docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model q",
        "python -m sglang.launch_server --model-path q --port 30000",
        "llama-server -m /m/q.gguf -c 8192 --port 8080",
        "speedmatrix simulate --port 8000",
    ]);
    let extra = prop::collection::vec(
        prop::sample::select(vec!["--max-model-len", "32768", "--enable-prefix-caching", "-tp", "2", "--x=y"]),
        0..4,
    );
    (base, extra).prop_map(|(b, e)| b.split(' ').map(str::to_string).chain(e.into_iter().map(str::to_string)).collect())
}

/// Insert `secret` at `slot` into `argv` at position `at`; returns the argv.
fn with_secret(mut argv: Vec<String>, slot: Slot, secret: &str, at: usize) -> Vec<String> {
    let at = 1 + at % argv.len();
    let words: Vec<String> = match slot {
        Slot::FlagValue(f, true) => vec![format!("{f}={secret}")],
        Slot::FlagValue(f, false) => vec![f.to_string(), secret.to_string()],
        Slot::Env(name, "") => {
            // An assignment before the command, as a shell writes it.
            argv.insert(0, format!("{name}={secret}"));
            return argv;
        }
        Slot::Env(name, before) => vec![before.to_string(), format!("{name}={secret}")],
        Slot::EnvFlagJoined(name) => vec![format!("--env={name}={secret}")],
        Slot::Shaped(_, "") => vec![secret.to_string()],
        Slot::Shaped(_, flag) => vec![flag.to_string(), secret.to_string()],
        Slot::RunKey => vec![format!("--header=Authorization:Bearer{secret}")],
    };
    argv.splice(at.min(argv.len())..at.min(argv.len()), words);
    argv
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn a_secret_in_any_position_never_survives(
        argv in shape(),
        slot in slot(),
        body in "[A-Za-z0-9_-]{16,40}",
        at in any::<usize>(),
    ) {
        let secret = match slot {
            Slot::Shaped(prefix, _) => format!("{prefix}{body}"),
            _ => body.clone(),
        };
        let argv = with_secret(argv, slot, &secret, at);
        let run_key = matches!(slot, Slot::RunKey).then_some(secret.as_str());
        // As from /proc (an argument vector) …
        let line = scrub(&redact_argv(&argv), run_key);
        prop_assert!(!line.contains(&secret), "{:?} → {}", argv, line);
        prop_assert!(line.contains(REDACTED), "{:?} → {}", argv, line);
        // … and as `--launch-command` (one line a shell splits).
        let given = shlex::try_join(argv.iter().map(String::as_str)).expect("no NUL");
        let words = shlex::split(&given).expect("splits");
        let line = scrub(&redact_argv(&words), run_key);
        prop_assert!(!line.contains(&secret), "{} → {}", given, line);
    }

    /// Whatever the arguments, the line splits back into as many words (quoting holds).
    #[test]
    fn the_stored_line_splits_back(argv in prop::collection::vec("\\PC{0,12}", 0..8)) {
        let line = redact_argv(&argv);
        let words = shlex::split(&line).unwrap_or_default();
        prop_assert_eq!(words.len(), argv.len(), "{:?} → {}", argv, line);
    }
}

// ---------------------------------------------------------------------------------------------
// `run` flags: any value gets the value or an error naming the flag; never a panic.

fn run_spec(extra: &[String]) -> Option<Result<crate::measuring::spec::RunSpec, crate::measuring::error::RunError>> {
    use clap::Parser;
    let base = ["speedmatrix", "run", "--dry-run", "-o", "/nonexistent-dir/fuzz.json"].map(String::from);
    let cli = crate::cli::Cli::try_parse_from(base.iter().chain(extra)).ok()?;
    match cli.command {
        crate::cli::Command::Run(a) => Some(crate::measuring::spec::RunSpec::from_args(&a)),
        _ => None,
    }
}

proptest! {
    #![proptest_config(cases(1500))]

    #[test]
    fn any_matrix_flag_value_is_read_or_refused_by_name(
        flag in prop::sample::select(vec!["--contexts", "--prefill-contexts", "--concurrency", "--duration", "--stall-timeout"]),
        value in prop_oneof![r"[0-9kKmaxnoe.,smhd +\-]{0,20}", "\\PC{0,20}"],
    ) {
        if let Some(Err(e)) = run_spec(&[flag.to_string(), value.clone()]) {
            let line = crate::command::error_line(e);
            prop_assert!(line.contains(flag) || line.contains(flag.trim_start_matches('-')), "{} {:?}: {}", flag, value, line);
        }
    }

    #[test]
    fn valid_matrix_flags_read_exactly(
        contexts in prop::collection::vec((1u64..=1024, any::<bool>()), 1..6),
        concurrency in prop::collection::vec(1u32..=4096, 1..6),
        secs in 1u64..=86_400,
        unit in prop::sample::select(vec!["s", "ms", "m"]),
    ) {
        use speedmatrix_schema::context::ContextArg;
        let ctx: Vec<String> = contexts.iter().map(|(n, k)| if *k { format!("{n}k") } else { n.to_string() }).collect();
        let conc: Vec<String> = concurrency.iter().map(u32::to_string).collect();
        let (dur, want) = match unit {
            "ms" => (format!("{}ms", secs * 1000), std::time::Duration::from_secs(secs)),
            "m" => (format!("{}m", secs.div_ceil(60).min(1440)), std::time::Duration::from_secs(secs.div_ceil(60).min(1440) * 60)),
            _ => (format!("{secs}s"), std::time::Duration::from_secs(secs)),
        };
        let args = ["--contexts".into(), ctx.join(","), "--concurrency".into(), conc.join(","), "--duration".into(), dur];
        let spec = run_spec(&args).expect("parses").expect("valid");
        let tokens: Vec<ContextArg> = contexts.iter().map(|(n, k)| ContextArg::Tokens(if *k { n * 1024 } else { *n })).collect();
        prop_assert_eq!(spec.contexts, tokens);
        prop_assert_eq!(spec.concurrency, concurrency);
        prop_assert_eq!(spec.window, want);
    }
}

// ---------------------------------------------------------------------------------------------
// Both importers: a source file with values replaced or removed anywhere converts to a run that
// loads, or is refused with an error naming the file; never a panic, never an invalid run.

fn import_fixtures() -> Vec<crate::import::Source> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import");
    ["benchmark_results.json", "vllm-bench-c1.json", "vllm-bench-c4.json"]
        .iter()
        .map(|n| crate::import::Source {
            name: n.to_string(),
            json: serde_json::from_slice(&std::fs::read(dir.join(n)).expect("import fixture")).expect("JSON"),
        })
        .collect()
}

/// Every path to a value in `v` (keys and indices).
fn json_paths(v: &serde_json::Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    let children: Vec<(String, &serde_json::Value)> = match v {
        serde_json::Value::Object(m) => m.iter().map(|(k, x)| (k.clone(), x)).collect(),
        serde_json::Value::Array(a) => a.iter().enumerate().map(|(i, x)| (i.to_string(), x)).collect(),
        _ => vec![],
    };
    for (k, x) in children {
        here.push(k);
        json_paths(x, here, out);
        here.pop();
    }
}

/// Replace (`Some`) or remove (`None`) the value at `path`.
fn edit_json(root: &mut serde_json::Value, path: &[String], with: Option<serde_json::Value>) {
    let Some((last, parent)) = path.split_last() else {
        if let Some(w) = with {
            *root = w;
        }
        return;
    };
    let mut v = root;
    for k in parent {
        v = match v {
            serde_json::Value::Object(m) => m.get_mut(k),
            serde_json::Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .expect("a path found in this tree");
    }
    match (v, with) {
        (serde_json::Value::Object(m), Some(w)) => {
            m.insert(last.clone(), w);
        }
        (serde_json::Value::Object(m), None) => {
            m.remove(last);
        }
        (serde_json::Value::Array(a), w) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < a.len()) {
                match w {
                    Some(w) => a[i] = w,
                    None => {
                        a.remove(i);
                    }
                }
            }
        }
        _ => {}
    }
}

fn odd_value() -> impl Strategy<Value = Option<serde_json::Value>> {
    prop::option::weighted(
        0.8,
        prop_oneof![
            Just(serde_json::Value::Null),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
            Just(serde_json::Value::from(1e308)),
            Just(serde_json::Value::from(-1)),
            Just(serde_json::Value::from(0)),
            "\\PC{0,8}".prop_map(serde_json::Value::from),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
        ],
    )
}

proptest! {
    #![proptest_config(cases(400))]

    #[test]
    fn edited_import_sources_convert_to_a_valid_run_or_are_refused(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), odd_value()), 1..4),
    ) {
        let mut sources = import_fixtures();
        for (which, at, with) in &edits {
            let i = which.index(sources.len());
            let mut found = Vec::new();
            json_paths(&sources[i].json, &mut Vec::new(), &mut found);
            let path = at.get(&found).clone();
            edit_json(&mut sources[i].json, &path, with.clone());
        }
        let by = "speedmatrix fuzz";
        let out = std::path::Path::new("fuzz.json");
        let runs = [
            crate::import::llm_inference_bench::convert(&sources[0], by)
                .and_then(|r| crate::import::checked(r, &sources[..1], out)),
            crate::import::vllm_bench::convert(&sources[1..], by).and_then(|r| crate::import::checked(r, &sources[1..], out)),
        ];
        for r in runs {
            match r {
                Ok(results) => {
                    let bytes = serde_json::to_vec(&results).expect("serializes");
                    let loaded = speedmatrix_schema::load_results(&bytes);
                    prop_assert!(loaded.is_ok(), "an imported run that does not load: {:?}", loaded.err());
                }
                Err(e) => {
                    prop_assert!(!matches!(e, crate::import::ImportError::Invalid(_)), "{}", crate::command::error_line(e));
                    let line = crate::command::error_line(e);
                    prop_assert!(!line.contains('\n') && !line.is_empty(), "{line}");
                }
            }
        }
    }
}
