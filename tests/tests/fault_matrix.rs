//! The fault matrix: one test per fault a long unattended run meets, each against a real
//! server process or socket on loopback — a scripted server (`support::scripted`) or the twin in
//! its own process (`speedmatrix simulate`). Each ends with a results file that loads, whose
//! measured cells are intact, whose fault cell says why, and whose run status and exit code are
//! the ones the fault matrix of docs/CLI.md documents.
//!
//! Faults the twin injects inside a stream (in-band error, stall, no `[DONE]`, truncation,
//! keep-alives, split frames) are covered by `collector_twin.rs`; server shapes (HTML with
//! HTTP 200, `/metrics` missing or odd) by `server_shapes.rs`.

use speedmatrix_schema::{CellStatus, Results, RunStatus};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::collect::{collect, read};
use support::scripted::{self, Failing, Script};

/// These run the collector in real time: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Exit codes (docs/CLI.md, "Exit codes").
const EXIT_FAILED: i32 = 1;
const EXIT_CELL_ERRORS: i32 = 3;

/// One context, `concurrency` columns, no prefill rows, 1-s windows, short answers.
fn matrix(concurrency: &str) -> Vec<String> {
    matrix_of(concurrency, "1s")
}

/// As [`matrix`] with windows of `duration`.
fn matrix_of(concurrency: &str, duration: &str) -> Vec<String> {
    ["--contexts", "256", "--concurrency", concurrency, "--prefill-contexts", "none", "--duration", duration]
        .into_iter()
        .chain(["--max-tokens", "32", "--no-gpu"])
        .map(String::from)
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Every measured cell has its figures (nothing lost around the fault).
fn assert_measured_intact(r: &Results) {
    for c in r.decode.iter().filter(|c| c.status.is_measured()) {
        assert!(c.total_tps.is_some_and(|t| t > 0.0), "{c:?}");
        assert!(c.ttft_ms.as_ref().and_then(|d| d.p50).is_some(), "{c:?}");
        assert!(c.output_tokens.is_some_and(|t| t > 0), "{c:?}");
    }
}

fn reason(c: &speedmatrix_schema::DecodeCell) -> &str {
    c.reason.as_deref().unwrap_or("")
}

/// The 1- and 2-stream matrix against a scripted server whose first request fails as
/// `failing` says: the run's exit code is 3 (cell errors); its file.
async fn run_failing_once(failing: Failing) -> Results {
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { failing: Some(failing), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let (code, err) = collect(&server.url, &out, &strs(&matrix("1,2"))).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    read(&out)
}

/// The first cell is an error whose reason contains `quoted`; the second is measured, and
/// every measured cell is intact.
fn assert_first_cell_errs_quoting(r: &Results, quoted: &str) {
    assert_eq!(r.decode[0].status, CellStatus::Error);
    assert!(reason(&r.decode[0]).contains(quoted), "{:?}", r.decode[0].reason);
    assert!(r.decode[1].status.is_measured(), "{:?}", r.decode[1].reason);
    assert_measured_intact(r);
}

/// HTTP 429 with `Retry-After: 1`: the collector waits as asked, sends the request again and
/// records it in the cell's reason; the cells are measured and the run exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_429_with_a_short_retry_after_is_waited_out_and_recorded() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}"#;
    let failing =
        Failing { from: 2, count: 2, status: 429, body: body.into(), retry_after: Some(1), ..Failing::default() };
    let server = scripted::start(Script { failing: Some(failing), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let (code, err) = collect(&server.url, &out, &strs(&matrix("1,2"))).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert!(r.decode.iter().all(|c| c.status.is_measured()), "{:?}", r.decode);
    assert_measured_intact(&r);
    let limited: Vec<&str> = r.decode.iter().map(reason).filter(|r| r.contains("HTTP 429")).collect();
    assert!(!limited.is_empty(), "a cell says it was rate limited: {:?}", r.decode);
    let count: usize =
        limited.iter().filter_map(|r| r.split("HTTP 429 to ").nth(1)?.split(' ').next()?.parse::<usize>().ok()).sum();
    assert_eq!(count, 2, "two requests were answered 429: {limited:?}");
    assert!(err.contains("rate limited"), "the log says so too: {err}");
}

/// HTTP 429 with `Retry-After: 1` to a request inside the window of a 1-stream cell: the stream
/// waits out a second of a 4-s window without a request in flight, so the cell is not valid
/// (one stream was not running for a quarter of it), and its reason says the wait was a rate
/// limiter's, not a request waiting for its first token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_wait_inside_the_window_is_named_in_the_queued_reason() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let failing = Failing { from: 4, count: 1, status: 429, retry_after: Some(1), ..Failing::default() };
    let server = scripted::start(Script { failing: Some(failing), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let (code, err) = collect(&server.url, &out, &strs(&matrix_of("1", "4s"))).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let cell = &r.decode[0];
    assert_eq!(cell.status, CellStatus::RequestsQueued, "{:?}", cell.reason);
    let why = reason(cell);
    assert!(why.contains("of 1 streams were running"), "{why}");
    assert!(why.contains("waiting out an HTTP 429's Retry-After was not running"), "{why}");
    assert!(why.contains("HTTP 429 to 1 request"), "{why}");
    assert_measured_intact(&r);
}

/// HTTP 429 with `Retry-After` as an HTTP date two seconds ahead (the form gateways and CDNs
/// send): waited out like the seconds form, the cells measured, exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_429_with_an_http_date_retry_after_is_waited_out() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let after = Some(Duration::from_secs(2));
    let failing = Failing { from: 1, count: 1, status: 429, retry_after_date: after, ..Failing::default() };
    let server = scripted::start(Script { failing: Some(failing), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let (code, err) = collect(&server.url, &out, &strs(&matrix("1"))).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.decode[0].status, CellStatus::Valid, "{:?}", r.decode[0].reason);
    assert!(reason(&r.decode[0]).contains("HTTP 429 to 1 request"), "{:?}", r.decode[0].reason);
    assert_measured_intact(&r);
}

/// HTTP 429 without `Retry-After`: nothing says when to come back, so the request fails as any
/// error status does — an error cell quoting the 429, the run goes on, exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_without_retry_after_makes_an_error_cell() {
    let _one = SERIAL.lock().await;
    let r = run_failing_once(Failing { from: 1, count: 1, status: 429, ..Failing::default() }).await;
    assert_first_cell_errs_quoting(&r, "HTTP 429");
}

/// A `Retry-After` longer than the collector waits (10 s) fails the request as before: an error
/// cell that quotes the 429, exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_retry_after_makes_an_error_cell() {
    let _one = SERIAL.lock().await;
    let failing = Failing { from: 1, count: 1, status: 429, retry_after: Some(3600), ..Failing::default() };
    let r = run_failing_once(failing).await;
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_first_cell_errs_quoting(&r, "HTTP 429");
}

/// HTTP 500 for one request: that cell is an error quoting the status, the run goes on (the
/// server still answers `/v1/models`), exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_5xx_makes_an_error_cell_and_the_run_goes_on() {
    let _one = SERIAL.lock().await;
    let r = run_failing_once(Failing::default()).await;
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_first_cell_errs_quoting(&r, "HTTP 500");
    assert!(r.decode[0].total_tps.is_none(), "an error cell has no throughput");
}

/// A proxy in front of the server answers an HTML 502 page: the cell is an error that says
/// HTTP 502 and quotes the page; the rest is measured, exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_502_from_a_proxy_makes_an_error_cell() {
    let _one = SERIAL.lock().await;
    let page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>";
    let failing = Failing { status: 502, content_type: "text/html", body: page.into(), ..Failing::default() };
    let r = run_failing_once(failing).await;
    assert_first_cell_errs_quoting(&r, "HTTP 502");
    assert!(reason(&r.decode[0]).contains("Bad Gateway"), "{:?}", r.decode[0].reason);
}

/// The connection is reset mid-stream (no `finish_reason`, no `[DONE]`): the cell is an error
/// saying the stream broke; the next cell is measured, exit 3. With `--server-wait` it is
/// measured again (newcomer trial: a server back within 2 s was never measured again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_stream_makes_an_error_cell() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { failing: Some(failing_reset()), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let (code, err) = collect(&server.url, &out, &strs(&matrix("1,2"))).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    assert_eq!(r.decode[0].status, CellStatus::Error);
    let why = reason(&r.decode[0]);
    assert!(why.contains("stream broke") || why.contains("stream ended early"), "{why}");
    assert!(r.decode[1].status.is_measured(), "{:?}", r.decode[1].reason);
    assert_measured_intact(&r);

    // With --server-wait the broken cell is measured again at once, though the server never
    // stopped answering (a restart faster than the check looks the same), and says so.
    let server = scripted::start(Script { failing: Some(failing_reset()), ..Script::default() }).await;
    let out = dir.path().join("again.json");
    let mut args = matrix("1,2");
    args.extend(["--server-wait", "5s"].map(String::from));
    let (code, err) = collect(&server.url, &out, &strs(&args)).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert!(r.decode[0].status.is_measured(), "{:?}", r.decode[0].reason);
    let why = reason(&r.decode[0]);
    assert!(
        why.starts_with("measured again: the first try's connections broke (") && why.contains("still answered"),
        "{why}"
    );
    assert_measured_intact(&r);
}

fn failing_reset() -> Failing {
    Failing { reset_mid_stream: true, ..Failing::default() }
}

/// The API key is revoked mid-run (every endpoint answers 401 from then on): the run stops as
/// `failed` with that cause instead of filling every later cell with the same error; what was
/// measured stays, exit 1 (resumable with a new key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_mid_run_stops_the_run_as_failed() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // The first cell: its warm-up and one long stream (cut at the window's close); revoked then.
    let server = scripted::start(Script { revoke_after: Some(2), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let mut args: Vec<String> = matrix("1,2,4").into_iter().filter(|a| a != "--max-tokens" && a != "32").collect();
    args.extend(["--max-tokens", "400", "--api-key", "sk-test-revoked-key"].map(String::from));
    let (code, err) = collect(&server.url, &out, &strs(&args)).await;
    assert_eq!(code, Some(EXIT_FAILED), "{err}");
    assert!(err.contains("refused the API key"), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Failed);
    let cause = r.run.reason.as_deref().unwrap_or_default();
    assert!(cause.contains("refused the API key") && cause.contains("401"), "{cause}");
    assert!(r.decode[0].status.is_measured(), "{:?}", r.decode[0].reason);
    assert_eq!(r.decode[1].status, CellStatus::Error, "{:?}", r.decode[1].reason);
    assert!(reason(&r.decode[1]).contains("401"), "{:?}", r.decode[1].reason);
    assert_eq!(r.decode[2].status, CellStatus::NotRun);
    assert!(reason(&r.decode[2]).starts_with("not measured: the server refused the API key"), "{:?}", r.decode[2]);
    assert_measured_intact(&r);
}

/// Response headers that come after 1.5 s (a slow gateway): within `--stall-timeout` they are
/// waited for and counted in TTFT; past it the cell is an error that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_response_headers_count_in_ttft_and_past_the_stall_timeout_fail() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { header_delay: Duration::from_millis(1500), ..Script::default() }).await;
    let out = dir.path().join("slow.json");
    let mut args = matrix_of("1", "2s");
    args.extend(["--stall-timeout", "5s"].map(String::from));
    let (code, err) = collect(&server.url, &out, &strs(&args)).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let c = &r.decode[0];
    assert!(c.status.is_measured(), "{:?}", c.reason);
    assert!(c.ttft_ms.as_ref().and_then(|d| d.p50).is_some_and(|t| t >= 1500.0), "{:?}", c.ttft_ms);

    let out = dir.path().join("too-slow.json");
    let mut args = matrix("1");
    args.extend(["--stall-timeout", "1s"].map(String::from));
    let (code, err) = collect(&server.url, &out, &strs(&args)).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.decode[0].status, CellStatus::Error);
    assert!(reason(&r.decode[0]).contains("no response headers within the stall timeout"), "{:?}", r.decode[0].reason);
}

/// `/v1/models` advertises 32,768 tokens, but the server's real limit is 1,000 (answered with
/// vLLM's 400 "maximum context length"): the 256-token cell is measured, the 2K cell is an error
/// quoting the server's limit, exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_limit_below_the_advertised_max_model_len_makes_error_cells() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { context_limit: Some(1000), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256,2k", "--concurrency", "1", "--prefill-contexts", "256,2k", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "32", "--no-gpu"]].concat()).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.engine.max_model_len, Some(32_768), "the advertised limit is recorded as advertised");
    assert_eq!(r.prefill[0].status, CellStatus::Valid, "{:?}", r.prefill[0].reason);
    assert_eq!(r.prefill[1].status, CellStatus::Error);
    let prefill_why = r.prefill[1].reason.as_deref().unwrap_or_default();
    assert!(prefill_why.contains("maximum context length is 1000"), "{prefill_why}");
    assert!(r.decode[0].status.is_measured(), "{:?}", r.decode[0].reason);
    assert_eq!(r.decode[1].status, CellStatus::Error);
    assert!(reason(&r.decode[1]).contains("maximum context length is 1000"), "{:?}", r.decode[1].reason);
    assert_measured_intact(&r);
}

// ---------------------------------------------------------------------------------------------
// The twin in its own process: killed mid-window, restarted.

/// A twin in its own process; killed when dropped.
struct Twin {
    child: Child,
    port: u16,
}

impl Twin {
    /// `speedmatrix simulate --profile tiny --port PORT`, ready when it accepts connections.
    fn start(port: u16) -> Twin {
        let child = Command::new(support::bin())
            .args(["simulate", "--profile", "tiny", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the twin");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the twin did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Twin { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Wait (≤ 60 s) until the run writing `out` has measured `n` decode cells.
fn wait_for_cells(out: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let measured = || {
        std::fs::read(out)
            .ok()
            .and_then(|b| speedmatrix_schema::load_results(&b).ok())
            .map_or(0, |r| r.decode.iter().filter(|c| c.status.is_measured()).count())
    };
    while measured() < n {
        assert!(Instant::now() < deadline, "{n} decode cell(s) not measured within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The collector against `url` in its own process (so the test can act while it runs).
fn spawn_run(url: &str, out: &Path, extra: &[&str]) -> Child {
    Command::new(support::bin())
        .args(["run", "--url", url, "--contexts", "256", "--concurrency", "1,2,4", "--prefill-contexts", "none"])
        .args(["--duration", "3s", "--max-tokens", "64", "--quiet", "--no-gpu", "-o"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the collector")
}

/// The server is killed in the middle of the second cell's 3-s window and does not come back
/// within `--server-wait 2s`: the run fails (exit 1) saying so and how long it waited; the first
/// cell keeps its figures, the broken cell is an error, the rest `not_run` with the cause.
#[test]
fn a_server_killed_mid_window_fails_the_run_after_the_bounded_wait() {
    let _one = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let mut twin = Twin::start(free_port());
    let run = spawn_run(&twin.url(), &out, &["--server-wait", "2s"]);
    wait_for_cells(&out, 1);
    std::thread::sleep(Duration::from_millis(1500));
    twin.kill();
    let o = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(EXIT_FAILED), "{err}");
    assert!(err.contains("waiting up to 2s"), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Failed);
    let cause = r.run.reason.as_deref().unwrap_or_default();
    assert!(cause.contains("the server stopped answering") && cause.contains("waited 2s"), "{cause}");
    assert!(r.decode[0].status.is_measured(), "{:?}", r.decode[0].reason);
    assert_eq!(r.decode[1].status, CellStatus::Error, "{:?}", r.decode[1]);
    assert!(!reason(&r.decode[1]).is_empty());
    assert_eq!(r.decode[2].status, CellStatus::NotRun);
    assert!(reason(&r.decode[2]).starts_with("not measured: the server stopped answering"), "{:?}", r.decode[2]);
    assert_measured_intact(&r);
}

/// The server restarts mid-run (killed in the second cell's window, up again 4 s later on the
/// same port): with `--server-wait 30s` the run waits, measures the broken cell again and
/// completes (exit 0); that cell's reason says it was measured again and why, no other does.
#[test]
fn a_server_restarting_mid_run_is_waited_for_and_the_broken_cell_measured_again() {
    let _one = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let port = free_port();
    let mut twin = Twin::start(port);
    let run = spawn_run(&twin.url(), &out, &["--server-wait", "30s"]);
    wait_for_cells(&out, 1);
    std::thread::sleep(Duration::from_millis(1500));
    twin.kill();
    std::thread::sleep(Duration::from_secs(4));
    let _back = Twin::start(port);
    let o = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert!(r.decode.iter().all(|c| c.status.is_measured()), "{:?}", r.decode);
    assert_measured_intact(&r);
    let again: Vec<usize> = (0..r.decode.len()).filter(|&i| reason(&r.decode[i]).contains("measured again")).collect();
    assert_eq!(again, [1], "only the broken cell was measured again: {:?}", r.decode);
    let why = reason(&r.decode[1]);
    assert!(
        why.contains("the server stopped answering during the first try")
            && why.contains("s after the failure was seen"),
        "{why}"
    );
    assert!(err.contains("waiting up to 30s") && err.contains("measured again"), "the log says it: {err}");
}

/// The server dies and comes back on another port: `--resume FILE` alone tries the file's dead
/// URL and exits 2 saying so; `--resume FILE --url NEW` continues, the file keeps the URL it
/// started with, and every cell measured now records where it was measured
/// (`accepted_differences`: `config.server_url`), the cell measured before does not.
#[test]
fn a_run_resumed_at_another_url_records_where_its_cells_were_measured() {
    let _one = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let mut first = Twin::start(free_port());
    let run = spawn_run(&first.url(), &out, &[]);
    wait_for_cells(&out, 1);
    std::thread::sleep(Duration::from_millis(1500));
    first.kill();
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(EXIT_FAILED), "{}", String::from_utf8_lossy(&o.stderr));
    let resume = |extra: &[&str]| {
        let o = Command::new(support::bin())
            .args(["run", "--quiet", "--no-gpu", "--resume"])
            .arg(&out)
            .args(["--accept-change", "launch-command"])
            .args(extra)
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = resume(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&first.url()) && err.contains("--url from the file"), "{err}");

    let second = Twin::start(free_port());
    let (code, err) = resume(&["--url", &second.url()]);
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.config.server_url.as_deref(), Some(first.url().as_str()), "the header keeps the first URL");
    let moved = |c: &speedmatrix_schema::DecodeCell| {
        c.accepted_differences.iter().find(|d| d.field == "config.server_url").map(|d| d.measured.clone())
    };
    assert_eq!(moved(&r.decode[0]), None, "measured before the move: {:?}", r.decode[0].accepted_differences);
    for c in &r.decode[1..] {
        assert!(c.status.is_measured(), "{:?}", c.reason);
        assert_eq!(moved(c), Some(Some(second.url())), "{:?}", c.accepted_differences);
    }
    assert!(err.contains("config.server_url"), "the log says it: {err}");
}
