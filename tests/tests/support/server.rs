//! Real servers a test starts (vLLM, llama.cpp): a child process with its output in a log file,
//! its readiness polled while the child is watched — when it exits before it is ready the test
//! fails at once with the exit status (a signal named: SIGILL means a binary built for another
//! CPU) and the log's tail — and its whole process tree killed when dropped.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `$SPEEDMATRIX_CACHE/servers` (default `~/.cache/speedmatrix/servers`): where
/// `scripts/setup.sh` installs the real servers.
pub fn cache() -> PathBuf {
    std::env::var_os("SPEEDMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/speedmatrix"))
        .join("servers")
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A started server; its process group and descendants are killed when dropped.
pub struct ServerProcess {
    name: String,
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

impl ServerProcess {
    /// Start `cmd` (which must listen on `port`) in its own process group, stdout and stderr to
    /// `log`.
    pub fn spawn(name: &str, mut cmd: Command, port: u16, log: &Path) -> ServerProcess {
        let out = std::fs::File::create(log).expect("create the server log");
        let err = out.try_clone().expect("clone the log handle");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        ServerProcess { name: name.into(), child, url: format!("http://127.0.0.1:{port}"), log: log.into() }
    }

    /// Poll `ready(url)` every 250 ms until it is true. Fails at once when the child exits, and
    /// after `limit` when it never got ready — both with the log's tail.
    pub fn wait_ready(&mut self, limit: Duration, mut ready: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited before it was ready: {}\n{}", self.name, describe(status), self.log_tail());
            }
            if ready(&self.url) {
                return;
            }
            if Instant::now() > deadline {
                panic!("{} was not ready within {} s\n{}", self.name, limit.as_secs(), self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last 3,000 bytes of the log, headed by its path.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(3000)..]).into_owned();
        format!("--- last lines of {} ---\n{tail}", self.log.display())
    }
}

impl Drop for ServerProcess {
    /// vLLM forks an engine core and workers that outlive a killed API server (each holding
    /// GBs): kill the process group, then any descendant that left it.
    fn drop(&mut self) {
        let pid = self.child.id();
        let tree = speedmatrix::measuring::launch::descendants(pid);
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for p in tree {
            let _ = Command::new("kill").args(["-KILL", &p.to_string()]).status();
        }
    }
}

/// "exit code 1", or "killed by signal 4 (SIGILL …)".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => {
            let what = match sig {
                4 => " (SIGILL: an instruction this CPU does not run — a binary built for another CPU)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL: out of memory?)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            format!("killed by signal {sig}{what}")
        }
        _ => format!("{status}"),
    }
}
