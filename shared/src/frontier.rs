//! Operating points and Pareto frontiers: every valid decode cell of a run as a point of
//! throughput (total tok/s, or per GPU) against per-user speed (the median per-request tok/s,
//! "interactivity"), and the frontier of the points no other point beats on both. The page's
//! Pareto charts draw them; the frontier says which configurations are worth running.

use crate::derived::{gpu_count, per_gpu};
use crate::model::{CellStatus, ContextSize, Results};

/// The Pareto frontier of `points` (x, y), both better when higher: the points no other point
/// beats or equals on both axes, in increasing x (so decreasing y). Non-finite points are
/// ignored; duplicates appear once.
pub fn pareto_frontier(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
    // Highest x first; among equal x, highest y first.
    pts.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
    let mut frontier: Vec<(f64, f64)> = Vec::new();
    let mut best_y = f64::NEG_INFINITY;
    for p in pts {
        if p.1 > best_y {
            frontier.push(p);
            best_y = p.1;
        }
    }
    frontier.reverse();
    frontier
}

/// One valid decode cell as an operating point.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatingPoint {
    /// The cell's context.
    pub context: ContextSize,
    /// Its concurrency.
    pub concurrency: u32,
    /// Total tok/s (all streams).
    pub total_tps: f64,
    /// Total tok/s per GPU, when the run has a GPU count.
    pub total_tps_per_gpu: Option<f64>,
    /// Median per-request tok/s: the speed one user sees.
    pub per_user_tps: f64,
}

/// The valid decode cells of `r` that have both total tok/s and a median per-request tok/s, in
/// file order. Cells with other statuses are left out: an over-capacity cell has no figures,
/// and a queued cell did not run its N streams at once, so it is not a way to serve N users.
pub fn operating_points(r: &Results) -> Vec<OperatingPoint> {
    let gpus = gpu_count(r).ok();
    r.decode
        .iter()
        .filter(|c| c.status == CellStatus::Valid)
        .filter_map(|c| {
            let total = c.total_tps.filter(|v| v.is_finite())?;
            let per_user = c.per_request_tps.as_ref()?.p50.filter(|v| v.is_finite())?;
            Some(OperatingPoint {
                context: c.context.clone(),
                concurrency: c.concurrency,
                total_tps: total,
                total_tps_per_gpu: gpus.map(|g| per_gpu(total, g)),
                per_user_tps: per_user,
            })
        })
        .collect()
}

/// The frontier of a run's operating points, total tok/s per GPU (x) against per-user tok/s
/// (y), over all its contexts.
///
/// # Errors
/// Why there is no per-GPU figure (the run has no GPU count).
pub fn per_gpu_frontier(r: &Results) -> Result<Vec<(f64, f64)>, String> {
    gpu_count(r)?;
    let pts: Vec<(f64, f64)> =
        operating_points(r).iter().filter_map(|p| Some((p.total_tps_per_gpu?, p.per_user_tps))).collect();
    Ok(pareto_frontier(&pts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).expect("the seed loads")
    }

    #[test]
    fn frontier_keeps_undominated_points_in_x_order() {
        let pts = [(1.0, 10.0), (2.0, 9.0), (2.0, 5.0), (3.0, 9.0), (4.0, 1.0), (0.5, 10.0), (f64::NAN, 99.0)];
        assert_eq!(pareto_frontier(&pts), vec![(1.0, 10.0), (3.0, 9.0), (4.0, 1.0)]);
        assert!(pareto_frontier(&[]).is_empty());
        assert_eq!(pareto_frontier(&[(2.0, 2.0), (2.0, 2.0)]), vec![(2.0, 2.0)]);
    }

    #[test]
    fn the_seed_per_gpu_frontier() {
        let r = seed();
        let pts = operating_points(&r);
        // 48 cells: 6 over capacity, 1 requests queued (64K × 8), so 41 valid points.
        assert_eq!(pts.len(), 41);
        assert!(!pts.iter().any(|p| p.context.tokens == 65536 && p.concurrency == 8));
        // Per GPU is half the total on 2 GPUs. The frontier, by hand from the file: the 8K row
        // from 8 streams up (each level more tok/s per GPU for less per-user speed); below that
        // 16K × 1 (239.3 tok/s, 240.7 per user) beats 8K × 1 (237.1, 239.8) on both, 16K × 2
        // (428.2, 215.8) is a hair faster per user than 8K × 2 (431.6, 215.7) but slower in
        // total, so both stay; 32K × 4 (765.3, 192.6) beats 8K × 4 (742.7, 187.9).
        let f = per_gpu_frontier(&r).unwrap();
        let want = [
            (119.65, 240.7),
            (214.1, 215.8),
            (215.8, 215.7),
            (382.65, 192.6),
            (653.0, 163.1),
            (1011.6, 125.1),
            (1660.75, 99.0),
            (2316.0, 64.7),
            (3171.3, 40.2),
        ];
        assert_eq!(f.len(), want.len(), "{f:?}");
        for ((x, y), (wx, wy)) in f.iter().zip(want) {
            assert!((x - wx).abs() < 1e-9 && (y - wy).abs() < 1e-9, "{f:?}");
        }
        let mut anon = r.clone();
        anon.hardware.gpu_count = None;
        anon.hardware.gpus.clear();
        assert!(per_gpu_frontier(&anon).is_err());
        assert!(operating_points(&anon).iter().all(|p| p.total_tps_per_gpu.is_none()));
    }
}
