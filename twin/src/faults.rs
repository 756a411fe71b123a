//! Faults on demand: `--fault NAME[=PARAM][@RATE]`, repeatable, drawn per request from a
//! generator seeded by `--seed`.
//!
//! | name | effect |
//! |---|---|
//! | `drop` | close the connection mid-stream (no terminating chunk) |
//! | `no-done` | end the stream without `data: [DONE]` |
//! | `inband-error` | mid-stream `data: {"error": {…}}` (HTTP 200), then `[DONE]` |
//! | `stall=DUR` | mid-stream, write nothing for DUR (`5s`, `500ms`; default 5 s) |
//! | `status=CODE` | answer CODE (500, 503 or 429) with a vLLM error body |
//! | `keepalive` | an SSE comment line (`: keepalive`) before every frame — legal SSE |
//! | `split` | each frame written in 2–3 pieces at random byte offsets (also inside multi-byte characters) — legal SSE |
//! | `metrics-404`, `tokenize-404`, `version-404` | that endpoint answers 404 |
//! | `no-chunk-usage` | `continuous_usage_stats` is ignored: usage only in the final chunk (servers and proxies that do not know it) |
//! | `no-usage` | no usage at all, even with `include_usage` (a proxy that drops it) |
//!
//! `@RATE` (0…1, default 1) is the fraction of requests (or endpoint calls) affected.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// One kind of fault.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Close the connection mid-stream.
    Drop,
    /// Omit `data: [DONE]`.
    NoDone,
    /// An error object inside the HTTP-200 stream.
    InbandError,
    /// Pause writing mid-stream for this long.
    Stall(Duration),
    /// Answer with this HTTP status instead of a completion.
    Status(u16),
    /// SSE comment lines between frames.
    Keepalive,
    /// Frames split across writes.
    Split,
    /// `/metrics` answers 404.
    Metrics404,
    /// `/tokenize` answers 404.
    Tokenize404,
    /// `/version` answers 404.
    Version404,
    /// `stream_options.continuous_usage_stats` is ignored (usage in the final chunk only).
    NoChunkUsage,
    /// No usage in the stream at all.
    NoUsage,
}

/// A fault and how often it strikes.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// What happens.
    pub kind: FaultKind,
    /// Fraction of requests affected, 0…1.
    pub rate: f64,
}

/// A `--fault` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFault(pub String);

impl fmt::Display for BadFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadFault {}

fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse::<f64>().ok().filter(|v| *v >= 0.0).map(|v| Duration::from_secs_f64(v / 1000.0));
    }
    let secs = s.strip_suffix('s').unwrap_or(s);
    secs.parse::<f64>().ok().filter(|v| *v >= 0.0 && v.is_finite()).map(Duration::from_secs_f64)
}

impl FromStr for Fault {
    type Err = BadFault;
    fn from_str(s: &str) -> Result<Fault, BadFault> {
        let bad = |why: &str| BadFault(format!("bad --fault `{s}`: {why}"));
        let (spec, rate) = match s.split_once('@') {
            Some((a, r)) => {
                let rate: f64 = r.parse().map_err(|_| bad("RATE must be a number in 0..1"))?;
                if !(0.0..=1.0).contains(&rate) {
                    return Err(bad("RATE must be in 0..1"));
                }
                (a, rate)
            }
            None => (s, 1.0),
        };
        let (name, param) = match spec.split_once('=') {
            Some((n, p)) => (n, Some(p)),
            None => (spec, None),
        };
        let no_param = |k: FaultKind| match param {
            None => Ok(k),
            Some(_) => Err(bad("this fault takes no parameter")),
        };
        let kind = match name {
            "drop" => no_param(FaultKind::Drop)?,
            "no-done" => no_param(FaultKind::NoDone)?,
            "inband-error" => no_param(FaultKind::InbandError)?,
            "keepalive" => no_param(FaultKind::Keepalive)?,
            "split" => no_param(FaultKind::Split)?,
            "metrics-404" => no_param(FaultKind::Metrics404)?,
            "tokenize-404" => no_param(FaultKind::Tokenize404)?,
            "version-404" => no_param(FaultKind::Version404)?,
            "no-chunk-usage" => no_param(FaultKind::NoChunkUsage)?,
            "no-usage" => no_param(FaultKind::NoUsage)?,
            "stall" => FaultKind::Stall(match param {
                None => Duration::from_secs(5),
                Some(p) => parse_duration(p).ok_or_else(|| bad("DUR like 5s or 500ms"))?,
            }),
            "status" => {
                let code: u16 = param
                    .ok_or_else(|| bad("status needs a code: status=500|503|429"))?
                    .parse()
                    .map_err(|_| bad("status code must be a number"))?;
                if ![500, 503, 429].contains(&code) {
                    return Err(bad("status must be 500, 503 or 429"));
                }
                FaultKind::Status(code)
            }
            _ => {
                return Err(bad("known faults: drop, no-done, inband-error, stall=DUR, status=500|503|429, \
                     keepalive, split, metrics-404, tokenize-404, version-404, no-chunk-usage, no-usage"))
            }
        };
        Ok(Fault { kind, rate })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FaultKind::Drop => f.write_str("drop")?,
            FaultKind::NoDone => f.write_str("no-done")?,
            FaultKind::InbandError => f.write_str("inband-error")?,
            FaultKind::Stall(d) => write!(f, "stall={}ms", d.as_millis())?,
            FaultKind::Status(c) => write!(f, "status={c}")?,
            FaultKind::Keepalive => f.write_str("keepalive")?,
            FaultKind::Split => f.write_str("split")?,
            FaultKind::Metrics404 => f.write_str("metrics-404")?,
            FaultKind::Tokenize404 => f.write_str("tokenize-404")?,
            FaultKind::Version404 => f.write_str("version-404")?,
            FaultKind::NoChunkUsage => f.write_str("no-chunk-usage")?,
            FaultKind::NoUsage => f.write_str("no-usage")?,
        }
        if self.rate < 1.0 {
            write!(f, "@{}", self.rate)?;
        }
        Ok(())
    }
}

/// The faults that strike one request (or one endpoint call).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Struck(pub Vec<FaultKind>);

impl Struck {
    /// Whether a fault matching `pred` struck.
    pub fn has(&self, pred: impl Fn(&FaultKind) -> bool) -> bool {
        self.0.iter().any(pred)
    }
    /// The HTTP status fault, if any.
    pub fn status(&self) -> Option<u16> {
        self.0.iter().find_map(|k| match k {
            FaultKind::Status(c) => Some(*c),
            _ => None,
        })
    }
    /// The stall duration, if any.
    pub fn stall(&self) -> Option<Duration> {
        self.0.iter().find_map(|k| match k {
            FaultKind::Stall(d) => Some(*d),
            _ => None,
        })
    }
    /// Names for the trace.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|k| Fault { kind: k.clone(), rate: 1.0 }.to_string()).collect()
    }
}

/// Draw which of `faults` strike the call numbered `n` (deterministic in `seed` and `n`).
pub fn draw(faults: &[Fault], seed: u64, n: u64) -> Struck {
    if faults.is_empty() {
        return Struck::default();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ n.wrapping_mul(0xa076_1d64_78bd_642f));
    Struck(faults.iter().filter(|f| f.rate >= 1.0 || rng.random::<f64>() < f.rate).map(|f| f.kind.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        let p = |s: &str| s.parse::<Fault>().unwrap();
        assert_eq!(p("drop").kind, FaultKind::Drop);
        assert_eq!(p("stall=5s").kind, FaultKind::Stall(Duration::from_secs(5)));
        assert_eq!(p("stall=250ms").kind, FaultKind::Stall(Duration::from_millis(250)));
        assert_eq!(p("status=503@0.5"), Fault { kind: FaultKind::Status(503), rate: 0.5 });
        for s in [
            "no-done",
            "inband-error",
            "keepalive",
            "split",
            "metrics-404",
            "tokenize-404",
            "version-404",
            "no-chunk-usage",
            "no-usage",
        ] {
            assert_eq!(p(s).to_string(), s);
        }
        for bad in ["", "nope", "status=404", "status", "drop=3", "split@2", "stall=xs"] {
            assert!(bad.parse::<Fault>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rate_is_respected_and_seeded() {
        let f = vec!["drop@0.25".parse::<Fault>().unwrap()];
        let hits = (0..4000).filter(|&n| !draw(&f, 7, n).0.is_empty()).count();
        assert!((800..1200).contains(&hits), "{hits}");
        assert_eq!(draw(&f, 7, 3), draw(&f, 7, 3));
    }
}
