//! What a results file's header says about where it was measured, checked over real sockets:
//! twins in their own processes (`speedmatrix simulate --port 0`), a TCP relay in front of one
//! (`tcp-relay`, a tunnel's stand-in), and a second twin on another loopback address with the
//! port the old launch-command lookup matched on.
//!
//! - a server reached through a relay is remote: no hardware card of this machine, no launch
//!   command, no GPU figures; this machine is recorded as the client;
//! - a second server does not lend its launch command;
//! - a server not on this host's GPUs (the twin) gives no GPU figures;
//! - the diff never calls an unknown launch command "same", and finds the launch commands of
//!   twins started with `--port 0`;
//! - `--resume` refuses another server unless the difference is accepted, and records it per
//!   cell.
//!
//! These run the collector in real time: run them under the machine-wide lock.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::twin::Listening;

use serde_json::Value;
use speedmatrix_schema::{load_results, CellStatus, GpuSelectionMethod, Results, ServerPlace};

const RELAY: &str = env!("CARGO_BIN_EXE_tcp-relay");

/// `speedmatrix simulate --profile tiny --port 0 EXTRA…`.
fn twin(extra: &[&str]) -> Listening {
    let mut cmd = Command::new(support::bin());
    cmd.args(["simulate", "--profile", "tiny", "--port", "0"]).args(extra);
    Listening::start(cmd)
}

/// `tcp-relay 127.0.0.1:0 → upstream`.
fn relay(upstream: &Listening) -> Listening {
    let mut cmd = Command::new(RELAY);
    cmd.arg("127.0.0.1:0").arg(format!("127.0.0.1:{}", upstream.port()));
    Listening::start(cmd)
}

/// A one-cell run against `url` (256 tokens × 1 stream for 1 s). Each stream outlasts the
/// window (1,024 tokens at the tiny twin's ~475 tok/s), so no replacement gap lowers the
/// server's running gauge: with 32-token streams, two or three /metrics readings in 1 s could
/// land in gaps and make the cell "requests queued" (0.7 of 1 running, seen side by side).
fn collect(url: &str, out: &Path, extra: &[&str]) -> Output {
    Command::new(support::bin())
        .args(["run", "--url", url, "--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none"])
        .args(["--duration", "1s", "--max-tokens", "1024", "--quiet", "-o"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run the collector")
}

fn measured(url: &str, dir: &Path, name: &str, extra: &[&str]) -> (Results, PathBuf) {
    let out = dir.join(name);
    let o = collect(url, &out, extra);
    assert_eq!(o.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&o.stderr));
    (load_results(&std::fs::read(&out).unwrap()).expect("a valid results file"), out)
}

/// No GPU figure anywhere in the cells, and the header says why.
fn no_gpu_figures(r: &Results, what: &str) {
    let sel = r.hardware.gpu_selection.as_ref().unwrap_or_else(|| panic!("{what}: gpu_selection recorded"));
    assert_eq!(sel.method, GpuSelectionMethod::None, "{what}: {sel:?}");
    assert!(r.hardware.gpus.is_empty() && r.hardware.gpu_telemetry_note.is_some(), "{what}: {:?}", r.hardware);
    for c in &r.decode {
        assert!(c.gpu_power_w.is_none() && c.energy_j_per_token.is_none() && c.gpu.is_none(), "{what}: {c:?}");
    }
}

#[test]
fn a_server_behind_a_relay_is_remote_and_this_machine_is_only_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = twin(&[]);
    let fwd = relay(&server);

    let (direct, _) = measured(&server.url, dir.path(), "direct.json", &[]);
    let at = direct.hardware.server_location.as_ref().expect("the location is recorded");
    assert_eq!(at.place, ServerPlace::Local, "{at:?}");
    let client = direct.client.as_ref().expect("the client machine is recorded");
    assert!(client.cpu.is_some() && client.os.is_some() && client.cores.is_some(), "{client:?}");
    assert_eq!(direct.hardware.cpu, client.cpu, "a local server's hardware is this machine");
    let launch = direct.engine.launch_command.as_deref().expect("the twin's own launch command");
    assert!(launch.contains("simulate") && launch.contains("--port 0"), "{launch}");
    no_gpu_figures(&direct, "the twin, on this machine but on no GPU");

    let (relayed, _) = measured(&fwd.url, dir.path(), "relayed.json", &[]);
    assert_eq!(relayed.decode[0].status, CellStatus::Valid, "{:?}", relayed.decode[0].reason);
    let at = relayed.hardware.server_location.as_ref().expect("the location is recorded");
    assert_eq!(at.place, ServerPlace::Remote, "{at:?}");
    assert!(at.evidence.contains("tcp-relay") && at.evidence.contains("onward"), "{}", at.evidence);
    let h = &relayed.hardware;
    assert!(h.cpu.is_none() && h.os.is_none() && h.host.is_none(), "the client is not the server's hardware: {h:?}");
    assert_eq!(relayed.client, direct.client, "this machine is still recorded, as the client");
    assert_eq!(relayed.engine.launch_command, None, "the relay's command is no launch command");
    let why = relayed.missing.iter().find(|m| m.figure == "engine.launch_command");
    assert!(
        why.is_some_and(|m| m.reason.contains("not on this machine") && m.reason.contains("--launch-command")),
        "a null launch command has its reason in `missing`: {:?}",
        relayed.missing
    );
    assert!(!direct.missing.iter().any(|m| m.figure == "engine.launch_command"), "{:?}", direct.missing);
    no_gpu_figures(&relayed, "a remote server");

    // What people read says so.
    let show = Command::new(support::bin()).arg("show").arg(dir.path().join("relayed.json")).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("Server") && text.contains("remote: "), "{text}");
    assert!(text.contains("Client"), "{text}");
}

/// The old lookup took the launch command from any server process whose `--port` flag matched
/// the URL's port. A second twin on 127.0.0.2 with that flag must lend nothing: not to the twin
/// that really owns the socket, and not to a relay on that port.
#[test]
fn a_second_server_on_the_port_does_not_lend_its_launch_command() {
    let dir = tempfile::tempdir().unwrap();
    let server = twin(&["--seed", "11"]);
    let port = server.port().to_string();
    let _other = twin_at("127.0.0.2", &port, &["--seed", "22"]);
    let (r, _) = measured(&server.url, dir.path(), "a.json", &[]);
    let launch = r.engine.launch_command.as_deref().expect("the launch command of the socket's owner");
    assert!(launch.contains("--seed 11") && !launch.contains("--seed 22"), "{launch}");

    let fwd = relay(&server);
    let _third = twin_at("127.0.0.2", &fwd.port().to_string(), &["--seed", "33"]);
    let (r, _) = measured(&fwd.url, dir.path(), "b.json", &[]);
    assert_eq!(r.engine.launch_command, None, "a relay in front: the launch command is unknown");
    assert_eq!(r.hardware.server_location.as_ref().map(|l| l.place), Some(ServerPlace::Remote));
}

/// `speedmatrix simulate --host HOST --port PORT` (PORT as the flag says, not 0).
fn twin_at(host: &str, port: &str, extra: &[&str]) -> Listening {
    let mut cmd = Command::new(support::bin());
    cmd.args(["simulate", "--profile", "tiny", "--host", host, "--port", port]).args(extra);
    Listening::start(cmd)
}

/// Two twins started with `--port 0`, one without speculative decoding: the diff lists the
/// launch commands' difference flag by flag, and never says "same launch command" when a
/// command is unknown.
#[test]
fn the_diff_finds_launch_commands_of_twins_on_any_port_and_never_calls_unknown_same() {
    let dir = tempfile::tempdir().unwrap();
    let a_twin = twin(&[]);
    let b_twin = twin(&["--speculative-tokens", "0"]);
    let (_, a) = measured(&a_twin.url, dir.path(), "a.json", &[]);
    let (_, b) = measured(&b_twin.url, dir.path(), "b.json", &[]);
    let diff = |a: &Path, b: &Path| {
        let o = Command::new(support::bin()).arg("diff").arg(a).arg(b).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = diff(&a, &b);
    assert!(text.contains("--speculative-tokens"), "{text}");
    assert!(!text.contains("None: same"), "{text}");

    // Both launch commands unknown (as a round-1 file or a remote server records them).
    let strip = |p: &Path, to: &Path| {
        let mut v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["engine"]["launch_command"] = Value::Null;
        std::fs::write(to, v.to_string()).unwrap();
    };
    let (a2, b2) = (dir.path().join("a2.json"), dir.path().join("b2.json"));
    strip(&a, &a2);
    strip(&b, &b2);
    let text = diff(&a2, &b2);
    assert!(text.contains("unknown in A and B"), "{text}");
    assert!(!text.contains("None: same"), "{text}");
    let text = diff(&a, &b2);
    assert!(text.contains("unknown in B"), "{text}");
}

/// `--resume` against a server that is not the one the file describes: refused with the field
/// and the flag that accepts it; accepted, the cells measured now carry the difference.
#[test]
fn resume_refuses_another_server_unless_accepted_and_records_it_per_cell() {
    let dir = tempfile::tempdir().unwrap();
    let server = twin(&[]);
    let out = dir.path().join("run.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", &server.url, "--contexts", "256", "--concurrency", "1,2", "--prefill-contexts", "none"])
        .args(["--duration", "1s", "--max-tokens", "32", "--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // The file as if measured by another engine build, its second cell not yet run.
    let mut v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let real_version = v["engine"]["version"].clone();
    v["engine"]["version"] = "0.0.1-other".into();
    v["run"]["status"] = "interrupted".into();
    v["decode"][1] = serde_json::json!({
        "context": v["decode"][1]["context"].clone(), "concurrency": 2, "status": "not_run", "reason": "pending"
    });
    std::fs::write(&out, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let resume = |extra: &[&str]| {
        Command::new(support::bin())
            .args([
                "run",
                "--url",
                &server.url,
                "--contexts",
                "256",
                "--concurrency",
                "1,2",
                "--prefill-contexts",
                "none",
            ])
            .args(["--duration", "1s", "--max-tokens", "32", "--quiet", "--resume"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = resume(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("engine.version is \"0.0.1-other\" in the file"), "{stderr}");
    assert!(stderr.contains("--accept-change engine-version"), "{stderr}");

    let o = resume(&["--accept-change", "engine-version"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = load_results(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r.engine.version.as_deref(), Some("0.0.1-other"), "the header keeps the first run's value");
    assert!(r.decode[0].accepted_differences.is_empty(), "measured under the header");
    let d = &r.decode[1].accepted_differences;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].field.as_str(), d[0].header.as_deref()), ("engine.version", Some("0.0.1-other")));
    assert_eq!(d[0].measured.as_deref(), real_version.as_str());
}
