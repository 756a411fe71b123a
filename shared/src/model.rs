//! The results file (schema version [`crate::SCHEMA_VERSION`]): one JSON document per run.
//!
//! Conventions used by every type here:
//! - Durations are milliseconds (`_ms`) or seconds (`_s`) as the field name says, measured on a
//!   monotonic clock; points in time inside a run are `_ms` offsets from [`RunInfo::started_at`].
//! - Rates are tokens per second (`_tps`); sizes are bytes (`_bytes`) or tokens (`_tokens`).
//! - A figure a source does not give is `null`, never invented (the seed page has no p90/p99).
//! - Each figure's doc comment names its source: *client clock* (the collector's monotonic
//!   clock), *server usage* (the `usage` object of the stream), *Prometheus* (the server's
//!   `/metrics`), *NVML* (the GPU driver), or *plan* (decided before measuring).

use serde::{Deserialize, Serialize};

/// A whole run: header (tool, run, hardware, engine, config) and every planned measurement.
///
/// Every planned prefill row and decode cell appears, measured or not (see [`CellStatus`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// Always `"speedmatrix-results"` ([`crate::SCHEMA_NAME`]).
    pub schema: String,
    /// The schema version of this file (integer, currently 3). Older versions are migrated on
    /// load; newer ones are refused with an "upgrade speedmatrix" error.
    pub schema_version: u32,
    /// The program that measured (or converted) this run.
    pub tool: Tool,
    /// Identity, timing and state of the run.
    pub run: RunInfo,
    /// The machine the server ran on.
    pub hardware: Hardware,
    /// The inference engine and model that were measured.
    pub engine: Engine,
    /// The test plan: what was asked for.
    pub config: Config,
    /// Prefill rows, in plan order (one per prefill context).
    pub prefill: Vec<PrefillRow>,
    /// Sustained-decode cells, in plan order (context-major, then concurrency).
    pub decode: Vec<DecodeCell>,
    /// Open-loop rate cells (`--rates`), in plan order (context-major, then rate): requests
    /// arrive on a schedule that does not wait for the server. Absent before schema v4 and in
    /// runs without `--rates`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<RateCell>,
    /// `--rates auto`: per context, the highest rate found to meet `config.rate_slo`, and how
    /// it was bracketed. Absent without a search.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_at_slo: Vec<RateAtSlo>,
    /// Replayed request traces (`--trace`; docs/METHODOLOGY.md, "Trace replay"): one row per
    /// trace, with the figures of a rate cell and every request's record. The trace replayed
    /// is `config.trace`. Absent in runs without `--trace`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<TraceRow>,
    /// Multi-turn conversations (`--turns`; docs/METHODOLOGY.md, "Conversations"): one cell per
    /// context × sessions at once, with figures per turn. Absent in runs without `--turns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversations: Vec<ConversationCell>,
    /// The machine the collector ran on: its CPU bounds the client's own figures (the
    /// self-check `client_cpu_pct`). For a server on that machine it is the same host as
    /// [`Results::hardware`]; for a remote one it is not the server's hardware. `null` in files
    /// that did not record it (schema v1) and for imported runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientMachine>,
    /// Figures this run could not give, and why (e.g. a server without `/metrics`, an engine
    /// without a KV-usage gauge, a source format without percentiles). Empty when nothing is
    /// known to be missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
    /// For imported runs: the source format, files, and every source field that did not map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportInfo>,
}

/// A figure (or group of figures) a run lacks, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MissingFigure {
    /// The figure: a metric id (`kv_cache_usage`, `ttft_ms_p90`), a field path
    /// (`engine.version`) or a group (`server` = all Prometheus figures).
    pub figure: String,
    /// Why it is missing, e.g. "/metrics answered HTTP 404".
    pub reason: String,
}

/// Where an imported run came from (`speedmatrix import`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ImportInfo {
    /// The source format: `llm-inference-bench` or `vllm-bench`.
    pub format: String,
    /// The source files' names (no directories), in the order given.
    #[serde(default)]
    pub files: Vec<String>,
    /// Source fields that were not carried into the results file, each with its value or why.
    #[serde(default)]
    pub unmapped: Vec<UnmappedField>,
}

/// One source field an import left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UnmappedField {
    /// JSON path in the source, prefixed with the file when there are several, e.g.
    /// `bench-c8.json: $.request_goodput`.
    pub field: String,
    /// The value (shortened) or why it did not map.
    pub note: String,
}

/// The program that produced the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// Program name, e.g. `speedmatrix` or `llm-inference-bench` for an imported run.
    pub name: String,
    /// Program version, e.g. `0.1.0`; `null` when the source does not say (an imported run;
    /// `missing` lists `tool.version` with the reason).
    #[serde(default)]
    pub version: Option<String>,
    /// For imported runs: the program and version that converted the file.
    #[serde(default)]
    pub converted_by: Option<String>,
}

/// Lifecycle state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still measuring; the file is rewritten after every cell.
    Running,
    /// Every planned cell has a final status.
    Complete,
    /// Stopped by the user (Ctrl-C) or a dead server; unmeasured cells are `not_run`.
    Interrupted,
    /// The run could not go on; `notes` / cell reasons say why.
    Failed,
}

/// Identity and timing of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// Unique id of the run (also the run-unique prompt prefix), e.g. a ULID or UUID.
    pub id: String,
    /// Wall-clock start of the run, RFC 3339 (e.g. `2026-11-30T10:53:38Z`). `null` only for
    /// imported runs whose source does not say.
    #[serde(default)]
    pub started_at: Option<String>,
    /// Wall-clock end of the run, RFC 3339; `null` while running or when unknown.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// State of the run.
    pub status: RunStatus,
    /// Why the run stopped early (`interrupted` or `failed`), e.g. "the server stopped
    /// answering: cannot reach http://…/v1/models: connection refused (after decode 8K × 4)".
    #[serde(default)]
    pub reason: Option<String>,
    /// Short human label (`--label`), e.g. "vLLM 0.26 + MTP2".
    #[serde(default)]
    pub label: Option<String>,
    /// Free text (`--notes`), and for imported runs where the figures came from.
    #[serde(default)]
    pub notes: Option<String>,
}

/// The machine the server ran on. Source: NVML and the OS when the server runs on the
/// collector's machine (found by the process that owns the URL's listening socket, see
/// [`Hardware::server_location`]); for a remote server only what the server itself reports;
/// the imported file for imports. The collector's own machine is [`Results::client`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// Kind of accelerator, e.g. "Discrete GPU", "CPU only".
    #[serde(default)]
    pub accelerator_type: Option<String>,
    /// One entry per GPU (NVML inventory); empty when unknown.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// Number of GPUs serving the model (may be known when the list is not).
    #[serde(default)]
    pub gpu_count: Option<u32>,
    /// Total GPU memory across all GPUs, bytes.
    #[serde(default)]
    pub vram_total_bytes: Option<u64>,
    /// Host CPU model name, e.g. "AMD EPYC 9554".
    #[serde(default)]
    pub cpu: Option<String>,
    /// Operating system, e.g. "linux".
    #[serde(default)]
    pub os: Option<String>,
    /// Host name; dropped by `--redact-host`.
    #[serde(default)]
    pub host: Option<String>,
    /// Why GPU figures are missing when they are, e.g. "NVML not available: libnvidia-ml.so not found".
    #[serde(default)]
    pub gpu_telemetry_note: Option<String>,
    /// Whether the server ran on the collector's machine, and how that was found. `null` when
    /// not recorded (schema v1, imports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_location: Option<ServerLocation>,
    /// How the GPUs in [`Hardware::gpus`] (and so every GPU figure of the cells) were chosen.
    /// `null` when not recorded (schema v1, imports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_selection: Option<GpuSelection>,
}

/// Where the server ran, as the collector found it. Source: the operating system (the process
/// that owns the listening socket of the URL's port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServerLocation {
    /// Local, remote, or unknown.
    pub place: ServerPlace,
    /// What it was found from, e.g. "PID 4242 (vllm) listens on 127.0.0.1:8000", "127.0.0.1:8000
    /// is forwarded by ssh (PID 77): the server runs elsewhere", "10.0.0.5 is not an address of
    /// this machine".
    pub evidence: String,
}

/// Whether the server ran on the collector's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ServerPlace {
    /// A process on this machine owns the listening socket and serves the requests: the
    /// hardware card is this machine's.
    Local,
    /// The URL's host is another machine, or the local socket belongs to a tunnel or proxy
    /// (ssh, kubectl port-forward, socat, docker-proxy, a relay): the hardware card holds only
    /// what the server reports.
    Remote,
    /// The address is this machine's, but no process visible to the collector owns the socket
    /// (another user's process, another namespace): treated as remote.
    Unknown,
}

/// How the GPUs a run read were chosen. Source: NVML's compute processes matched against the
/// server's process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuSelection {
    /// The rule that chose them.
    pub method: GpuSelectionMethod,
    /// The choice in words, e.g. "2 of 8 GPUs: those where the server's processes (PIDs 4242,
    /// 4300) hold a compute context".
    pub detail: String,
}

/// The rule that chose the GPUs of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum GpuSelectionMethod {
    /// The GPUs where the server's processes hold a compute context: the figures are the
    /// server's GPUs'.
    ServerProcesses,
    /// All GPUs of the host, assumed: the server's processes could not be matched (e.g. a
    /// server in a container with its own PID namespace). Power and energy may include other
    /// work on those GPUs; `show` and the page mark them as assumed.
    AllAssumed,
    /// No GPU was read: the server is not on this host's GPUs (a remote server, the twin, a
    /// CPU server), `--no-gpu`, or no NVML. The cells carry no GPU figures.
    None,
}

/// The machine the collector ran on. Source: the operating system.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClientMachine {
    /// CPU model name, e.g. "AMD EPYC 9554 (64 cores)".
    #[serde(default)]
    pub cpu: Option<String>,
    /// CPU cores the collector could use (the self-check's "all of its cores").
    #[serde(default)]
    pub cores: Option<u32>,
    /// Operating system, e.g. "linux".
    #[serde(default)]
    pub os: Option<String>,
    /// Host name; dropped by `--redact-host`.
    #[serde(default)]
    pub host: Option<String>,
}

/// One GPU, from NVML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Marketing name, e.g. "H200 NVL".
    pub name: String,
    /// NVML UUID, e.g. `GPU-…`.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Total memory of this GPU, bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Driver version, e.g. "580.65.06".
    #[serde(default)]
    pub driver: Option<String>,
    /// CUDA driver API version, e.g. "13.0".
    #[serde(default)]
    pub cuda: Option<String>,
    /// Enforced power limit, W.
    #[serde(default)]
    pub power_limit_w: Option<f64>,
}

/// Where the KV-cache budget in tokens came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KvBudgetSource {
    /// Prometheus `vllm:cache_config_info{kv_cache_size_tokens=…}`.
    KvCacheSizeTokens,
    /// Prometheus `num_gpu_blocks × block_size` (approximate for hybrid models).
    NumGpuBlocks,
    /// SGLang `/get_server_info` `max_total_num_tokens`.
    ServerInfo,
    /// llama.cpp `/props` context size.
    Props,
    /// The `--kv-budget` flag.
    Flag,
}

/// The inference engine, the model it served and how it was launched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Engine {
    /// Engine name: `vllm`, `sglang`, `llamacpp`, `openai` (unknown OpenAI-compatible);
    /// `null` when an imported source does not say (`missing` lists `engine.name`).
    #[serde(default)]
    pub name: Option<String>,
    /// Engine version as the server reports it (`GET /version`), e.g. "0.26.1rc1.dev638+g52be12cfa".
    #[serde(default)]
    pub version: Option<String>,
    /// Source commit of the engine build, e.g. "52be12cfac0c".
    #[serde(default)]
    pub commit: Option<String>,
    /// Build flavour, e.g. "cuda-13.2".
    #[serde(default)]
    pub build: Option<String>,
    /// Compute backend, e.g. "cuda", "rocm", "cpu".
    #[serde(default)]
    pub backend: Option<String>,
    /// Source repository of the engine, e.g. "github.com/vllm-project/vllm".
    #[serde(default)]
    pub repository: Option<String>,
    /// Weight quantization, e.g. "INT4", "FP8", "BF16".
    #[serde(default)]
    pub quantization: Option<String>,
    /// The model name requests use (`/v1/models` `data[].id`), e.g. "qwen".
    #[serde(default)]
    pub served_model_name: Option<String>,
    /// The model loaded (`/v1/models` `root` or the launch command), e.g. "Qwen/Qwen3.5-122B-A10B-GPTQ-Int4".
    #[serde(default)]
    pub model: Option<String>,
    /// Model revision, e.g. "main".
    #[serde(default)]
    pub revision: Option<String>,
    /// Longest sequence (prompt + output) the server accepts, tokens (`/v1/models`).
    #[serde(default)]
    pub max_model_len: Option<u64>,
    /// KV-cache capacity of the server, tokens; the over-capacity rule uses it.
    #[serde(default)]
    pub kv_budget_tokens: Option<u64>,
    /// Where [`Engine::kv_budget_tokens`] came from.
    #[serde(default)]
    pub kv_budget_source: Option<KvBudgetSource>,
    /// Speculative decoding in use, e.g. `mtp, 2 tokens`; `null` when none or unknown.
    #[serde(default)]
    pub speculative_decoding: Option<String>,
    /// The server's launch command with every secret replaced by `<redacted>`.
    #[serde(default)]
    pub launch_command: Option<String>,
    /// Parallel request slots (llama.cpp `/props` `total_slots`, `-np`); more streams than
    /// slots wait in the server's queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// Context per slot, tokens (llama.cpp `/props` `default_generation_settings.n_ctx`); a
    /// stream whose prompt + max output exceeds it is over capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_context_tokens: Option<u64>,
    /// Most requests the server runs at once (SGLang `/get_server_info`
    /// `max_running_requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_requests: Option<u32>,
    /// Set when the server was a simulation — the speedmatrix twin — not a real engine: every
    /// figure of the run is the twin's model of a server. Absent for real servers and in files
    /// written before it was recorded (schema v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Simulated>,
}

/// What simulated the server a run measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Simulated {
    /// The simulator, e.g. "speedmatrix twin".
    pub by: String,
    /// The twin's engine profile, e.g. "h200-qwen3.5-122b" or "fit:run.json".
    #[serde(default)]
    pub profile: Option<String>,
    /// How the collector knew, e.g. "x-speedmatrix-twin header".
    #[serde(default)]
    pub evidence: Option<String>,
}

/// A context size: the label people read and the token count it stands for.
///
/// `8K` = 8,192 tokens (K = 1,024). `max` resolves to a real count at plan time (how:
/// `docs/METHODOLOGY.md`, "Context sizes"). A context of 0 tokens is a real one: decode with
/// no context beyond the request itself (imported from tools that measure it, labelled "0").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ContextSize {
    /// Display label, e.g. "8K", "251K".
    pub label: String,
    /// Nominal prompt length, tokens (e.g. 8192; 0 for "no context").
    pub tokens: u64,
}

/// Which OpenAI endpoint the requests used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/chat/completions` (default).
    Chat,
    /// `POST /v1/completions`.
    Completions,
}

/// How the streams of one decode cell get their prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PromptSharing {
    /// All N streams share the cell's one warmed prompt (the seed's way; default).
    Shared,
    /// Each stream has its own prompt, each warmed (`--distinct-prompts`).
    Distinct,
}

/// How prefill was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PrefillMode {
    /// One cold `max_tokens: 1` request per context that also warms the prefix cache for
    /// that context's decode cells ("Measured during decode warm-up").
    DecodeWarmup,
    /// A separate cold request, not reused by decode cells.
    Separate,
}

/// What a decode cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DecodeTest {
    /// N streams kept running for a fixed window ("Fixed duration").
    FixedDuration,
    /// A fixed number of requests per stream.
    FixedRequests,
}

/// The prompt text source: its name and content hash, so runs can be compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PromptCorpus {
    /// Corpus name, e.g. "speedmatrix-prose-v1".
    pub name: String,
    /// SHA-256 of the corpus text, lowercase hex.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Where the text came from: the built-in corpus, or a user's file (`run --prompts
    /// FILE.jsonl`: `name` is the file's name, `sha256` its bytes'). Absent: built in (files
    /// before `--prompts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<PromptOrigin>,
}

/// Where a run's prompt text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PromptOrigin {
    /// speedmatrix's own seeded prose (`speedmatrix-prose-v1`).
    BuiltIn,
    /// A user's prompts (`run --prompts FILE.jsonl`), cut or repeated to each context.
    UserFile,
}

/// Where a row's or cell's speculative-decoding figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SpecDecodeSource {
    /// The growth of the server's speculative-decoding counters (vLLM
    /// `spec_decode_num_drafts`, `_num_draft_tokens`, `_num_accepted_tokens`,
    /// `_num_accepted_tokens_per_pos`; llama.cpp's of the same names) from the reading before
    /// the cell's first request to the reading after its last ended, the server idle
    /// (Prometheus).
    PrometheusCounters,
    /// The mean of the server's accept-length gauge read inside the window (SGLang
    /// `spec_accept_length`; Prometheus): no counts.
    PrometheusGauge,
}

impl SpecDecodeSource {
    /// The source in words, as `show` and the page print it: `Prometheus counters`.
    pub fn words(self) -> &'static str {
        match self {
            SpecDecodeSource::PrometheusCounters => "Prometheus counters",
            SpecDecodeSource::PrometheusGauge => "Prometheus gauge",
        }
    }
}

/// Speculative decoding during a cell, from the server's own counters
/// (`docs/METHODOLOGY.md`, "Speculative decoding").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SpecDecodeFigures {
    /// Where the figures came from.
    pub source: SpecDecodeSource,
    /// Drafts verified (one per request per step that speculated), count; `null` from a
    /// gauge.
    #[serde(default)]
    pub drafts: Option<u64>,
    /// Draft tokens proposed, tokens; `null` from a gauge.
    #[serde(default)]
    pub draft_tokens: Option<u64>,
    /// Draft tokens accepted, tokens; `null` from a gauge.
    #[serde(default)]
    pub accepted_tokens: Option<u64>,
    /// Acceptance rate: accepted ÷ draft tokens, fraction 0–1; `null` when nothing was
    /// drafted (the cell's `missing` says so) or from a gauge.
    #[serde(default)]
    pub acceptance_rate: Option<f64>,
    /// Mean accepted length: 1 + accepted tokens ÷ drafts (vLLM's definition: the tokens one
    /// verification step yields, the target model's own included), tokens; from a gauge, the
    /// gauge's mean; `null` when nothing was drafted.
    #[serde(default)]
    pub mean_accepted_length: Option<f64>,
    /// Accepted tokens at each draft position (from 0), tokens (vLLM
    /// `spec_decode_num_accepted_tokens_per_pos`); empty where the server does not count them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_per_position: Vec<u64>,
    /// Acceptance by position: accepted tokens at each position ÷ drafts, fractions 0–1;
    /// empty where the server does not count them or nothing was drafted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptance_by_position: Vec<f64>,
}

/// The test plan. Source: plan (flags and discovery).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Decode contexts (rows of the matrix).
    pub contexts: Vec<ContextSize>,
    /// Concurrency levels: simultaneous streams (columns of the matrix).
    pub concurrency: Vec<u32>,
    /// Prefill contexts.
    pub prefill_contexts: Vec<ContextSize>,
    /// Length of each decode measurement window, s; `null` when the source has no fixed window
    /// (an imported `vllm bench serve` run) or does not say.
    #[serde(default)]
    pub window_s: Option<f64>,
    /// `max_tokens` of each decode request, tokens; `null` when an imported source does not say.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Endpoint used; `null` when an imported source does not say.
    #[serde(default)]
    pub endpoint: Option<Endpoint>,
    /// Whether requests set `ignore_eos: true`.
    #[serde(default)]
    pub ignore_eos: Option<bool>,
    /// Sampling temperature sent.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Sampling seed sent.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Prompt text source.
    #[serde(default)]
    pub prompt_corpus: Option<PromptCorpus>,
    /// Prompt sharing between the streams of a cell.
    #[serde(default)]
    pub prompt_sharing: Option<PromptSharing>,
    /// How prefill was measured.
    #[serde(default)]
    pub prefill_mode: Option<PrefillMode>,
    /// What decode cells measure.
    #[serde(default)]
    pub decode_test: Option<DecodeTest>,
    /// A stream with no bytes for this long is an error, s.
    #[serde(default)]
    pub stall_timeout_s: Option<f64>,
    /// Contexts that were asked for but could not be planned (e.g. longer than the server's
    /// `max_model_len`), each with the reason; they have no row or cell. Empty when every asked
    /// context was planned, and in files that did not record it (schema v1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run_contexts: Vec<NotRunContext>,
    /// The server's base URL as `run --url` gave it (no credentials: those are refused), so
    /// `run --resume FILE` can continue without the flags; `null` with `--redact-host`, for
    /// imports, and in files that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_url: Option<String>,
    /// How many times each decode cell is measured (`run --repeat`, plan), interleaved across
    /// the matrix; `null` means once (files before repeats, and runs of one repeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
    /// Offered request rates of the rate cells, requests/s (plan: `--rates`); absent without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    /// `--slo` of rate cells (plan): the goodput of each rate cell counts the requests that
    /// meet it, and `--rates auto` searches for the highest rate whose cell meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_slo: Option<RateSlo>,
    /// `--rates auto`: the rate cells are found by a search per context (plan).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rate_search: bool,
    /// `--keep-going`: rates above a saturated one are measured too (plan); absent: they are
    /// skipped, each saying so in its `reason`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rate_keep_going: bool,
    /// `--trace`: the request trace replayed, its slice and speed (plan); absent without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSource>,
    /// `--prefix-share`: the shares of each prompt that are a prefix shared by a cell's
    /// requests, fractions 0–1 ascending (plan). Each decode cell is measured at each share
    /// (`decode[].prefix_share`), and each prefill context gets a warm row per share above 0
    /// beside its cold one (`docs/METHODOLOGY.md`, "Prefix caching"). Absent without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix_shares: Vec<f64>,
}

/// A context asked for (`--contexts`, `--prefill-contexts`) that the plan could not hold.
/// Source: plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NotRunContext {
    /// Which measurement it was asked for.
    pub phase: PlanPhase,
    /// As asked, e.g. "16K" or "max".
    pub label: String,
    /// The prompt length it stands for, tokens; `null` for a `max` that resolved to nothing.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Why it was not run, e.g. "16,384 prompt + 4,096 output tokens exceed the server's
    /// max_model_len 8,192".
    pub reason: String,
}

/// The two kinds of measurement a plan holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PlanPhase {
    /// A prefill row (`--prefill-contexts`).
    Prefill,
    /// A row of decode cells (`--contexts`).
    Decode,
}

/// The status of a prefill row or decode cell (`docs/METHODOLOGY.md`, "Statuses"). When
/// several apply, the first of over_capacity → error → requests_queued → not_run → valid wins
/// ([`crate::status`]); the variants are listed in display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Measured; every stream ran at once and none failed.
    Valid,
    /// Measured, but the server could not run all N streams at once (some waited in a queue).
    RequestsQueued,
    /// Planned, not run: N × (context + max_tokens) exceeds the server's KV budget.
    OverCapacity,
    /// At least one stream failed; `reason` says how. No throughput is claimed.
    Error,
    /// Planned but not measured (interrupted, excluded).
    NotRun,
    /// A rate cell whose server did not keep up with the offered rate: the requests in flight
    /// grew through the window beyond their noise, or requests of the window were still
    /// unanswered when the drain ended. `reason` and `saturation` hold the evidence.
    Saturated,
    /// A rate cell whose client did not send on schedule: the send lag (scheduled instant →
    /// request sent) was large enough to change the offered load, or `--max-in-flight` held
    /// requests back. The figures are kept (latencies count from the scheduled instants);
    /// `reason` has the lag.
    ClientLimited,
}

impl CellStatus {
    /// Every status, in display order.
    pub const ALL: [CellStatus; 7] = [
        CellStatus::Valid,
        CellStatus::RequestsQueued,
        CellStatus::Saturated,
        CellStatus::ClientLimited,
        CellStatus::OverCapacity,
        CellStatus::Error,
        CellStatus::NotRun,
    ];

    /// The snake_case id used in JSON, CSV and URLs, e.g. `over_capacity`.
    pub fn id(self) -> &'static str {
        match self {
            CellStatus::Valid => "valid",
            CellStatus::RequestsQueued => "requests_queued",
            CellStatus::OverCapacity => "over_capacity",
            CellStatus::Error => "error",
            CellStatus::NotRun => "not_run",
            CellStatus::Saturated => "saturated",
            CellStatus::ClientLimited => "client_limited",
        }
    }

    /// Words for people, as the seed page writes them, e.g. "Over capacity".
    pub fn label(self) -> &'static str {
        match self {
            CellStatus::Valid => "Valid",
            CellStatus::RequestsQueued => "Requests queued",
            CellStatus::OverCapacity => "Over capacity",
            CellStatus::Error => "Error",
            CellStatus::NotRun => "Not run",
            CellStatus::Saturated => "Saturated",
            CellStatus::ClientLimited => "Client-limited",
        }
    }

    /// Whether the cell's figures were measured (valid, requests queued, and for rate cells
    /// saturated or client-limited).
    pub fn is_measured(self) -> bool {
        matches!(
            self,
            CellStatus::Valid | CellStatus::RequestsQueued | CellStatus::Saturated | CellStatus::ClientLimited
        )
    }
}

/// Why a cell is over capacity: the tokens it would need against the server's KV budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// N × (context + max_tokens), tokens.
    pub required_tokens: u64,
    /// The server's KV budget, tokens.
    pub budget_tokens: u64,
}

/// A distribution summary. All fields share the unit of the metric that holds it.
///
/// Percentiles use the nearest-rank method everywhere ([`crate::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Distribution {
    /// Median.
    #[serde(default)]
    pub p50: Option<f64>,
    /// 90th percentile.
    #[serde(default)]
    pub p90: Option<f64>,
    /// 99th percentile.
    #[serde(default)]
    pub p99: Option<f64>,
    /// Arithmetic mean.
    #[serde(default)]
    pub mean: Option<f64>,
    /// Smallest value.
    #[serde(default)]
    pub min: Option<f64>,
    /// Largest value.
    #[serde(default)]
    pub max: Option<f64>,
    /// Number of values summarised: requests for per-request metrics (TTFT, TPOT, E2E), tokens
    /// for ITL, chunks for chunk gaps.
    #[serde(default)]
    pub count: Option<u64>,
}

/// Where a cell's output-token count came from, in order of preference
/// (`docs/METHODOLOGY.md`, "Where tokens are counted from").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TokenCountSource {
    /// Cumulative `usage.completion_tokens` on every chunk (`continuous_usage_stats`): exact per
    /// chunk.
    ContinuousUsage,
    /// Chunks counted, each request's count reconciled with its final `usage` (its tokens
    /// spread evenly over its chunks); requests without one (still streaming when the window
    /// closed) at the tokens per chunk of those with one.
    FinalUsage,
    /// Chunks counted and scaled to the server's `generation_tokens_total` counter over the
    /// window (Prometheus, read between scrapes): no request had a usage.
    ServerCounter,
    /// One token per text-carrying chunk, nothing to reconcile with (no usage at all, no live
    /// server counter): approximate, a lower bound under speculative decoding.
    ChunkCount,
    /// Counted by the source tool in a way it does not state (imported runs).
    Reported,
}

/// Why a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Reached `max_tokens` (`finish_reason: "length"`).
    Length,
    /// Stop token or sequence (`finish_reason: "stop"`).
    Stop,
    /// Cancelled by the collector when the window closed.
    Cancelled,
    /// Failed; see the sample's `error`.
    Error,
    /// Any other finish reason the server sent.
    Other,
}

/// One request's summary (not per token). Times are client clock, ms from the run start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RequestSample {
    /// When the request was sent, ms from the run start (client clock). In a rate cell: its
    /// scheduled instant, from which its TTFT and E2E latency count.
    pub start_ms: f64,
    /// Rate cells: scheduled instant → request sent, ms (client clock). Absent in decode cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_ms: Option<f64>,
    /// The `id` the server gave the completion (e.g. `chatcmpl-…`), to match its logs or a trace.
    #[serde(default)]
    pub response_id: Option<String>,
    /// Request sent → first token on any channel, ms (client clock).
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Request sent → first content token, ms (client clock); differs for reasoning models.
    #[serde(default)]
    pub ttft_content_ms: Option<f64>,
    /// Request sent → last token, ms (client clock).
    #[serde(default)]
    pub e2e_ms: Option<f64>,
    /// Prompt length, tokens (server usage).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Tokens generated, tokens (server usage).
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Of those, tokens generated inside the measurement window (server usage).
    #[serde(default)]
    pub window_output_tokens: Option<u64>,
    /// (t_last − t_first) ÷ (output_tokens − 1), ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// SSE chunks that carried tokens (client).
    #[serde(default)]
    pub chunks: Option<u64>,
    /// Whether the stream opened the cell (true) or replaced a finished one inside the window.
    #[serde(default)]
    pub opening: Option<bool>,
    /// How the request ended.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
    /// The error, when it failed (in-band error, truncated stream, HTTP status, stall).
    #[serde(default)]
    pub error: Option<String>,
    /// The server's own timing of this request, when it sends one (llama.cpp's `timings`
    /// object in the last chunk). Server clock, kept beside the client's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
}

impl RequestSample {
    /// A request known only by its start (or scheduled instant), ms from the run start: every
    /// other figure absent.
    pub fn at(start_ms: f64) -> RequestSample {
        RequestSample {
            start_ms,
            send_lag_ms: None,
            response_id: None,
            ttft_ms: None,
            ttft_content_ms: None,
            e2e_ms: None,
            prompt_tokens: None,
            output_tokens: None,
            window_output_tokens: None,
            tpot_ms: None,
            chunks: None,
            opening: None,
            finish_reason: None,
            error: None,
            server_timings: None,
        }
    }
}

/// A request's timing as the server reports it (llama.cpp `timings`; server clock).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServerTimings {
    /// Prompt tokens processed (not taken from the cache), tokens (`prompt_n`).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens reused from the cache, tokens (`cache_n`).
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Prompt processing time, ms (`prompt_ms`).
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Prompt processing rate, tok/s (`prompt_per_second`).
    #[serde(default)]
    pub prompt_tps: Option<f64>,
    /// Tokens generated, tokens (`predicted_n`).
    #[serde(default)]
    pub predicted_tokens: Option<u64>,
    /// Generation time, ms (`predicted_ms`).
    #[serde(default)]
    pub predicted_ms: Option<f64>,
    /// Generation rate of this request, tok/s (`predicted_per_second`).
    #[serde(default)]
    pub predicted_tps: Option<f64>,
}

/// One prefill measurement: a cold `max_tokens: 1` request at one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PrefillRow {
    /// Target context.
    pub context: ContextSize,
    /// Real prompt length the server counted, tokens (server usage).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Status of the row.
    pub status: CellStatus,
    /// Why the status is what it is (required for `error`, `over_capacity`, `not_run`).
    #[serde(default)]
    pub reason: Option<String>,
    /// prompt_tokens ÷ TTFT, tok/s.
    #[serde(default)]
    pub prompt_tps: Option<f64>,
    /// Request sent → first token, ms (client clock).
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Requests that finished (finish_reason and `[DONE]` seen by the client), count.
    #[serde(default)]
    pub completed_requests: Option<u64>,
    /// Prompt tokens the server served from its prefix cache, tokens; ~0 for a cold
    /// measurement (a row above the registry's threshold carries a warning in `reason`). Its
    /// source is [`PrefillRow::cached_tokens_source`]; `null` when the server tells none.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Header fields that differed from the file's header when this row was measured (a
    /// `--resume` against a changed server, accepted with `--accept-change`). Empty when it was
    /// measured under the header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_differences: Vec<AcceptedDifference>,
    /// Where `cached_tokens` came from; `null` when not recorded (schema v1) or unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens_source: Option<CachedTokensSource>,
    /// A warm row (`--prefix-share`): the share of the prompt that is a prefix sent once
    /// before the measured request, so it is in the server's prefix cache (plan, fraction
    /// 0–1). Absent for a cold row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
    /// A warm row's prefix cache: the cache state it started from and the measured hit rate
    /// beside the planned share. Absent for a cold row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheFigures>,
    /// Figures of this row its sources could not give, and why. Empty when nothing is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
    /// The request(s) behind this row.
    #[serde(default)]
    pub requests: Vec<RequestSample>,
}

/// How a prefix-share row or cell began with a known prefix cache (`docs/METHODOLOGY.md`,
/// "Prefix caching").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CacheStart {
    /// The server emptied its prefix cache on request just before (vLLM `POST
    /// /reset_prefix_cache`, SGLang `POST /flush_cache`, llama.cpp slot erase).
    Reset,
    /// No reset was possible: the prompts carry text unique to this row or cell from their
    /// first token, so nothing cached earlier can match them.
    Salted,
}

/// Where a measured prefix-cache hit rate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum HitRateSource {
    /// The prefix-cache hit and query counters' growth over the row or cell (Prometheus:
    /// vLLM `prefix_cache_hits` ÷ `prefix_cache_queries`).
    Prometheus,
    /// `usage.prompt_tokens_details.cached_tokens` ÷ `usage.prompt_tokens` of its requests
    /// (server usage).
    Usage,
    /// llama.cpp's `timings.cache_n` ÷ (`cache_n` + `prompt_n`) of its requests (server usage).
    ServerTimings,
}

impl HitRateSource {
    /// The source in words, as `show` and the page print it: `Prometheus`, `server usage`.
    pub fn words(self) -> &'static str {
        match self {
            HitRateSource::Prometheus => "Prometheus",
            HitRateSource::Usage => "server usage",
            HitRateSource::ServerTimings => "server timings",
        }
    }
}

/// A prefix-share row's or cell's prefix cache: what was planned, how the cache started, and
/// what the server says it served from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PrefixCacheFigures {
    /// The planned share of each prompt that is the shared prefix, fraction 0–1 (plan).
    pub planned_share: f64,
    /// How the cache was put in a known state before the row or cell.
    pub cache_start: CacheStart,
    /// The reset asked for (`POST /reset_prefix_cache`), or why none could be (with
    /// `salted`).
    pub cache_start_detail: String,
    /// Prompt tokens served from the prefix cache ÷ prompt tokens, over the measured requests,
    /// fraction 0–1 (source: `hit_rate_source`); `null` when no source gives it (the row's or
    /// cell's `missing` says why).
    #[serde(default)]
    pub measured_hit_rate: Option<f64>,
    /// Where `measured_hit_rate` came from.
    #[serde(default)]
    pub hit_rate_source: Option<HitRateSource>,
    /// Prompt tokens served from the cache, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub hit_tokens: Option<u64>,
    /// Prompt tokens looked up, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub query_tokens: Option<u64>,
}

/// A header field whose value differed when a row or cell was measured: the file's header
/// keeps the first run's value, this records the one the row or cell was measured with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AcceptedDifference {
    /// The header field, e.g. `engine.version`, `engine.launch_command`.
    pub field: String,
    /// Its value in the file's header; `null` when the header does not know it.
    #[serde(default)]
    pub header: Option<String>,
    /// Its value when this row or cell was measured; `null` when unknown then.
    #[serde(default)]
    pub measured: Option<String>,
}

/// Where a prefill row's cached prompt tokens came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CachedTokensSource {
    /// `usage.prompt_tokens_details.cached_tokens` of the request (server usage: vLLM with
    /// prompt-token details, SGLang).
    Usage,
    /// llama.cpp's `timings.cache_n` of the request.
    ServerTimings,
    /// The prefix-cache hit counter's growth around the request (Prometheus).
    Prometheus,
}

/// How a decode cell's readiness ended: every stream decoding and the server queue empty, or
/// not within the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReadinessOutcome {
    /// Every stream produced a token and the queue gauge (if any) read 0.
    Ready,
    /// Not ready within the limit; the window was measured anyway and the cell says so.
    TimedOut,
    /// A stream failed first; no window was measured.
    Failed,
}

/// A decode cell's readiness, before its window. Source: client clock (and Prometheus for the
/// queue).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Readiness {
    /// How it ended.
    pub outcome: ReadinessOutcome,
    /// From the opening of the cell's first stream to that outcome, ms (client clock).
    pub after_ms: f64,
    /// The longest readiness may take, ms.
    pub limit_ms: f64,
    /// Streams that had produced a token (or finished) by then.
    pub streams_producing: u32,
}

impl PrefillRow {
    /// A row of the plan without figures yet: `status` and `reason` as given, nothing measured.
    pub fn new(context: ContextSize, status: CellStatus, reason: Option<String>) -> PrefillRow {
        PrefillRow {
            context,
            prompt_tokens: None,
            status,
            reason,
            prompt_tps: None,
            ttft_ms: None,
            completed_requests: None,
            cached_tokens: None,
            accepted_differences: vec![],
            cached_tokens_source: None,
            prefix_share: None,
            prefix_cache: None,
            missing: vec![],
            requests: vec![],
        }
    }
}

/// Server-side figures during a decode window (Prometheus `/metrics`, sampled ≥ 1 Hz).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServerFigures {
    /// Mean of `num_requests_running` samples, requests.
    #[serde(default)]
    pub running_avg: Option<f64>,
    /// Largest `num_requests_waiting` sample, requests.
    #[serde(default)]
    pub waiting_max: Option<f64>,
    /// Mean KV-cache usage, fraction 0–1.
    #[serde(default)]
    pub kv_cache_usage_avg: Option<f64>,
    /// Largest KV-cache usage, fraction 0–1.
    #[serde(default)]
    pub kv_cache_usage_max: Option<f64>,
    /// Preemptions during the window (counter delta).
    #[serde(default)]
    pub preemptions: Option<u64>,
    /// `generation_tokens_total` delta from just before the cell's first stream opened to just
    /// after its last one ended, tokens: the server's count of what the cell's requests
    /// generated, a cross-check of the client's count (the sum of `requests[].output_tokens`).
    /// The server may count a few more: tokens of streams cancelled at the window's end that
    /// were generated but never sent.
    #[serde(default)]
    pub generation_tokens: Option<u64>,
    /// Prefix-cache hits during the window, tokens (counter delta).
    #[serde(default)]
    pub prefix_cache_hit_tokens: Option<u64>,
    /// Prefix-cache queries during the window, tokens (counter delta).
    #[serde(default)]
    pub prefix_cache_query_tokens: Option<u64>,
    /// Mean accepted length per speculative-decoding draft, tokens.
    #[serde(default)]
    pub spec_mean_accepted_len: Option<f64>,
}

/// GPU figures during a decode window (NVML, summed over GPUs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuFigures {
    /// Mean total board power, W.
    #[serde(default)]
    pub power_w: Option<f64>,
    /// Energy used in the window, J (NVML total-energy counter delta).
    #[serde(default)]
    pub energy_j: Option<f64>,
    /// Mean GPU utilization, percent 0–100.
    #[serde(default)]
    pub utilization_pct: Option<f64>,
    /// Largest memory used, bytes.
    #[serde(default)]
    pub memory_used_bytes: Option<u64>,
    /// Mean SM clock, MHz.
    #[serde(default)]
    pub sm_clock_mhz: Option<f64>,
    /// Mean memory clock, MHz.
    #[serde(default)]
    pub mem_clock_mhz: Option<f64>,
    /// Largest temperature, °C.
    #[serde(default)]
    pub temperature_c: Option<f64>,
}

/// One sustained-decode measurement: N streams at one context for a fixed window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DecodeCell {
    /// Target context (row of the matrix).
    pub context: ContextSize,
    /// Real prompt length the server counted, tokens (server usage).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Simultaneous streams N (column of the matrix).
    pub concurrency: u32,
    /// `--prefix-share`: the share of each request's prompt that is a prefix shared by the
    /// cell's requests, the rest unique to the request (plan, fraction 0–1). Absent: the
    /// streams share one whole warmed prompt (`config.prompt_sharing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
    /// A prefix-share cell's prefix cache: how it started, the measured hit rate beside the
    /// planned share. Absent without `prefix_share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheFigures>,
    /// Status of the cell.
    pub status: CellStatus,
    /// Why the status is what it is (required for `error`, `over_capacity`, `not_run`).
    #[serde(default)]
    pub reason: Option<String>,
    /// For `over_capacity`: the shortfall.
    #[serde(default)]
    pub capacity: Option<Capacity>,
    /// Length of the measurement window actually used, s (client clock).
    #[serde(default)]
    pub window_s: Option<f64>,
    /// When the window opened, ms from the run start (client clock).
    #[serde(default)]
    pub window_start_ms: Option<f64>,
    /// When the window really closed, ms from the run start (client clock); `window_s` is
    /// `window_end_ms − window_start_ms`, and its distance from `window_start_ms +
    /// config.window_s` is how late the close was. `null` in files that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end_ms: Option<f64>,
    /// How readiness ended before the window; `null` when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Readiness>,
    /// Output tokens of all streams inside the window ÷ window, tok/s.
    #[serde(default)]
    pub total_tps: Option<f64>,
    /// Per-stream decode rate, 1000 ÷ TPOT of each stream (one value per stream), tok/s.
    #[serde(default)]
    pub per_request_tps: Option<Distribution>,
    /// TTFT of the N streams that opened the cell, ms (client clock).
    #[serde(default)]
    pub ttft_ms: Option<Distribution>,
    /// TTFT of replacement streams started inside the window, ms (client clock).
    #[serde(default)]
    pub ttft_in_window_ms: Option<Distribution>,
    /// Request sent → first content token (reasoning models), ms (client clock).
    #[serde(default)]
    pub ttft_content_ms: Option<Distribution>,
    /// Time per output token, one value per stream: (last − first in-window token time) ÷ tokens
    /// after the first in-window chunk, ms (client clock, server usage).
    #[serde(default)]
    pub tpot_ms: Option<Distribution>,
    /// Inter-token latency: chunk gaps divided over the tokens each chunk carries, ms.
    #[serde(default)]
    pub itl_ms: Option<Distribution>,
    /// Raw gaps between token-carrying SSE chunks, ms (client clock).
    #[serde(default)]
    pub chunk_gap_ms: Option<Distribution>,
    /// Request sent → last token, for requests that finished, ms (client clock).
    #[serde(default)]
    pub e2e_ms: Option<Distribution>,
    /// Output tokens produced inside the window by all streams, tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Where `output_tokens` came from.
    #[serde(default)]
    pub token_count_source: Option<TokenCountSource>,
    /// Whether counted chunks were reconciled with a real count (final usage, the server
    /// counter): `false` means the figures are approximate (one token per chunk); `null` when
    /// every chunk carried its usage, or in files that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_count_reconciled: Option<bool>,
    /// What the token count was checked against: every source's count over the cell's
    /// requests and each disagreement beyond the sources' slack (`docs/METHODOLOGY.md`, "Where
    /// tokens are counted from"). `null` in files that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_count_check: Option<TokenCheck>,
    /// Requests that finished inside the window (client), count.
    #[serde(default)]
    pub completed_requests: Option<u64>,
    /// Mean requests being served during the window — past their first token, not waiting in
    /// a queue — requests: the server's running gauge (Prometheus; then equal to
    /// `server.running_avg`), else the time-weighted mean of streams between their first token
    /// and their end as the client saw them (the count the status rules use). `null` in v1
    /// files where it held the client's in-flight count (queued streams included).
    #[serde(default)]
    pub avg_active_requests: Option<f64>,
    /// Most requests in flight at once during the window (client view), requests.
    #[serde(default)]
    pub max_active_requests: Option<f64>,
    /// Speculative decoding: the acceptance rate, accepted ÷ draft tokens, fraction 0–1
    /// (Prometheus); equal to `spec_decode.acceptance_rate` where that is given.
    #[serde(default)]
    pub spec_accept_rate: Option<f64>,
    /// Speculative decoding over the cell's requests: drafts, draft and accepted tokens, the
    /// acceptance rate, the mean accepted length and the acceptance by position, from the
    /// server's counters (`docs/METHODOLOGY.md`, "Speculative decoding"). Absent where the
    /// server counts no speculation (the file's `missing` says why) and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<SpecDecodeFigures>,
    /// Mean GPU power in the window, W (NVML, over the GPUs of `hardware.gpu_selection`).
    #[serde(default)]
    pub gpu_power_w: Option<f64>,
    /// GPU energy per output token, J/token (NVML energy delta ÷ output tokens).
    #[serde(default)]
    pub energy_j_per_token: Option<f64>,
    /// Further server figures (Prometheus).
    #[serde(default)]
    pub server: Option<ServerFigures>,
    /// Further GPU figures (NVML).
    #[serde(default)]
    pub gpu: Option<GpuFigures>,
    /// Collector CPU use during the window, percent of one core (client self-check, getrusage).
    /// Near all of its cores means the figures may be the client's limit; `reason` then says so.
    #[serde(default)]
    pub client_cpu_pct: Option<f64>,
    /// Header fields that differed from the file's header when this cell was measured (a
    /// `--resume` against a changed server, accepted with `--accept-change`). Empty when it was
    /// measured under the header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_differences: Vec<AcceptedDifference>,
    /// The requests behind this cell, one summary each.
    #[serde(default)]
    pub requests: Vec<RequestSample>,
    /// The window as a time series of one-second buckets (client clock); `null` in files that
    /// did not record one (no noise data: the cell's intervals are unavailable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<WindowSeries>,
    /// Confidence intervals of the cell's headline figures (`docs/METHODOLOGY.md`, "Noise");
    /// `null` in files without samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<CellIntervals>,
    /// Each measurement of the cell when the run planned more than one (`config.repeats`), in
    /// the order measured; empty for a cell measured once. With repeats, `total_tps`,
    /// `ttft_ms` and `tpot_ms` are means over the measured repeats (`docs/METHODOLOGY.md`,
    /// "Repeats"); the cell's other figures, its requests excepted (those of every repeat),
    /// are those of its latest repeat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<CellRepeat>,
    /// The spread over repeats of each headline figure; empty without two measured repeats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeat_spread: Vec<FigureSpread>,
    /// Figures of this cell its sources could not give, and why (e.g. ITL percentiles where
    /// no chunk's token count was reported). Empty when nothing is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
}

/// A decode cell's output-token sources side by side, over the cell's requests (opening and
/// replacement, the whole of each): what [`crate::tokens::decide`] compared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenCheck {
    /// Chunks that carried text (content, reasoning or a tool call), tokens: each is at least
    /// one token, so no source may count fewer (client).
    pub text_chunks: u64,
    /// The growth of per-chunk usage, summed over the requests that carried usage on every
    /// chunk, tokens (server usage); `null` when none did.
    #[serde(default)]
    pub chunk_usage: Option<u64>,
    /// The final `usage.completion_tokens`, summed over the requests that finished with one,
    /// tokens (server usage); `null` when none did.
    #[serde(default)]
    pub final_usage: Option<u64>,
    /// Text chunks of the requests behind `final_usage`, tokens (client): its lower bound.
    #[serde(default)]
    pub final_usage_text_chunks: Option<u64>,
    /// The server's output-token counter over the whole cell, tokens (Prometheus; as
    /// `server.generation_tokens`); `null` without a counter that grows while requests stream.
    #[serde(default)]
    pub server_counter: Option<u64>,
    /// Every disagreement beyond the sources' slack; empty when the sources agree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<TokenDisagreement>,
}

/// One token source that disagreed with the cell's other evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenDisagreement {
    /// The source that disagreed.
    pub source: TokenCountSource,
    /// `true` when it was set aside (it counts what cannot be: fewer tokens than text chunks, a
    /// running total that does not grow); `false` when it was only noted.
    pub rejected: bool,
    /// What was seen, e.g. "final usage 12 tokens for 1,536 text chunks in 12 of 12 finished
    /// requests".
    pub reason: String,
}

/// One measurement (repeat) of a decode cell, compact: its window, headline figures, counts
/// and series. Sources as the cell's figures of the same names (client clock, server usage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CellRepeat {
    /// Which repeat, 1 = the first pass over the matrix.
    pub repeat: u32,
    /// How this repeat ended, as a cell's status.
    pub status: CellStatus,
    /// Why, where its status needs a reason (as a cell's `reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When its window opened, ms from the run start (client clock).
    #[serde(default)]
    pub window_start_ms: Option<f64>,
    /// When its window closed, ms from the run start (client clock).
    #[serde(default)]
    pub window_end_ms: Option<f64>,
    /// Its output tokens inside the window ÷ window, tok/s.
    #[serde(default)]
    pub total_tps: Option<f64>,
    /// Its TTFT of the opening streams, ms (client clock).
    #[serde(default)]
    pub ttft_ms: Option<Distribution>,
    /// Its time per output token, one value per stream, ms.
    #[serde(default)]
    pub tpot_ms: Option<Distribution>,
    /// Its output tokens inside the window, tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Its requests finished inside the window, count.
    #[serde(default)]
    pub completed_requests: Option<u64>,
    /// Its requests sent (opening and replacement streams), count.
    #[serde(default)]
    pub requests: Option<u64>,
    /// Its window as a per-second series (as the cell's `series`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<WindowSeries>,
}

/// The spread of one figure over the measured repeats of a cell (those with figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FigureSpread {
    /// The figure's metric id (`total_tps`, `ttft_ms_p50`, `tpot_ms_p50`).
    pub figure: String,
    /// Repeats with the figure, count.
    pub repeats: u64,
    /// Their mean (the cell's headline figure), in the figure's unit.
    pub mean: f64,
    /// Their sample standard deviation (n − 1), in the figure's unit.
    pub sd: f64,
    /// The smallest repeat's figure.
    pub min: f64,
    /// The largest repeat's figure.
    pub max: f64,
}

/// A decode window as a time series: bucket `i` covers `[start + i·bucket_s, start +
/// (i+1)·bucket_s)` ms after the window opened, whole buckets only (the window's last fraction
/// of a second is in the cell's figures but not here). Source: client clock, except `running`
/// and `waiting` (Prometheus).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WindowSeries {
    /// Width of one bucket, s.
    pub bucket_s: f64,
    /// Output tokens of all streams that arrived in each bucket, tokens (counted as for
    /// `output_tokens`; fractional where a chunk's tokens are spread over its reconciled count).
    pub output_tokens: Vec<f64>,
    /// Streams decoding (past their first token, not yet ended) in each bucket, time-weighted
    /// mean, streams.
    pub streams_decoding: Vec<f64>,
    /// The server's running gauge, mean of the scrapes in each bucket (Prometheus); `null`
    /// where no scrape fell in the bucket. Empty when the server has no such gauge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<Option<f64>>,
    /// The server's waiting gauge, largest scrape in each bucket (Prometheus); as `running`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Option<f64>>,
}

/// How a confidence interval was computed (each defined in `docs/METHODOLOGY.md`, "Noise").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    /// Non-overlapping batch means over a window's per-second series, Student's t with
    /// batches − 1 degrees of freedom (respects autocorrelation within the window).
    BatchMeans,
    /// Percentile bootstrap over the cell's requests (seeded, deterministic).
    BootstrapRequests,
    /// Student's t interval of the mean over repeats of the cell.
    BetweenRepeats,
}

/// A confidence interval of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Interval {
    /// The figure the interval is about (the batch means' mean, the requests' percentile, the
    /// repeats' mean), in the figure's unit.
    pub estimate: f64,
    /// Lower bound, in the figure's unit.
    pub low: f64,
    /// Upper bound, in the figure's unit.
    pub high: f64,
    /// Confidence level, fraction 0–1 (0.95).
    pub level: f64,
    /// How it was computed.
    pub method: IntervalMethod,
    /// Pieces of evidence behind it: batches, requests or repeats, count.
    pub evidence: u64,
    /// Standard error of the estimate, in the figure's unit (bootstrap: the replicates'
    /// standard deviation).
    pub std_error: f64,
    /// Degrees of freedom of the t distribution behind the interval; `null` for the bootstrap
    /// (read as normal when two intervals are compared).
    #[serde(default)]
    pub df: Option<f64>,
}

/// The confidence intervals of a decode cell's headline figures. A figure whose evidence is too
/// short for an honest interval is `null`, with the reason in `missing`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CellIntervals {
    /// Of `total_tps`, tok/s.
    #[serde(default)]
    pub total_tps: Option<Interval>,
    /// Of `ttft_ms.p50`, ms.
    #[serde(default)]
    pub ttft_ms_p50: Option<Interval>,
    /// Of `tpot_ms.p50`, ms.
    #[serde(default)]
    pub tpot_ms_p50: Option<Interval>,
    /// Intervals left out and why (`figure` is the metric id, e.g. `total_tps`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
}

impl DecodeCell {
    /// A cell of the plan without figures yet: `status` and `reason` as given, nothing measured.
    pub fn new(context: ContextSize, concurrency: u32, status: CellStatus, reason: Option<String>) -> DecodeCell {
        DecodeCell {
            context,
            prompt_tokens: None,
            concurrency,
            prefix_share: None,
            prefix_cache: None,
            status,
            reason,
            capacity: None,
            window_s: None,
            window_start_ms: None,
            window_end_ms: None,
            readiness: None,
            total_tps: None,
            per_request_tps: None,
            ttft_ms: None,
            ttft_in_window_ms: None,
            ttft_content_ms: None,
            tpot_ms: None,
            itl_ms: None,
            chunk_gap_ms: None,
            e2e_ms: None,
            output_tokens: None,
            token_count_source: None,
            token_count_reconciled: None,
            token_count_check: None,
            completed_requests: None,
            avg_active_requests: None,
            max_active_requests: None,
            spec_accept_rate: None,
            spec_decode: None,
            gpu_power_w: None,
            energy_j_per_token: None,
            server: None,
            gpu: None,
            client_cpu_pct: None,
            accepted_differences: vec![],
            requests: vec![],
            series: None,
            intervals: None,
            repeats: vec![],
            repeat_spread: vec![],
            missing: vec![],
        }
    }
}

/// How a rate cell's arrivals are spaced (plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ArrivalProcess {
    /// Exponential gaps (a Poisson process): independent arrivals, the default.
    Poisson,
    /// Equal gaps of 1 ÷ rate.
    Constant,
    /// Gamma-distributed gaps with mean 1 ÷ rate and the coefficient of variation `cv`:
    /// burstier than Poisson above 1, smoother below.
    Gamma,
    /// The instants of a request trace (`--trace`): each request at its timestamp, scaled by
    /// the replay's speed (the row's rate is the trace's mean).
    Trace,
}

/// A rate cell's arrival schedule, as planned: the process and the seed it is drawn from (the
/// same seed gives the same arrival instants against any server).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Arrival {
    /// The process (plan).
    pub process: ArrivalProcess,
    /// Coefficient of variation of the gaps, for `gamma` (plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// The seed of the schedule (plan: `--seed`, else 0).
    pub seed: u64,
}

/// Why a rate cell is (or is not) saturated: the evidence the rule in docs/METHODOLOGY.md
/// ("Open-loop rate cells") reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Saturation {
    /// Requests in flight when the window opened (client clock).
    pub in_flight_start: u64,
    /// Requests in flight when the window closed (client clock).
    pub in_flight_end: u64,
    /// The growth the rule allows as noise: 3 × √(2 × mean in flight) + 2, and at least 5 % of
    /// the requests scheduled in the window.
    pub growth_allowed: f64,
    /// The server's waiting-queue gauge at the first and last reading inside the window
    /// (Prometheus); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<(f64, f64)>,
    /// Completions in the window ÷ requests scheduled in it.
    #[serde(default)]
    pub achieved_share: Option<f64>,
    /// Requests scheduled in the window and not finished when the drain ended.
    pub unfinished: u64,
}

/// One open-loop measurement: requests at one context arriving at a set rate, on a schedule
/// that does not wait for the server (docs/METHODOLOGY.md, "Open-loop rate cells"). Every
/// request's TTFT and E2E latency count from its scheduled instant, so a client or connection
/// that falls behind cannot hide the server's queue (no coordinated omission).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateCell {
    /// Target context (row of the matrix).
    pub context: ContextSize,
    /// The prompts' real length, tokens (median server usage).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Offered request rate, requests/s (plan).
    pub rate_rps: f64,
    /// How arrivals are spaced (plan).
    pub arrival: Arrival,
    /// `--max-in-flight`: the most requests the client keeps open (plan); absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// `--prefix-share`: the share of each request's prompt that is a prefix shared by the
    /// cell's requests, the rest unique to the request (plan, fraction 0–1). Absent: every
    /// request a cold prefill of a prompt of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
    /// A prefix-share rate cell's prefix cache: how it started, the measured hit rate over the
    /// cell's requests beside the planned share. Absent without `prefix_share`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheFigures>,
    /// Valid, saturated, client-limited, error or not run.
    pub status: CellStatus,
    /// Why the status, and notes.
    #[serde(default)]
    pub reason: Option<String>,
    /// Warm-up before the window: from the first scheduled request until it finished, s
    /// (client clock).
    #[serde(default)]
    pub warmup_s: Option<f64>,
    /// The window's real length, s (client clock).
    #[serde(default)]
    pub window_s: Option<f64>,
    /// When the window opened, ms from the run start (client clock).
    #[serde(default)]
    pub window_start_ms: Option<f64>,
    /// The drain after the window (requests of the window finishing), s (client clock).
    #[serde(default)]
    pub drain_s: Option<f64>,
    /// Requests scheduled inside the window ÷ its length, requests/s (plan, on the client
    /// clock's window).
    #[serde(default)]
    pub offered_rps: Option<f64>,
    /// Requests that finished inside the window ÷ its length, requests/s (client clock).
    #[serde(default)]
    pub achieved_rps: Option<f64>,
    /// Requests scheduled inside the window (plan).
    #[serde(default)]
    pub scheduled_requests: Option<u64>,
    /// Requests that finished inside the window (client clock).
    #[serde(default)]
    pub completed_requests: Option<u64>,
    /// Output tokens that arrived inside the window ÷ its length, tok/s.
    #[serde(default)]
    pub total_tps: Option<f64>,
    /// Output tokens that arrived inside the window.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Where the output-token count came from.
    #[serde(default)]
    pub token_count_source: Option<TokenCountSource>,
    /// TTFT of the requests scheduled in the window, from their scheduled instants, ms.
    #[serde(default)]
    pub ttft_ms: Option<Distribution>,
    /// TPOT of the requests scheduled in the window, ms.
    #[serde(default)]
    pub tpot_ms: Option<Distribution>,
    /// ITL of the requests scheduled in the window, ms (per token; only where each chunk's
    /// token count is known).
    #[serde(default)]
    pub itl_ms: Option<Distribution>,
    /// E2E latency of the requests scheduled in the window, from their scheduled instants, ms.
    #[serde(default)]
    pub e2e_ms: Option<Distribution>,
    /// Send lag of the requests scheduled in the window: scheduled instant → request sent, ms
    /// (client clock).
    #[serde(default)]
    pub send_lag_ms: Option<Distribution>,
    /// Requests of the window that `--max-in-flight` held back (their latencies still count
    /// from their scheduled instants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<u64>,
    /// Time-weighted mean of requests in flight in the window (client clock).
    #[serde(default)]
    pub avg_in_flight: Option<f64>,
    /// Most requests in flight at once in the window (client clock).
    #[serde(default)]
    pub max_in_flight_seen: Option<u64>,
    /// The saturation rule's evidence.
    #[serde(default)]
    pub saturation: Option<Saturation>,
    /// With `--slo`: requests of the window that finished meeting it (their own TTFT and TPOT
    /// within the limits) ÷ the window's length, requests/s (client clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_rps: Option<f64>,
    /// With `--slo`: whether the cell meets it (valid, and its TTFT and TPOT at the SLO's
    /// percentile within the limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meets_slo: Option<bool>,
    /// Prometheus figures over the window.
    #[serde(default)]
    pub server: Option<ServerFigures>,
    /// Speculative decoding over the cell's requests (warm-up, window and drain), from the
    /// server's counters, as a decode cell's `spec_decode`. Absent where the server counts no
    /// speculation and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<SpecDecodeFigures>,
    /// The collector's CPU use over the window, % of one core (client).
    #[serde(default)]
    pub client_cpu_pct: Option<f64>,
    /// Header differences accepted on `--resume` (see [`AcceptedDifference`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_differences: Vec<AcceptedDifference>,
    /// Every request of the cell (warm-up, window, drain), in schedule order.
    #[serde(default)]
    pub requests: Vec<RequestSample>,
    /// Why a figure of this cell is null.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
    /// `over_capacity`: the KV-cache tokens the requests in flight needed (their time-weighted
    /// mean × (context + max output)) against the server's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
}

impl RateCell {
    /// A cell of the plan without figures yet.
    pub fn new(context: ContextSize, rate_rps: f64, arrival: Arrival, max_in_flight: Option<u32>) -> RateCell {
        RateCell {
            context,
            prompt_tokens: None,
            rate_rps,
            arrival,
            max_in_flight,
            prefix_share: None,
            prefix_cache: None,
            status: CellStatus::NotRun,
            reason: Some("pending".into()),
            warmup_s: None,
            window_s: None,
            window_start_ms: None,
            drain_s: None,
            offered_rps: None,
            achieved_rps: None,
            scheduled_requests: None,
            completed_requests: None,
            total_tps: None,
            output_tokens: None,
            token_count_source: None,
            ttft_ms: None,
            tpot_ms: None,
            itl_ms: None,
            e2e_ms: None,
            send_lag_ms: None,
            held_back: None,
            avg_in_flight: None,
            max_in_flight_seen: None,
            saturation: None,
            goodput_rps: None,
            meets_slo: None,
            server: None,
            spec_decode: None,
            client_cpu_pct: None,
            accepted_differences: vec![],
            requests: vec![],
            missing: vec![],
            capacity: None,
        }
    }

    /// "2 req/s" — the rate as people read it.
    pub fn rate_label(&self) -> String {
        rate_label(self.rate_rps)
    }
}

/// A request rate in words: `0.5 req/s`, `2 req/s`.
pub fn rate_label(rps: f64) -> String {
    let text = format!("{rps:.3}");
    format!("{} req/s", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The service-level objective of rate cells (`--slo ttft=2s,tpot=50ms,p=90`): limits on TTFT
/// and TPOT at a percentile (plan).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateSlo {
    /// Highest acceptable TTFT, ms (from the scheduled instant).
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Highest acceptable TPOT, ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// The percentile the limits apply to: 50, 90 or 99.
    pub percentile: u8,
}

/// What `--rates auto` found at one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RateAtSlo {
    /// The context.
    pub context: ContextSize,
    /// The highest measured rate whose cell met the SLO, requests/s; `null` when none did.
    #[serde(default)]
    pub rate_rps: Option<f64>,
    /// The lowest measured rate above it whose cell did not, requests/s; `null` when every
    /// rate measured met it.
    #[serde(default)]
    pub failed_at_rps: Option<f64>,
    /// How the search ended, in words.
    pub reason: String,
}

/// The request trace a run replays (`run --trace`; plan). Source: the file and the flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TraceSource {
    /// The trace's format: `mooncake` (one JSON object per line: `timestamp`, `input_length`,
    /// `output_length`, `hash_ids`).
    pub format: String,
    /// The file as `--trace` named it.
    pub file: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Lines in the file.
    pub lines: u64,
    /// Requests in the slice replayed.
    pub requests: u64,
    /// `--trace-from`: the slice starts here, s of trace time; absent: at the trace's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_s: Option<f64>,
    /// `--trace-to`: the slice ends before here, s of trace time; absent: after its last
    /// request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_s: Option<f64>,
    /// `--trace-speed`: 2 replays twice as fast (every gap halved).
    pub speed: f64,
    /// The slice's length in trace time, s (from its start to `to_s` or its last request).
    pub span_s: f64,
    /// The file's timestamps were not in order; the requests were sorted by timestamp.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sorted: bool,
}

/// A replayed trace: the figures of a rate cell over the whole slice, and every request's
/// record (docs/METHODOLOGY.md, "Trace replay").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TraceRow {
    /// The figures, status and requests as a rate cell has them (the rate rule decides the
    /// status): `context` is the trace's longest input, `rate_rps` its mean rate as replayed,
    /// `arrival.process` is `trace`; the window is the slice (from its start to its last
    /// request, scaled by the speed). `cell.requests[i]` and `requests[i]` are the same request.
    pub cell: RateCell,
    /// Every request of the slice as the trace planned it and as it was served, in schedule
    /// order.
    #[serde(default)]
    pub requests: Vec<TraceRequest>,
    /// The trace's ideal reuse beside the prefix-cache hit rate the server measured over the
    /// replay (docs/METHODOLOGY.md, "Trace replay"); absent in files from before it was
    /// measured and for a replay not yet measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<TracePrefixCache>,
}

/// A replayed trace's prefix reuse: what the trace could reuse, and what the server served
/// from its prefix cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TracePrefixCache {
    /// Prompt tokens in blocks an earlier request of the slice sent ÷ the slice's prompt
    /// tokens, fraction 0–1 (trace: `hash_ids` × 512 tokens, a partial last block by its
    /// tokens).
    pub ideal_reuse: f64,
    /// The numerator of `ideal_reuse`, tokens (trace).
    pub ideal_reused_tokens: u64,
    /// The slice's prompt tokens (`input_length` summed), tokens (trace).
    pub trace_prompt_tokens: u64,
    /// Tokens of the distinct blocks the slice sends: what a cache must hold to reach the
    /// ideal (trace).
    pub distinct_block_tokens: u64,
    /// How the cache was put in a known state before the replay.
    pub cache_start: CacheStart,
    /// The reset asked for (`POST /reset_prefix_cache`), or why none could be (with
    /// `salted`).
    pub cache_start_detail: String,
    /// Prompt tokens served from the prefix cache ÷ prompt tokens looked up, over the replay,
    /// fraction 0–1 (source: `hit_rate_source`); `null` when no source gives it (the cell's
    /// `missing` says why).
    #[serde(default)]
    pub measured_hit_rate: Option<f64>,
    /// Where `measured_hit_rate` came from.
    #[serde(default)]
    pub hit_rate_source: Option<HitRateSource>,
    /// Prompt tokens served from the cache, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub hit_tokens: Option<u64>,
    /// Prompt tokens looked up, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub query_tokens: Option<u64>,
}

/// A multi-turn conversation cell (`run --turns N`): `sessions` conversations at once (closed
/// loop), each sending its turns one after another — turn 1 a prompt of its own, every later
/// turn the whole history (prompts and the server's answers, as chat messages) plus a new user
/// message, `think_time_s` after the previous answer ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ConversationCell {
    /// The context (row of the matrix): turn 1's prompt leaves room in it for every later
    /// turn's answer and message.
    pub context: ContextSize,
    /// Conversations at once (`--concurrency`).
    pub sessions: u32,
    /// Turns per conversation (`--turns`).
    pub turns: u32,
    /// Pause between an answer's end and the next turn's request, s (`--think-time`).
    pub think_time_s: f64,
    /// Turn 1's prompt, tokens (plan: the context less the room for the later turns).
    pub first_prompt_tokens: u64,
    /// Each later turn's new user message, tokens as a whole prompt (plan).
    pub follow_up_tokens: u64,
    /// `max_tokens` of every answer (plan).
    pub answer_tokens: u32,
    /// Valid, error or not run.
    pub status: CellStatus,
    /// Why it has its status (an error's cause), and notes.
    #[serde(default)]
    pub reason: Option<String>,
    /// Figures per turn, turn 1 first; empty before it was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_turn: Vec<TurnFigures>,
    /// Figures its sources could not give, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
    /// Header differences accepted on `--resume` when it was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_differences: Vec<AcceptedDifference>,
}

/// Turn k of a conversation cell, over its sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnFigures {
    /// The turn, from 1.
    pub turn: u32,
    /// Sessions whose request of this turn finished (client).
    pub completed: u64,
    /// Sessions whose request of this turn failed (client).
    pub failed: u64,
    /// The turn's prompt as the server counted it, median over sessions, tokens (server
    /// usage).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Time to first token, ms, over the sessions (client clock).
    #[serde(default)]
    pub ttft_ms: Option<Distribution>,
    /// Inter-token latency, ms, over the turn's tokens (client clock, server usage).
    #[serde(default)]
    pub itl_ms: Option<Distribution>,
    /// Request sent → last token, ms, over the sessions (client clock).
    #[serde(default)]
    pub e2e_ms: Option<Distribution>,
    /// This turn's TTFT p50 ÷ turn 1's: what turn k costs against turn 1 (client clock).
    #[serde(default)]
    pub ttft_ratio: Option<f64>,
    /// Prompt tokens served from the prefix cache ÷ prompt tokens, over the turn's requests,
    /// fraction 0–1 (source: `hit_rate_source`); `null` when no source gives it (the cell's
    /// `missing` says why).
    #[serde(default)]
    pub cache_hit_rate: Option<f64>,
    /// Where `cache_hit_rate` came from.
    #[serde(default)]
    pub hit_rate_source: Option<HitRateSource>,
    /// Prompt tokens served from the cache, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub hit_tokens: Option<u64>,
    /// Prompt tokens looked up, tokens (source: `hit_rate_source`).
    #[serde(default)]
    pub query_tokens: Option<u64>,
}

impl ConversationCell {
    /// The cell of a plan, not measured yet.
    pub fn planned(
        context: ContextSize,
        sessions: u32,
        (turns, think_time_s): (u32, f64),
        (first_prompt_tokens, follow_up_tokens, answer_tokens): (u64, u64, u32),
    ) -> ConversationCell {
        ConversationCell {
            context,
            sessions,
            turns,
            think_time_s,
            first_prompt_tokens,
            follow_up_tokens,
            answer_tokens,
            status: CellStatus::NotRun,
            reason: Some("pending".into()),
            per_turn: vec![],
            missing: vec![],
            accepted_differences: vec![],
        }
    }
}

/// One request of a replayed trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TraceRequest {
    /// Its line in the trace file, from 1.
    pub line: u64,
    /// Its `timestamp`, ms from the trace's start (trace).
    pub timestamp_ms: f64,
    /// Its scheduled instant, ms from the run start (client clock: the replay's zero plus the
    /// timestamp scaled by the speed); absent before it was measured.
    #[serde(default)]
    pub scheduled_ms: Option<f64>,
    /// `input_length`: prompt tokens planned (trace).
    pub input_length: u64,
    /// `output_length`: output tokens planned, sent as `max_tokens` (trace).
    pub output_length: u64,
    /// `hash_ids`: its prefix blocks of 512 tokens (trace).
    #[serde(default)]
    pub hash_ids: Vec<u64>,
    /// The `id` the server gave the completion, to match its logs or a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Prompt tokens as served (server usage; the count as built where the server gave none).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Output tokens as served (server usage).
    #[serde(default)]
    pub output_tokens: Option<u64>,
}

impl TraceRow {
    /// The row of a trace not measured yet.
    pub fn new(
        context: ContextSize,
        rate_rps: f64,
        max_in_flight: Option<u32>,
        requests: Vec<TraceRequest>,
    ) -> TraceRow {
        let arrival = Arrival { process: ArrivalProcess::Trace, cv: None, seed: 0 };
        TraceRow { cell: RateCell::new(context, rate_rps, arrival, max_in_flight), requests, prefix_cache: None }
    }
}
