//! After a prefill row or decode cell failed: does the server still answer ([`after_failure`])?
//! A failure that was the server's own answer stays the row's; a server that stopped answering
//! and came back within `--server-wait` (a restart), or connections that broke while it still
//! answered, get the row measured again; a server that is gone, or refuses the key, stops the
//! run ([`ServerGone`], the run's `reason`).

use crate::measuring::client::HttpError;
use crate::measuring::session::Session;
use std::time::Duration;

/// After a failed cell, the server no longer answers — or refuses the key: the run stops
/// (`run.reason`).
#[derive(Debug)]
pub(crate) struct ServerGone {
    /// The last of the tries.
    last: HttpError,
    /// How long the run waited for the server to answer again (`--server-wait`), if at all.
    waited: Option<Duration>,
}

impl ServerGone {
    /// The server answers, but refuses the API key (revoked or expired mid-run).
    fn key_refused(&self) -> bool {
        matches!(self.last.status(), Some(401 | 403))
    }
}

impl std::fmt::Display for ServerGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key_refused() {
            write!(f, "the server refused the API key (revoked or expired?): {}", self.last)?;
        } else {
            write!(f, "the server stopped answering: {}", self.last)?;
        }
        match self.waited {
            Some(w) => write!(f, " (waited {} for it to come back, --server-wait)", humantime::format_duration(w)),
            None => Ok(()),
        }
    }
}

/// Whether the server still answers after a cell failed: `GET /v1/models`, three tries a second
/// apart; `Ok(true)` when it answered only after a try that got nothing (down for a moment: a
/// restart). [`ServerGone`] when nothing answers (connection refused, reset, timeout), every
/// answer is a 5xx, or it refuses the key — the run then stops rather than fill every
/// remaining cell with the same error.
async fn server_alive(s: &Session) -> Result<bool, ServerGone> {
    const TRIES: usize = 3;
    for attempt in 1..=TRIES {
        match s.client.get_text("/v1/models").await {
            // After a try that got no answer, the server was down for a moment (a restart).
            Ok(_) => return Ok(attempt > 1),
            // A key revoked mid-run: every later cell would fail the same way.
            Err(last @ HttpError::Status { status: 401 | 403, .. }) => return Err(ServerGone { last, waited: None }),
            Err(HttpError::Status { status, .. }) if status < 500 => return Ok(attempt > 1),
            Err(last) if attempt == TRIES => return Err(ServerGone { last, waited: None }),
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    Ok(false)
}

/// After a failed row or cell whose reason is `first_try`: `Ok(Some(note))` when it is to be
/// measured again, with the note for its reason — the server had stopped answering and
/// answered again within `--server-wait` (a restart: its prefix cache is gone, so warmed
/// prompts are forgotten), or the first try's connections broke while the server still answers
/// (a restart faster than this check, a proxy, the network); `Ok(None)` when the server still
/// answers and the failure was its own answer; else why the run stops. Nothing is measured
/// again with `--server-wait 0`.
pub(crate) async fn after_failure(s: &mut Session, first_try: Option<&str>) -> Result<Option<String>, ServerGone> {
    let start = tokio::time::Instant::now();
    let retry = !s.spec.server_wait.is_zero();
    let gone = match server_alive(s).await {
        Ok(true) if retry => {
            s.forget_warm();
            return Ok(Some(measured_again(first_try, start.elapsed())));
        }
        Ok(false) if retry && first_try.is_some_and(connection_broke) => {
            s.forget_warm();
            return Ok(Some(format!(
                "measured again: the first try's connections broke ({}) while the server still answered (a restart faster than the check, a proxy or the network)",
                first_try.unwrap_or("error")
            )));
        }
        Ok(_) => return Ok(None),
        Err(g) if g.key_refused() || !retry => return Err(g),
        Err(g) => g,
    };
    s.log(format!(
        "the server stopped answering; waiting up to {} for it to come back (--server-wait)",
        humantime::format_duration(s.spec.server_wait)
    ));
    let mut last = gone.last;
    let waiting = tokio::time::Instant::now();
    while waiting.elapsed() < s.spec.server_wait {
        tokio::time::sleep(Duration::from_millis(500).min(s.spec.server_wait.saturating_sub(waiting.elapsed()))).await;
        match s.client.get_text("/v1/models").await {
            Ok(_) => {
                s.forget_warm();
                return Ok(Some(measured_again(first_try, start.elapsed())));
            }
            Err(e) => last = e,
        }
    }
    Err(ServerGone { last, waited: Some(s.spec.server_wait) })
}

/// Whether a failure's reason says the connection broke rather than that the server answered an
/// error: the words of `StreamError::Broke`, `StreamError::Truncated`, `HttpError::Unreachable`
/// and `HttpError::Unanswered` (unit-tested against them).
fn connection_broke(reason: &str) -> bool {
    [
        "stream broke:",
        "stream ended early",
        "cannot reach ",
        "closed the connection after the request without answering",
    ]
    .iter()
    .any(|w| reason.contains(w))
}

/// The reason of a row or cell measured again after the server came back.
fn measured_again(first_try: Option<&str>, after: Duration) -> String {
    format!(
        "measured again: the server stopped answering during the first try ({}) and answered again {:.1} s after the failure was seen",
        first_try.unwrap_or("error"),
        after.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::StreamError;

    #[test]
    fn a_broken_connection_is_told_by_the_errors_own_words() {
        let unreachable = HttpError::Unreachable { url: "http://x/v1".into(), message: "connection refused".into() };
        let unanswered = HttpError::Unanswered {
            url: "http://x/v1".into(),
            message: "connection closed before message completed".into(),
        };
        for broke in [
            StreamError::Truncated.to_string(),
            StreamError::Broke("reset".into()).to_string(),
            unreachable.to_string(),
            unanswered.to_string(),
        ] {
            assert!(connection_broke(&format!("1 of 2 streams failed: {broke}")), "{broke}");
        }
        let answered =
            HttpError::Status { url: "http://x/v1".into(), status: 500, body: "oops".into(), retry_after: None };
        for own in [StreamError::NoDone.to_string(), answered.to_string()] {
            assert!(!connection_broke(&own), "{own}");
        }
    }
}
