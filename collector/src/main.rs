//! The `speedmatrix` binary: parse the command line, hand it to [`speedmatrix::run`].
fn main() -> std::process::ExitCode {
    speedmatrix::run(speedmatrix::cli::Cli::parse_noting_given(std::env::args_os()))
}
