//! The twin tells its clients it is a simulation: every response carries [`TWIN_HEADER`]
//! (its profile), and `/version` reports the vLLM version it imitates with
//! [`VERSION_TAG`] appended as a local-version label (`0.26.1rc1.dev638+g52be12cfa.speedmatrix.twin`,
//! `0.11.0+speedmatrix.twin`). A collector reads either, records the run as simulated
//! ([`crate::Simulated`]) and keeps the imitated version as the engine version.

use crate::model::Results;

/// The response header the twin sets on every answer; its value is the twin's profile.
pub const TWIN_HEADER: &str = "x-speedmatrix-twin";

/// The local-version label the twin appends to the version it imitates.
pub const VERSION_TAG: &str = "speedmatrix.twin";

/// Who simulates: the name recorded in [`crate::Simulated::by`].
pub const TWIN_NAME: &str = "speedmatrix twin";

/// `version` with the twin's label: `+speedmatrix.twin`, or `.speedmatrix.twin` when it already
/// has a local part (`+g52be12cfa`).
pub fn tag_version(version: &str) -> String {
    let sep = if version.contains('+') { '.' } else { '+' };
    format!("{version}{sep}{VERSION_TAG}")
}

/// The imitated version of a tagged one; `None` when `version` carries no twin label.
pub fn untag_version(version: &str) -> Option<&str> {
    let rest = version.strip_suffix(VERSION_TAG)?;
    rest.strip_suffix(['+', '.'])
}

/// A few words on what simulated a run's server (`speedmatrix twin, profile h200-qwen3.5-122b`),
/// else `None`: the mark beside a run in a diff header or a run picker.
pub fn short(r: &Results) -> Option<String> {
    let s = r.engine.simulated.as_ref()?;
    Some(match &s.profile {
        Some(p) => format!("{}, profile {p}", s.by),
        None => s.by.clone(),
    })
}

/// One line for people when a run measured a simulation, else `None`: what the page's banner
/// and `show` say.
pub fn notice(r: &Results) -> Option<String> {
    let s = r.engine.simulated.as_ref()?;
    let profile = s.profile.as_deref().map(|p| format!(" (profile {p})")).unwrap_or_default();
    let engine = r.engine.name.as_deref().map(|e| format!("{e} ")).unwrap_or_default();
    Some(format!(
        "Simulated: this run measured the {}{profile}, a model of a server — not a real {engine}server or its hardware.",
        s.by
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        assert_eq!(tag_version("0.26.1rc1.dev638+g52be12cfa"), "0.26.1rc1.dev638+g52be12cfa.speedmatrix.twin");
        assert_eq!(tag_version("0.11.0"), "0.11.0+speedmatrix.twin");
        for v in ["0.26.1rc1.dev638+g52be12cfa", "0.11.0"] {
            assert_eq!(untag_version(&tag_version(v)), Some(v));
        }
        assert_eq!(untag_version("0.11.0"), None);
        assert_eq!(untag_version("speedmatrix.twin"), None);
    }

    #[test]
    fn notice_only_for_simulated_runs() {
        let mut r: Results =
            crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap();
        assert_eq!(notice(&r), None);
        r.engine.simulated =
            Some(crate::Simulated { by: TWIN_NAME.into(), profile: Some("h200-qwen3.5-122b".into()), evidence: None });
        assert_eq!(short(&r).as_deref(), Some("speedmatrix twin, profile h200-qwen3.5-122b"));
        let n = notice(&r).unwrap();
        assert!(n.starts_with("Simulated: ") && n.contains("h200-qwen3.5-122b") && n.contains("vllm"), "{n}");
    }
}
