//! Measuring a server: everything `speedmatrix run` does between the flags and the results
//! file. [`run`] sequences it; each other module owns one job:
//!
//! - [`discovery`]: what server this is (`/v1/models`, `/version`, `/metrics`, …);
//! - [`engine`]: the engine adapters (vLLM, SGLang, llama.cpp, plain OpenAI) — detection, KV
//!   budget, metric names, stream options, the reasons for figures a server cannot give;
//! - [`plan`]: flags + server → the cells to measure (pure);
//! - [`prompt`]: prompts of exact token counts (`/tokenize`, varied prose);
//! - [`client`]: HTTP and SSE, one record per streamed request;
//! - [`prometheus`]: `/metrics` text (Prometheus 0.0.4, OpenMetrics) → samples;
//! - [`measure`]: records → the figures and status of a window (pure);
//! - [`gpu`]: NVML GPU inventory and per-window power, energy, utilization, clocks;
//! - [`launch`]: the server's launch command (secrets redacted) and the host's CPU, OS, name;
//! - [`selfcheck`]: the collector's own CPU use (is the client the bottleneck?).

pub mod client;
pub mod discovery;
pub mod engine;
pub mod gpu;
pub mod launch;
pub mod measure;
pub mod plan;
pub mod prometheus;
pub mod prompt;
pub mod run;
pub mod selfcheck;
