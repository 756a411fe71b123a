//! The page as headless Chromium renders it, for end-to-end tests that only need to see that a
//! results file opens in the viewer: `speedmatrix serve FILE --port 0` on 127.0.0.1, then
//! `chromium --dump-dom`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// The DOM of the served page for `file` after its scripts ran; `None` (after saying why) when
/// this machine has no chromium — a failure under `CI=true`.
pub fn rendered_dom(file: &Path) -> Option<String> {
    let Some(chromium) = ["chromium", "chromium-browser"].iter().find_map(|n| {
        std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(n)).find(|f| f.is_file()))
    }) else {
        super::skip("chromium not found: the viewer check needs it (scripts/setup.d/web.sh)");
        return None;
    };
    let mut child = Command::new(super::bin())
        .arg("serve")
        .arg(file)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start speedmatrix serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("serve's first line");
    let url = line.trim().strip_prefix("listening on ").map(str::to_string);
    let profile = tempfile::tempdir().expect("a profile folder");
    let o = url.as_ref().map(|url| {
        Command::new(chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
            .args(["--disable-component-update", "--disable-sync", "--virtual-time-budget=15000", "--dump-dom"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("{url}/"))
            .output()
            .expect("run chromium")
    });
    let _ = child.kill();
    let _ = child.wait();
    let o = o.unwrap_or_else(|| panic!("serve printed {line:?}, not its URL"));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}
