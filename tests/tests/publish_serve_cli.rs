//! `speedmatrix publish` and `speedmatrix serve` end to end (no browser): the site's files, the
//! run index, bad input, and what the server answers on 127.0.0.1.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn speedmatrix() -> Command {
    let mut c = Command::new(support::BIN);
    c.current_dir(root());
    c
}

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(args: &[&str]) -> Server {
    let mut child = speedmatrix()
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line
        .trim()
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("a port");
    Server(child, port)
}

/// One HTTP/1.1 request: (status, headers lowercased, body).
fn get(port: u16, method: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

#[test]
fn publish_writes_viewer_runs_and_index() {
    let site = tempfile::tempdir().unwrap();
    let out = speedmatrix().args(["publish", FIXTURE, FIXTURE, "-o"]).arg(site.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("published 2 runs to "));
    let files = files_under(site.path());
    assert!(site.path().join("index.html").is_file());
    assert!(files.iter().any(|f| f.ends_with(".wasm")), "{files:?}");
    assert!(files.iter().any(|f| f.ends_with(".js")), "{files:?}");
    assert!(!files.iter().any(|f| f.ends_with("SOURCE_HASH")), "build metadata stays out of sites");
    let index = speedmatrix_schema::site::load_index(&std::fs::read(site.path().join("runs/index.json")).unwrap())
        .expect("a valid index");
    let names: Vec<&str> = index.runs.iter().map(|r| r.file.as_str()).collect();
    assert_eq!(names, ["h200-qwen3.5-122b-vllm.json", "h200-qwen3.5-122b-vllm-2.json"]);
    let e = &index.runs[0];
    assert_eq!(e.label, "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2");
    assert_eq!(e.model.as_deref(), Some("Qwen/Qwen3.5-122B-A10B-GPTQ-Int4"));
    assert_eq!(e.hardware.as_deref(), Some("2 × H200 NVL"));
    // The run is copied byte for byte.
    assert_eq!(
        std::fs::read(site.path().join("runs").join(names[0])).unwrap(),
        std::fs::read(root().join(FIXTURE)).unwrap()
    );
    // Asset URLs are relative, so the site works from any sub-path.
    let html = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert!(!html.contains("href=\"/") && !html.contains("src=\"/") && !html.contains("from '/"), "{html}");
    assert!(!html.contains("http://") && !html.contains("https://"), "no hosted asset: {html}");
}

#[test]
fn publish_refuses_a_bad_run_with_the_loader_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"schema\": \"speedmatrix-results\", \"schema_version\": 1").unwrap();
    let out = speedmatrix().arg("publish").arg(&bad).arg("--out").arg(dir.path().join("site")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: ") && err.contains("bad.json: invalid JSON at line 1"), "{err}");
    assert!(!dir.path().join("site").exists(), "nothing is written when a run is bad");
    let out = speedmatrix().args(["publish", "--out", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "at least one run is required");
}

#[test]
fn serve_answers_the_site_on_loopback() {
    let server = serve(&[FIXTURE]);
    let (status, head, body) = get(server.1, "GET", "/");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/html"), "{head}");
    let html = String::from_utf8(body).unwrap();
    let wasm = html.split('"').find(|s| s.ends_with(".wasm")).map(|s| s.trim_start_matches("./").to_string());
    let wasm = wasm.expect("index.html names its wasm");
    let (status, head, body) = get(server.1, "GET", &format!("/{wasm}"));
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/wasm"), "{head}");
    assert_eq!(&body[..4], b"\0asm");
    let (status, head, body) = get(server.1, "GET", "/runs/index.json?x=1");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/json"));
    assert_eq!(speedmatrix_schema::site::load_index(&body).unwrap().runs.len(), 1);
    let (status, _, body) = get(server.1, "HEAD", "/runs/index.json");
    assert_eq!((status, body.len()), (200, 0));
    assert_eq!(get(server.1, "GET", "/results.json").0, 404);
    assert_eq!(get(server.1, "GET", "/../Cargo.toml").0, 404);
    assert_eq!(get(server.1, "GET", "/%2e%2e/Cargo.toml").0, 404);
    assert_eq!(get(server.1, "POST", "/").0, 405);
}

#[test]
fn serve_a_folder_stays_inside_it() {
    let site = tempfile::tempdir().unwrap();
    let out = speedmatrix().args(["publish", FIXTURE, "--out"]).arg(site.path()).output().unwrap();
    assert!(out.status.success());
    std::fs::write(site.path().join("results.json"), b"{}").unwrap();
    // A file beside the site, and links to it and to a file inside.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), site.path().join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), site.path().join("leakdir")).unwrap();
    std::os::unix::fs::symlink(site.path().join("results.json"), site.path().join("alias.json")).unwrap();
    let server = serve(&[site.path().to_str().unwrap()]);
    let (status, head, body) = get(server.1, "GET", "/results.json");
    assert_eq!((status, body.as_slice()), (200, &b"{}"[..]));
    assert!(head.contains("content-type: application/json") && head.contains("cache-control: no-cache"), "{head}");
    let (status, head, _) = get(server.1, "GET", "/runs");
    assert_eq!(status, 307, "a folder without its slash is redirected");
    assert!(head.contains("location: /runs/"), "{head}");
    assert_eq!(get(server.1, "GET", "/runs/").0, 404, "no listing of folders");
    assert_eq!(get(server.1, "GET", "/runs/index.json").0, 200);
    assert_eq!(get(server.1, "GET", "/runs/%69ndex.json").0, 200, "percent-escapes are decoded");
    let (status, _, body) = get(server.1, "HEAD", "/runs/index.json");
    assert_eq!((status, body.len()), (200, 0));
    // Nothing outside the folder: not by `..`, escaped or not, nor by a link leading out.
    for path in
        ["/../Cargo.toml", "/%2e%2e/Cargo.toml", "/runs/..%2F..%2FCargo.toml", "/leak.txt", "/leakdir/secret.txt"]
    {
        let (status, _, body) = get(server.1, "GET", path);
        assert_eq!(status, 404, "{path}");
        assert!(!String::from_utf8_lossy(&body).contains("secret") && !body.starts_with(b"[workspace]"), "{path}");
    }
    assert_eq!(get(server.1, "GET", "/alias.json").2, b"{}", "a link inside the site is served");
    assert_eq!(get(server.1, "POST", "/results.json").0, 405);
    // Mixing a folder with files is refused.
    let out = speedmatrix().arg("serve").arg(site.path()).arg(FIXTURE).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
