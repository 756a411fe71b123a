//! `speedmatrix demo` end to end: it measures the twin, publishes that run beside the seed run
//! and serves the site; the served index lists both runs and the page and runs are reachable.
//! The demo's run also checks the wall-time estimates (see `support::estimate`). The two tests
//! run one at a time, so neither slows the other's twin.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&buf[9..12]).unwrap().parse().unwrap();
    (status, buf[split + 4..].to_vec())
}

/// One demo at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn demo_measures_publishes_and_serves_both_runs() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let mut child = Command::new(support::bin())
        .args(["demo", "--port", "0", "-o"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let served = line.trim().strip_prefix("listening on http://127.0.0.1:").map(|p| p.parse::<u16>().unwrap());
    let Some(port) = served else {
        let _ = child.kill();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        panic!("no listening line ({line:?}); stderr: {err}");
    };
    // Measured and published: the run's wall time, with the twin's start and the publishing
    // (well under a second each) in it.
    let wall = start.elapsed().as_secs_f64();
    let (status, index) = get(port, "/runs/index.json");
    let (page, _) = get(port, "/");
    // SIGTERM (a service manager, `timeout`, `docker stop`) stops the serving demo cleanly.
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(exit.and_then(|s| s.code()), Some(0), "the demo did not stop on SIGTERM within 10 s: {exit:?}");
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    support::estimate::check_estimates(&log, wall);
    assert_eq!((status, page), (200, 200));
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let runs = index["runs"].as_array().expect("runs/index.json lists runs");
    assert_eq!(runs.len(), 2, "{index}");
    // The demo's own results file is complete and valid, with measured cells.
    let demo =
        speedmatrix_schema::load_results(&std::fs::read(dir.path().join("demo-twin-h200.json")).unwrap()).unwrap();
    assert_eq!(demo.run.status, speedmatrix_schema::RunStatus::Complete);
    assert_eq!(demo.decode.len(), 6);
    assert!(
        demo.decode.iter().all(|c| c.status.is_measured()),
        "{:?}",
        demo.decode.iter().map(|c| &c.reason).collect::<Vec<_>>()
    );
    assert!(dir.path().join("site/index.html").exists());
    // The demo measured the twin and says so: in the file, and in the index beside the seed.
    let sim = demo.engine.simulated.as_ref().expect("the demo run is recorded as simulated");
    assert_eq!((sim.by.as_str(), sim.profile.as_deref()), ("speedmatrix twin", Some("h200-qwen3.5-122b")));
    assert_eq!(demo.engine.version.as_deref(), Some("0.26.1rc1.dev638+g52be12cfa"), "the version it imitates");
    let marks: Vec<bool> = runs.iter().map(|r| r["simulated"] == true).collect();
    assert_eq!(marks.iter().filter(|m| **m).count(), 1, "the demo run, not the seed: {index}");
}

/// Ctrl-C while the demo measures: the run is interrupted (exit 130, its file complete), and
/// the closing line says how to go on with the demo — run it again — not `--resume`, which
/// the demo does not have.
#[test]
fn an_interrupted_demo_says_to_run_it_again() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(support::bin())
        .args(["demo", "--port", "0", "-o"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("measuring") {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    err.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    assert!(seen.contains("the demo starts over when run again (`speedmatrix demo`)"), "{seen}");
    assert!(!seen.contains("--resume"), "{seen}");
}
