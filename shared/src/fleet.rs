//! The fleet view of a site: every valid decode cell of the runs the run table keeps as a point
//! of total tok/s per GPU (y) against per-user tok/s, the median per-request tok/s
//! ("interactivity", x), grouped by GPU type, with each type's Pareto frontier
//! ([`crate::frontier::pareto_frontier`]) — the configurations worth running on that GPU.
//!
//! The points come from the site's cells table, `runs/cells.csv` ([`crate::cells`], written by
//! `publish` beside the index): one fetch of every run's cells instead of one fetch per run
//! file. Only the columns named in [`NEEDED`] are read. The viewer draws it
//! (`viewer/src/view/report_page/fleet.rs`); each point links to its run's report with the
//! cell's detail open ([`FleetPoint::href`]).

use crate::frontier::pareto_frontier;
use std::collections::BTreeMap;

/// The columns of `cells.csv` the fleet view reads.
pub const NEEDED: [&str; 11] = [
    "run_file",
    "gpu",
    "hardware",
    "phase",
    "context",
    "context_tokens",
    "concurrency",
    "status",
    "total_tps",
    "total_tps_per_gpu",
    "per_request_tps_p50",
];

/// The group of points of runs whose GPU type the cells table does not name.
pub const UNKNOWN_GPU: &str = "GPU not recorded";

/// One valid decode cell of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPoint {
    /// The run's file, relative to `runs/`.
    pub run_file: String,
    /// The GPU type (the inventory's model, else the hardware summary), when known.
    pub gpu: Option<String>,
    /// The context label, e.g. `8K`.
    pub context: String,
    /// The context in tokens.
    pub context_tokens: u64,
    /// Requests at once.
    pub concurrency: u32,
    /// Total tok/s.
    pub total_tps: f64,
    /// Total tok/s per GPU, when the run has a GPU count.
    pub total_tps_per_gpu: Option<f64>,
    /// Median per-request tok/s: the speed one user sees.
    pub per_user_tps: f64,
}

impl FleetPoint {
    /// The link to the run's report with this cell's detail open
    /// (`?show=runs/FILE&cell=TOKENSxN`).
    pub fn href(&self) -> String {
        format!(
            "?show={}&cell={}x{}",
            crate::site::encode_query_value(&format!("runs/{}", self.run_file)),
            self.context_tokens,
            self.concurrency
        )
    }

    /// What the point is, in words: `run-0001.json · 8K × 64`.
    pub fn name(&self) -> String {
        format!("{} · {} × {}", self.run_file, self.context, self.concurrency)
    }
}

/// Why `cells.csv` cannot give the fleet view's points.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// The text is no CSV the reader understands.
    #[error("runs/cells.csv cannot be read at line {line}: {message}")]
    Csv {
        /// The line (1-based).
        line: u64,
        /// What the reader said.
        message: String,
    },
    /// A column the fleet view needs is missing.
    #[error("runs/cells.csv has no column {0:?} (written by an older speedmatrix?): publish the site again")]
    MissingColumn(&'static str),
}

/// The valid decode cells of `cells.csv` that have total tok/s and a median per-request tok/s,
/// in file order. Other rows (prefill, rate, trace, any status but `valid`) are skipped: an
/// over-capacity cell has no figures and a queued one did not serve its N users at once.
///
/// # Errors
/// [`FleetError`] when the text is not CSV or lacks a column of [`NEEDED`].
pub fn points_from_csv(text: &str) -> Result<Vec<FleetPoint>, FleetError> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
    let csv_error =
        |e: csv::Error| FleetError::Csv { line: e.position().map_or(1, csv::Position::line), message: e.to_string() };
    let headers = reader.headers().map_err(csv_error)?.clone();
    let mut at = [0usize; NEEDED.len()];
    for (k, name) in NEEDED.iter().enumerate() {
        at[k] = headers.iter().position(|h| h == *name).ok_or(FleetError::MissingColumn(name))?;
    }
    let [file, gpu, hardware, phase, context, tokens, concurrency, status, total, per_gpu, per_user] = at;
    let mut out = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let field = |i: usize| record.get(i).unwrap_or("");
        if field(phase) != "decode" || field(status) != "valid" {
            continue;
        }
        let number = |i: usize| field(i).parse::<f64>().ok().filter(|v| v.is_finite());
        let (Some(total_tps), Some(per_user_tps)) = (number(total), number(per_user)) else { continue };
        let text = |i: usize| Some(field(i).to_string()).filter(|s| !s.is_empty());
        out.push(FleetPoint {
            run_file: field(file).to_string(),
            gpu: text(gpu).or_else(|| text(hardware)),
            context: field(context).to_string(),
            context_tokens: field(tokens).parse().unwrap_or(0),
            concurrency: field(concurrency).parse().unwrap_or(0),
            total_tps,
            total_tps_per_gpu: number(per_gpu),
            per_user_tps,
        });
    }
    Ok(out)
}

/// The points of one GPU type.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSeries {
    /// The GPU type ([`UNKNOWN_GPU`] when not recorded).
    pub gpu: String,
    /// Its points, in file order; each has a per-GPU figure.
    pub points: Vec<FleetPoint>,
    /// The points on its frontier, as indexes into `points`, in increasing per-user tok/s (so
    /// decreasing tok/s per GPU).
    pub frontier: Vec<usize>,
}

/// The fleet view of the runs kept.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fleet {
    /// One series per GPU type, sorted by name ([`UNKNOWN_GPU`] last).
    pub series: Vec<GpuSeries>,
    /// Valid cells of kept runs left out because their run has no GPU count (no per-GPU figure).
    pub without_gpu_count: usize,
    /// How many runs the points come from.
    pub runs: usize,
}

impl Fleet {
    /// Every point drawn.
    pub fn point_count(&self) -> usize {
        self.series.iter().map(|s| s.points.len()).sum()
    }

    /// The largest per-user tok/s and tok/s per GPU of any point (0 when there is none).
    pub fn extent(&self) -> (f64, f64) {
        self.series.iter().flat_map(|s| &s.points).fold((0.0, 0.0), |(x, y), p| {
            (f64::max(x, p.per_user_tps), f64::max(y, p.total_tps_per_gpu.unwrap_or(0.0)))
        })
    }
}

/// The fleet view of the points whose run `keep` keeps (the run table's filters), grouped by
/// GPU type with each type's frontier of tok/s per GPU against per-user tok/s.
pub fn fleet(points: &[FleetPoint], keep: impl Fn(&str) -> bool) -> Fleet {
    let mut groups: BTreeMap<(bool, String), Vec<FleetPoint>> = BTreeMap::new();
    let mut without_gpu_count = 0;
    let mut runs = std::collections::BTreeSet::new();
    for p in points.iter().filter(|p| keep(&p.run_file)) {
        if p.total_tps_per_gpu.is_none() {
            without_gpu_count += 1;
            continue;
        }
        runs.insert(p.run_file.as_str());
        let gpu = p.gpu.clone();
        groups.entry((gpu.is_none(), gpu.unwrap_or_else(|| UNKNOWN_GPU.to_string()))).or_default().push(p.clone());
    }
    let series = groups
        .into_iter()
        .map(|((_, gpu), points)| {
            let xy: Vec<(f64, f64)> =
                points.iter().map(|p| (p.per_user_tps, p.total_tps_per_gpu.unwrap_or(0.0))).collect();
            let frontier = pareto_frontier(&xy).into_iter().filter_map(|f| xy.iter().position(|q| *q == f)).collect();
            GpuSeries { gpu, points, frontier }
        })
        .collect();
    Fleet { series, without_gpu_count, runs: runs.len() }
}

/// Axis ticks from 0 to at least `max`: a round step (1, 2 or 5 × 10ⁿ) giving about five.
pub fn ticks(max: f64) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::RunOf;

    fn seed() -> crate::Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap()
    }

    /// The cells table of runs, as `publish` writes it.
    fn csv_of(runs: &[(&str, &crate::Results)]) -> String {
        let of: Vec<RunOf> = runs.iter().map(|&(file, results)| RunOf { file, results }).collect();
        crate::cells::to_csv(&of)
    }

    #[test]
    fn the_points_are_the_valid_decode_cells_with_their_figures() {
        let r = seed();
        let points = points_from_csv(&csv_of(&[("seed.json", &r)])).unwrap();
        let expected = crate::frontier::operating_points(&r);
        assert_eq!(points.len(), expected.len());
        assert!(!points.is_empty());
        for (p, e) in points.iter().zip(&expected) {
            assert_eq!((p.context_tokens, p.concurrency), (e.context.tokens, e.concurrency));
            assert_eq!(p.per_user_tps, e.per_user_tps);
            assert_eq!(p.total_tps_per_gpu, e.total_tps_per_gpu);
            assert_eq!(p.gpu.as_deref(), Some("H200 NVL"));
        }
        let p = &points[0];
        assert_eq!(p.href(), format!("?show=runs/seed.json&cell={}x{}", p.context_tokens, p.concurrency));
    }

    #[test]
    fn the_frontier_is_per_gpu_type_and_follows_the_filter() {
        let a = seed();
        let mut b = seed();
        b.hardware.gpus.iter_mut().for_each(|g| g.name = "H100".into());
        // The H100 copy is half as fast per GPU: its own frontier, not beaten by the H200's.
        b.decode.iter_mut().for_each(|c| c.total_tps = c.total_tps.map(|v| v / 2.0));
        let points = points_from_csv(&csv_of(&[("a.json", &a), ("b.json", &b)])).unwrap();
        let all = fleet(&points, |_| true);
        assert_eq!(all.series.iter().map(|s| s.gpu.as_str()).collect::<Vec<_>>(), ["H100", "H200 NVL"]);
        assert_eq!(all.runs, 2);
        for s in &all.series {
            let xy: Vec<(f64, f64)> = s.points.iter().map(|p| (p.per_user_tps, p.total_tps_per_gpu.unwrap())).collect();
            let want = pareto_frontier(&xy);
            let got: Vec<(f64, f64)> = s.frontier.iter().map(|&i| xy[i]).collect();
            assert_eq!(got, want);
            assert!(!got.is_empty() && got.len() < xy.len(), "some points are beaten");
        }
        let only_a = fleet(&points, |f| f == "a.json");
        assert_eq!(only_a.series.len(), 1);
        assert_eq!(only_a.point_count(), all.point_count() / 2);
    }

    #[test]
    fn runs_without_a_gpu_count_are_counted_not_drawn_and_bad_tables_say_why() {
        let mut r = seed();
        r.hardware.gpus.clear();
        r.hardware.gpu_count = None;
        let csv = csv_of(&[("x.json", &r)]);
        let points = points_from_csv(&csv).unwrap();
        let f = fleet(&points, |_| true);
        assert!(crate::derived::gpu_count(&r).is_err());
        assert!(!points.is_empty());
        assert_eq!(f.point_count(), 0);
        assert_eq!(f.without_gpu_count, points.len());
        let err = points_from_csv("run_file,phase\nx.json,decode\n").unwrap_err();
        assert_eq!(err, FleetError::MissingColumn("gpu"));
        assert!(err.to_string().contains("publish the site again"));
        assert_eq!(ticks(6342.6), [0.0, 2000.0, 4000.0, 6000.0, 8000.0]);
        assert_eq!(ticks(47.0), [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
    }
}
