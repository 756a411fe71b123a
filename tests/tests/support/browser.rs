//! The browser-test harness shared by viewer_browser.rs, diff_browser.rs and the other
//! end-to-end tests that open the page: `speedmatrix serve` on 127.0.0.1, chromedriver driving
//! headless Chromium through fantoccini, polling helpers (Leptos updates the DOM
//! asynchronously). Without chromium/chromedriver a test skips ([`super::skip`]: a failure
//! under `CI=true`).

use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";
/// How long a DOM condition may take to become true.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// One browser at a time: the machines running this have few cores.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn fixture() -> PathBuf {
    root().join(FIXTURE)
}

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// chromedriver in a process group of its own, with every Chromium it started: killed as a
/// group when dropped, so a test that panics mid-scenario leaves no browser behind (killing
/// chromedriver alone orphaned its Chromium processes, which then held a core each).
pub struct DriverGroup(Child);

impl Drop for DriverGroup {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
    }
}

pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|f| f.is_file()))
}

/// chromedriver and the browser, or `None` (after saying why) when this machine lacks them.
pub fn tools() -> Option<(PathBuf, Option<PathBuf>)> {
    let driver = std::env::var_os("CHROMEDRIVER").map(PathBuf::from).or_else(|| on_path("chromedriver"));
    let browser = std::env::var_os("CHROME").map(PathBuf::from).or_else(|| on_path("chromium"));
    match driver {
        Some(d) if d.is_file() => Some((d, browser)),
        _ => {
            super::skip("chromedriver not found (install chromium and chromium-driver: scripts/setup.d/web.sh)");
            None
        }
    }
}

pub use super::server::free_port;

/// `speedmatrix serve ARGS --port 0`; returns the process and its base URL (ending in `/`).
pub fn serve(args: &[&Path]) -> (Proc, String) {
    let mut child = Command::new(super::bin())
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start speedmatrix serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("read serve's first line");
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    assert!(url.starts_with("http://127.0.0.1:"), "serve must listen on loopback: {url}");
    (Proc(child), format!("{url}/"))
}

pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    _driver: DriverGroup,
}

pub async fn browser(driver: &Path, chromium: Option<&Path>) -> Browser {
    let port = free_port();
    let child = std::os::unix::process::CommandExt::process_group(
        Command::new(driver).arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null()),
        0,
    )
    .spawn()
    .expect("start chromedriver");
    let driver = DriverGroup(child);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(15), "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let profile = tempfile::tempdir().expect("a profile folder").keep();
    let mut options = json!({
        "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--window-size=1400,1000",
            format!("--user-data-dir={}", profile.display()),
        ]
    });
    if let Some(b) = chromium {
        options["binary"] = json!(b.display().to_string());
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");
    Browser { client, _driver: driver }
}

/// Run one browser scenario: skip without the tools, one at a time, always close the session.
pub fn scenario<F, Fut>(f: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some((driver, chromium)) = tools() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let b = browser(&driver, chromium.as_deref()).await;
        let client = b.client.clone();
        f(b.client.clone()).await;
        let _ = client.close().await;
    });
}

/// Evaluate `body` (a JS function body that `return`s) until it gives something truthy.
pub async fn until(c: &Client, what: &str, body: &str) -> Value {
    let start = Instant::now();
    loop {
        let v = c.execute(body, vec![]).await.unwrap_or(Value::Null);
        let truthy = match &v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            _ => true,
        };
        if truthy {
            return v;
        }
        if start.elapsed() > PATIENCE {
            let page = c
                .execute("return document.body ? document.body.innerText.slice(0, 1500) : ''", vec![])
                .await
                .unwrap_or_default();
            panic!("timed out waiting for {what}; page text: {page}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the first element matching `css`, once it exists.
pub async fn text(c: &Client, css: &str) -> String {
    let body = format!("const e = document.querySelector({css:?}); return e ? e.innerText : null;");
    until(c, css, &body).await.as_str().unwrap_or_default().to_string()
}

/// Wait until the element matching `css` has text containing `needle`.
pub async fn wait_text(c: &Client, css: &str, needle: &str) -> String {
    let body = format!(
        "const e = document.querySelector({css:?}); return e && e.innerText.includes({needle:?}) ? e.innerText : null;"
    );
    until(c, &format!("{css} to contain {needle:?}"), &body).await.as_str().unwrap_or_default().to_string()
}
