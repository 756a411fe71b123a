//! `speedmatrix run --dry-run` end to end: the real binary discovers a real twin over a socket
//! and prints the plan it would measure — the server line, dropped contexts, the matrix, the
//! cells over the KV budget, the estimated wall time — and writes nothing. Each plan is a
//! snapshot (`tests/tests/snapshots/dry_run_cli__*.snap`, ports shown as `[port]`).

use speedmatrix_twin::{self as twin, Fault, Flavor, Profile, TwinConfig};

/// Run `speedmatrix run --dry-run --url URL ARGS…`; returns what it printed (stdout, then
/// stderr, then the exit code) and checks that no results file was written.
async fn dry_run(url: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let o = tokio::process::Command::new(support::bin())
        .args(["run", "--dry-run", "--url", url, "-o"])
        .arg(&out)
        .args(args)
        .env_remove("SPEEDMATRIX_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .expect("run the collector");
    assert!(!out.exists(), "--dry-run writes no results file");
    format!(
        "stdout:\n{}stderr:\n{}exit: {:?}\n",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        o.status.code()
    )
}

/// Start a twin with `cfg`, snapshot the dry-run plan of each (name, flags), stop the twin. A
/// name ending in `-v1-url` gives `--url` with the `/v1` suffix users often paste.
async fn plans(cfg: TwinConfig, cases: &[(&str, &[&str])]) {
    let t = twin::start(cfg, "127.0.0.1:0").await.expect("twin starts");
    for (name, args) in cases {
        let url = if name.ends_with("-v1-url") { format!("{}/v1", t.url()) } else { t.url() };
        let text = dry_run(&url, args).await;
        assert!(text.ends_with("exit: Some(0)\n"), "{name}: {text}");
        support::snap::settings().bind(|| insta::assert_snapshot!(*name, text));
    }
    t.shutdown().await;
}

#[tokio::test]
async fn tiny_twin_plans() {
    plans(
        TwinConfig::new(Profile::tiny()),
        &[
            // The default matrix: contexts above the 32K max_model_len are dropped with a warning.
            ("tiny-defaults", &[]),
            (
                "tiny-max-and-1024-streams",
                &["--contexts", "1k,max", "--concurrency", "1,1024", "--prefill-contexts", "none"],
            ),
            // --serve with --dry-run: nothing to serve, and the plan says so.
            ("tiny-serve", &["--contexts", "1k", "--concurrency", "1", "--prefill-contexts", "none", "--serve", "0"]),
            (
                "tiny-completions-short",
                &[
                    "--contexts",
                    "256,4k",
                    "--concurrency",
                    "1,4",
                    "--duration",
                    "5s",
                    "--max-tokens",
                    "64",
                    "--endpoint",
                    "completions",
                ],
            ),
            // Prefix shares: named in the decode line, and the prefill line's warm rows.
            (
                "tiny-prefix-share",
                &["--contexts", "1k,4k", "--concurrency", "1,4", "--prefill-contexts", "1k", "--prefix-share", "0,50%"],
            ),
            // A list flag given twice adds up; a value listed twice (`1k` and `1024`) is planned
            // once, with a note.
            (
                "tiny-repeated-values",
                &["--contexts", "1k", "--contexts", "4k,1024", "--concurrency", "1,4,4", "--prefill-contexts", "none"],
            ),
            // Conversations: the estimate counts the turns' new tokens, answers and think time.
            (
                "tiny-conversation",
                &[
                    "--contexts",
                    "4k",
                    "--concurrency",
                    "1,4",
                    "--turns",
                    "3",
                    "--think-time",
                    "1s",
                    "--max-tokens",
                    "128",
                    "--prefill-contexts",
                    "none",
                ],
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn h200_twin_plans() {
    plans(
        TwinConfig::new(Profile::h200_qwen()),
        &[
            // The seed's matrix: the same six cells over the KV budget as the seed run.
            ("h200-defaults", &[]),
            (
                "h200-short-windows-v1-url",
                &[
                    "--contexts",
                    "8k,64k,max",
                    "--concurrency",
                    "1,64,128",
                    "--prefill-contexts",
                    "none",
                    "--duration",
                    "10s",
                    "--max-tokens",
                    "256",
                    "--endpoint",
                    "completions",
                ],
            ),
            ("h200-kv-budget-flag", &["--kv-budget", "100000", "--contexts", "8k"]),
        ],
    )
    .await;
}

/// Other server shapes: SGLang (KV pool from /get_server_info, no /version), a server without
/// /metrics, and a plain OpenAI-compatible endpoint (--engine openai).
#[tokio::test]
async fn other_server_shapes_plans() {
    let mut sglang = TwinConfig::new(Profile::h200_qwen());
    sglang.flavor = Flavor::Sglang;
    plans(sglang, &[("sglang-h200", &["--contexts", "8k,128k", "--concurrency", "1,64"])]).await;
    let mut no_metrics = TwinConfig::new(Profile::tiny());
    no_metrics.faults = vec!["metrics-404".parse::<Fault>().expect("a fault")];
    plans(no_metrics, &[("tiny-metrics-404", &["--contexts", "1k", "--concurrency", "1,8"])]).await;
    plans(
        TwinConfig::new(Profile::tiny()),
        &[("tiny-engine-openai", &["--engine", "openai", "--contexts", "1k", "--concurrency", "1,8"])],
    )
    .await;
}

/// A server that reports no version (`/version` answers 404, as a plain OpenAI-compatible one
/// may): the server line says so, never "version unknown" (a figure not given is said as such).
#[tokio::test]
async fn a_server_without_a_version_is_said_to_report_none() {
    let mut cfg = TwinConfig::new(Profile::tiny());
    cfg.faults = vec!["version-404".parse::<Fault>().expect("a fault")];
    let t = twin::start(cfg, "127.0.0.1:0").await.expect("twin starts");
    let args = ["--engine", "openai", "--contexts", "1k", "--concurrency", "1", "--prefill-contexts", "none"];
    let text = dry_run(&t.url(), &args).await;
    t.shutdown().await;
    assert!(text.ends_with("exit: Some(0)\n"), "{text}");
    let line = text.lines().find(|l| l.starts_with("server: ")).unwrap_or_default();
    assert!(line.starts_with("server: openai (the server reports no version) · model tiny"), "{text}");
    assert!(!text.contains("version unknown"), "{text}");
}

/// What the run would refuse about `-o` (an existing file, a folder that cannot be written) is
/// a note in the dry run, which writes nothing and so succeeds (exit 0: docs/CLI.md, "Exit codes").
#[tokio::test]
async fn what_the_run_would_refuse_about_o_is_a_note() {
    let t = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await.expect("twin starts");
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("r.json");
    std::fs::write(&existing, "precious").unwrap();
    let unwritable = dir.path().join("no-such-folder").join("r.json");
    for (out, words) in [
        (&existing, format!(
            "note: without --dry-run the run would stop here: -o {0}: the file exists; continue it with --resume {0}, overwrite it with --force, or pick another -o\n",
            existing.display()
        )),
        (&unwritable, format!("note: without --dry-run the run would stop here: cannot write {}: ", unwritable.display())),
    ] {
        let o = tokio::process::Command::new(support::bin())
            .args(["run", "--dry-run", "--url", &t.url(), "--contexts", "1k", "--concurrency", "1"])
            .args(["--prefill-contexts", "none", "-o"])
            .arg(out)
            .output()
            .await
            .expect("run the collector");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert!(err.starts_with(&words), "{err}");
        assert!(err.contains("plan: estimated wall time"), "the plan is still printed: {err}");
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "precious");
    assert!(!unwritable.parent().unwrap().exists());
    t.shutdown().await;
}
