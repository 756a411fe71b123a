//! `speedmatrix simulate` as a process: one `listening on URL` line, a clean stop on Ctrl-C, and
//! exit code 2 for bad flags.

#[tokio::test]
async fn cli_prints_one_line_and_stops_on_ctrl_c() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let exe = support::bin();
    let mut child = Command::new(exe)
        .args(["simulate", "--profile", "tiny", "--port", "0", "--seed", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect(&line).to_string();
    assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"), "{url}");
    let health = reqwest::get(format!("{url}/health")).await.expect("GET /health");
    assert_eq!(health.status().as_u16(), 200);
    let ok = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    let out = Command::new(exe)
        .args(["simulate", "--profile", "tiny", "--port", "0", "--fault", "explode"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad --fault"));
    let out = Command::new(exe).args(["simulate", "--profile", "nope", "--port", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Bad `--fault` values and an unwritable `--trace` are refused with exit code 2 and a message
/// naming the value — never a panic (a stall of `infms` or `1e300` once reached
/// `Duration::from_secs_f64` and aborted), never a misleading "cannot listen".
#[test]
fn bad_fault_values_and_trace_paths_are_refused_clearly() {
    use std::process::Command;
    let simulate = |extra: &[&str]| {
        let out = Command::new(support::bin())
            .args(["simulate", "--profile", "tiny", "--port", "0"])
            .args(extra)
            .output()
            .expect("run simulate");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for fault in ["stall=infms", "stall=1e300", "stall=inf", "stall=-1s", "stall=0s", "stall=5"] {
        let (code, err) = simulate(&["--fault", fault]);
        assert_eq!(code, Some(2), "{fault}: {err}");
        assert!(err.contains(&format!("bad --fault `{fault}`: DUR must be a duration")), "{fault}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, err) = simulate(&["--fault", "drop@1.5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("bad --fault `drop@1.5`: RATE must be a number in 0..1"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("no-such-dir").join("trace.jsonl");
    let (code, err) = simulate(&["--trace", trace.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("cannot create the trace file {}", trace.display())), "{err}");
    assert!(!err.contains("cannot listen"), "{err}");
}

#[test]
fn residuals_print_the_seed_fit_and_a_fit_of_any_run() {
    use std::process::Command;
    let out = Command::new(support::bin()).args(["simulate", "--residuals"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("residuals of profile h200-qwen3.5-122b"), "{table}");
    assert!(table.contains("measured as llm-inference-bench measures"));
    let cells = table.lines().filter(|l| l.starts_with("  ") && l.contains(" × ")).count();
    assert_eq!(cells, 48, "every decode cell of the seed: {table}");
    assert!(table.contains("over capacity → over capacity"));
    // --fit prints the same table for the seed fixture, with what the fit assumed.
    let fixture = format!("{}/fixtures/h200-qwen3.5-122b-vllm.json", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(support::bin()).args(["simulate", "--fit", &fixture, "--residuals"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let fitted = String::from_utf8_lossy(&out.stdout);
    assert!(fitted.starts_with("fit: "), "{fitted}");
    let body = |t: &str| t.lines().skip_while(|l| !l.starts_with("prefill")).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&fitted), body(&table), "the h200 profile is the fit of the seed fixture");
    let out = Command::new(support::bin()).args(["simulate", "--profile", "tiny", "--residuals"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A run of rate cells (no decode cell) fits too, and its valid rate cells are replayed.
    let rates = format!("{}/fixtures/rates-twin.json", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(support::bin()).args(["simulate", "--fit", &rates, "--residuals"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("fit: decode steps: 0 from decode cells, 1 from rate cells"), "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("  ") && l.contains(" req/s: TTFT ")).count(), 4, "{table}");
}

/// A port already in use is one exit code (1, a failure while working) and one message shape
/// for every command that listens: `simulate`, `serve` and `demo`.
#[test]
fn a_busy_port_exits_1_for_every_command_that_listens() {
    use std::process::Command;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let demo_out = dir.path().join("demo");
    let commands: [Vec<&str>; 3] = [
        vec!["simulate", "--profile", "tiny", "--port", &port],
        vec!["serve", "--port", &port],
        vec!["demo", "--port", &port, "-o", demo_out.to_str().unwrap()],
    ];
    for args in &commands {
        let out = Command::new(support::bin()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(&port) && err.to_lowercase().contains("in use"), "{args:?}: {err}");
    }
}
