//! Measuring a server: everything `speedmatrix run` does between the flags and the results
//! file. [`run`] sequences it; each other module owns one job:
//!
//! - [`spec`]: the flags, checked once into a `RunSpec` (with `--resume`, merged with the
//!   file's values);
//! - [`error`]: why a run could not start or stopped (`RunError`), why a row or cell could not
//!   start (`CellError`);
//! - [`session`]: what every measurement shares — the server's client and facts, the prompts,
//!   warm-ups and request bodies, the results held, the log, the progress bar and live state;
//! - [`measurement`]: one measurement's life cycle (warm → window → drain → figures), which
//!   a prefill row and a decode cell (and future kinds) implement;
//! - [`header`]: a fresh results file — its engine header, config, host facts, GPU selection;
//! - [`resume`]: whether a `--resume` file may be continued (same plan, same server);
//! - [`recovery`]: after a failed row or cell — does the server still answer, or come back?
//! - [`fdlimit`]: open files for the plan's streams (the soft limit raised, or a clear refusal);
//! - [`discovery`]: what server this is (`/v1/models`, `/version`, `/metrics`, …);
//! - [`engine`]: the engine adapters (vLLM, SGLang, llama.cpp, plain OpenAI) — detection, KV
//!   budget, metric names, stream options, the reasons for figures a server cannot give;
//! - [`plan`]: flags + server → the cells to measure (pure);
//! - [`prompt`]: prompts of exact token counts (`/tokenize`, varied prose);
//! - [`client`]: HTTP and SSE, one record per streamed request;
//! - [`held`]: the streams' own HTTP/1.1 connections — warmed in batches (a small listen
//!   backlog resets none), handed from a finished stream to its replacement;
//! - [`wire`]: a streamed chunk's payload → its tokens, finish reason, usage (`ChunkParser`: a
//!   one-pass scan of the common shape, a `Value` fallback);
//! - [`chunk_scan`]: that scan — checks a chunk is JSON and reads only the fields measured;
//! - [`prometheus`]: `/metrics` text (Prometheus 0.0.4, OpenMetrics) → samples;
//! - [`prefill`]: one prefill row, cold (and how cold it really was) or warm (`--prefix-share`);
//! - [`prefix`]: prefix-share cells and warm rows — the cache reset (else salted prompts), the
//!   shared prefix and unique rests, the measured hit rate beside the plan;
//! - [`cell`]: one decode cell in stages — warm, open, ready, window, drain;
//! - [`conversation`]: multi-turn conversations (`--turns`) — sessions at once, each sending
//!   its history with the server's answers, figures per turn;
//! - [`live_state`]: the run's live state (results so far, the row or cell being measured) in a
//!   watch channel, for the terminal bar and the live page;
//! - [`scrape`]: `/metrics` read by a task of its own, off the measuring path;
//! - [`measure`]: a cell's observation → its figures and status (pure);
//! - [`endings`]: how a row's or cell's requests ended (finish reasons, output lengths against
//!   `max_tokens`) applied to it, and the over-capacity rule with the measured lengths;
//! - [`series`]: a cell's window as per-second buckets, the evidence of its intervals (pure);
//! - [`gpu`]: NVML GPU inventory and per-window power, energy, utilization, clocks;
//! - [`locate`]: where the server runs — the process that owns the URL's listening socket, or
//!   a tunnel, proxy or another machine;
//! - [`launch`]: the server's launch command (secrets redacted) and the host's CPU, OS, name;
//! - [`selfcheck`]: the collector's own CPU use (is the client the bottleneck?);
//! - [`pacer`]: open-loop sending — each scheduled instant from a thread of its own, the request
//!   due then sent or held back by `--max-in-flight` (rate cells and trace replays);
//! - [`trace`]: a request trace (`--trace`, Mooncake format) read, sliced and replayed;
//! - [`trace_prompt`]: a trace's prompts — one text block per hash id, shared exactly;
//! - [`trace_cache`]: a trace replay's prefix cache — the trace's ideal reuse beside the hit
//!   rate the server measured, and why when it falls short.
//! - [`spec_decode`]: a cell's speculative decoding from the server's counters (pure);
//! - [`user_prompts`]: `--prompts FILE.jsonl`, a user's own prompts read and checked.

/// `eprintln!` that never panics: a closed stderr (`run … 2>&1 | head`) must not stop a run
/// half-way and leave its file `running`; the lines are lost, the measurements are not.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod cache_start;
pub mod cell;
pub mod chunk_scan;
pub mod client;
pub mod conversation;
pub mod discovery;
pub mod endings;
pub mod engine;
pub mod error;
pub mod fdlimit;
pub mod gpu;
pub mod header;
pub mod held;
pub mod launch;
pub mod live_state;
pub mod locate;
pub mod measure;
pub mod measurement;
pub mod pacer;
pub mod plan;
pub mod prefill;
pub mod prefix;
pub mod prometheus;
pub mod prompt;
pub mod rate;
pub mod rate_figures;
pub mod recovery;
pub mod resume;
pub mod run;
pub mod scrape;
pub mod selfcheck;
pub mod series;
pub mod session;
pub mod spec;
pub mod spec_decode;
pub mod trace;
pub mod trace_cache;
pub mod trace_prompt;
pub mod user_prompts;
pub mod wire;
