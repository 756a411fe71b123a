//! The `speedmatrix` binary: parse the command line, hand it to [`speedmatrix::run`].

/// mimalloc, not glibc's malloc: a stream's chunks allocate and free small buffers at every read.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    speedmatrix::run(speedmatrix::cli::Cli::parse_noting_given(std::env::args_os()))
}
