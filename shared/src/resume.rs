//! Continuing a run (`speedmatrix run --resume FILE`): is the server still the one the file's
//! header describes? Pure: the file's header against the header the collector would write now.
//!
//! Cells measured after a change (another engine version, KV budget or launch command) would be
//! merged under the first header, so every difference is refused unless the user accepts it
//! (`--accept-change KEY`); an accepted difference is recorded on every row and cell measured
//! afterwards ([`crate::AcceptedDifference`]).

use crate::model::{AcceptedDifference, CellStatus, Results};

/// A header field compared on resume: the key `--accept-change` takes, the field path, and how
/// to read it.
struct Compared {
    key: &'static str,
    field: &'static str,
    get: fn(&Results) -> Option<String>,
    /// Compared only when the file records it (fields a schema-v1 file cannot hold).
    when_recorded: bool,
}

const COMPARED: [Compared; 9] = [
    Compared { key: "engine", field: "engine.name", get: |r| r.engine.name.clone(), when_recorded: false },
    Compared {
        key: "engine-version",
        field: "engine.version",
        get: |r| r.engine.version.clone(),
        when_recorded: false,
    },
    Compared { key: "model", field: "engine.model", get: |r| r.engine.model.clone(), when_recorded: false },
    Compared {
        key: "max-model-len",
        field: "engine.max_model_len",
        get: |r| r.engine.max_model_len.map(|v| v.to_string()),
        when_recorded: false,
    },
    Compared {
        key: "kv-budget",
        field: "engine.kv_budget_tokens",
        get: |r| r.engine.kv_budget_tokens.map(|v| v.to_string()),
        when_recorded: false,
    },
    Compared {
        key: "launch-command",
        field: "engine.launch_command",
        get: |r| r.engine.launch_command.clone(),
        when_recorded: false,
    },
    Compared { key: "gpus", field: "hardware.gpus", get: gpus, when_recorded: false },
    Compared { key: "host", field: "hardware.host", get: |r| r.hardware.host.clone(), when_recorded: false },
    Compared {
        key: "server-location",
        field: "hardware.server_location",
        get: |r| r.hardware.server_location.as_ref().map(|l| format!("{:?}", l.place).to_lowercase()),
        when_recorded: true,
    },
];

/// The keys `--accept-change` takes, plus `all`.
pub fn keys() -> Vec<&'static str> {
    COMPARED.iter().map(|c| c.key).chain(["all"]).collect()
}

fn gpus(r: &Results) -> Option<String> {
    let g = &r.hardware.gpus;
    (!g.is_empty()).then(|| {
        g.iter()
            .map(|g| format!("{} {}", g.name, g.uuid.as_deref().unwrap_or("")).trim().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// One header field that differs between the file and the server now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The `--accept-change` key, e.g. `engine-version`.
    pub key: &'static str,
    /// The difference as it is recorded on the cells measured now.
    pub recorded: AcceptedDifference,
}

impl Difference {
    /// "engine.version is 0.26.1 in the file, 0.27.0 now".
    pub fn describe(&self) -> String {
        let v = |x: &Option<String>| x.as_deref().map_or("unknown".to_string(), |s| format!("{s:?}"));
        format!(
            "{} is {} in the file, {} now",
            self.recorded.field,
            v(&self.recorded.header),
            v(&self.recorded.measured)
        )
    }
}

/// Every compared header field that differs between `file` (the run being resumed) and `now`
/// (the header the collector made from the server it reaches now). A field neither knows is no
/// difference; one only one of them knows is (nothing says it is the same).
pub fn differences(file: &Results, now: &Results) -> Vec<Difference> {
    COMPARED
        .iter()
        .filter_map(|c| {
            let (a, b) = ((c.get)(file), (c.get)(now));
            let skip = a == b || (c.when_recorded && a.is_none());
            (!skip).then(|| Difference {
                key: c.key,
                recorded: AcceptedDifference { field: c.field.into(), header: a, measured: b },
            })
        })
        .collect()
}

/// The differences `accepted` does not cover (`all` covers every one).
pub fn refused<'a>(diffs: &'a [Difference], accepted: &[String]) -> Vec<&'a Difference> {
    if accepted.iter().any(|a| a == "all") {
        return vec![];
    }
    diffs.iter().filter(|d| !accepted.iter().any(|a| a == d.key)).collect()
}

/// The measurements a resumed run of `r` would take (`keep_going`: `--keep-going`, which
/// measures the rates skipped after a saturated one): prefill rows not run, each repeat a decode
/// cell still needs, rate cells pending (a `--rates auto` context still to search counts one),
/// traces and conversations not run. 0: the run is complete, nothing to resume.
pub fn left_to_measure(r: &Results, keep_going: bool) -> usize {
    let not_run = |s: CellStatus| s == CellStatus::NotRun;
    let n = crate::repeats::planned(r);
    let skipped = |reason: Option<&str>| reason.is_some_and(|r| r.starts_with("not run: "));
    let rates = match r.config.rate_search {
        true => {
            r.config.contexts.iter().filter(|c| !r.rate_at_slo.iter().any(|f| f.context.tokens == c.tokens)).count()
        }
        false => r.rates.iter().filter(|c| not_run(c.status) && (keep_going || !skipped(c.reason.as_deref()))).count(),
    };
    r.prefill.iter().filter(|p| not_run(p.status)).count()
        + r.decode.iter().map(|c| crate::repeats::left(c, n) as usize).sum::<usize>()
        + rates
        + r.traces.iter().filter(|t| not_run(t.cell.status)).count()
        + r.conversations.iter().filter(|c| not_run(c.status)).count()
}

/// The rows and cells of `r`, every kind: prefill rows, decode, rate and conversation cells,
/// traces.
pub fn rows_and_cells(r: &Results) -> usize {
    r.prefill.len() + r.decode.len() + r.rates.len() + r.traces.len() + r.conversations.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap()
    }

    #[test]
    fn the_same_server_has_no_difference() {
        assert!(differences(&seed(), &seed()).is_empty());
    }

    #[test]
    fn another_version_budget_or_launch_command_is_a_difference() {
        let a = seed();
        let mut b = seed();
        b.engine.version = Some("0.27.0".into());
        b.engine.kv_budget_tokens = Some(1);
        b.engine.launch_command = None;
        let d = differences(&a, &b);
        let keys: Vec<&str> = d.iter().map(|d| d.key).collect();
        assert_eq!(keys, ["engine-version", "kv-budget", "launch-command"]);
        assert_eq!(d[0].describe(), "engine.version is \"0.26.1rc1.dev638+g52be12cfa\" in the file, \"0.27.0\" now");
        assert!(d[2].describe().ends_with(", unknown now"), "{}", d[2].describe());
        assert_eq!(refused(&d, &["kv-budget".into(), "launch-command".into()]).len(), 1);
        assert!(refused(&d, &["all".into()]).is_empty());
        assert_eq!(refused(&d, &[]).len(), 3);
    }

    #[test]
    fn a_field_a_v1_file_cannot_hold_is_compared_only_when_recorded() {
        let a = seed();
        let mut b = seed();
        b.hardware.server_location = Some(crate::ServerLocation {
            place: crate::ServerPlace::Local,
            evidence: "vllm (PID 1) listens on 127.0.0.1:8000".into(),
        });
        assert!(differences(&a, &b).is_empty(), "the seed (v1) does not record where its server was");
        let mut c = b.clone();
        c.hardware.server_location.as_mut().unwrap().place = crate::ServerPlace::Remote;
        assert_eq!(differences(&b, &c)[0].key, "server-location");
        assert!(keys().contains(&"all"));
    }

    #[test]
    fn a_complete_run_has_nothing_left_and_a_partial_one_its_unmeasured_cells() {
        let mut r = seed();
        assert_eq!(r.run.status, crate::RunStatus::Complete);
        assert_eq!(left_to_measure(&r, false), 0, "every row and cell of the seed is measured");
        assert_eq!(rows_and_cells(&r), r.prefill.len() + r.decode.len());
        assert!(r.decode[0].status.is_measured());
        let measured = r.decode.iter().filter(|c| c.status.is_measured()).count();
        assert!(measured < r.decode.len(), "the seed has cells over capacity, never measured");
        r.decode[0].status = CellStatus::NotRun;
        r.prefill[1].status = CellStatus::NotRun;
        assert_eq!(left_to_measure(&r, false), 2);
        r.config.repeats = Some(3);
        // The unmeasured cell needs 3; every measured one 2 more; over capacity none.
        assert_eq!(left_to_measure(&r, false), 1 + 3 + 2 * (measured - 1));
    }
}
