//! The command-line surface: raw flags as clap parses them. Validation into plans happens in
//! the module of each command.

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use speedmatrix_schema::Endpoint;
use std::path::PathBuf;

/// Measure how fast an LLM server really is, and publish the result.
#[derive(Debug, Parser)]
#[command(name = "speedmatrix", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parse `argv` (clap's usage error and exit on bad flags), noting which `run` flags were
    /// given rather than defaulted ([`RunArgs::given`]).
    pub fn parse_noting_given<I, T>(argv: I) -> Cli
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let m = Cli::command().get_matches_from(argv);
        let mut cli = Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit());
        if let (Command::Run(a), Some(("run", rm))) = (&mut cli.command, m.subcommand()) {
            let given = |id: &&clap::Id| {
                matches!(rm.value_source(id.as_str()), Some(ValueSource::CommandLine | ValueSource::EnvVariable))
            };
            a.given = Some(rm.ids().filter(given).map(|id| id.to_string()).collect());
        }
        cli
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the speed-test matrix against a server and write a results file.
    Run(Box<RunArgs>),
    /// Print a results file: header, prefill table and decode matrix (or the full table).
    Show(ShowArgs),
    /// Write a static site (the viewer, the runs, runs/index.json, and every row of every run
    /// as runs/cells.csv and runs/cells.parquet) ready to upload anywhere.
    Publish(PublishArgs),
    /// Write every measured row of the given runs (prefill rows, decode cells, rate cells,
    /// traces) with each run's header as one table: Parquet or CSV (columns: docs/EXPORT.md).
    Export(ExportArgs),
    /// Write one self-contained HTML report of a run (or a diff of two) that opens from
    /// file:// with no server.
    Report(ReportArgs),
    /// Serve a published site, or results files with the viewer, on 127.0.0.1.
    Serve(ServeArgs),
    /// Compare two runs: A (baseline) against B (candidate) — header differences and the
    /// delta matrix; `--fail-on-regression` makes it a CI gate.
    Diff(DiffArgs),
    /// Print the JSON Schema of the results file (the committed copy is
    /// shared/schema/results.schema.json).
    Schema,
    /// Run the twin: a vLLM-shaped server on loopback whose timing follows a measured run.
    Simulate(SimulateArgs),
    /// About a minute, no GPU: measure the twin, publish the result beside the seed run, serve it.
    Demo(DemoArgs),
    /// Convert other tools' result files (llm-inference-bench, vllm bench serve) into a
    /// results file; unmapped source fields are listed in it.
    Import(ImportArgs),
}

/// The formats `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFrom {
    /// llm-inference-bench's `benchmark_results.json` (one file).
    LlmInferenceBench,
    /// `vllm bench serve --save-result` JSON, one file per concurrency.
    VllmBench,
}

/// Flags of `speedmatrix import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The source files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Their format.
    #[arg(long, value_enum)]
    pub from: ImportFrom,
    /// The results file to write.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
}

/// Output formats of `show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// Human-readable tables, the way the seed page reads.
    Text,
    /// The text view as Markdown tables.
    Markdown,
    /// The full measurement table as CSV (headers are metric ids, raw numbers).
    Csv,
    /// The full measurement table as a JSON array of rows.
    Json,
}

/// Flags of `speedmatrix report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The results file, or two (A, the baseline, then B) to open as a diff.
    #[arg(required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// The HTML file to write (replaced if it exists).
    #[arg(long, short = 'o', default_value = "report.html")]
    pub out: PathBuf,
}

/// Flags of `speedmatrix show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The results file (JSON), or `-` for standard input.
    pub file: PathBuf,
    /// Output format; csv and json always give the full measurement table.
    #[arg(long, short = 'f', value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    /// Add the full measurement table to the text and markdown views.
    #[arg(long, conflicts_with = "slo")]
    pub all: bool,
    /// With `-f csv` or `-f json`: the rate cells' table (one row per rate cell, its own
    /// columns) instead of the measurement table.
    #[arg(long, conflicts_with_all = ["slo", "all"])]
    pub rates: bool,
    /// With `-f csv` or `-f json`: the replayed traces' rows (`run --trace`; the rate cells'
    /// columns, one row per trace) instead of the measurement table.
    #[arg(long, conflicts_with_all = ["slo", "all", "rates"])]
    pub traces: bool,
    /// Instead of the report, the capacity at a service-level objective: per context, the
    /// largest concurrency whose cell is valid and meets it, with its total tok/s (goodput) and
    /// per GPU. `ttft=2s,tps=20` = median TTFT ≤ 2 s and median per-request tok/s ≥ 20; either
    /// may be left out. Rate cells are judged too (goodput, meets): `tpot=50ms` may stand for
    /// `tps`, `p=90` sets their percentile. Text and markdown only.
    #[arg(long, value_name = "ttft=DUR,tps=N")]
    pub slo: Option<String>,
}

/// Output formats of `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Human-readable tables.
    Text,
    /// Markdown tables, ready to paste into a pull request.
    Markdown,
    /// The whole comparison as JSON (every matched figure with A, B, Δ and Δ %).
    Json,
}

/// Flags of `speedmatrix diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline results file (A), or `-` for standard input.
    pub a: PathBuf,
    /// The candidate results file (B), or `-` for standard input.
    pub b: PathBuf,
    /// The metric of the delta matrix and of the gate: a registry id such as `total_tps`,
    /// `ttft_ms_p50` (a bare distribution id means its p50).
    #[arg(long, default_value = "total_tps")]
    pub metric: String,
    /// The least relative change called better or worse: `5`, `5%`. Default: 5 % for figures
    /// without an interval ("same" below it); 0 % for figures with one when both runs carry
    /// noise data (significance alone decides).
    #[arg(long)]
    pub threshold: Option<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Exit 1 when a cell valid in A gets worse on --metric by more than PCT (`5` or `5%`), or
    /// turns error / over capacity in B.
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<String>,
}

/// The endpoint flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EndpointArg {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completions,
}

impl From<EndpointArg> for Endpoint {
    fn from(e: EndpointArg) -> Self {
        match e {
            EndpointArg::Chat => Endpoint::Chat,
            EndpointArg::Completions => Endpoint::Completions,
        }
    }
}

/// Flags of `speedmatrix run`.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The ids of the flags given on the command line (or by environment), not defaulted;
    /// `None` when not known (arguments built in code): `--resume` then takes no flag from
    /// its file.
    #[arg(skip)]
    pub given: Option<Vec<String>>,
    /// Base URL of the OpenAI-compatible server (a trailing /v1 is dropped).
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// API key sent as `Authorization: Bearer KEY` (else from OPENAI_API_KEY).
    #[arg(long, env = "SPEEDMATRIX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Served model name (default: the first the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Decode contexts (matrix rows): tokens, `8k` (= 8,192) or `max`. Given more than once,
    /// the lists add up; a value listed twice is measured once (with a note).
    #[arg(long, value_delimiter = ',', default_value = "8k,16k,32k,64k,128k,max")]
    pub contexts: Vec<String>,
    /// Concurrency levels (matrix columns): simultaneous streams. Given more than once, the
    /// lists add up; a value listed twice is measured once (with a note).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64,128")]
    pub concurrency: Vec<u32>,
    /// Open-loop request rates (requests/s) of rate cells at each context, e.g. `0.5,1,2,4`:
    /// requests arrive on a schedule that does not wait for the server, and their latencies
    /// count from their scheduled instants. Without --concurrency, only rate cells are measured.
    /// `auto` (with --slo) searches per context for the highest rate that meets the SLO. Given
    /// more than once, the lists add up; a rate listed twice is measured once (with a note).
    // A negative rate is a value (refused by the rates' own check, which names the flag), not a flag.
    #[arg(long, value_delimiter = ',', value_name = "RPS", allow_negative_numbers = true)]
    pub rates: Vec<String>,
    /// The SLO of rate cells: `ttft=2s,tpot=50ms[,p=90]` (limits on TTFT and TPOT at the 50th,
    /// 90th or 99th percentile; p=50 by default). Each rate cell gets its goodput (requests/s
    /// meeting it) and whether it meets it; `--rates auto` searches with it.
    #[arg(long, value_name = "SLO")]
    pub slo: Option<String>,
    /// How the arrivals of rate cells are spaced: `poisson`, `constant` or `gamma:CV` (CV: the
    /// gaps' coefficient of variation, above 1 burstier than Poisson). Seeded by --seed.
    #[arg(long, default_value = "poisson", value_name = "PROCESS")]
    pub arrival: String,
    /// Rate cells: keep at most N requests open; a request due while N are open waits for one
    /// to end (its latencies still count from its scheduled instant) and the cell says so.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight: Option<u32>,
    /// Rate cells: measure the higher rates of a context after one was saturated (by default
    /// they are not run, saying why).
    #[arg(long)]
    pub keep_going: bool,
    /// Replay a request trace in the Mooncake format (one JSON object per line: `timestamp` ms,
    /// `input_length`, `output_length`, `hash_ids`): each request sent at its timestamp, open
    /// loop, prompts sharing the prefix blocks its hash ids say. Without --contexts,
    /// --concurrency or --prefill-contexts, only the trace is measured.
    #[arg(long, value_name = "FILE.jsonl")]
    pub trace: Option<std::path::PathBuf>,
    /// Your own prompts instead of the built-in prose: one JSON object per line with the text
    /// in "text" (or "prompt"), cut or repeated to each context's length with the server's
    /// tokenizer. The results name the file and its SHA-256 (speculative acceptance depends on
    /// the text).
    #[arg(long, value_name = "FILE.jsonl")]
    pub prompts: Option<std::path::PathBuf>,
    /// Replay the trace this many times as fast (2: every gap halved; 0.5: twice as slow).
    #[arg(long, value_name = "F", default_value = "1")]
    pub trace_speed: String,
    /// Replay the trace from this many seconds of trace time (its requests from then on).
    #[arg(long, value_name = "SECONDS")]
    pub trace_from: Option<String>,
    /// Replay the trace up to this many seconds of trace time (its requests before then).
    #[arg(long, value_name = "SECONDS")]
    pub trace_to: Option<String>,
    /// Prefill contexts (one cold request each); `none` for no prefill rows. Given more than
    /// once, the lists add up; a value listed twice is measured once (with a note).
    #[arg(long, value_delimiter = ',', default_value = "8k,16k,32k,64k,128k,max")]
    pub prefill_contexts: Vec<String>,
    /// Measurement window per decode cell, e.g. `30s`, `10s`, `2m`.
    // A value starting with '-' is taken, so `--duration -5s` gets the duration's own error
    // (naming the flag), not clap's "unexpected argument '-5'".
    #[arg(long, default_value = "30s", allow_hyphen_values = true)]
    pub duration: String,
    /// `max_tokens` of every decode request.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Measure every decode cell N times, each with fresh streams, interleaved across the
    /// matrix (every cell once, then every cell again, …); figures are the means over repeats
    /// and, from 2, get intervals between repeats.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Endpoint to call.
    #[arg(long, value_enum, default_value_t = EndpointArg::Chat)]
    pub endpoint: EndpointArg,
    /// Give every stream of a cell its own (warmed) prompt instead of sharing one.
    #[arg(long)]
    pub distinct_prompts: bool,
    /// Prefix-share cells, e.g. `0,50%,90%`: each decode cell is measured at each share, every
    /// request's prompt being that share of the context as a prefix shared by the cell's
    /// requests plus a unique rest; each prefill context gets a warm row per share above 0
    /// (the prefix sent once first). The server's prefix cache is reset before each (else
    /// the prompts are salted) and its measured hit rate recorded beside the plan.
    #[arg(long, value_name = "SHARES", conflicts_with = "distinct_prompts")]
    pub prefix_share: Option<String>,
    /// Multi-turn conversations instead of decode cells: per context and concurrency, that
    /// many sessions at once (closed loop), each sending N turns — turn 1 a prompt of its own,
    /// every later turn the whole history (prompts and the server's answers) plus a new
    /// message; figures per turn. Chat endpoint only.
    // Checked by the run's spec (one line naming the flag, exit 2), not by clap.
    #[arg(long, value_name = "N")]
    pub turns: Option<String>,
    /// With --turns: the pause between an answer's end and the session's next turn.
    #[arg(long, value_name = "DUR")]
    pub think_time: Option<String>,
    /// Sampling temperature sent with every request.
    // A negative number is a value (refused by the range check with its reason), not a flag.
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// Sampling seed sent with every request; also seeds the prompt text.
    #[arg(long)]
    pub seed: Option<u64>,
    /// KV-cache budget in tokens for the over-capacity rule; replaces what the server reports.
    #[arg(long)]
    pub kv_budget: Option<u64>,
    /// A stream that sends nothing for this long fails, and so does one whose tokens flowed and
    /// then stopped for this long with only keep-alive comments (there is no overall request
    /// timeout).
    #[arg(long, default_value = "120s")]
    pub stall_timeout: String,
    /// When a cell fails and the server stops answering, wait this long for it to answer again
    /// (a restart) before the run fails; a cell whose try it broke is measured again. `0s`: fail
    /// at once.
    #[arg(long, default_value = "0s")]
    pub server_wait: String,
    /// Results file, rewritten atomically after every prefill row and cell [default:
    /// results.json, or the --resume file]. An existing file is not overwritten without --force.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Overwrite an existing results file given with -o.
    #[arg(long)]
    pub force: bool,
    /// Continue the run in this results file (same plan and server), skipping measured cells;
    /// a failed run's error cells are measured again.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// With --resume: header differences to accept when the server is not the one the file
    /// describes: engine, engine-version, model, max-model-len, kv-budget, launch-command, gpus,
    /// host, server-location, or all. Each row and cell measured now records the difference.
    #[arg(long, value_delimiter = ',', value_name = "FIELD")]
    pub accept_change: Vec<String>,
    /// Set by `speedmatrix demo` (no flag): its run cannot be resumed, so an interrupted demo
    /// says to start it again instead of naming `--resume`.
    #[arg(skip)]
    pub from_demo: bool,
    /// Print the plan and the estimated wall time, then stop.
    #[arg(long)]
    pub dry_run: bool,
    /// A label for the run, shown in reports.
    #[arg(long)]
    pub label: Option<String>,
    /// Free-text notes stored with the run.
    #[arg(long)]
    pub notes: Option<String>,
    /// No progress bar (plain log lines instead).
    #[arg(long)]
    pub quiet: bool,
    /// Serve the page on 127.0.0.1 while measuring: it follows this run live (the plan from
    /// the start, cells as they land, the cell being measured, the time left). PORT defaults to
    /// 8765; 0 lets the system pick a free one.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "8765")]
    pub serve: Option<u16>,
    /// The server's launch command, when it is not a local process speedmatrix can read
    /// (secrets such as --api-key values are redacted before it is stored).
    #[arg(long)]
    pub launch_command: Option<String>,
    /// Leave the host name out of the results file and replace home-directory paths by `~`.
    #[arg(long)]
    pub redact_host: bool,
    /// Do not read GPUs through NVML (inventory, power, energy); the file then says "skipped".
    #[arg(long)]
    pub no_gpu: bool,
    /// GPUs serving the model, for the per-GPU figures: needed when NVML cannot see them (a
    /// remote server, a tunnel, the twin); overrides NVML's count when the server uses fewer
    /// GPUs than this host has.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpu_count: Option<u32>,
    /// The server's engine, when detection (from /props, /get_server_info, /metrics) picks
    /// wrongly; `openai` measures from the stream alone (its /metrics is not read).
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
}

/// The `--engine` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// vLLM.
    Vllm,
    /// SGLang.
    Sglang,
    /// llama.cpp `llama-server`.
    Llamacpp,
    /// Any OpenAI-compatible endpoint (hosted API, proxy).
    Openai,
}

impl From<EngineArg> for crate::measuring::engine::EngineKind {
    fn from(e: EngineArg) -> Self {
        use crate::measuring::engine::EngineKind;
        match e {
            EngineArg::Vllm => EngineKind::Vllm,
            EngineArg::Sglang => EngineKind::Sglang,
            EngineArg::Llamacpp => EngineKind::LlamaCpp,
            EngineArg::Openai => EngineKind::OpenAi,
        }
    }
}

/// Where `simulate --reasoning` puts reasoning text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReasoningFieldArg {
    /// `delta.reasoning` (vLLM 0.16+).
    Reasoning,
    /// `delta.reasoning_content` (vLLM ≤ 0.11).
    #[value(name = "reasoning_content")]
    ReasoningContent,
}

/// Flags of `speedmatrix simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Engine profile: `h200-qwen3.5-122b` (fitted to the seed's H200 run) or `tiny`.
    #[arg(long, default_value = "h200-qwen3.5-122b", conflicts_with = "fit")]
    pub profile: String,
    /// Fit the engine profile to this results file (any run: prefill rows, decode cells, KV
    /// budget, max_model_len, speculative decoding), print its residual table, then serve it.
    #[arg(long, value_name = "RUN.json")]
    pub fit: Option<PathBuf>,
    /// Print the residual table — every prefill row and decode cell of the run the profile is
    /// fitted to, replayed in simulated time the way that run was measured — and exit.
    #[arg(long)]
    pub residuals: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one (the line printed tells which).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on /v1/*.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Seed of every random choice (speculative acceptance, answer lengths, faults).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the ground-truth trace here (JSON Lines, one line per request).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Inject a fault: `NAME[=PARAM][@RATE]`, repeatable. Names: drop, no-done, inband-error,
    /// stall=DUR, status=500|503|429, keepalive, split, metrics-404, tokenize-404, version-404,
    /// no-chunk-usage, no-usage.
    #[arg(long, value_name = "NAME[=PARAM][@RATE]")]
    pub fault: Vec<String>,
    /// Stream the first part of each chat answer as reasoning.
    #[arg(long)]
    pub reasoning: bool,
    /// Delta field of reasoning text (implies --reasoning).
    #[arg(long, value_enum)]
    pub reasoning_field: Option<ReasoningFieldArg>,
    /// Tokens of reasoning before the content starts.
    #[arg(long, default_value_t = 64)]
    pub reasoning_tokens: u32,
    /// Speculative (MTP) tokens per step; 0 turns speculative decoding off. Default: the
    /// profile's (2 for h200-qwen3.5-122b).
    #[arg(long)]
    pub speculative_tokens: Option<u32>,
    /// Ngram speculative decoding, `ngram:K` (K = 1…16 draft tokens per step): each request's
    /// drafts are accepted more the more its prompt repeats itself (deterministic from --seed
    /// and the text), counted in vLLM's spec_decode counters and the trace.
    #[arg(long, value_name = "ngram:K", conflicts_with = "speculative_tokens")]
    pub spec_decode: Option<String>,
    /// Turn the prefix cache off.
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// Engine version the twin reports: vLLM's /version, or with --flavor sglang the version in
    /// /get_server_info (default 0.5.4).
    #[arg(long)]
    pub engine_version: Option<String>,
    /// Served model name.
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Longest prompt + output (tokens).
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// KV cache capacity in tokens (rounded down to whole blocks of 16), replacing the
    /// profile's: a small one makes the prefix cache evict (and requests queue). At least the
    /// longest request (`--max-model-len`), as vLLM requires.
    #[arg(long, value_name = "TOKENS")]
    pub kv_tokens: Option<u64>,
    /// Run the twin's clock this many times faster than real time (trace times stay in twin
    /// ms). For tests of long schedules.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The server to imitate on the wire: `vllm`, or `sglang` (/get_server_info, sglang:*
    /// metrics, reasoning_content, flat error bodies).
    #[arg(long, value_enum, default_value_t = FlavorArg::Vllm)]
    pub flavor: FlavorArg,
}

/// `simulate --flavor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlavorArg {
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// SGLang's server.
    Sglang,
}

/// Flags of `speedmatrix publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Results files to add (each is checked first). Runs the site already lists are kept; a
    /// file with the same name and run id as one of them replaces it (a re-run or resumed run).
    pub runs: Vec<PathBuf>,
    /// The site folder to write (created if needed).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Take a run out of the site: its run id, or its file name under runs/ (repeatable).
    #[arg(long, value_name = "RUN_ID")]
    pub remove: Vec<String>,
}

/// Formats of `export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Apache Parquet: typed columns (DOUBLE, INT64, STRING, BOOLEAN), nulls where a row has no
    /// such figure, the column-list version in the file's metadata.
    Parquet,
    /// CSV (RFC 4180): one header line, raw numbers, empty fields for nulls.
    Csv,
}

/// Flags of `speedmatrix export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Results files (each is checked first); their rows are written in this order.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The file to write (replaced if it exists): `cells.parquet` or `cells.csv`.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// The format; default: from the extension of --out (.parquet or .pq, .csv).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<ExportFormat>,
}

/// Flags of `speedmatrix serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A published site folder, or results files to show with the viewer; nothing serves the
    /// viewer alone (open or drop files in the page).
    pub paths: Vec<PathBuf>,
    /// Port on 127.0.0.1; 0 lets the system pick a free one.
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// Follow a results file that another process writes (`speedmatrix run -o RUN.json`): the
    /// page shows the run live, updated whenever the file is saved.
    #[arg(long, value_name = "RUN.json", conflicts_with = "paths")]
    pub watch: Option<PathBuf>,
}

/// Flags of `speedmatrix demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Folder for the demo's results files and the published site (`OUT/site`).
    #[arg(long, short = 'o', default_value = "speedmatrix-demo")]
    pub out: PathBuf,
    /// Port on 127.0.0.1 for the page; 0 lets the system pick a free one.
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
}
