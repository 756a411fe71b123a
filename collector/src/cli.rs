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
