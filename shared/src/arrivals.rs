//! The arrival schedule of an open-loop rate cell (docs/METHODOLOGY.md, "Open-loop rate
//! cells"): the instants at which requests are due, drawn before the cell starts from the plan
//! alone — the process, the rate and a seed — so the same seed gives the same instants against
//! any server. Pure and deterministic (ChaCha8 seeded from the plan; the gaps' distributions
//! from `rand_distr`), so the twin and the tests can redraw a cell's schedule exactly.

use crate::model::{Arrival, ArrivalProcess};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma};

/// Why a schedule cannot be drawn (a flag out of range; the collector checks flags first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// The rate is not a positive, finite number.
    #[error("a request rate must be a positive number of requests per second, not {0}")]
    Rate(f64),
    /// The coefficient of variation of `gamma:CV` is not positive and finite.
    #[error("gamma:CV needs a positive coefficient of variation, not {0}")]
    Cv(f64),
    /// A trace's instants come from its file ([`crate::trace::offsets_s`]), not from a process.
    #[error("a trace's instants come from its file, not from an arrival process")]
    Trace,
}

/// The endless sequence of a cell's arrival instants, s from the cell's start (the first
/// request is due one gap after it, as in a process that was already running).
pub struct Schedule {
    rng: ChaCha8Rng,
    gaps: Gaps,
    t_s: f64,
}

enum Gaps {
    Constant(f64),
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

impl Schedule {
    /// The schedule of a cell at `rate_rps` with `arrival`'s process and seed; `cell_key`
    /// tells cells of one run apart (each gets its own instants from the same `--seed`).
    ///
    /// # Errors
    /// [`ScheduleError`] for a rate or CV that is not positive and finite.
    pub fn new(arrival: &Arrival, rate_rps: f64, cell_key: u64) -> Result<Schedule, ScheduleError> {
        if !(rate_rps.is_finite() && rate_rps > 0.0) {
            return Err(ScheduleError::Rate(rate_rps));
        }
        let mean = 1.0 / rate_rps;
        let gaps = match arrival.process {
            ArrivalProcess::Constant => Gaps::Constant(mean),
            ArrivalProcess::Poisson => Gaps::Exp(Exp::new(rate_rps).map_err(|_| ScheduleError::Rate(rate_rps))?),
            ArrivalProcess::Trace => return Err(ScheduleError::Trace),
            ArrivalProcess::Gamma => {
                let cv = arrival.cv.unwrap_or(1.0);
                if !(cv.is_finite() && cv > 0.0) {
                    return Err(ScheduleError::Cv(cv));
                }
                // Shape k = 1/CV², scale θ = mean/k: mean gap 1/rate, CV as asked.
                let shape = 1.0 / (cv * cv);
                Gaps::Gamma(Gamma::new(shape, mean / shape).map_err(|_| ScheduleError::Cv(cv))?)
            }
        };
        let seed = arrival.seed ^ cell_key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Ok(Schedule { rng: ChaCha8Rng::seed_from_u64(seed), gaps, t_s: 0.0 })
    }
}

impl Iterator for Schedule {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let gap = match &self.gaps {
            Gaps::Constant(g) => *g,
            Gaps::Exp(d) => d.sample(&mut self.rng),
            Gaps::Gamma(d) => d.sample(&mut self.rng),
        };
        self.t_s += gap;
        Some(self.t_s)
    }
}

/// The key that tells a run's rate cells apart for [`Schedule::new`]: the context's tokens and
/// the rate, so a cell keeps its schedule when the plan around it changes.
pub fn cell_key(context_tokens: u64, rate_rps: f64) -> u64 {
    context_tokens.rotate_left(32) ^ rate_rps.to_bits()
}

/// The largest `gamma:CV` taken: at CV 20 a user found 866 requests due at one instant and a
/// window without any; at 10 a burst is already 100 times Poisson's variance.
pub const MAX_CV: f64 = 10.0;

/// `poisson`, `constant` or `gamma:CV` as a flag gives it (`--arrival`).
///
/// # Errors
/// What is wrong with the text, in words for the flag's error.
pub fn parse_process(text: &str) -> Result<(ArrivalProcess, Option<f64>), String> {
    match text.trim() {
        "poisson" => Ok((ArrivalProcess::Poisson, None)),
        "constant" => Ok((ArrivalProcess::Constant, None)),
        t => {
            let cv = t.strip_prefix("gamma:").ok_or_else(|| {
                format!("{t:?} is not an arrival process: use poisson, constant or gamma:CV (e.g. gamma:2)")
            })?;
            match cv.parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_CV => Ok((ArrivalProcess::Gamma, Some(v))),
                _ => Err(format!(
                    "gamma:{cv}: the coefficient of variation must be a number above 0 and at most {MAX_CV} (e.g. gamma:2); far above that, nearly every request of a window arrives at one instant"
                )),
            }
        }
    }
}

/// The process in the form [`parse_process`] reads.
pub fn process_text(a: &Arrival) -> String {
    match a.process {
        ArrivalProcess::Poisson => "poisson".into(),
        ArrivalProcess::Constant => "constant".into(),
        ArrivalProcess::Gamma => format!("gamma:{}", a.cv.unwrap_or(1.0)),
        ArrivalProcess::Trace => "trace".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(process: ArrivalProcess, cv: Option<f64>) -> Arrival {
        Arrival { process, cv, seed: 7 }
    }

    fn gaps(a: &Arrival, rate: f64, n: usize) -> Vec<f64> {
        let t: Vec<f64> = Schedule::new(a, rate, 1).unwrap().take(n).collect();
        t.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(g: &[f64]) -> (f64, f64) {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        let var = g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (g.len() - 1) as f64;
        (m, var.sqrt() / m)
    }

    #[test]
    fn each_process_has_the_rate_and_burstiness_asked_for() {
        for (a, cv) in [
            (arrival(ArrivalProcess::Poisson, None), 1.0),
            (arrival(ArrivalProcess::Constant, None), 0.0),
            (arrival(ArrivalProcess::Gamma, Some(2.0)), 2.0),
            (arrival(ArrivalProcess::Gamma, Some(0.5)), 0.5),
        ] {
            let (m, c) = mean_cv(&gaps(&a, 4.0, 40_000));
            assert!((m - 0.25).abs() < 0.25 * 0.03, "{a:?}: mean gap {m}");
            assert!((c - cv).abs() < 0.05 + 0.03 * cv, "{a:?}: CV {c}, asked {cv}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_instants_and_cells_differ() {
        let a = arrival(ArrivalProcess::Poisson, None);
        let one: Vec<f64> = Schedule::new(&a, 2.0, 5).unwrap().take(100).collect();
        let again: Vec<f64> = Schedule::new(&a, 2.0, 5).unwrap().take(100).collect();
        let other_cell: Vec<f64> = Schedule::new(&a, 2.0, 6).unwrap().take(100).collect();
        let other_seed: Vec<f64> = Schedule::new(&Arrival { seed: 8, ..a }, 2.0, 5).unwrap().take(100).collect();
        assert_eq!(one, again);
        assert_ne!(one, other_cell);
        assert_ne!(one, other_seed);
        assert!(one.windows(2).all(|w| w[1] > w[0]), "instants increase");
    }

    #[test]
    fn bad_values_are_named() {
        let a = arrival(ArrivalProcess::Poisson, None);
        assert!(Schedule::new(&a, 0.0, 1).is_err());
        assert!(Schedule::new(&a, f64::NAN, 1).is_err());
        assert!(Schedule::new(&arrival(ArrivalProcess::Gamma, Some(0.0)), 1.0, 1).is_err());
        assert_eq!(parse_process("gamma:2"), Ok((ArrivalProcess::Gamma, Some(2.0))));
        assert!(parse_process("gamma:-1").unwrap_err().contains("above 0"));
        assert!(parse_process("gamma:1e9").unwrap_err().contains("at most 10"));
        assert!(parse_process("bursty").unwrap_err().contains("poisson, constant or gamma:CV"));
        assert_eq!(process_text(&arrival(ArrivalProcess::Gamma, Some(2.0))), "gamma:2");
    }
}
