//! `speedmatrix demo`: from a fresh clone to a report page in about a minute, no GPU needed.
//!
//! Starts the twin (h200 profile, fitted to the seed run) in-process on 127.0.0.1, runs a short
//! matrix against it with the real collector (`run`), publishes the result beside the seed run
//! (embedded in the binary) as a static site, and serves that site until Ctrl-C.

use crate::cli::{DemoArgs, RunArgs, ServeArgs};
use crate::command::{CommandError, Failure};
use crate::measuring::run::RunError;
use crate::site::publish::SiteError;
use crate::site::serve::ServeError;
use clap::Parser;
use speedmatrix_twin::{self as twin, Profile, TwinConfig};
use std::path::PathBuf;

/// The seed run, shipped in the binary so `demo` works from any folder.
const SEED_RUN: &[u8] = include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json");

/// The demo's matrix: small enough for about a minute on the h200 twin, wide enough to show
/// prefill rows, a heatmap and a queue-free decode curve.
const DEMO_RUN_FLAGS: [&str; 12] = [
    "--contexts",
    "8k,64k",
    "--concurrency",
    "1,8,32",
    "--prefill-contexts",
    "8k,64k",
    "--duration",
    "5s",
    "--label",
    "demo: speedmatrix against its twin of the seed's H200 run",
    "--notes",
    "Measured by `speedmatrix demo` against `speedmatrix simulate --profile h200-qwen3.5-122b` on loopback.",
];

/// Why the demo could not run to its page.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The page's `--port` is taken.
    #[error("cannot listen on 127.0.0.1:{port}; pick another --port (0 = any free one)")]
    Port {
        /// `--port`.
        port: u16,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The demo folder or the seed run in it cannot be written.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The folder or file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The twin cannot start.
    #[error("cannot start the twin")]
    Twin(#[source] speedmatrix_twin::StartError),
    /// The demo's own `run` flags do not parse (a bug).
    #[error("the demo's run flags do not parse")]
    Flags(#[source] clap::Error),
    /// The measurement failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The site cannot be published.
    #[error(transparent)]
    Site(#[from] SiteError),
    /// The site cannot be served.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The async runtime cannot start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl CommandError for DemoError {
    fn failure(&self) -> Failure {
        match self {
            DemoError::Run(e) => e.failure(),
            DemoError::Site(e) => e.failure(),
            DemoError::Serve(e) => e.failure(),
            _ => Failure::Working,
        }
    }
}

/// `run`'s flags for the demo matrix against `url`, writing `out` (clap fills the defaults).
fn run_args(url: &str, out: &std::path::Path) -> Result<RunArgs, DemoError> {
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }
    let out = out.to_string_lossy().into_owned();
    // The demo's own folder: a second demo replaces the first one's run.
    let argv = ["demo", "--url", url, "-o", &out, "--force"].into_iter().chain(DEMO_RUN_FLAGS);
    let mut run = Wrapper::try_parse_from(argv).map(|w| w.run).map_err(DemoError::Flags)?;
    run.from_demo = true;
    Ok(run)
}

/// Run the demo: measure, publish, serve (until Ctrl-C). Returns the exit code.
///
/// # Errors
/// [`DemoError`] when the folder cannot be written, the twin cannot start, the port is taken,
/// or the run, the publishing or the serving fails.
pub fn run(args: &DemoArgs) -> Result<u8, DemoError> {
    let out = &args.out;
    // Find a taken port now, not after a minute of measuring.
    if args.port != 0 {
        std::net::TcpListener::bind(("127.0.0.1", args.port))
            .map_err(|source| DemoError::Port { port: args.port, source })?;
    }
    std::fs::create_dir_all(out).map_err(|source| DemoError::Write { path: out.clone(), source })?;
    let demo_run = out.join("demo-twin-h200.json");
    let seed_run = out.join("seed-h200-qwen3.5-122b-vllm.json");
    std::fs::write(&seed_run, SEED_RUN).map_err(|source| DemoError::Write { path: seed_run.clone(), source })?;

    let rt = crate::command::runtime().map_err(DemoError::Runtime)?;
    let code = rt.block_on(async {
        let twin = twin::start(TwinConfig::new(Profile::h200_qwen()), "127.0.0.1:0").await.map_err(DemoError::Twin)?;
        eprintln!("demo: the twin (h200-qwen3.5-122b profile) listens on {}; measuring (about a minute)…", twin.url());
        let code = crate::measuring::run::measure(&run_args(&twin.url(), &demo_run)?).await;
        twin.shutdown().await;
        Ok::<u8, DemoError>(code?)
    })?;
    drop(rt);
    // A complete run with error cells is still published: the page shows each error's reason.
    if code != 0 && code != crate::command::exit::CELL_ERRORS {
        return Ok(code);
    }

    let site_dir = out.join("site");
    let site = crate::site::publish::build_site(&[demo_run, seed_run])?;
    crate::site::publish::write_site(&site, &site_dir)?;
    crate::site::publish::remove_stale(&site, &site_dir)?;
    eprintln!(
        "demo: published the demo run and the seed run to {} (upload it as it is to publish); serving it until Ctrl-C",
        site_dir.display()
    );
    crate::site::serve::run(&ServeArgs { paths: vec![site_dir], port: args.port, watch: None })?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_flags_parse_and_the_seed_is_valid() {
        let a = run_args("http://127.0.0.1:1", std::path::Path::new("x.json")).unwrap();
        assert_eq!(a.concurrency, [1, 8, 32]);
        assert_eq!(a.max_tokens, 4096, "clap defaults apply");
        assert!(speedmatrix_schema::load_results(SEED_RUN).is_ok());
    }
}
