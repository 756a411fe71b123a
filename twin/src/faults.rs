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
//! | `reset-404` | the prefix-cache reset (`POST /reset_prefix_cache`, SGLang's `/flush_cache`) answers 404, as vLLM's does without dev mode |
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
    /// The prefix-cache reset answers 404 (vLLM without `VLLM_SERVER_DEV_MODE`).
    Reset404,
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

/// Faults listed in the errors of [`FaultError::Unknown`].
const KNOWN: &str = "drop, no-done, inband-error, stall=DUR, status=500|503|429, keepalive, split, metrics-404, \
                     tokenize-404, version-404, reset-404, no-chunk-usage, no-usage";

/// A `--fault` value that does not parse; each variant names the whole value given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// `@RATE` is not a number in 0…1.
    #[error("bad --fault `{spec}`: RATE must be a number in 0..1 (the share of requests struck)")]
    Rate {
        /// The `--fault` value.
        spec: String,
    },
    /// A fault that takes no parameter got one (`drop=3`).
    #[error("bad --fault `{spec}`: `{name}` takes no parameter")]
    UnexpectedParam {
        /// The `--fault` value.
        spec: String,
        /// The fault's name.
        name: String,
    },
    /// `stall=DUR` with a DUR that is not a duration longer than 0.
    #[error("bad --fault `{spec}`: DUR must be a duration longer than 0 like 5s or 500ms ({reason})")]
    Duration {
        /// The `--fault` value.
        spec: String,
        /// What is wrong with DUR.
        reason: String,
    },
    /// `status` without `=CODE`, or a code other than 500, 503 or 429.
    #[error("bad --fault `{spec}`: status needs a code: status=500, status=503 or status=429")]
    Status {
        /// The `--fault` value.
        spec: String,
    },
    /// A name that is no fault.
    #[error("bad --fault `{spec}`: unknown fault `{name}`; known faults: {KNOWN}")]
    Unknown {
        /// The `--fault` value.
        spec: String,
        /// The name given.
        name: String,
    },
}

/// DUR of `stall=DUR`, through humantime (`5s`, `500ms`, `1m30s`): a whole number and a unit
/// per part. Anything else — no unit, fractions, `inf`, exponents, an overflow, zero — is
/// refused.
fn parse_stall(spec: &str, dur: &str) -> Result<Duration, FaultError> {
    let bad = |reason: String| FaultError::Duration { spec: spec.to_string(), reason };
    let d = humantime::parse_duration(dur.trim()).map_err(|e| {
        // humantime's own words name a character position ("expected number at 0"): say what is
        // wrong instead.
        bad(match e {
            humantime::DurationError::UnknownUnit { unit, .. } => format!("{unit:?} is no time unit"),
            humantime::DurationError::NumberOverflow => "too long".into(),
            _ => format!("{:?} is not a whole number with a unit", dur.trim()),
        })
    })?;
    if d.is_zero() {
        return Err(bad("a stall of 0 is no stall".into()));
    }
    Ok(d)
}

/// `@RATE`: a number in 0…1 (NaN and infinities are outside).
fn parse_rate(spec: &str, rate: &str) -> Result<f64, FaultError> {
    match rate.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(FaultError::Rate { spec: spec.to_string() }),
    }
}

impl FromStr for Fault {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Fault, FaultError> {
        let (spec, rate) = match s.split_once('@') {
            Some((a, r)) => (a, parse_rate(s, r)?),
            None => (s, 1.0),
        };
        let (name, param) = match spec.split_once('=') {
            Some((n, p)) => (n, Some(p)),
            None => (spec, None),
        };
        let no_param = |k: FaultKind| match param {
            None => Ok(k),
            Some(_) => Err(FaultError::UnexpectedParam { spec: s.to_string(), name: name.to_string() }),
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
            "reset-404" => no_param(FaultKind::Reset404)?,
            "no-chunk-usage" => no_param(FaultKind::NoChunkUsage)?,
            "no-usage" => no_param(FaultKind::NoUsage)?,
            "stall" => FaultKind::Stall(match param {
                None => Duration::from_secs(5),
                Some(p) => parse_stall(s, p)?,
            }),
            "status" => match param.map(str::trim) {
                Some("500") => FaultKind::Status(500),
                Some("503") => FaultKind::Status(503),
                Some("429") => FaultKind::Status(429),
                _ => return Err(FaultError::Status { spec: s.to_string() }),
            },
            _ => return Err(FaultError::Unknown { spec: s.to_string(), name: name.to_string() }),
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
            FaultKind::Reset404 => f.write_str("reset-404")?,
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
            "reset-404",
            "no-chunk-usage",
            "no-usage",
        ] {
            assert_eq!(p(s).to_string(), s);
        }
        assert_eq!(p("stall=1m30s").kind, FaultKind::Stall(Duration::from_secs(90)));
        assert_eq!(p("stall").kind, FaultKind::Stall(Duration::from_secs(5)));
        assert_eq!(p("stall=0.5s").kind, FaultKind::Stall(Duration::from_millis(500)));
        assert_eq!(p("status=429@1").to_string(), "status=429");
    }

    /// Each kind of bad value gets its own error, naming the whole `--fault` value.
    #[test]
    fn bad_values_name_what_is_wrong() {
        let err = |s: &str| s.parse::<Fault>().expect_err(s);
        let spec = |s: &str| format!("bad --fault `{s}`: ");
        for s in ["", "nope", "drop3"] {
            assert_eq!(err(s), FaultError::Unknown { spec: s.into(), name: s.into() });
            assert!(err(s).to_string().starts_with(&spec(s)), "{}", err(s));
            assert!(err(s).to_string().contains("known faults: drop, no-done"), "{}", err(s));
        }
        for s in ["drop=3", "keepalive=", "version-404=1@0.5"] {
            assert!(matches!(err(s), FaultError::UnexpectedParam { .. }), "{s}: {:?}", err(s));
        }
        for s in ["status", "status=404", "status=abc", "status=", "status=65536"] {
            assert_eq!(err(s), FaultError::Status { spec: s.into() });
        }
        for s in ["split@2", "drop@-0.1", "drop@", "drop@x", "drop@NaN", "drop@inf", "drop@0.5@0.5"] {
            assert_eq!(err(s), FaultError::Rate { spec: s.into() }, "{s}");
            assert!(err(s).to_string().starts_with(&spec(s)));
        }
    }

    /// Durations go through humantime: nothing that is not a whole number with a unit reaches
    /// `Duration` arithmetic (infinities and huge values used to panic in `from_secs_f64`).
    #[test]
    fn stall_durations_are_checked_never_panic() {
        for dur in [
            "infms",
            "inf",
            "infs",
            "1e300",
            "1e300s",
            "1e300ms",
            "1.5e3s",
            "NaNs",
            "-5s",
            "5",
            "0s",
            "0ms",
            "",
            "xs",
            "5 parsecs",
            "99999999999999999999999999s",
        ] {
            let s = format!("stall={dur}");
            let e = s.parse::<Fault>().expect_err(&s);
            assert!(matches!(e, FaultError::Duration { .. }), "{s}: {e:?}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("bad --fault `{s}`: DUR must be a duration")), "{msg}");
            assert!(!msg.contains(" at "), "no parser positions: {msg}");
        }
        let e = "stall=xyz".parse::<Fault>().unwrap_err().to_string();
        assert!(e.ends_with("(\"xyz\" is not a whole number with a unit)"), "{e}");
        let e = "stall=5 parsecs".parse::<Fault>().unwrap_err().to_string();
        assert!(e.ends_with("(\"parsecs\" is no time unit)"), "{e}");
    }

    #[test]
    fn rate_is_respected_and_seeded() {
        let f = vec!["drop@0.25".parse::<Fault>().unwrap()];
        let hits = (0..4000).filter(|&n| !draw(&f, 7, n).0.is_empty()).count();
        assert!((800..1200).contains(&hits), "{hits}");
        assert_eq!(draw(&f, 7, 3), draw(&f, 7, 3));
    }

    /// `PROPTEST_CASES` if set (the long form, docs/ARCHITECTURE.md, "Tests"), else `default`.
    fn cases(default: u32) -> proptest::prelude::ProptestConfig {
        let n = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
        proptest::prelude::ProptestConfig { cases: n, failure_persistence: None, ..Default::default() }
    }

    proptest::proptest! {
        #![proptest_config(cases(3000))]

        /// Any `--fault` value parses or gets an error naming it; never a panic. What parses
        /// prints back to a value that parses to the same fault.
        #[test]
        fn any_fault_spec_parses_or_names_itself(
            name in proptest::sample::select(vec![
                "drop", "no-done", "inband-error", "stall", "status", "keepalive", "split",
                "metrics-404", "tokenize-404", "version-404", "reset-404", "no-chunk-usage", "no-usage", "",
            ]),
            param in proptest::option::of(r"[0-9a-zA-Z.+\-_ ]{0,24}"),
            rate in proptest::option::of(r"[0-9a-zA-Z.+\-@]{0,12}"),
            noise in r"\PC{0,16}",
        ) {
            let mut spec = name.to_string();
            if let Some(p) = &param {
                spec = format!("{spec}={p}");
            }
            if let Some(r) = &rate {
                spec = format!("{spec}@{r}");
            }
            for s in [spec.clone(), format!("{spec}{noise}"), noise.clone()] {
                match s.parse::<Fault>() {
                    Ok(f) => {
                        let again = f.to_string().parse::<Fault>();
                        proptest::prop_assert_eq!(again.as_ref(), Ok(&f), "{} printed as {}", s, f);
                        if let FaultKind::Stall(d) = f.kind {
                            proptest::prop_assert!(!d.is_zero());
                        }
                        proptest::prop_assert!((0.0..=1.0).contains(&f.rate));
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        proptest::prop_assert!(msg.starts_with(&format!("bad --fault `{s}`: ")), "{}", msg);
                    }
                }
            }
        }

        /// Stall durations of every size and shape humantime reads (up to its overflow) either
        /// parse to that duration or are refused.
        #[test]
        fn stall_durations_of_any_size(n in proptest::num::u64::ANY, unit in proptest::sample::select(vec![
            "ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y", "", "e300", "e300ms",
        ])) {
            let s = format!("stall={n}{unit}");
            match s.parse::<Fault>() {
                Ok(f) => proptest::prop_assert!(matches!(f.kind, FaultKind::Stall(d) if !d.is_zero())),
                Err(e) => proptest::prop_assert!(matches!(e, FaultError::Duration { .. }), "{}: {:?}", s, e),
            }
        }
    }
}
