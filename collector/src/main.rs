//! The `speedmatrix` binary: parse the command line, hand it to [`speedmatrix::run`].
use clap::Parser;

fn main() -> std::process::ExitCode {
    speedmatrix::run(speedmatrix::cli::Cli::parse())
}
