//! The twin in its own process on loopback (`speedmatrix simulate --port 0`), killed when
//! dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A child process, killed and reaped when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the twin with `args` after `simulate --port 0`; its process and `http://ADDR`.
pub fn twin(args: &[&str]) -> (Killed, String) {
    let mut child = Command::new(super::BIN)
        .args(["simulate", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the twin");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).expect("the twin's first line");
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected {line:?}")).to_string();
    (Killed(child), url)
}
