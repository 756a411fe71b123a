//! The command-line surface: raw flags as clap parses them. Validation into plans happens in
//! the module of each command.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Measure how fast an LLM server really is, and publish the result.
#[derive(Debug, Parser)]
#[command(name = "speedmatrix", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a results file: header, prefill table and decode matrix (or the full table).
    Show(ShowArgs),
    /// Print the JSON Schema of the results file (the committed copy is
    /// shared/schema/results.schema.json).
    Schema,
    /// Run the twin: a vLLM-shaped server on loopback whose timing follows a measured run.
    Simulate(SimulateArgs),
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

/// Flags of `speedmatrix show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The results file (JSON, schema v1), or `-` for standard input.
    pub file: PathBuf,
    /// Output format; csv and json always give the full measurement table.
    #[arg(long, short = 'f', value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
    /// Add the full measurement table to the text and markdown views.
    #[arg(long)]
    pub all: bool,
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
    #[arg(long, default_value = "h200-qwen3.5-122b")]
    pub profile: String,
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
    /// stall=DUR, status=500|503|429, keepalive, split, metrics-404, tokenize-404, version-404.
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
    /// Turn the prefix cache off.
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// Engine version reported by /version.
    #[arg(long)]
    pub engine_version: Option<String>,
    /// Served model name.
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Longest prompt + output (tokens).
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Run the twin's clock this many times faster than real time (trace times stay in twin
    /// ms). For tests of long schedules.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
}
