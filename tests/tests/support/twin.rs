//! Processes that print `listening on ADDR` first (`speedmatrix simulate --port 0`, the
//! `tcp-relay`), killed when dropped; the twin started that way.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A child process that printed `listening on ADDR`; killed and reaped when dropped.
pub struct Listening {
    child: Child,
    /// `http://ADDR` (ADDR as printed, with `http://` added when missing).
    pub url: String,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Listening {
    /// Start `cmd` and wait for its `listening on …` line on stdout.
    pub fn start(mut cmd: Command) -> Listening {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start the process");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        // Keep reading so the child never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let addr = line.strip_prefix("listening on ").unwrap_or_else(|| panic!("no listening line: {line:?}"));
        let url = if addr.starts_with("http") { addr.to_string() } else { format!("http://{addr}") };
        Listening { child, url }
    }

    /// The port of [`Listening::url`].
    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
    }
}

/// Start the twin with `args` after `simulate --port 0`; its process and `http://ADDR`.
pub fn twin(args: &[&str]) -> (Listening, String) {
    let mut cmd = Command::new(super::bin());
    cmd.args(["simulate", "--port", "0"]).args(args);
    let twin = Listening::start(cmd);
    let url = twin.url.clone();
    (twin, url)
}
