//! `speedmatrix publish` and `speedmatrix serve` end to end (no browser): the site's files, the
//! run index, bad input, and what the server answers on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn speedmatrix() -> Command {
    let mut c = Command::new(support::bin());
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

fn publish(site: &Path, args: &[&str]) -> std::process::Output {
    speedmatrix().arg("publish").args(args).arg("--out").arg(site).output().unwrap()
}

fn index_of(site: &Path) -> speedmatrix_schema::site::RunIndex {
    speedmatrix_schema::site::load_index(&std::fs::read(site.join("runs/index.json")).unwrap()).expect("a valid index")
}

fn index_files(site: &Path) -> Vec<String> {
    index_of(site).runs.into_iter().map(|r| r.file).collect()
}

const IMPORT: &str = "tests/fixtures/round1/import-llm-inference-bench.json";

#[test]
fn publishing_into_a_site_adds_replaces_removes_and_leaves_nothing_stale() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    assert!(publish(&site, &[FIXTURE]).status.success());
    // What an older publish may have left: a run no longer listed, an older build's viewer
    // asset; and a page of the user's own, which is not ours to delete.
    std::fs::write(site.join("runs/old-run.json"), b"{}").unwrap();
    std::fs::write(site.join("speedmatrix-viewer-0123456789abcdef.js"), b"old").unwrap();
    std::fs::write(site.join("speedmatrix-viewer-0123456789abcdef_bg.wasm"), b"old").unwrap();
    std::fs::write(site.join("about.html"), b"mine").unwrap();

    // Adding a run keeps the old one and cleans up.
    let out = publish(&site, &[IMPORT]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        said.starts_with("published 2 runs to ") && said.contains("(1 added, 0 replaced, 1 kept, 0 removed;"),
        "{said}"
    );
    assert!(said.contains("3 stale removed"), "{said}");
    assert_eq!(index_files(&site), ["h200-qwen3.5-122b-vllm.json", "import-llm-inference-bench.json"]);
    for gone in
        ["runs/old-run.json", "speedmatrix-viewer-0123456789abcdef.js", "speedmatrix-viewer-0123456789abcdef_bg.wasm"]
    {
        assert!(!site.join(gone).exists(), "{gone} is stale and stays behind");
    }
    assert_eq!(std::fs::read(site.join("about.html")).unwrap(), b"mine", "other files are left alone");
    let on_disk = files_under(&site.join("runs"));
    assert_eq!(on_disk.len(), 5, "two runs, the index and the cells table as CSV and Parquet: {on_disk:?}");

    // The same file again (same name, same run id) replaces its copy: a re-run or a resumed run.
    let out = publish(&site, &[FIXTURE]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(0 added, 1 replaced, 1 kept, 0 removed;"));
    assert_eq!(index_files(&site).len(), 2);
    // Another run under the same file name gets a name of its own: nothing is lost.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(root().join(FIXTURE)).unwrap()).unwrap();
    v["run"]["id"] = "another-run".into();
    let other = other_dir.join("h200-qwen3.5-122b-vllm.json");
    std::fs::write(&other, serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(publish(&site, &[other.to_str().unwrap()]).status.success());
    assert_eq!(
        index_files(&site),
        ["h200-qwen3.5-122b-vllm.json", "import-llm-inference-bench.json", "h200-qwen3.5-122b-vllm-2.json"]
    );

    // --remove takes one out by run id or by file name, and deletes its file.
    let import_id = index_of(&site).runs[1].id.clone().expect("a v2 index names run ids");
    let out = publish(&site, &["--remove", &import_id, "--remove", "h200-qwen3.5-122b-vllm-2.json"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("(0 added, 0 replaced, 1 kept, 2 removed;"));
    assert_eq!(index_files(&site), ["h200-qwen3.5-122b-vllm.json"]);
    assert!(!site.join("runs/import-llm-inference-bench.json").exists());
    let out = publish(&site, &["--remove", "no-such-run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--remove no-such-run: no run of the site") && err.contains("h200-qwen3.5-122b-vllm.json"),
        "{err}"
    );
}

#[test]
fn a_version_1_index_is_read_and_rewritten_as_the_current_version() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("runs")).unwrap();
    std::fs::copy(root().join(FIXTURE), site.join("runs/seed.json")).unwrap();
    let v1 = r#"{"schema": "speedmatrix-run-index", "schema_version": 1,
        "runs": [{"file": "seed.json", "label": "seed"}, {"file": "gone.json", "label": "gone"}]}"#;
    std::fs::write(site.join("runs/index.json"), v1).unwrap();
    let out = publish(&site, &[IMPORT]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gone.json is listed in the index but missing; left out"));
    let index = index_of(&site);
    assert_eq!(index.schema_version, speedmatrix_schema::site::INDEX_SCHEMA_VERSION);
    assert_eq!(index.schema_version, 4);
    assert_eq!(index_files(&site), ["seed.json", "import-llm-inference-bench.json"]);
    let seed = &index.runs[0];
    assert_eq!(seed.label, "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2", "regenerated from the file");
    assert_eq!(seed.headline.as_ref().and_then(|h| h.peak_total_tps), Some(6342.6));
    // Version 4 records speculative decoding, for the run table's facet.
    assert_eq!(seed.speculative_decoding.as_deref(), Some("mtp, 2 speculative tokens"));
    let import = &index.runs[1];
    assert_eq!(import.gpu_count, None);
    let h = import.headline.as_ref().unwrap();
    assert_eq!(h.peak_total_tps_per_gpu, None);
    assert!(h.missing.iter().any(|m| m.figure == "peak_total_tps_per_gpu" && m.reason.contains("no GPU count")));

    // A broken index is not silently replaced; a broken listed run can be removed.
    std::fs::write(site.join("runs/seed.json"), b"{").unwrap();
    let out = publish(&site, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("take it out with --remove seed.json"));
    assert!(publish(&site, &["--remove", "seed.json"]).status.success());
    assert_eq!(index_files(&site), ["import-llm-inference-bench.json"]);
    std::fs::write(site.join("runs/index.json"), b"[]").unwrap();
    let out = publish(&site, &[FIXTURE]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs/index.json is not a run index"));
    // Nothing to publish into a folder without a site.
    let out = publish(&dir.path().join("empty"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to publish"));
}

/// The `run_file` column of a site's `runs/cells.csv`, one value per row.
fn cells_files(site: &Path) -> Vec<String> {
    let mut r = csv::Reader::from_path(site.join("runs/cells.csv")).unwrap();
    let at = r.headers().unwrap().iter().position(|h| h == "run_file").expect("a run_file column");
    r.records().map(|rec| rec.unwrap()[at].to_string()).collect()
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn digests_list_a_file_published_twice_once_and_refuse_a_file_changed_after_publishing() {
    use speedmatrix_schema::site::sha256_hex;
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let copy = dir.path().join("seed copy.json");
    std::fs::copy(root().join(FIXTURE), &copy).unwrap();
    let out = publish(&site, &[FIXTURE, copy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("the same file under two names, listed once: seed-copy.json = h200-qwen3.5-122b-vllm.json"),
        "{said}"
    );
    // Every entry carries its file's digest; the copy has the seed's.
    let index = index_of(&site);
    let seed_digest = sha256_hex(&std::fs::read(root().join(FIXTURE)).unwrap());
    for e in &index.runs {
        let on_disk = sha256_hex(&std::fs::read(site.join("runs").join(&e.file)).unwrap());
        assert_eq!(e.sha256.as_deref(), Some(on_disk.as_str()), "{}", e.file);
        assert_eq!(on_disk, seed_digest);
    }
    // The cells table has the file's rows once, under its first name.
    let files = cells_files(&site);
    assert!(!files.is_empty() && files.iter().all(|f| f == "h200-qwen3.5-122b-vllm.json"), "{files:?}");

    // Adding a run leaves the runs the site keeps as they are on disk (not rewritten).
    let seed_file = site.join("runs/h200-qwen3.5-122b-vllm.json");
    let before = modified(&seed_file);
    let out = publish(&site, &[IMPORT]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        said.contains("(1 added, 0 replaced, 2 kept, 0 removed;") && said.contains("2 kept as they were"),
        "{said}"
    );
    assert_eq!(modified(&seed_file), before, "a kept run's file is not written again");

    // A listed file edited after publishing: the next publish names it, both digests and the
    // ways out, and changes nothing.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&seed_file).unwrap()).unwrap();
    v["run"]["label"] = "edited after publishing".into();
    let edited = serde_json::to_vec(&v).unwrap();
    std::fs::write(&seed_file, &edited).unwrap();
    let index_before = std::fs::read(site.join("runs/index.json")).unwrap();
    let out = publish(&site, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs/h200-qwen3.5-122b-vllm.json changed after it was published"), "{err}");
    assert!(err.contains(&seed_digest) && err.contains(&sha256_hex(&edited)), "{err}");
    assert!(err.contains("--remove h200-qwen3.5-122b-vllm.json"), "{err}");
    assert_eq!(std::fs::read(site.join("runs/index.json")).unwrap(), index_before, "the index is left as it was");
    // Given again, the edited file is published as it is now.
    let out = publish(&site, &[seed_file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("(0 added, 1 replaced, 2 kept, 0 removed;"));
    let index = index_of(&site);
    let seed = index.runs.iter().find(|e| e.file == "h200-qwen3.5-122b-vllm.json").unwrap();
    assert_eq!(seed.sha256.as_deref(), Some(sha256_hex(&edited).as_str()));
    assert_eq!(seed.label, "edited after publishing");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("same file under two names"), "no longer the copy's file");
}
