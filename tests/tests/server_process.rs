//! `speedmatrix run` against a server in its own process (the twin, `speedmatrix simulate`):
//! what the results file, the log and the progress output say when the server dies mid-run,
//! and that an API key never reaches any of them — passed by flag, by environment variable, or
//! sitting in the server's launch command.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use speedmatrix_schema::{load_results, CellStatus, Results, RunStatus};

/// A twin in its own process; killed when dropped.
struct Twin {
    child: Child,
    url: String,
}

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `speedmatrix simulate --profile tiny` on a free port, ready when it accepts connections.
fn start_twin(extra: &[&str]) -> Twin {
    let port = free_port();
    let child = Command::new(support::bin())
        .args(["simulate", "--profile", "tiny", "--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the twin");
    let twin = Twin { child, url: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the twin did not listen within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    twin
}

/// Wait (≤ 60 s) until the run writing `out` has measured a decode cell.
fn wait_for_a_valid_cell(out: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read(out)
        .ok()
        .and_then(|b| load_results(&b).ok())
        .is_some_and(|r| r.decode.iter().any(|c| c.status == CellStatus::Valid))
    {
        assert!(Instant::now() < deadline, "no decode cell measured within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read(out: &Path) -> Results {
    load_results(&std::fs::read(out).unwrap()).expect("a valid results file")
}

/// A server killed after the first decode cell: the run stops with status `failed` and the
/// cause, keeps every cell measured before, marks the rest `not_run` with the cause, and exits 1.
#[test]
fn a_server_that_dies_mid_run_leaves_a_complete_file_of_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let mut twin = start_twin(&[]);
    let run = Command::new(support::bin())
        .args(["run", "--url", &twin.url, "--contexts", "256,512", "--concurrency", "1,2"])
        .args(["--prefill-contexts", "256", "--duration", "1s", "--quiet", "--no-gpu", "-o"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first decode cell is in the file, then kill the server.
    wait_for_a_valid_cell(&out);
    let _ = twin.child.kill();
    let _ = twin.child.wait();
    let o: Output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("run failed: the server stopped answering"), "{stderr}");
    assert!(stderr.contains("--resume"), "says how to go on: {stderr}");

    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Failed);
    let cause = r.run.reason.as_deref().expect("the run says why it stopped");
    assert!(cause.contains("the server stopped answering") && cause.contains("/v1/models"), "{cause}");
    assert!(r.run.finished_at.is_some());
    assert_eq!(r.prefill[0].status, CellStatus::Valid, "the prefill row measured before stays");
    let valid: Vec<_> = r.decode.iter().filter(|c| c.status == CellStatus::Valid).collect();
    assert!(!valid.is_empty() && valid.iter().all(|c| c.total_tps.is_some_and(|t| t > 0.0)));
    // The cell the server died in is an error with the transport error; the rest were not run.
    let errors: Vec<_> = r.decode.iter().filter(|c| c.status == CellStatus::Error).collect();
    assert_eq!(errors.len(), 1, "one cell saw the server die: {:?}", r.decode);
    let not_run: Vec<_> = r.decode.iter().filter(|c| c.status == CellStatus::NotRun).collect();
    assert_eq!(valid.len() + errors.len() + not_run.len(), 4);
    for c in not_run {
        assert!(c.reason.as_deref().unwrap().starts_with("not measured: the server stopped answering"), "{c:?}");
    }
}

/// The key, passed three ways, appears in no output: not in the results file, not in stderr (log
/// and progress), not in stdout. The launch command read from the twin's process keeps the flag
/// with `<redacted>` in place of the key.
#[test]
fn an_api_key_never_reaches_the_file_the_log_or_the_progress_output() {
    let key = "sk-speedmatrix-test-9f3c1e77a0b24d6e";
    let dir = tempfile::tempdir().unwrap();
    let twin = start_twin(&["--api-key", key]);
    let run = |name: &str, flags: &[&str], env: Option<(&str, &str)>| -> (PathBuf, Output) {
        let out = dir.path().join(format!("{name}.json"));
        let mut cmd = Command::new(support::bin());
        cmd.args(["run", "--url", &twin.url, "--contexts", "256", "--concurrency", "1", "--prefill-contexts", "256"])
            .args(["--duration", "1s", "--no-gpu", "-o"])
            .arg(&out)
            .args(flags)
            .env_remove("SPEEDMATRIX_API_KEY")
            .env_remove("OPENAI_API_KEY");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        (out.clone(), cmd.output().unwrap())
    };
    // The key also hides in an `env NAME=…` word after the command and in an unusual flag.
    let launch = format!(
        "HF_TOKEN=hf_abcdefghijklmnopqrstuv vllm serve m --api-key {key} --opaque {key} env VLLM_API_KEY={key}"
    );
    let cases = [
        ("flag", run("flag", &["--api-key", key], None)),
        ("env", run("env", &[], Some(("SPEEDMATRIX_API_KEY", key)))),
        ("openai-env", run("openai-env", &[], Some(("OPENAI_API_KEY", key)))),
        ("launch", run("launch", &["--api-key", key, "--launch-command", &launch], None)),
    ];
    for (name, (out, o)) in &cases {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}: {stderr}");
        let file = std::fs::read_to_string(out).unwrap();
        assert!(!file.contains(key) && !file.contains("9f3c1e77"), "{name}: key in the results file");
        assert!(!stderr.contains(key) && !String::from_utf8_lossy(&o.stdout).contains(key), "{name}: key printed");
        let r = read(out);
        assert_eq!(r.decode[0].status, CellStatus::Valid, "{name}: the key was used: {:?}", r.decode[0].reason);
        let cmd = r.engine.launch_command.as_deref().expect("a launch command");
        assert!(cmd.contains("--api-key <redacted>"), "{name}: {cmd}");
        if *name == "launch" {
            assert!(cmd.starts_with("HF_TOKEN=<redacted> vllm serve m"), "{cmd}");
            assert!(!file.contains("hf_abcdefghij"));
        } else {
            assert!(cmd.contains("simulate"), "{name}: read from the twin's process: {cmd}");
        }
    }
    // A wrong key: the 401 is reported without echoing either key.
    let (out, o) = run("wrong", &["--api-key", "sk-wrong-key-0123456789abcdef"], None);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    assert!(!stderr.contains("sk-wrong-key") && !stderr.contains(key), "{stderr}");
    assert!(!out.exists());
}

/// SIGTERM (`timeout`, `docker stop`, a cancelled CI job) ends the run like Ctrl-C: status
/// `interrupted` with the cause, exit 143. A closed stderr (`2>&1 | head`) does not stop it.
#[test]
fn sigterm_and_a_closed_stderr_leave_a_finished_file() {
    let dir = tempfile::tempdir().unwrap();
    let twin = start_twin(&[]);
    let out = dir.path().join("term.json");
    let run = Command::new(support::bin())
        .args(["run", "--url", &format!("{}/v1", twin.url), "--contexts", "256,512", "--concurrency", "1,2"])
        .args(["--prefill-contexts", "none", "--duration", "1s", "--no-gpu", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_valid_cell(&out);
    assert!(Command::new("kill").args(["-TERM", &run.id().to_string()]).status().unwrap().success());
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(143), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Interrupted);
    assert_eq!(r.run.reason.as_deref(), Some("stopped by SIGTERM"));
    assert_eq!(r.config.stall_timeout_s, Some(120.0), "the stall timeout in force is recorded");

    // stderr closed from the start: the run still measures every cell and finishes the file.
    let out = dir.path().join("closed.json");
    let mut child = Command::new(support::bin())
        .args(["run", "--url", &twin.url, "--contexts", "256", "--concurrency", "1", "--prefill-contexts", "256"])
        .args(["--duration", "1s", "--no-gpu", "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert!(r.decode.iter().all(|c| c.status == CellStatus::Valid));
}

/// `--resume` of a run that failed because its server died measures the error cell again and
/// completes the file; without `-o` it writes to the resumed file.
#[test]
fn resuming_a_failed_run_measures_its_error_cells_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let mut twin = start_twin(&[]);
    let flags = ["--contexts", "256", "--concurrency", "1,2", "--prefill-contexts", "none", "--duration", "1s"];
    let run = Command::new(support::bin())
        .args(["run", "--url", &twin.url, "--no-gpu", "--quiet", "-o"])
        .arg(&out)
        .args(flags)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_valid_cell(&out);
    let _ = twin.child.kill();
    let _ = twin.child.wait();
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let failed = read(&out);
    assert_eq!(failed.run.status, RunStatus::Failed);
    assert!(failed.decode.iter().any(|c| c.status == CellStatus::Error));

    // The restarted twin listens on another free port, so its launch command (`--port 0` as
    // found by its socket) differs from the file's: resuming refuses it unless accepted.
    let twin = start_twin(&[]);
    let resume = |extra: &[&str]| {
        Command::new(support::bin())
            .args(["run", "--url", &twin.url, "--no-gpu", "--quiet", "--resume"])
            .arg(&out)
            .args(flags)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = resume(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--accept-change launch-command"), "{stderr}");
    let o = resume(&["--accept-change", "launch-command"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("measured again"), "{stderr}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.run.id, failed.run.id, "the same run, continued in its own file");
    assert!(r.decode.iter().all(|c| c.status == CellStatus::Valid), "{:?}", r.decode);
}
