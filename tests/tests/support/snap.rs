//! Snapshot tests (insta) of what users read: the settings every snapshot shares, and the
//! placeholders for what changes from one run to the next.
//!
//! Only the varying parts are replaced, each by a named placeholder, so the rest of the output
//! stays byte for byte under test: loopback ports (`127.0.0.1:[port]`), a test's temporary
//! folder (`[tmp]`), the binary's own version where a file records it (`speedmatrix
//! [version]`), and Unix timestamps the twin writes (`"created":[unix time]`). Snapshots live in
//! `tests/tests/snapshots/`; docs/ARCHITECTURE.md ("Tests") says how to review them.

use std::path::Path;

/// The settings shared by every snapshot, with the placeholders above (the temporary folder
/// comes with [`with_tmp`]).
pub fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]");
    s.add_filter(r#""created":\d+"#, r#""created":[unix time]"#);
    s.add_filter(
        &format!(r#""converted_by": "speedmatrix {}"#, regex::escape(env!("CARGO_PKG_VERSION"))),
        r#""converted_by": "speedmatrix [version]"#,
    );
    s
}

/// [`settings`] with `dir` (a test's temporary folder) shown as `[tmp]`.
pub fn with_tmp(dir: &Path) -> insta::Settings {
    let mut s = settings();
    s.add_filter(&regex::escape(&dir.display().to_string()), "[tmp]");
    s
}

/// Prometheus text with the samples of the twin's latency histograms (TTFT, ITL, E2E: bucket
/// counts below `+Inf` and sums, which follow the clock) shown as `[timing]`. Their `_count` and
/// `+Inf` bucket (how many were observed) and every other sample are kept.
pub fn mask_timing_histograms(text: &str) -> String {
    let timing = ["_seconds_bucket{", "_seconds_sum{"];
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let masked = !line.starts_with('#')
            && timing.iter().any(|t| line.contains(t))
            && !line.contains("le=\"+Inf\"")
            && line.rsplit_once(' ').is_some();
        match line.rsplit_once(' ') {
            Some((sample, _value)) if masked => {
                out.push_str(sample);
                out.push_str(" [timing]");
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(line),
        }
    }
    out
}
